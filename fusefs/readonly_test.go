package fusefs_test

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// mutation is one way to change the tree through the mount.
type mutation struct {
	name string
	do   func(m *mounttest.Mount) error
}

func openClose(p string, flags int) error {
	f, err := os.OpenFile(p, flags, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

// mutations covers every mutating FUSE opcode that needs no handle
// opened for writing (those are in TestIntegration_FencedPrimary).
var mutations = []mutation{
	{"create", func(m *mounttest.Mount) error { return openClose(m.Path("d/new"), os.O_CREATE|os.O_WRONLY) }},
	{"create excl", func(m *mounttest.Mount) error { return openClose(m.Path("d/new"), os.O_CREATE|os.O_EXCL|os.O_RDWR) }},
	{"create read-only", func(m *mounttest.Mount) error { return openClose(m.Path("d/new"), os.O_CREATE|os.O_RDONLY) }},
	{"O_TMPFILE", func(m *mounttest.Mount) error {
		fd, err := unix.Open(m.Path("d"), unix.O_TMPFILE|unix.O_RDWR, 0o600)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}},
	{"mkdir", func(m *mounttest.Mount) error { return os.Mkdir(m.Path("d/newdir"), 0o755) }},
	{"mknod fifo", func(m *mounttest.Mount) error { return unix.Mkfifo(m.Path("d/fifo"), 0o644) }},
	{"symlink", func(m *mounttest.Mount) error { return os.Symlink("f", m.Path("d/link")) }},
	{"link", func(m *mounttest.Mount) error { return os.Link(m.Path("d/f"), m.Path("d/hard")) }},
	{"unlink", func(m *mounttest.Mount) error { return unix.Unlink(m.Path("d/f")) }},
	{"rmdir", func(m *mounttest.Mount) error { return unix.Rmdir(m.Path("e")) }},
	{"rename", func(m *mounttest.Mount) error { return os.Rename(m.Path("d/f"), m.Path("d/g")) }},
	{"rename exchange", func(m *mounttest.Mount) error {
		return unix.Renameat2(unix.AT_FDCWD, m.Path("d/f"), unix.AT_FDCWD, m.Path("e"), unix.RENAME_EXCHANGE)
	}},
	{"truncate", func(m *mounttest.Mount) error { return os.Truncate(m.Path("d/f"), 0) }},
	{"chmod", func(m *mounttest.Mount) error { return os.Chmod(m.Path("d/f"), 0o600) }},
	{"chown", func(m *mounttest.Mount) error { return os.Chown(m.Path("d/f"), 1, 1) }},
	{"utimens", func(m *mounttest.Mount) error {
		return os.Chtimes(m.Path("d/f"), time.Unix(1, 0), time.Unix(2, 0))
	}},
	{"setxattr", func(m *mounttest.Mount) error { return unix.Setxattr(m.Path("d/f"), "user.new", []byte("v"), 0) }},
	{"removexattr", func(m *mounttest.Mount) error { return unix.Removexattr(m.Path("d/f"), "user.k") }},
	{"open O_WRONLY", func(m *mounttest.Mount) error { return openClose(m.Path("d/f"), os.O_WRONLY) }},
	{"open O_RDWR", func(m *mounttest.Mount) error { return openClose(m.Path("d/f"), os.O_RDWR) }},
	{"open O_APPEND", func(m *mounttest.Mount) error { return openClose(m.Path("d/f"), os.O_WRONLY|os.O_APPEND) }},
	{"open O_TRUNC", func(m *mounttest.Mount) error { return openClose(m.Path("d/f"), os.O_WRONLY|os.O_TRUNC) }},
	{"open O_RDONLY|O_TRUNC", func(m *mounttest.Mount) error { return openClose(m.Path("d/f"), os.O_RDONLY|os.O_TRUNC) }},
}

// snapshot describes a tree: names, types, sizes, modes, owners, times,
// contents and xattrs.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s mode=%o uid=%d size=%d mtime=%d.%d", p, st.Mode, st.Uid, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			x := make([]byte, 256)
			n, _ := unix.Lgetxattr(p, "user.k", x)
			fmt.Fprintf(&b, " data=%q xattr=%q", data, x[:max(n, 0)])
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestIntegration_ReadOnlyModesRefuseMutations(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModeReplica, fusefs.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: mode})
			m.WriteOrig("d/f", []byte("content"))
			m.MkdirOrig("e")
			if err := unix.Setxattr(m.OrigPath("d/f"), "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, m.Orig)
			refusals := m.Server.Stats().ReadOnlyRefusals
			for _, mu := range mutations {
				wantErrno(t, mu.name, mu.do(m), syscall.EROFS)
			}
			if after := snapshot(t, m.Orig); after != before {
				t.Errorf("backing tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if got := m.Server.Stats().ReadOnlyRefusals - refusals; got < uint64(len(mutations)) {
				t.Errorf("ReadOnlyRefusals grew by %d, want >= %d", got, len(mutations))
			}
			// Reading still works.
			if data, err := os.ReadFile(m.Path("d/f")); err != nil || string(data) != "content" {
				t.Errorf("read: %q, %v", data, err)
			}
		})
	}
}

