package nasfault

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// mountPrimary mounts a primary fusefs over a faultfs NAS holding jobA
// and jobB, with fenceTimeout, without the rest of the daemon: the tests
// below call SetMode as the daemon's mode follower does.
func mountPrimary(t *testing.T, fenceTimeout time.Duration) (*fusefs.Server, *faultfs.FS, string) {
	t.Helper()
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	lower, nas, mnt := filepath.Join(top, "lower"), filepath.Join(top, "nas"), filepath.Join(top, "flink")
	for _, d := range []string{filepath.Join(lower, jobA), filepath.Join(lower, jobB), nas, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fault := faultfs.Mount(t, lower, nas)
	logs := &logBuffer{t: t}
	cfg := fusefs.DefaultConfig()
	cfg.Backing, cfg.MountPoint, cfg.Mode = nas, mnt, fusefs.ModePrimary
	cfg.Visibility = fusefs.AllVisible{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.FenceTimeout = fenceTimeout
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fault.Clear()
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		if t.Failed() {
			t.Log("mount log:\n" + logs.String())
		}
	})
	return srv, fault, mnt
}

// TestFencingWithAHungMutation: a mutation hung on the NAS neither holds
// up other mutations nor fencing: SetMode returns within FenceTimeout
// and says that a change is still in flight; from then on every change
// is refused at once; the hung change, when the NAS finally answers,
// is counted as a write after the fence.
func TestFencingWithAHungMutation(t *testing.T) {
	t.Parallel()
	srv, fault, mnt := mountPrimary(t, time.Second)
	fault.Add(faultfs.Rule{Ops: faultfs.OpMkdir, Path: jobA, Hang: true})
	hung := make(chan error, 1)
	go func() { hung <- os.Mkdir(filepath.Join(mnt, jobA, "chk-7"), 0o755) }()
	deadline := time.Now().Add(10 * time.Second)
	for fault.Hung() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the mkdir never reached the NAS")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Mkdir(filepath.Join(mnt, jobB, "chk-1"), 0o755); err != nil {
		t.Fatalf("another mkdir while one hangs: %v", err)
	}
	fenced := make(chan error, 1)
	start := time.Now()
	go func() { fenced <- srv.SetMode(fusefs.ModeFenced) }()
	select {
	case err := <-fenced:
		if !errors.Is(err, fusefs.ErrFenceIncomplete) {
			t.Errorf("SetMode: %v, want ErrFenceIncomplete", err)
		}
		t.Logf("SetMode returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		fault.Clear()
		t.Fatal("SetMode(fenced) waits for a mutation hung on the NAS")
	}
	refused := make(chan error, 1)
	go func() { refused <- os.Mkdir(filepath.Join(mnt, jobB, "chk-2"), 0o755) }()
	select {
	case err := <-refused:
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("mkdir after fencing: %v, want EROFS", err)
		}
	case <-time.After(5 * time.Second):
		fault.Clear()
		t.Fatal("a mutation after fencing waits instead of being refused")
	}
	fault.Clear()
	if err := <-hung; err != nil {
		t.Logf("the hung mkdir, released: %v", err)
	}
	if n := srv.Stats().WritesAfterFence; n != 1 {
		t.Errorf("WritesAfterFence %d, want 1 (the hung mkdir landed after the fence)", n)
	}
}

// TestFencingWritersOnAHungNAS: fencing with writers open while the NAS
// stops answering every call on their files returns at once (no change
// of theirs is in flight), and their next writes are refused at once,
// without waiting on the NAS: every write goes through the daemon, which
// refuses it before it touches the backing file (design §5.14).
func TestFencingWritersOnAHungNAS(t *testing.T) {
	t.Parallel()
	srv, fault, mnt := mountPrimary(t, time.Second)
	var files []*os.File
	for i := 0; i < 4; i++ {
		f, err := os.OpenFile(filepath.Join(mnt, jobA, "f"+string(rune('0'+i))), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("before")); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	fault.Add(faultfs.Rule{Ops: faultfs.OpAll &^ faultfs.OpLookup, Path: jobA, Hang: true})
	defer fault.Clear()
	fenced := make(chan error, 1)
	start := time.Now()
	go func() { fenced <- srv.SetMode(fusefs.ModeFenced) }()
	select {
	case err := <-fenced:
		if err != nil {
			t.Errorf("SetMode with no change in flight: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("SetMode took %v", d)
		}
	case <-time.After(20 * time.Second):
		fault.Clear()
		t.Fatalf("SetMode(fenced) hangs with writers open on a hung NAS: %v", <-fenced)
	}
	for _, f := range files {
		written := make(chan error, 1)
		go func() { _, err := f.Write([]byte("after")); written <- err }()
		select {
		case err := <-written:
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("%s: a write after fencing: %v, want EROFS", f.Name(), err)
			}
		case <-time.After(5 * time.Second):
			fault.Clear()
			t.Fatalf("%s: a write after fencing waits on the hung NAS", f.Name())
		}
	}
	fault.Clear()
	for _, f := range files {
		f.Close()
	}
}
