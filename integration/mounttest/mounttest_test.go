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
