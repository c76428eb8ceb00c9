package zkbridge

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestIntegration_Lease holds the lease rule against real ZooKeeper:
// renewals keep it fresh; unchanged for D it expires; a holder stops
// claiming D/2 after its last renewal; a renewal after the observer
// concluded makes the takeover's activation fail on the lease guard; an
// activation revokes the lease, after which no renewal succeeds until
// the site is active again.
func TestIntegration_Lease(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	withCluster := func(cfg *Config) { cfg.ClusterID = "lease" }
	dc1 := e.bridge("dc1", withCluster)
	dc2 := e.bridge("dc2", withCluster)
	ctx := testContext(t, time.Minute)
	rule := LeaseRule{Duration: 8 * time.Second}
	hc := &fakeClock{t: time.Unix(1000, 0)}
	oc := &fakeClock{t: time.Unix(5000, 0)}
	h, err := dc1.NewLeaseHolder(rule)
	if err != nil {
		t.Fatal(err)
	}
	h.now = hc.now
	o, err := dc2.NewLeaseObserver(rule, "dc1")
	if err != nil {
		t.Fatal(err)
	}
	o.now = oc.now

	if h.Claiming(hc.now()) {
		t.Fatal("a holder that never renewed claims")
	}
	if v, err := o.Observe(ctx); err != nil || v.State != LeaseAbsent {
		t.Fatalf("before any renewal: %+v %v, want absent", v, err)
	}
	if err := h.Renew(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !h.Claiming(hc.now()) {
		t.Fatal("a holder that just renewed does not claim")
	}
	hc.add(rule.HolderLapse() - time.Millisecond)
	if !h.Claiming(hc.now()) {
		t.Fatal("the holder stopped claiming before D/2")
	}
	hc.add(time.Millisecond)
	if h.Claiming(hc.now()) {
		t.Fatal("the holder still claims D/2 after its renewal")
	}
	// The observer's clock starts when it first sees a version.
	observe := func(want LeaseState) LeaseView {
		t.Helper()
		v, err := o.Observe(ctx)
		if err != nil || v.State != want {
			t.Fatalf("observed %+v %v, want %s", v, err, want)
		}
		return v
	}
	if v := observe(LeaseFresh); time.Duration(v.ExpiresIn) != rule.ObserverDead() {
		t.Fatalf("first seen: expires in %v, want %v", time.Duration(v.ExpiresIn), rule.ObserverDead())
	}
	oc.add(rule.ObserverDead() - time.Millisecond)
	if v := observe(LeaseFresh); time.Duration(v.ExpiresIn) != time.Millisecond {
		t.Fatalf("1ms before the conclusion: expires in %v", time.Duration(v.ExpiresIn))
	}
	// A renewal restarts it.
	if err := h.Renew(ctx, 0); err != nil {
		t.Fatal(err)
	}
	oc.add(time.Millisecond)
	observe(LeaseFresh)
	oc.add(rule.ObserverDead())
	v := observe(LeaseExpired)
	guard, ok := v.Guard()
	if !ok {
		t.Fatal("an expired lease gives no guard")
	}

	// The holder renews after the observer concluded: the takeover's
	// activation is refused by the guard, nothing changes.
	if err := h.Renew(ctx, 0); err != nil {
		t.Fatal(err)
	}
	_, err = dc2.Takeover(ctx, TakeoverOptions{Lease: &guard})
	if !errors.Is(err, ErrLeaseRenewed) {
		t.Fatalf("takeover after a renewal: %v, want ErrLeaseRenewed", err)
	}
	if site, _, _ := dc2.ActiveSite(ctx); site != "" {
		t.Fatalf("active-site %q after a refused activation", site)
	}

	// Unchanged for D again: the activation revokes the lease.
	observe(LeaseFresh)
	oc.add(rule.ObserverDead())
	v = observe(LeaseExpired)
	guard, _ = v.Guard()
	rep, err := dc2.Takeover(ctx, TakeoverOptions{Lease: &guard})
	if err != nil || !rep.Activated {
		t.Fatalf("takeover: %+v %v", rep, err)
	}
	observe(LeaseRevoked)
	paths, err := dc2.clusterPaths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := dc2.readLeases(ctx, paths)
	if err != nil || len(infos) != 1 || infos[0].Site != "dc1" || infos[0].RevokedBy != "dc2" || infos[0].RevokedEpoch != rep.Epoch || infos[0].RevokedAt == nil {
		t.Fatalf("leases for status: %+v %v; want dc1's, revoked by dc2 at epoch %d", infos, err, rep.Epoch)
	}
	t.Logf("status: liveness lease: %s", infos[0])
	if err := h.Renew(ctx, 0); !errors.Is(err, ErrLeaseRevoked) {
		t.Fatalf("renewal of a revoked lease: %v", err)
	}
	if h.Claiming(hc.now()) {
		t.Fatal("a revoked holder claims")
	}
	// Active again at a newer epoch (a failback), dc1 renews again.
	rep, err = dc1.Takeover(ctx, TakeoverOptions{})
	if err != nil || !rep.Activated {
		t.Fatalf("failback: %+v %v", rep, err)
	}
	if err := h.Renew(ctx, rep.Epoch); err != nil {
		t.Fatalf("renewal after the failback: %v", err)
	}
	if !h.Claiming(hc.now()) {
		t.Fatal("the holder does not claim after the failback")
	}
}
