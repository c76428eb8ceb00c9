package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

const testLease = 2 * time.Second

// site is one in-process daemon of a test.
type testDaemon struct {
	mnt  string
	stop func()
	// done is closed when Run returned err.
	done chan struct{}
	err  error
}

// end stops the daemon and waits for it.
func (d *testDaemon) end(t *testing.T) {
	t.Helper()
	d.stop()
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s's daemon did not end", d.mnt)
	}
}

// startSiteDaemon runs a daemon of site over backing with ZooKeeper.
func startSiteDaemon(t *testing.T, c *zktest.Cluster, site, backing string, mode fusefs.Mode, modify func(*Config)) *testDaemon {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "flink")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: "file://" + mnt, Dir: backing}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Site, cfg.Backing, cfg.MountPoint, cfg.Resolver = site, backing, mnt, res
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("test_daemon", site)
	cfg.Catalog.Poll, cfg.FollowInterval = 100*time.Millisecond, 100*time.Millisecond
	cfg.Mount.Mode = mode
	zcfg := zkbridge.DefaultConfig()
	zcfg.Servers, zcfg.ClusterID, zcfg.Site = c.Servers(), "auto", site
	zcfg.SessionTimeout, zcfg.LockWait, zcfg.Logger = 4*time.Second, 10*time.Second, cfg.Logger
	cfg.ZooKeeper = &zcfg
	cfg.LeaseDuration = testLease
	if modify != nil {
		modify(&cfg)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg.Notify.Ready = w
	ctx, stop := context.WithCancel(context.Background())
	d := &testDaemon{mnt: mnt, stop: stop, done: make(chan struct{})}
	go func() { d.err = Run(ctx, cfg); close(d.done) }()
	buf := make([]byte, 16)
	if n, _ := r.Read(buf); string(buf[:n]) != "READY\n" {
		stop()
		<-d.done
		t.Fatalf("%s not ready: %v", site, d.err)
	}
	t.Cleanup(func() {
		d.end(t)
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	})
	return d
}

func activeSite(t *testing.T, b *zkbridge.Bridge) (string, int64) {
	t.Helper()
	site, epoch, err := b.ActiveSite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return site, epoch
}

// TestIntegration_AutoTakeover: with takeover manual a standby site never
// takes over by itself; with auto, while the active site's daemon renews
// its lease nothing changes and the standby mount holds opens; once it
// stops, exactly one of two standby daemons takes over within about the
// lease, the held open proceeds on the promoted mount, and the old
// primary's lease is revoked.
func TestIntegration_AutoTakeover(t *testing.T) {
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 1)
	top := t.TempDir()
	nas1, nas2 := filepath.Join(top, "dc1"), filepath.Join(top, "dc2")
	for _, d := range []string{nas1, nas2} {
		if err := os.MkdirAll(filepath.Join(d, "ha"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "ha", "f"), []byte("x"), 0o644)
	}
	zcfg := zkbridge.DefaultConfig()
	zcfg.Servers, zcfg.ClusterID, zcfg.Site = c.Servers(), "auto", "dc1"
	zcfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	b, err := zkbridge.New(context.Background(), zcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The first start goes through ckptfs takeover.
	if rep, err := b.Takeover(context.Background(), zkbridge.TakeoverOptions{}); err != nil || !rep.Activated {
		t.Fatalf("first takeover: %+v %v", rep, err)
	}
	dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, func(c *Config) { c.Takeover = TakeoverAuto })

	// Manual: dc1 stops renewing, dc2 waits for an operator.
	manual := startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, nil)
	time.Sleep(3 * testLease / 2)
	if site, _ := activeSite(t, b); site != "dc1" {
		t.Fatalf("active-site %q with dc1 renewing", site)
	}
	if err := os.WriteFile(filepath.Join(dc1.mnt, "ha", "g"), []byte("y"), 0o644); err != nil {
		t.Fatalf("dc1's primary, renewing: %v", err)
	}
	if _, err := os.ReadFile(filepath.Join(manual.mnt, "ha", "f")); err != nil {
		t.Fatalf("a manual standby holds nothing: %v", err)
	}
	dc1.end(t)
	time.Sleep(3 * testLease)
	if site, _ := activeSite(t, b); site != "dc1" {
		t.Fatalf("takeover manual: active-site %q without an operator", site)
	}
	manual.end(t)

	// Auto: two daemons of dc2; an open waits.
	dc1 = startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, func(c *Config) { c.Takeover = TakeoverAuto })
	auto := func(c *Config) { c.Takeover = TakeoverAuto }
	a := startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, auto)
	startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, auto)
	opened := make(chan error, 1)
	go func() { _, err := os.ReadFile(filepath.Join(a.mnt, "ha", "f")); opened <- err }()
	time.Sleep(3 * testLease / 2)
	select {
	case err := <-opened:
		t.Fatalf("dc2's open was not held while dc1 renews: %v", err)
	default:
	}
	_, epoch := activeSite(t, b)
	lost := time.Now()
	dc1.end(t)
	var site string
	for site != "dc2" {
		if time.Since(lost) > 4*testLease {
			t.Fatalf("no automatic takeover %v after dc1 stopped", time.Since(lost))
		}
		time.Sleep(50 * time.Millisecond)
		site, _ = activeSite(t, b)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("the held open after the takeover: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the held open did not proceed after the takeover")
	}
	t.Logf("dc2 took over %v after dc1 stopped (lease %v)", time.Since(lost).Round(time.Millisecond), testLease)
	if err := os.WriteFile(filepath.Join(a.mnt, "ha", "h"), []byte("z"), 0o644); err != nil {
		t.Fatalf("dc2's promoted mount: %v", err)
	}
	time.Sleep(testLease)
	if _, got := activeSite(t, b); got != epoch+1 {
		t.Fatalf("epoch %d after the takeover, want %d: exactly one activation", got, epoch+1)
	}
}
