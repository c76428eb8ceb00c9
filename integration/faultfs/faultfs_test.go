package faultfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

func TestMain(m *testing.M) { Main(m) }

func mount(t *testing.T) (*FS, string) {
	t.Helper()
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	lower, mnt := filepath.Join(top, "lower"), filepath.Join(top, "mnt")
	for _, d := range []string{filepath.Join(lower, "a", "b"), filepath.Join(lower, "c"), mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "a", "b", "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Mount(t, lower, mnt), mnt
}

// TestLookupAttrs: by default a stat of a name asks for its attributes
// again after the LOOKUP that returned them; with LookupAttrs, as on
// NFS, it does not.
func TestLookupAttrs(t *testing.T) {
	f, _ := mount(t)
	nfs := MountWith(t, f.Lower, t.TempDir(), Options{LookupAttrs: true})
	for _, c := range []struct {
		fs       *FS
		min, max uint64 // GETATTRs for 20 stats
	}{{f, 20, 25}, {nfs, 0, 2}} {
		before := c.fs.Ops()
		for i := range 20 {
			name := fmt.Sprintf("n%d", i)
			if err := os.WriteFile(filepath.Join(c.fs.Lower, "a", "b", name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(c.fs.MountPoint, "a", "b", name)); err != nil {
				t.Fatal(err)
			}
		}
		got := c.fs.Ops().Sub(before)
		if n := got.Total(OpGetattr); n < c.min || n > c.max {
			t.Errorf("LookupAttrs %v: 20 stats of new names asked for attributes %d times (%s), want %d to %d", c.fs == nfs, n, got, c.min, c.max)
		}
	}
}

// TestErrorsByRule: a rule fails exactly its operations on its subtree,
// and removing it heals the path.
func TestErrorsByRule(t *testing.T) {
	f, mnt := mount(t)
	file := filepath.Join(mnt, "a", "b", "f")
	remove := f.Add(Rule{Ops: OpStat, Path: "a/b", Name: "f", Err: syscall.EIO})
	if _, err := os.Stat(file); !errors.Is(err, syscall.EIO) {
		t.Fatalf("stat under an EIO rule: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "a", "b")); err != nil {
		t.Fatalf("the rule reached its parent: %v", err)
	}
	remove()
	if _, err := os.ReadFile(file); err != nil {
		t.Fatalf("after the rule is removed: %v", err)
	}
	f.Add(Rule{Ops: OpCreate | OpWrite, Path: "c", Err: syscall.ENOSPC})
	if err := os.WriteFile(filepath.Join(mnt, "c", "g"), []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create under an ENOSPC rule: %v", err)
	}
	f.Add(Rule{Ops: OpRead, Path: "a", Err: syscall.ESTALE})
	if _, err := os.ReadFile(file); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("read under an ESTALE rule: %v", err)
	}
	if f.Hits() < 3 {
		t.Errorf("hits %d, want at least 3", f.Hits())
	}
}

// TestHangUntilReleased: a hung listing waits until Release, and other
// paths answer meanwhile; a delay answers late.
func TestHangUntilReleased(t *testing.T) {
	f, mnt := mount(t)
	f.Add(Rule{Ops: OpReaddir, Path: "a", Hang: true})
	done := make(chan error, 1)
	go func() { _, err := os.ReadDir(filepath.Join(mnt, "a")); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for f.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Hung() != 1 {
		t.Fatalf("hung requests: %d, want 1", f.Hung())
	}
	if _, err := os.ReadDir(filepath.Join(mnt, "c")); err != nil {
		t.Fatalf("another directory: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the hung listing returned: %v", err)
	default:
	}
	f.Clear()
	if err := <-done; err != nil {
		t.Fatalf("released listing: %v", err)
	}
	f.Add(Rule{Ops: OpGetattr, Path: "c", Delay: 300 * time.Millisecond})
	start := time.Now()
	if _, err := os.Stat(filepath.Join(mnt, "c")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("a slow stat took %v", d)
	}
}

// TestHangSurvivesSignalsNotKill: a process hung on the NAS stays hung
// through a signal it does not die of (here SIGTERM, ignored), as on a
// hard NFS mount, and dies of SIGKILL, as NFS's killable waits let it.
func TestHangSurvivesSignalsNotKill(t *testing.T) {
	f, mnt := mount(t)
	f.Add(Rule{Ops: OpReaddir, Path: "a", Hang: true})
	ls := exec.Command("sh", "-c", `trap "" TERM; exec ls "$0"`, filepath.Join(mnt, "a"))
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ls.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for f.Hung() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Hung() != 1 {
		t.Fatalf("hung requests: %d, want 1", f.Hung())
	}
	// The signal interrupts the request (FUSE's INTERRUPT), which goes on.
	ls.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		t.Fatalf("a hung request ended on SIGTERM: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	ls.Process.Kill()
	select {
	case <-done:
		t.Logf("killed in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		f.Clear()
		<-done
		t.Fatal("a process hung on the NAS did not die of SIGKILL within 5s")
	}
	if n := f.Hung(); n != 0 {
		t.Errorf("hung requests after the kill: %d", n)
	}
}

// TestOpsCounted: every request is counted by operation, with no rule
// too.
func TestOpsCounted(t *testing.T) {
	f, mnt := mount(t)
	before := f.Ops()
	for i := 0; i < 3; i++ {
		if _, err := os.Lstat(filepath.Join(mnt, "a", "b", "f")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.ReadDir(filepath.Join(mnt, "c")); err != nil {
		t.Fatal(err)
	}
	got := f.Ops().Sub(before)
	// Each lstat looks up a, b and f (nothing is cached).
	if n := got[OpLookup]; n < 9 {
		t.Errorf("lookups %d, want at least 9 (%s)", n, got)
	}
	if n := got[OpReaddir]; n != 1 {
		t.Errorf("listings %d, want 1 (%s)", n, got)
	}
	if got.Total(OpStat) < got[OpLookup] {
		t.Errorf("Total(OpStat) %d < lookups %d", got.Total(OpStat), got[OpLookup])
	}
	if f.Hits() != 0 {
		t.Errorf("hits %d with no rule", f.Hits())
	}
}
