package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

const testLease = 2 * time.Second

// servers are the mounts the test binary's daemons made, by mount point.
var servers sync.Map

func init() {
	hook := func(mnt string, srv *fusefs.Server) { servers.Store(mnt, srv) }
	testHookMounted.Store(&hook)
}

// mounted is the mount at mnt (nil: none).
func mounted(mnt string) *fusefs.Server {
	if v, ok := servers.Load(mnt); ok {
		return v.(*fusefs.Server)
	}
	return nil
}

// testDaemon is one in-process daemon of a test.
type testDaemon struct {
	mnt string
	// wd records what the daemon asked of its watchdog; the test fails
	// when a real one would have killed a daemon that runs.
	wd   *watchdog.Recorder
	stop func()
	// done is closed when Run returned err.
	done chan struct{}
	err  error
	// stalled: the test stopped the daemon's loop on purpose.
	stalled bool
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

// testBridgeConfig is a bridge configuration of site on c, with the
// test's lease.
func testBridgeConfig(t *testing.T, c *zktest.Cluster, site string) zkbridge.Config {
	zcfg := zkbridge.DefaultConfig()
	zcfg.Servers, zcfg.ClusterID, zcfg.Site = c.Servers(), "auto", site
	zcfg.LeaseDuration = testLease
	zcfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	return zcfg
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
	zcfg := testBridgeConfig(t, c, site)
	zcfg.SessionTimeout, zcfg.LockWait, zcfg.Logger = 4*time.Second, 10*time.Second, cfg.Logger
	cfg.ZooKeeper = &zcfg
	wd := &watchdog.Recorder{}
	cfg.Watchdog = wd
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
	d := &testDaemon{mnt: mnt, wd: wd, stop: stop, done: make(chan struct{})}
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
		if at, fired := wd.Fired(); fired && !d.stalled {
			t.Errorf("%s's watchdog would have killed the daemon at %s although it ran: a healthy daemon let its deadline pass", site, at.Format(time.RFC3339Nano))
		}
	})
	if mode == fusefs.ModePrimary {
		// A primary writes once its site holds the lease.
		if err := mounttest.WaitWritable(mnt, 10*testLease); err != nil {
			t.Fatal(err)
		}
	}
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
// lease, the held open proceeds on the promoted mount, and the lease is
// dc2's.
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
	b, err := zkbridge.New(context.Background(), testBridgeConfig(t, c, "dc1"), nil)
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