// TestIntegration_PrimaryAllowsMutations runs the same table on a
// primary: each mutation must succeed, so the table cannot pass by
// failing for another reason.
func TestIntegration_PrimaryAllowsMutations(t *testing.T) {
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary})
			m.WriteOrig("d/f", []byte("content"))
			m.MkdirOrig("e")
			if err := unix.Setxattr(m.OrigPath("d/f"), "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			if err := mu.do(m); err != nil {
				t.Errorf("%s on a primary: %v", mu.name, err)
			}
		})
	}
}

// TestIntegration_FencedPrimary switches a primary to fenced while a
// file is open for writing: from then on nothing on that handle writes.
func TestIntegration_FencedPrimary(t *testing.T) {
	sealer := &mounttest.Sealer{}
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: sealer})
	m.WriteOrig("src", []byte("source data"))
	w, err := os.OpenFile(m.Path("out"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("before fence\n")); err != nil {
		t.Fatalf("write as primary: %v", err)
	}
	src, err := os.Open(m.Path("src"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
		t.Fatal(err)
	}
	if got := m.Server.Mode(); got != fusefs.ModeFenced {
		t.Fatalf("Mode() = %v", got)
	}
	fd := int(w.Fd())
	_, err = w.Write([]byte("after fence\n"))
	wantErrno(t, "write", err, syscall.EROFS)
	_, err = unix.Pwrite(fd, []byte("x"), 0)
	wantErrno(t, "pwrite", err, syscall.EROFS)
	_, err = unix.Pwritev(fd, [][]byte{[]byte("a"), []byte("b")}, 13)
	wantErrno(t, "pwritev", err, syscall.EROFS)
	wantErrno(t, "ftruncate", w.Truncate(0), syscall.EROFS)
	wantErrno(t, "fallocate", unix.Fallocate(fd, 0, 0, 1<<20), syscall.EROFS)
	wantErrno(t, "fchmod", w.Chmod(0o600), syscall.EROFS)
	offIn, offOut := int64(0), int64(0)
	_, err = unix.CopyFileRange(int(src.Fd()), &offIn, fd, &offOut, 6, 0)
	wantErrno(t, "copy_file_range into the mount", err, syscall.EROFS)
	wantErrno(t, "new write open", openClose(m.Path("out"), os.O_WRONLY), syscall.EROFS)
	if err := w.Sync(); err != nil {
		t.Errorf("fsync of data written before the fence: %v", err)
	}
	if data, err := os.ReadFile(m.OrigPath("out")); err != nil || string(data) != "before fence\n" {
		t.Errorf("backing file %q, %v", data, err)
	}

	// Promotion again: the same handle writes.
	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("promoted\n")); err != nil {
		t.Errorf("write after promotion: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if data, _ := os.ReadFile(m.OrigPath("out")); string(data) != "before fence\npromoted\n" {
		t.Errorf("backing file %q", data)
	}
}

// TestIntegration_SetModeWaitsForWriteInFlight holds a write inside the
// daemon and fences meanwhile: SetMode must wait for it, and the next
// write on the same handle must fail.
func TestIntegration_SetModeWaitsForWriteInFlight(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary})
	w, err := os.Create(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	inWrite, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fusefs.SetTestHookWritten(func() {
		once.Do(func() {
			close(inWrite)
			<-release
		})
	})
	t.Cleanup(func() { fusefs.SetTestHookWritten(nil) })

	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte("in flight"))
		wrote <- err
	}()
	<-inWrite
	fenced := make(chan struct{})
	go func() {
		m.Server.SetMode(fusefs.ModeFenced)
		close(fenced)
	}()
	select {
	case <-fenced:
		t.Error("SetMode returned while a write was still in the daemon")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-fenced
	if err := <-wrote; err != nil {
		t.Errorf("the write admitted before the fence failed: %v", err)
	}
	_, err = w.Write([]byte("after"))
	wantErrno(t, "write after SetMode returned", err, syscall.EROFS)
	if data, _ := os.ReadFile(m.OrigPath("f")); string(data) != "in flight" {
		t.Errorf("backing file %q", data)
	}
}

