package mounttest

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/manifest"
)

// RequireEnv makes tests that cannot run here fail instead of skipping.
const RequireEnv = "CKPTFS_REQUIRE_FUSE"

// Options configures New. The zero value is a primary mount that shows
// everything.
type Options struct {
	// Mode defaults to fusefs.ModePrimary.
	Mode fusefs.Mode
	// Visibility defaults to fusefs.AllVisible.
	Visibility manifest.Visibility
	// Sealer may be nil.
	Sealer manifest.Sealer
	// Dir holds orig/ and mnt/; a fresh t.TempDir() when empty. Existing
	// directories are reused (to mount again over a dead mount).
	Dir string
	// Configure adjusts the configuration just before mounting.
	Configure func(*fusefs.Config)
}

// Mount is one in-process mount of fusefs over Orig at Mnt.
type Mount struct {
	Orig   string
	Mnt    string
	Server *fusefs.Server

	t    testing.TB
	once sync.Once
	err  error
}

// RequireFUSE skips the test in -short mode; otherwise it skips the test,
// loudly, when real mounts are impossible here (not root, no usable
// /dev/fuse), or fails it when RequireEnv=1.
func RequireFUSE(t testing.TB) {
	t.Helper()
	requireFUSE(t, testing.Short(), os.Geteuid(), "/dev/fuse")
}

func requireFUSE(t testing.TB, short bool, euid int, dev string) {
	t.Helper()
	if short {
		t.Skipf("mounttest: no real FUSE mount in -short mode")
	}
	reason := ""
	if euid != 0 {
		reason = "not running as root"
	} else if f, err := os.OpenFile(dev, os.O_RDWR, 0); err != nil {
		reason = fmt.Sprintf("cannot open %s: %v", dev, err)
	} else {
		f.Close()
	}
	if reason == "" {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("real FUSE mounts are required (%s=1) but impossible: %s", RequireEnv, reason)
	}
	t.Skipf("SKIPPED: REAL-MOUNT TEST NOT RUN: %s (run as root with /dev/fuse; %s=1 makes this a failure)", reason, RequireEnv)
}

// New mounts fusefs in this process and unmounts it in t.Cleanup.
func New(t testing.TB, opts *Options) *Mount {
	t.Helper()
	RequireFUSE(t)
	if opts == nil {
		opts = &Options{}
	}
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	m := &Mount{Orig: filepath.Join(dir, "orig"), Mnt: filepath.Join(dir, "mnt"), t: t}
	for _, d := range []string{m.Orig, m.Mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			// A dead mount left at d is for fusefs.Mount to recover.
			if _, serr := os.Stat(d); !isDeadMount(serr) {
				t.Fatal(err)
			}
		}
	}
	cfg := fusefs.DefaultConfig()
	cfg.Backing, cfg.MountPoint = m.Orig, m.Mnt
	cfg.Mode = fusefs.ModePrimary
	if opts.Mode != 0 {
		cfg.Mode = opts.Mode
	}
	cfg.Visibility = fusefs.AllVisible{}
	if opts.Visibility != nil {
		cfg.Visibility = opts.Visibility
	}
	cfg.Sealer = opts.Sealer
	cfg.Logger = Logger(t)
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	m.Server = srv
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return m
}

// Unmount unmounts once, retrying while the mount is busy and detaching
// it lazily as a last resort (which is still reported as an error).
func (m *Mount) Unmount() error {
	m.once.Do(func() { m.err = unmount(m.Server, m.Mnt) })
	return m.err
}

const unmountPatience = 5 * time.Second

func unmount(srv *fusefs.Server, mnt string) error {
	deadline := time.Now().Add(unmountPatience)
	var err error
	for {
		if err = srv.Unmount(); err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if derr := syscall.Unmount(mnt, syscall.MNT_DETACH); derr != nil {
		return errors.Join(err, fmt.Errorf("lazy unmount %s: %w", mnt, derr))
	}
	return fmt.Errorf("%w (detached lazily; a file on the mount was still open)", err)
}

// OrigPath is rel inside the backing directory.
func (m *Mount) OrigPath(rel string) string { return filepath.Join(m.Orig, rel) }

// Path is rel inside the mount.
func (m *Mount) Path(rel string) string { return filepath.Join(m.Mnt, rel) }

// WriteOrig writes a file behind the mount's back (as replication does),
// creating its directories.
func (m *Mount) WriteOrig(rel string, data []byte) {
	m.t.Helper()
	p := m.OrigPath(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// MkdirOrig creates a directory behind the mount's back.
func (m *Mount) MkdirOrig(rel string) {
	m.t.Helper()
	if err := os.MkdirAll(m.OrigPath(rel), 0o755); err != nil {
		m.t.Fatal(err)
	}
}

func isDeadMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// Logger returns a logger that writes to t.Log, so output shows only for
// failed tests (or with -v). Lines logged after the test ended are
// dropped.
// Benchmarks print their logs, so there it only passes warnings.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	level := slog.LevelDebug
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool // GUARDED_BY(mu)
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
