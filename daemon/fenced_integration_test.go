package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestIntegration_FencedMountAfterReturn (issue 18, item 1): dc1's daemon
// (takeover auto) is cut off from ZooKeeper while it runs; it fences
// itself, dc2's daemon takes over automatically, and dc1's connection
// comes back. dc1 fences itself before dc2 activates (with the default
// follower interval of a second, longer than half the lease). dc1's mount
// stays fenced and answers as with takeover
// manual: a listing of a job directory is filtered as a replica's (an
// incomplete chk-N hidden) and answered at once, not held for
// hold-timeout and failed with EIO; a new write fails with EROFS. Once
// dc2's daemon stops, dc1's mount holds again and dc1 takes over back.
func TestIntegration_FencedMountAfterReturn(t *testing.T) {
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 1)
	const job = "0123456789abcdef0123456789abcdef"
	top := t.TempDir()
	nas1, nas2 := filepath.Join(top, "dc1"), filepath.Join(top, "dc2")
	for _, d := range []string{nas1, nas2} {
		for _, sub := range []string{"ha", "checkpoints/" + job + "/chk-2", "checkpoints/" + job + "/shared"} {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(d, "ha", "f"), []byte("x"), 0o644)
		// chk-2 has no _metadata: never complete.
		os.WriteFile(filepath.Join(d, "checkpoints", job, "chk-2", "state"), []byte("s"), 0o644)
	}
	// Flink's namespace, empty: no JobManager runs.
	zc := zktest.Connect(t, c.Servers())
	for _, p := range []string{"/flink", "/flink/auto"} {
		if _, err := zc.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := zkbridge.New(context.Background(), testBridgeConfig(t, c, "dc1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rep, err := b.Takeover(context.Background(), zkbridge.TakeoverOptions{}); err != nil || !rep.Activated {
		t.Fatalf("first takeover: %+v %v", rep, err)
	}
	const hold = 3 * time.Second
	proxy := zktest.NewProxy(t, c.Servers()[0])
	dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, func(c *Config) {
		c.Takeover, c.HoldTimeout = TakeoverAuto, hold
		c.ZooKeeper.Servers = []string{proxy.Addr()}
		// The default: the lease, not this, sets how often it looks.
		c.FollowInterval = DefaultConfig().FollowInterval
	})
	dc2 := startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, func(c *Config) { c.Takeover, c.HoldTimeout = TakeoverAuto, hold })
	jobDir := filepath.Join(dc1.mnt, "checkpoints", job)
	if err := os.WriteFile(filepath.Join(jobDir, "shared", "a"), []byte("a"), 0o644); err != nil {
		t.Fatalf("dc1's primary before the partition: %v", err)
	}

	// dc1's daemon renews its lease through the proxy before it is cut.
	for start := time.Now(); !renewed(t, b, "dc1"); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("dc1's daemon never renewed its lease")
		}
	}
	proxy.Block()
	cut := time.Now()
	// dc1's Flink writes on: the last write dc1's mount takes must start
	// well before dc2's activation. The mount stops admitting D/2 after
	// the start of its last renewal, and dc2 activates at least D after
	// it (design §5.10, §5.14); D/4 of that is asked for here.
	var lastWrite time.Time
	for i := 0; ; i++ {
		start := time.Now()
		if os.WriteFile(filepath.Join(jobDir, "shared", fmt.Sprintf("w%d", i)), nil, 0o644) == nil {
			lastWrite = start
		}
		if site, _ := activeSite(t, b); site == "dc2" {
			break
		}
		if time.Since(cut) > 30*time.Second {
			t.Fatal("dc2 did not take over while dc1 was cut off")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, st, err := zc.Get("/ckptfs/auto/active-site")
	if err != nil {
		t.Fatal(err)
	}
	activated := time.UnixMilli(st.Mtime)
	t.Logf("dc2 took over %v after dc1 was cut off; dc1's mount took its last write %v before", activated.Sub(cut).Round(time.Millisecond), activated.Sub(lastWrite).Round(time.Millisecond))
	if margin := activated.Sub(lastWrite); margin < testLease/4 {
		t.Errorf("dc1's mount took a write %v before dc2 activated (lease %v): want it fenced at least %v before", margin, testLease, testLease/4)
	}
	if err := os.WriteFile(filepath.Join(jobDir, "shared", "b"), []byte("b"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("a write on dc1's mount while cut off after dc2 took over: %v, want EROFS", err)
	}
	proxy.Unblock()

	// dc1 reconnects, reads active-site and dc2's lease; until then an
	// open is held (dc1 last knew itself active).
	back := time.Now()
	var names []string
	for {
		start := time.Now()
		entries, err := os.ReadDir(jobDir)
		took := time.Since(start)
		if err == nil {
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Logf("dc1's fenced mount lists %v, %v after its connection came back (this listing took %v)", names, time.Since(back).Round(time.Millisecond), took.Round(time.Millisecond))
			break
		}
		t.Logf("listing dc1's fenced mount: %v after %v", err, took.Round(time.Millisecond))
		if time.Since(back) > 30*time.Second {
			t.Fatalf("dc1's fenced mount never listed %s after its connection came back: %v", jobDir, err)
		}
	}
	if slices.Contains(names, "chk-2") || !slices.Contains(names, "shared") {
		t.Fatalf("dc1's fenced mount lists %v: want shared and not the incomplete chk-2 (filtered as a replica)", names)
	}
	start := time.Now()
	if _, err := os.ReadDir(jobDir); err != nil || time.Since(start) > hold/2 {
		t.Fatalf("listing dc1's fenced mount again: %v after %v, want at once", err, time.Since(start))
	}
	if _, err := os.ReadFile(filepath.Join(dc1.mnt, "ha", "f")); err != nil {
		t.Fatalf("reading through dc1's fenced mount: %v", err)
	}
	err = os.WriteFile(filepath.Join(jobDir, "shared", "c"), []byte("c"), 0o644)
	if !errors.Is(err, syscall.EROFS) || time.Since(start) > hold/2 {
		t.Fatalf("a write on dc1's fenced mount: %v after %v, want EROFS at once", err, time.Since(start))
	}
	if _, err := os.Stat(filepath.Join(nas1, "checkpoints", job, "shared", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write refused on dc1's fenced mount reached its NAS: %v", err)
	}
	if site, _ := activeSite(t, b); site != "dc2" {
		t.Fatalf("active-site %q after dc1 came back, want dc2", site)
	}

	// dc2 stops: a takeover back to dc1 may come, so dc1's opens are
	// held again until it is primary; then they proceed.
	dc2.end(t)
	lost := time.Now()
	for {
		if site, _ := activeSite(t, b); site == "dc1" {
			break
		}
		if time.Since(lost) > 30*time.Second {
			t.Fatal("dc1 did not take over back after dc2 stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var werr error
	for time.Since(lost) < 30*time.Second {
		if werr = os.WriteFile(filepath.Join(jobDir, "shared", "d"), []byte("d"), 0o644); werr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("dc1's mount after it took over back: %v", werr)
	}
	t.Logf("dc1 took over back and writes %v after dc2 stopped", time.Since(lost).Round(time.Millisecond))
}

// renewed says whether site owns the lease and a daemon renewed it.
func renewed(t *testing.T, b *zkbridge.Bridge, site string) bool {
	t.Helper()
	st, err := b.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Lease != nil && st.Lease.Site == site && !st.Lease.Renewed.IsZero()
}