// TestIntegration_FenceWaitsForWrites races SetMode against a stream of
// writes: every write the backing file got must have been acknowledged
// before SetMode returned, and none after.
func TestIntegration_FenceWaitsForWrites(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary})
	w, err := os.Create(m.Path("stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	chunk := make([]byte, 64<<10)
	const maxWrites = 4096 // 256 MiB: bounds the damage if the fence leaks
	type result struct {
		acked   int64
		refused bool
	}
	results := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		var r result
		for i := 0; i < maxWrites; i++ {
			if i == 10 {
				close(started)
			}
			if _, err := w.Write(chunk); err != nil {
				r.refused = errors.Is(err, syscall.EROFS)
				break
			}
			r.acked += int64(len(chunk))
		}
		results <- r
	}()
	<-started
	if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(m.OrigPath("stream"))
	if err != nil {
		t.Fatal(err)
	}
	sizeAtFence := st.Size()
	r := <-results
	if !r.refused {
		t.Fatal("writer stopped without EROFS")
	}
	st, _ = os.Stat(m.OrigPath("stream"))
	if st.Size() != sizeAtFence || st.Size() != r.acked {
		t.Errorf("size when SetMode returned %d, size now %d, acknowledged %d: a write landed after the fence",
			sizeAtFence, st.Size(), r.acked)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// openPassthroughWriter opens rel write-only and checks that the kernel
// writes it without the daemon.
func openPassthroughWriter(t *testing.T, m *mounttest.Mount, rel string) *os.File {
	t.Helper()
	before := m.Server.Stats().PassthroughWrites
	w, err := os.OpenFile(m.Path(rel), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if m.Server.Stats().PassthroughWrites != before+1 {
		w.Close()
		t.Fatalf("write-only open without passthrough: %+v", m.Server.Stats())
	}
	return w
}

// TestIntegration_FenceRevokesPassthroughWriters: fencing cuts off a file
// the kernel writes without the daemon, and SetMode returns once it is
// closed.
func TestIntegration_FenceRevokesPassthroughWriters(t *testing.T) {
	sealer := &mounttest.Sealer{}
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: sealer})
	requirePassthrough(t, m)
	w := openPassthroughWriter(t, m, "out")
	defer w.Close()
	if _, err := w.Write([]byte("before fence\n")); err != nil {
		t.Fatalf("write as primary: %v", err)
	}

	fenced := make(chan error, 1)
	go func() { fenced <- m.Server.SetMode(fusefs.ModeFenced) }()
	waitFor(t, "the writer to be revoked", func() bool { return m.Server.Stats().RevokedWriters == 1 })
	select {
	case err := <-fenced:
		t.Fatalf("SetMode returned (%v) while a writer opened before the fence is open", err)
	case <-time.After(50 * time.Millisecond):
	}
	fd := int(w.Fd())
	_, err := w.Write([]byte("after fence\n"))
	wantErrno(t, "write", err, syscall.EIO)
	_, err = unix.Pwrite(fd, []byte("x"), 0)
	wantErrno(t, "pwrite", err, syscall.EIO)
	_, err = unix.Pwritev(fd, [][]byte{[]byte("a"), []byte("b")}, 13)
	wantErrno(t, "pwritev", err, syscall.EIO)
	wantErrno(t, "ftruncate", w.Truncate(0), syscall.EIO)
	// fallocate reaches the daemon, which refuses it as for any handle.
	wantErrno(t, "fallocate", unix.Fallocate(fd, 0, 0, 1<<20), syscall.EROFS)
	wantErrno(t, "fsync", w.Sync(), syscall.EIO)
	wantErrno(t, "close", w.Close(), syscall.EIO)
	select {
	case err := <-fenced:
		if err != nil {
			t.Errorf("SetMode: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SetMode still waits after the writer was closed")
	}
	if data, err := os.ReadFile(m.OrigPath("out")); err != nil || string(data) != "before fence\n" {
		t.Errorf("backing file %q, %v", data, err)
	}
	wantErrno(t, "new write open", openClose(m.Path("out"), os.O_WRONLY), syscall.EROFS)
	// The revoked inode is gone with its last descriptor: the file reads
	// normally again.
	if data, err := os.ReadFile(m.Path("out")); err != nil || string(data) != "before fence\n" {
		t.Errorf("read after the fence: %q, %v", data, err)
	}
	m.Server.SyncSealer()
	if calls := sealer.Calls(); len(calls) == 0 || calls[len(calls)-1].Op != "nochecksum" || calls[len(calls)-1].Rel != "out" {
		t.Errorf("a file cut off by fencing must be reported without checksum: %v", calls)
	}
	if st := m.Server.Stats(); st.WritesAfterFence != 0 {
		t.Errorf("WritesAfterFence = %d", st.WritesAfterFence)
	}

	// Promotion again: write-only opens pass through again.
	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	w2 := openPassthroughWriter(t, m, "out")
	if _, err := w2.Write([]byte("promoted")); err != nil {
		t.Errorf("write after promotion: %v", err)
	}
	if err := w2.Close(); err != nil {
		t.Errorf("close after promotion: %v", err)
	}
}

// TestIntegration_FenceStopsPassthroughStream races SetMode against a
// stream of writes the kernel sends straight to the backing file; the
// writer closes the file at the first error, as Flink does. When SetMode
// returns, the file holds exactly what the writer was told was written,
// and it never grows again.
func TestIntegration_FenceStopsPassthroughStream(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: &mounttest.Sealer{}})
	requirePassthrough(t, m)
	for round := range 5 {
		rel := fmt.Sprintf("stream-%d", round)
		w := openPassthroughWriter(t, m, rel)
		chunk := make([]byte, 64<<10)
		const maxWrites = 4096 // 256 MiB: bounds the damage if the fence leaks
		type result struct {
			acked int64
			err   error
		}
		results := make(chan result, 1)
		started := make(chan struct{})
		go func() {
			var r result
			for i := 0; i < maxWrites; i++ {
				if i == 10 {
					close(started)
				}
				if _, err := w.Write(chunk); err != nil {
					r.err = err
					break
				}
				r.acked += int64(len(chunk))
			}
			w.Close()
			results <- r
		}()
		<-started
		if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(m.OrigPath(rel))
		if err != nil {
			t.Fatal(err)
		}
		sizeAtFence := st.Size()
		r := <-results
		wantErrno(t, "write after the fence", r.err, syscall.EIO)
		time.Sleep(20 * time.Millisecond)
		st, _ = os.Stat(m.OrigPath(rel))
		if st.Size() != sizeAtFence || st.Size() != r.acked {
			t.Errorf("round %d: size when SetMode returned %d, size now %d, acknowledged %d",
				round, sizeAtFence, st.Size(), r.acked)
		}
		// The stream's writes all came before SetMode returned: none of
		// them is a write after the fence.
		if got := m.Server.Stats().WritesAfterFence; got != 0 {
			t.Errorf("round %d: WritesAfterFence = %d, want 0", round, got)
		}
		if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntegration_FenceTimeout: a writer that keeps its descriptor open
// makes SetMode give up with ErrFenceIncomplete. splice(2) is the one
// write the kernel lets through such a descriptor; the mount notices it
// when the descriptor is closed.
func TestIntegration_FenceTimeout(t *testing.T) {
	rec := &records{next: slog.DiscardHandler}
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Configure: func(c *fusefs.Config) {
		c.FenceTimeout = 200 * time.Millisecond
		c.Logger = slog.New(rec)
	}})
	requirePassthrough(t, m)
	m.MkdirOrig("job")
	w := openPassthroughWriter(t, m, "job/out")
	defer w.Close()
	w.Write([]byte("before fence\n"))
	start := time.Now()
	err := m.Server.SetMode(fusefs.ModeFenced)
	if !errors.Is(err, fusefs.ErrFenceIncomplete) || !strings.Contains(err.Error(), "job/out") {
		t.Fatalf("SetMode with a writer kept open: %v, want ErrFenceIncomplete naming job/out", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond || waited > 5*time.Second {
		t.Errorf("SetMode waited %v, FenceTimeout is 200ms", waited)
	}
	if got := m.Server.Mode(); got != fusefs.ModeFenced {
		t.Errorf("mode %v after an incomplete fence", got)
	}
	_, err = w.Write([]byte("x"))
	wantErrno(t, "write", err, syscall.EIO)

	var pipe [2]int
	if err := unix.Pipe(pipe[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	unix.Write(pipe[1], []byte("spliced\n"))
	_, spliceErr := unix.Splice(pipe[0], nil, int(w.Fd()), nil, 8, 0)
	w.Close()
	waitReleased(t, m)
	want := uint64(0)
	if spliceErr == nil {
		want = 1
		if len(rec.find("a write reached a file after fencing, through a descriptor opened before (splice or sendfile)")) != 1 {
			t.Error("the write after fencing was not logged")
		}
	}
	t.Logf("splice into a revoked descriptor: %v", spliceErr)
	if got := m.Server.Stats().WritesAfterFence; got != want {
		t.Errorf("WritesAfterFence = %d, want %d (splice: %v)", got, want, spliceErr)
	}
	if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
		t.Errorf("SetMode once every writer is closed: %v", err)
	}
}
