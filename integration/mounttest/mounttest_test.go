package mounttest_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

func TestMain(m *testing.M) { mounttest.Main(m) }

// mountsAt counts the mounts at exactly dir.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			n++
		}
	}
	return n
}

// within runs do in a goroutine so that a hanging mount fails the test
// instead of blocking it.
func within(t *testing.T, what string, limit time.Duration, do func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- do() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("%s hangs for more than %v", what, limit)
		return nil
	}
}

// TestIntegration_KilledDaemonThenRemount: SIGKILL of the daemon leaves a
// mount that fails fast with ENOTCONN, and fusefs.Mount recovers it.
func TestIntegration_KilledDaemonThenRemount(t *testing.T) {
	dir := t.TempDir()
	orig, mnt := filepath.Join(dir, "orig"), filepath.Join(dir, "mnt")
	for _, d := range []string{orig, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(orig, "hello"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := mounttest.StartDaemon(t, orig, mnt, fusefs.ModeReplica)
	if got, err := os.ReadFile(filepath.Join(mnt, "hello")); err != nil || string(got) != "hello" {
		t.Fatalf("daemon serves %q, %v", got, err)
	}

	d.Kill()
	// Everything that reaches the dead daemon fails at once. stat of the
	// mount point itself may be answered from cached attributes until
	// they expire (AttrTimeout), then it fails too.
	for _, probe := range []struct {
		name string
		do   func() error
	}{
		{"statfs", func() error { var s syscall.Statfs_t; return syscall.Statfs(mnt, &s) }},
		{"stat of an uncached name", func() error { _, err := os.Stat(filepath.Join(mnt, "other")); return err }},
		{"readdir", func() error { _, err := os.ReadDir(mnt); return err }},
	} {
		if err := within(t, probe.name, time.Second, probe.do); !errors.Is(err, syscall.ENOTCONN) {
			t.Errorf("%s on the dead mount: %v, want ENOTCONN", probe.name, err)
		}
	}
	deadline := time.Now().Add(fusefs.DefaultConfig().AttrTimeout + 2*time.Second)
	for {
		err := within(t, "stat", time.Second, func() error { _, err := os.Stat(mnt); return err })
		if errors.Is(err, syscall.ENOTCONN) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("stat of the dead mount point: %v, want ENOTCONN once attributes expire", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: fusefs.ModeReplica})
	if got, err := os.ReadFile(m.Path("hello")); err != nil || string(got) != "hello" {
		t.Fatalf("remounted: %q, %v", got, err)
	}
	if n := mountsAt(t, mnt); n != 1 {
		t.Errorf("%d mounts at %s, want 1 (the dead one detached)", n, mnt)
	}
}

// newDaemon starts a daemon serving orig/hello at mnt under a fresh
// directory and checks that it serves.
func newDaemon(t *testing.T) (dir, mnt string, d *mounttest.Daemon) {
	t.Helper()
	dir = t.TempDir()
	orig := filepath.Join(dir, "orig")
	mnt = filepath.Join(dir, "mnt")
	for _, p := range []string{orig, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(orig, "hello"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = mounttest.StartDaemon(t, orig, mnt, fusefs.ModeReplica)
	if got, err := os.ReadFile(filepath.Join(mnt, "hello")); err != nil || string(got) != "hello" {
		t.Fatalf("daemon serves %q, %v", got, err)
	}
	return dir, mnt, d
}

// statfsAsync starts a statfs of dir and returns where its result will
// arrive.
func statfsAsync(dir string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		var s syscall.Statfs_t
		ch <- syscall.Statfs(dir, &s)
	}()
	return ch
}

// TestIntegration_StoppedDaemonThenRemount: a daemon stopped with
// SIGSTOP leaves a mount that answers nothing. fusefs.Mount waits
// ProbeTimeout for it, aborts its FUSE connection, detaches it and
// mounts in its place.
func TestIntegration_StoppedDaemonThenRemount(t *testing.T) {
	dir, mnt, d := newDaemon(t)
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	stuck := statfsAsync(mnt)
	select {
	case err := <-stuck:
		t.Fatalf("statfs of a stopped daemon's mount returned: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	const probe = time.Second
	start := time.Now()
	m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: fusefs.ModeReplica, Configure: func(c *fusefs.Config) {
		c.ProbeTimeout = probe
	}})
	if waited := time.Since(start); waited < probe {
		t.Errorf("mounted after %v, before the %v probe timeout", waited, probe)
	}
	if got, err := os.ReadFile(m.Path("hello")); err != nil || string(got) != "hello" {
		t.Fatalf("remounted: %q, %v", got, err)
	}
	if n := mountsAt(t, mnt); n != 1 {
		t.Errorf("%d mounts at %s, want 1 (the hung one detached)", n, mnt)
	}
	select {
	case err := <-stuck:
		if !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
			t.Errorf("statfs waiting on the aborted mount returned %v, want ENOTCONN", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("statfs waiting on the aborted mount still waits")
	}
	// Continued, the old daemon finds its connection gone and exits.
	d.Continue()
	deadline := time.Now().Add(5 * time.Second)
	for !d.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("the aborted daemon keeps running after SIGCONT")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIntegration_BrieflyStoppedDaemonIsNotAborted: a daemon that
// answers within ProbeTimeout, even late, keeps its mount.
func TestIntegration_BrieflyStoppedDaemonIsNotAborted(t *testing.T) {
	_, mnt, d := newDaemon(t)
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(500*time.Millisecond, d.Continue)
	cfg := fusefs.DefaultConfig()
	cfg.Backing, cfg.MountPoint, cfg.Visibility = filepath.Join(filepath.Dir(mnt), "orig"), mnt, fusefs.AllVisible{}
	cfg.Logger = mounttest.Logger(t)
	cfg.ProbeTimeout = 5 * time.Second
	srv, err := fusefs.Mount(cfg)
	if err == nil {
		srv.Unmount()
		t.Fatal("mounted over a daemon that answered")
	}
	if !errors.Is(err, fusefs.ErrAlreadyMounted) {
		t.Errorf("err = %v, want ErrAlreadyMounted", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "hello")); err != nil || string(got) != "hello" {
		t.Errorf("the daemon's mount was damaged: %q, %v", got, err)
	}
	if d.Exited() {
		t.Error("the daemon exited")
	}
}

// TestIntegration_LiveMountIsNotReplaced: a second Mount over a live one
// fails instead of stacking or detaching it.
func TestIntegration_LiveMountIsNotReplaced(t *testing.T) {
	m := mounttest.New(t, nil)
	m.WriteOrig("f", []byte("x"))
	cfg := fusefs.DefaultConfig()
	cfg.Backing, cfg.MountPoint, cfg.Visibility = m.Orig, m.Mnt, fusefs.AllVisible{}
	cfg.Logger = mounttest.Logger(t)
	srv, err := fusefs.Mount(cfg)
	if err == nil {
		srv.Unmount()
		t.Fatal("mounted over a live mount")
	}
	if !errors.Is(err, fusefs.ErrAlreadyMounted) {
		t.Errorf("err = %v, want ErrAlreadyMounted", err)
	}
	if _, err := os.Stat(m.Path("f")); err != nil {
		t.Errorf("first mount damaged: %v", err)
	}
}

// TestIntegration_UnmountBusy: Unmount while a file is open fails with
// EBUSY and works once it is closed; the harness retries the same way.
func TestIntegration_UnmountBusy(t *testing.T) {
	m := mounttest.New(t, nil)
	m.WriteOrig("f", []byte("x"))
	f, err := os.Open(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Server.Unmount(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("Unmount with an open file: %v, want EBUSY", err)
	}
	f.Close()
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount after close: %v", err)
	}
	if n := mountsAt(t, m.Mnt); n != 0 {
		t.Errorf("%d mounts left at %s", n, m.Mnt)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
}
