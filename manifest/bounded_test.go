package manifest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hangDeadline is how long a read of one file may take in these tests:
// far more than any of them needs, far less than forever.
const hangDeadline = 10 * time.Second

// withinDeadline runs f and fails the test if it has not returned within
// hangDeadline. Past it, unblock (when not nil) is called to make f
// return, so that no goroutine outlives the test; without it f is left
// running.
func withinDeadline(t *testing.T, what string, f func(), unblock func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hangDeadline):
		t.Errorf("%s hung past the deadline of %v", what, hangDeadline)
		if unblock != nil {
			unblock()
			<-done
		}
	}
}

// unblockFIFO opens the FIFO at path for writing and closes it: a reader
// waiting for a writer in open(2) or read(2) then reads its end.
func unblockFIFO(path string) func() {
	return func() {
		for range 1000 {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
				return
			}
			time.Sleep(10 * time.Millisecond) // ENXIO: no reader yet
		}
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// allocatedBy returns the bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sparse makes path a file of size bytes that holds nothing: a hole.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	writeFile(t, path, nil)
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// setOpenedHook runs hook on every regularFile opened until the test ends.
func setOpenedHook(t *testing.T, hook func(*regularFile)) {
	testHookOpened.Store(&hook)
	t.Cleanup(func() { testHookOpened.Store(nil) })
}

// TestRegularFileReads: a file of a backing file system is read only
// when it is a regular file within its reader's bound, for exactly the
// size it had when opened; one that changes meanwhile is not complete
// yet. Nothing waits for a FIFO's writer or reads a device.
func TestRegularFileReads(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	readAll := func(rel string, bound int64) ([]byte, error) {
		f, err := openRegularAt(root, rel)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return f.readAll(ctx, bound)
	}
	writeFile(t, filepath.Join(root, "plain"), []byte("0123456789"))
	if data, err := readAll("plain", 10); err != nil || string(data) != "0123456789" {
		t.Fatalf("plain file: %q, %v", data, err)
	}

	mkfifo(t, filepath.Join(root, "fifo"))
	if err := os.Symlink("/dev/zero", filepath.Join(root, "zero")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rel  string
		want error
	}{{"fifo", errNotRegular}, {"dir", errNotRegular}, {"zero", unix.ELOOP}, {"absent", unix.ENOENT}} {
		withinDeadline(t, "opening "+tc.rel, func() {
			if _, err := readAll(tc.rel, 1<<20); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), filepath.Join(root, tc.rel)) {
				t.Errorf("%s: %v, want %v naming the file", tc.rel, err, tc.want)
			}
		}, unblockFIFO(filepath.Join(root, "fifo")))
	}

	sparse(t, filepath.Join(root, "sparse"), 1<<40)
	var err error
	if n := allocatedBy(func() { _, err = readAll("sparse", 1<<20) }); n > 64<<10 {
		t.Errorf("refusing a sparse TiB allocated %d bytes", n)
	}
	var tl *tooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "1099511627776 bytes, larger than its bound of 1048576") || !strings.Contains(err.Error(), "sparse") {
		t.Errorf("sparse TiB: %v", err)
	}

	// Hashing stops when its context ends: a sparse TiB is not read to
	// its end by a pass that was given up on.
	withinDeadline(t, "hashing a sparse TiB", func() {
		f, err := openRegularAt(root, "sparse")
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if _, err := f.copyTo(ctx, io.Discard); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("copyTo = %v, want the context's end", err)
		}
	}, nil)

	// procfs reports a size of 0 for files that hold more.
	if f, err := openRegularAt("/proc/self", "status"); err == nil {
		_, err := f.readAll(ctx, 1<<20)
		f.Close()
		if !errors.Is(err, errChanged) || !strings.Contains(err.Error(), "longer than its 0 bytes") {
			t.Errorf("/proc/self/status: %v, want it longer than fstat says", err)
		}
	}

	for _, tc := range []struct {
		name   string
		change func(path string) error
		says   string
	}{
		{"grows", func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("more")
			return errors.Join(err, f.Close())
		}, "longer than its 10 bytes"},
		{"shrinks", func(p string) error { return os.Truncate(p, 5) }, "shorter than its 10 bytes"},
		{"is rewritten", func(p string) error {
			old := time.Now().Add(-time.Hour)
			return os.Chtimes(p, old, old)
		}, "modified meanwhile"},
	} {
		t.Run("a file that "+tc.name+" while read", func(t *testing.T) {
			p := filepath.Join(root, "plain")
			writeFile(t, p, []byte("0123456789"))
			setOpenedHook(t, func(f *regularFile) {
				if err := tc.change(f.Name()); err != nil {
					t.Error(err)
				}
			})
			for _, read := range []func(f *regularFile) error{
				func(f *regularFile) error { _, err := f.readAll(ctx, 1<<20); return err },
				func(f *regularFile) error { _, err := f.copyTo(ctx, io.Discard); return err },
			} {
				f, err := openRegularAt(root, "plain")
				if err != nil {
					t.Fatal(err)
				}
				err = read(f)
				f.Close()
				if !errors.Is(err, errChanged) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%v, want %q", err, tc.says)
				}
				if p := fileProblem("plain", err); p.Kind != ProblemSizeMismatch {
					t.Errorf("problem %v, want %s", p, ProblemSizeMismatch)
				}
				writeFile(t, p, []byte("0123456789"))
			}
		})
	}
}
