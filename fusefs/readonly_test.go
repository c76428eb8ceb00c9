package fusefs_test

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
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

func TestIntegration_ReadOnlyModesRefuseMutations(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModeReplica, fusefs.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: mode})
			m.WriteOrig("d/f", []byte("content"))
			m.MkdirOrig("e")
			if err := unix.Setxattr(m.OrigPath("d/f"), "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
			before := tree(t, m.Orig)
			refusals := m.Server.Stats().ReadOnlyRefusals
			for _, mu := range mutations {
				wantErrno(t, mu.name, mu.do(m), syscall.EROFS)
			}
			if after := tree(t, m.Orig); after != before {
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
	wantWritesRefused(t, w)
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

// hangWrite writes data to w and holds the write inside the daemon, after
// it reached the backing file but before it is answered, until release
// is closed; it returns once the write is held, with the write's result.
func hangWrite(t *testing.T, w *os.File, data string) (wrote <-chan error, release chan struct{}) {
	t.Helper()
	inWrite, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fusefs.SetTestHookWritten(func() {
		once.Do(func() {
			close(inWrite)
			<-release
		})
	})
	t.Cleanup(func() { fusefs.SetTestHookWritten(nil) })
	result := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte(data))
		result <- err
	}()
	<-inWrite
	return result, release
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
	wrote, release := hangWrite(t, w, "in flight")
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

// TestIntegration_FenceCutsWritersOff: a file opened for writing on a
// primary is served by the daemon, never passed through (design §5.14),
// so fencing cuts off every way of writing it: write, pwrite, pwritev,
// ftruncate, fallocate, copy_file_range, splice and sendfile all get
// EROFS, also for a file in a chk-N that the fenced mount hides (before
// issue 29 fencing had to look such a file up to revoke its passthrough
// writer, through the filtered path, and could not: the writer kept
// writing the NAS).
func TestIntegration_FenceCutsWritersOff(t *testing.T) {
	vis := mounttest.NewVisibility()
	vis.Set("job/chk-7", manifest.ErrIncomplete)
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Visibility: vis, Sealer: &mounttest.Sealer{}})
	m.MkdirOrig("job/chk-7")
	m.WriteOrig("src", []byte("source data"))
	for _, rel := range []string{"out", "job/chk-7/state"} {
		t.Run(rel, func(t *testing.T) {
			before := m.Server.Stats()
			w, err := os.OpenFile(m.Path(rel), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if st := m.Server.Stats(); st.PassthroughOpens != before.PassthroughOpens || st.DaemonOpens != before.DaemonOpens+1 {
				t.Fatalf("a write-only open was not served by the daemon: %+v", st)
			}
			if _, err := w.Write([]byte("before fence\n")); err != nil {
				t.Fatalf("write as primary: %v", err)
			}
			if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
				t.Fatal(err)
			}
			defer m.Server.SetMode(fusefs.ModePrimary)
			fd := int(w.Fd())
			wantWritesRefused(t, w)
			var pipe [2]int
			if err := unix.Pipe(pipe[:]); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pipe[0])
			defer unix.Close(pipe[1])
			unix.Write(pipe[1], []byte("spliced\n"))
			_, err = unix.Splice(pipe[0], nil, fd, nil, 8, 0)
			wantErrno(t, "splice", err, syscall.EROFS)
			src, err := os.Open(m.Path("src"))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			_, err = unix.Sendfile(fd, int(src.Fd()), nil, 6)
			wantErrno(t, "sendfile", err, syscall.EROFS)
			offIn, offOut := int64(0), int64(0)
			_, err = unix.CopyFileRange(int(src.Fd()), &offIn, fd, &offOut, 6, 0)
			wantErrno(t, "copy_file_range", err, syscall.EROFS)
			if data, err := os.ReadFile(m.OrigPath(rel)); err != nil || string(data) != "before fence\n" {
				t.Errorf("backing file %q, %v", data, err)
			}
		})
	}
}

