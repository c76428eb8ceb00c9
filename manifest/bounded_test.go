package manifest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

// TestSealedManifestIsReadBounded: what lies at a sealed manifest's path
// is read only when it is a regular file within the bound of a sealed
// manifest. A sparse file of a TiB (a crash loop of "out of memory" when
// read whole), a FIFO (a verification that never ends) or a symbolic
// link is a problem of that checkpoint, named in its verdict, and costs
// the verification no more than the bound.
func TestSealedManifestIsReadBounded(t *testing.T) {
	backing := t.TempDir()
	dir := realCheckpoint(t, filepath.Join(backing, "job"))
	chkRel, _ := filepath.Rel(backing, dir)
	res, err := NewResolver(nil, []string{backing})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: true})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := rec.Seal(chkRel)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "chk.json")
	writeFile(t, elsewhere, doc)
	cfg := DefaultVerifierConfig()
	cfg.Resolver, cfg.SealedRoot = res, backing
	verify := func(t *testing.T, unblock func()) (got *Verdict) {
		t.Helper()
		v, err := NewVerifier(cfg)
		if err != nil {
			t.Fatal(err)
		}
		withinDeadline(t, "VerifyDir", func() { got = v.VerifyDir(context.Background(), dir) }, unblock)
		return got
	}
	if got := verify(t, nil); !got.Complete || got.Level != L3 {
		t.Fatalf("sealed: complete %v level %v %v", got.Complete, got.Level, got.Problems)
	}

	for _, tc := range []struct {
		name   string
		make   func(t *testing.T)
		kind   ProblemKind
		detail []string // in the problem's detail
	}{
		{"sparse 64 MiB", func(t *testing.T) { sparse(t, sealed, 64<<20) }, ProblemParseError, []string{sealed, strconv.Itoa(64 << 20), "bound"}},
		{"FIFO", func(t *testing.T) { mkfifo(t, sealed) }, ProblemMissing, []string{sealed, "not a regular file"}},
		{"symbolic link", func(t *testing.T) {
			if err := os.Symlink(elsewhere, sealed); err != nil {
				t.Fatal(err)
			}
		}, ProblemOutsideRoot, []string{sealed}},
		{"sparse 1 TiB", func(t *testing.T) { sparse(t, sealed, 1<<40) }, ProblemParseError, []string{sealed, strconv.Itoa(1 << 40), "bound"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Remove(sealed); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				os.Remove(sealed)
				writeFile(t, sealed, doc)
			})
			tc.make(t)
			var got *Verdict
			n := allocatedBy(func() { got = verify(t, unblockFIFO(sealed)) })
			if t.Failed() {
				return
			}
			if n > 16<<20 {
				t.Errorf("the verification allocated %d MiB", n>>20)
			}
			if got.Complete || got.Level != LevelNone || len(got.Problems) != 1 {
				t.Fatalf("verdict complete %v level %v %v, want one problem", got.Complete, got.Level, got.Problems)
			}
			p := got.Problems[0]
			t.Log(p)
			if p.Kind != tc.kind {
				t.Errorf("problem %v, want kind %s", p, tc.kind)
			}
			for _, s := range tc.detail {
				if !strings.Contains(p.Detail, s) {
					t.Errorf("problem %v does not say %q", p, s)
				}
			}
		})
	}

	// A sealed manifest replicated in place while it is read says nothing
	// yet, as one that does not parse: the verdict stays at L1.
	t.Run("changed while read", func(t *testing.T) {
		setOpenedHook(t, func(f *regularFile) {
			if f.Name() == sealed {
				if err := os.Truncate(sealed, int64(len(doc)/2)); err != nil {
					t.Error(err)
				}
			}
		})
		t.Cleanup(func() { writeFile(t, sealed, doc) })
		if got := verify(t, nil); !got.Complete || got.Level != L1 {
			t.Errorf("complete %v level %v %v, want L1", got.Complete, got.Level, got.Problems)
		}
	})
}

// sparse makes path a file of size bytes that holds nothing: a hole.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	writeFile(t, path, nil)
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// TestJudgeHAFileRefusesWhatHasNoEnd: the catalog judges what a
// directory listing showed as a regular HA state file; by the time it
// opens it, it may be a FIFO (whose open and read wait for a writer
// forever) or a symbolic link to /dev/zero (whose hash never ends). Each
// is judged incomplete at once.
func TestJudgeHAFileRefusesWhatHasNoEnd(t *testing.T) {
	s := newJobHASite(t, "1.20.5")
	c := newCatalog(t, s.root)
	cluster := filepath.Dir(s.haFile)
	blob := filepath.Join(filepath.Dir(s.blob), "blob_p-"+strings.Repeat("0", 40)+"-"+strings.Repeat("0", 32))
	for _, tc := range []struct {
		kind, path string
		symlink    string // a symbolic link to this instead of a FIFO
	}{
		{"blob", blob, ""},
		{"blob", blob, "/dev/zero"},
		{"graph", filepath.Join(cluster, "submittedJobGraph0f1f0f1f0f1f"), ""},
		{"result", filepath.Join(s.results, s.job+"_DIRTY.json"), ""},
		{"checkpoint", filepath.Join(cluster, "completedCheckpoint0f1f0f1f0f1f"), ""},
	} {
		name := tc.kind + " FIFO"
		if tc.symlink != "" {
			name = tc.kind + " link to " + tc.symlink
		}
		t.Run(name, func(t *testing.T) {
			var unblock func()
			if tc.symlink != "" {
				if err := os.Symlink(tc.symlink, tc.path); err != nil {
					t.Fatal(err)
				}
			} else {
				mkfifo(t, tc.path)
				unblock = unblockFIFO(tc.path)
			}
			t.Cleanup(func() { os.Remove(tc.path) })
			rel, err := filepath.Rel(s.root, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			withinDeadline(t, "judging "+name, func() {
				if tc.kind == "checkpoint" {
					if j := c.judgeDescription(context.Background(), rel, haStat{}); j.chkDir != "" || j.legacy != nil {
						t.Errorf("names checkpoint directory %q", j.chkDir)
					}
					return
				}
				if c.judgeHAFile(context.Background(), rel, tc.kind) {
					t.Error("judged complete")
				}
			}, unblock)
		})
	}

	// A blob is hashed for its size, which may be a sparse TiB: a pass the
	// catalog gave up on stops hashing it.
	rel, _ := filepath.Rel(s.root, blob)
	sparse(t, blob, 1<<40)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	withinDeadline(t, "judging a sparse TiB blob", func() {
		if c.judgeHAFile(ctx, rel, "blob") {
			t.Error("judged complete")
		}
	}, nil)
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
