package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

// startRun runs the daemon in this process over a fresh backing
// directory and waits until it serves.
func startRun(t *testing.T, mode fusefs.Mode) (mnt string, cancel func(), done <-chan error) {
	t.Helper()
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "nas"), filepath.Join(top, "flink")
	for _, d := range []string{filepath.Join(backing, "job"), mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: "file://" + mnt, Dir: backing}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Site, cfg.Backing, cfg.MountPoint, cfg.Resolver = "dc1", backing, mnt, res
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	cfg.Catalog.Poll, cfg.FollowInterval, cfg.MetricsAddr = 100*time.Millisecond, 50*time.Millisecond, "127.0.0.1:0"
	cfg.Mount.Mode = mode
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg.Notify.Ready = w
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, cfg) }()
	buf := make([]byte, 16)
	if n, _ := r.Read(buf); string(buf[:n]) != "READY\n" {
		stop()
		t.Fatalf("not ready: %v", <-errc)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt, stop, errc
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestRunEndsEverything: when its context ends, Run unmounts and returns
// nil only after every goroutine it started has ended (TestMain's goleak
// check fails the package otherwise).
func TestRunEndsEverything(t *testing.T) {
	mnt, cancel, done := startRun(t, fusefs.ModePrimary)
	if err := os.WriteFile(filepath.Join(mnt, "job", "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("primary write: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if ok, _ := fusefs.IsMounted(mnt); ok {
		t.Error("still mounted after Run returned")
	}
}

// TestRunEndsWhenUnmountedFromOutside: one part's end (the mount went
// away) ends the others, and Run says why.
func TestRunEndsWhenUnmountedFromOutside(t *testing.T) {
	mnt, cancel, done := startRun(t, fusefs.ModeReplica)
	defer cancel()
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnmounted) {
			t.Fatalf("Run: %v, want ErrUnmounted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestRunRefusesABadConfig: nothing starts, and the error says it is the
// configuration's.
func TestRunRefusesABadConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Backing = "relative"
	if err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("Run: %v, want ErrConfig", err)
	}
}