// TestIntegration_DeadlineFence: with DeadlineFence the mount admits a
// change only before the deadline its daemon gave, on its own clock,
// whether or not anything calls SetMode (design §5.14).
func TestIntegration_DeadlineFence(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Configure: func(c *fusefs.Config) { c.DeadlineFence = true }})
	wantErrno(t, "a create before any deadline", openClose(m.Path("early"), os.O_CREATE|os.O_WRONLY), syscall.EROFS)
	m.Server.SetWriteDeadline(time.Now().Add(time.Hour))
	w, err := os.Create(m.Path("f"))
	if err != nil {
		t.Fatalf("create before the deadline: %v", err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("in time")); err != nil {
		t.Fatalf("write before the deadline: %v", err)
	}
	// The deadline passes with the mount still primary: nobody fences.
	m.Server.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	time.Sleep(60 * time.Millisecond)
	if m.Server.Mode() != fusefs.ModePrimary {
		t.Fatal("the mode changed by itself")
	}
	_, err = w.Write([]byte("late"))
	wantErrno(t, "write after the deadline", err, syscall.EROFS)
	wantErrno(t, "create after the deadline", openClose(m.Path("late"), os.O_CREATE|os.O_WRONLY), syscall.EROFS)
	wantErrno(t, "mkdir after the deadline", os.Mkdir(m.Path("d"), 0o755), syscall.EROFS)
	if st := m.Server.Stats(); st.DeadlineRefusals < 3 {
		t.Errorf("DeadlineRefusals = %d, want at least 3", st.DeadlineRefusals)
	}
	if data, _ := os.ReadFile(m.OrigPath("f")); string(data) != "in time" {
		t.Errorf("backing file %q", data)
	}
	// A renewal moves it on: the same handle writes again.
	m.Server.SetWriteDeadline(time.Now().Add(time.Hour))
	if _, err := w.Write([]byte(" again")); err != nil {
		t.Errorf("write after the deadline moved: %v", err)
	}
	if n := m.Server.InFlight(); n != 0 {
		t.Errorf("InFlight = %d with nothing in flight", n)
	}
}

// TestIntegration_FenceTimeout: a change that hangs in the backing file
// system makes SetMode give up with ErrFenceIncomplete after
// FenceTimeout; when it lands later it is counted as a write after the
// fence. InFlight counts it meanwhile.
func TestIntegration_FenceTimeout(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Configure: func(c *fusefs.Config) {
		c.FenceTimeout = 200 * time.Millisecond
	}})
	w, err := os.Create(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wrote, release := hangWrite(t, w, "hung")
	if n := m.Server.InFlight(); n != 1 {
		t.Errorf("InFlight = %d with one write hung", n)
	}
	start := time.Now()
	err = m.Server.SetMode(fusefs.ModeFenced)
	if !errors.Is(err, fusefs.ErrFenceIncomplete) {
		t.Fatalf("SetMode with a change hung: %v, want ErrFenceIncomplete", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond || waited > 5*time.Second {
		t.Errorf("SetMode waited %v, FenceTimeout is 200ms", waited)
	}
	if got := m.Server.Stats().WritesAfterFence; got != 0 {
		t.Errorf("WritesAfterFence = %d before the hung write landed", got)
	}
	close(release)
	if err := <-wrote; err != nil {
		t.Errorf("the hung write: %v", err)
	}
	if got := m.Server.Stats().WritesAfterFence; got != 1 {
		t.Errorf("WritesAfterFence = %d, want 1", got)
	}
	if n := m.Server.InFlight(); n != 0 {
		t.Errorf("InFlight = %d after the write came back", n)
	}
	if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
		t.Errorf("SetMode with nothing in flight: %v", err)
	}
}

// wantWritesRefused checks that write, pwrite, pwritev, ftruncate and
// fallocate through w, open for writing on a mount that is fenced, fail
// with EROFS.
func wantWritesRefused(t *testing.T, w *os.File) {
	t.Helper()
	fd := int(w.Fd())
	_, err := w.Write([]byte("after fence\n"))
	wantErrno(t, "write", err, syscall.EROFS)
	_, err = unix.Pwrite(fd, []byte("x"), 0)
	wantErrno(t, "pwrite", err, syscall.EROFS)
	_, err = unix.Pwritev(fd, [][]byte{[]byte("a"), []byte("b")}, 13)
	wantErrno(t, "pwritev", err, syscall.EROFS)
	wantErrno(t, "ftruncate", w.Truncate(0), syscall.EROFS)
	wantErrno(t, "fallocate", unix.Fallocate(fd, 0, 0, 1<<20), syscall.EROFS)
}
