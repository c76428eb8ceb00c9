package zkbridge

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// at returns st as if its read had started at start and returned at
// once: the rule only ever compares a state's times on one clock, so a
// test moves them instead of waiting.
func at(st State, start time.Time) State {
	st.Start, st.Returned = start, start
	return st
}

// TestIntegration_Lease holds the lease rule (design §5.10) against a
// real ZooKeeper: the first activation waits D for a lease nobody owned;
// a holder's claim lasts D/2 from the start of its last renewal; an
// observer concludes only after D unchanged (the longer of its own D and
// the renewer's); a renewal after the conclusion fails the activation; no
// renewal applies after an activation; a hand that deletes or rewrites
// active-site, the epoch or the lease stops the writing site instead of
// starting another; a takeover refuses while the lease is renewed.
func TestIntegration_Lease(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	withCluster := func(cfg *Config) { cfg.ClusterID = "lease" }
	dc1 := e.bridge("dc1", withCluster)
	dc2 := e.bridge("dc2", withCluster)
	ctx := testContext(t, 2*time.Minute)
	rule := LeaseRule{Duration: 8 * time.Second}
	h, err := dc1.NewLeaseHolder(rule)
	if err != nil {
		t.Fatal(err)
	}
	read := func(b *Bridge) State {
		t.Helper()
		st, err := b.ReadState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// Nothing there: nobody holds, a renewal is refused.
	if st := read(dc1); st.LeaseExists() || st.Holds("dc1") {
		t.Fatalf("fresh cluster: %+v", st)
	}
	if err := h.Renew(ctx, read(dc1)); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("renewal without a lease: %v", err)
	}

	// The first activation: the takeover creates the lease, owned by
	// nobody, and waits D (MinLeaseDuration here) before it grants it.
	start := time.Now()
	rep, err := dc1.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second})
	if err != nil || !rep.Activated {
		t.Fatalf("first takeover: %+v %v", rep, err)
	}
	if waited := time.Since(start); waited < MinLeaseDuration {
		t.Fatalf("the first activation waited %v, less than D %v", waited, MinLeaseDuration)
	}
	st := read(dc1)
	if !st.Holds("dc1") || st.Lease.Epoch != rep.Epoch || st.Lease.Judged == 0 {
		t.Fatalf("after dc1's activation: %+v, lease %+v", st, st.Lease)
	}
	// The takeover on the site that holds it waits for nothing.
	start = time.Now()
	if rep, err := dc1.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second}); err != nil || !rep.AlreadyActive {
		t.Fatalf("takeover on the active site: %+v %v", rep, err)
	} else if waited := time.Since(start); waited > MinLeaseDuration/2 {
		t.Fatalf("the takeover on the active site waited %v", waited)
	}

	// The holder's claim.
	t0 := time.Unix(1000, 0)
	if err := h.Renew(ctx, at(st, t0)); err != nil {
		t.Fatal(err)
	}
	if got := h.Deadline(); !got.Equal(t0.Add(rule.HolderLapse())) {
		t.Fatalf("deadline %v, want D/2 after the renewal's start", got)
	}
	if h.Due(t0.Add(rule.RenewEvery()-time.Millisecond)) || !h.Due(t0.Add(rule.RenewEvery())) {
		t.Fatal("renewals are not due every D/8")
	}

	// The observer's clock starts when a read returns a version.
	o, err := NewLeaseObserver(rule)
	if err != nil {
		t.Fatal(err)
	}
	o0 := time.Unix(5000, 0)
	see := func(b *Bridge, when time.Time, want LeaseState) LeaseView {
		t.Helper()
		v := o.See(at(read(b), when))
		if v.State != want {
			t.Fatalf("observed %+v at %v, want %s", v, when.Sub(o0), want)
		}
		return v
	}
	see(dc2, o0, LeaseFresh)
	see(dc2, o0.Add(rule.ObserverDead()-time.Millisecond), LeaseFresh)
	// A renewal restarts it.
	if err := h.Renew(ctx, read(dc1)); err != nil {
		t.Fatal(err)
	}
	see(dc2, o0.Add(rule.ObserverDead()), LeaseFresh)
	v := see(dc2, o0.Add(2*rule.ObserverDead()), LeaseExpired)
	guard, ok := v.Guard()
	if !ok || v.Owner != "dc1" {
		t.Fatalf("an expired lease: %+v", v)
	}
	// An observer with a shorter D waits for the renewer's.
	short, _ := NewLeaseObserver(LeaseRule{Duration: time.Second})
	short.See(at(read(dc2), o0))
	if v := short.See(at(read(dc2), o0.Add(2*time.Second))); v.State != LeaseFresh {
		t.Fatalf("an observer with D 1s concluded a lease renewed with D %v after 2s: %+v", rule.Duration, v)
	}

	// The holder renews after the observer concluded: the takeover's
	// guarded writes are refused, nothing changes.
	if err := h.Renew(ctx, read(dc1)); err != nil {
		t.Fatal(err)
	}
	if _, err = dc2.Takeover(ctx, TakeoverOptions{Lease: &guard}); !errors.Is(err, ErrLeaseRenewed) {
		t.Fatalf("takeover after a renewal: %v, want ErrLeaseRenewed", err)
	}
	if st := read(dc2); st.ActiveSite != "dc1" || st.Epoch != rep.Epoch {
		t.Fatalf("after a refused activation: %+v", st)
	}

	// Unchanged for D again: the activation grants the lease to dc2.
	stale := read(dc1) // dc1 reads before the activation, renews after
	see(dc2, o0.Add(3*rule.ObserverDead()), LeaseFresh)
	v = see(dc2, o0.Add(4*rule.ObserverDead()), LeaseExpired)
	guard, _ = v.Guard()
	rep2, err := dc2.Takeover(ctx, TakeoverOptions{Lease: &guard})
	if err != nil || !rep2.Activated || rep2.Epoch != rep.Epoch+1 {
		t.Fatalf("takeover: %+v %v", rep2, err)
	}
	if st := read(dc2); !st.Holds("dc2") || st.Holds("dc1") {
		t.Fatalf("after dc2's activation: %+v %+v", st, st.Lease)
	}
	// No renewal of dc1 applies any more, and its claim ends at once.
	if err := h.Renew(ctx, stale); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("renewal read before the activation: %v", err)
	}
	if !h.Deadline().IsZero() {
		t.Fatal("dc1 still claims after a renewal failed on the epoch")
	}
	if err := h.Renew(ctx, read(dc1)); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("renewal after the activation: %v", err)
	}

	// Hands on ckptfs's nodes stop the writer, and start nobody.
	h2, _ := dc2.NewLeaseHolder(rule)
	if err := h2.Renew(ctx, read(dc2)); err != nil {
		t.Fatal(err)
	}
	conn := zktest.Connect(t, e.servers).Conn
	paths, _ := dc2.clusterPaths(ctx)
	mustSet := func(path, data string) {
		t.Helper()
		if _, err := conn.Set(path, []byte(data), -1); err != nil {
			t.Fatal(err)
		}
	}
	stale = read(dc2)
	mustSet(paths.activeSite(), "dc1") // rolled back by hand
	if err := h2.Renew(ctx, stale); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("renewal after active-site was rewritten: %v", err)
	}
	if read(dc1).Holds("dc1") || read(dc2).Holds("dc2") {
		t.Fatal("a site holds the lease after active-site was rewritten by hand")
	}
	mustSet(paths.activeSite(), "dc2")
	if !read(dc2).Holds("dc2") {
		t.Fatal("dc2 does not hold its lease again")
	}
	stale = read(dc2)
	mustSet(paths.epoch(), "1") // rolled back by hand
	if err := h2.Renew(ctx, stale); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("renewal after the epoch was rolled back: %v", err)
	}
	if read(dc2).Holds("dc2") || read(dc1).Holds("dc1") {
		t.Fatal("a site holds the lease with the epoch rolled back")
	}
	mustSet(paths.epoch(), "2")
	for _, p := range []string{paths.activeSite(), paths.lease()} {
		stale = read(dc2)
		if err := conn.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
		if err := h2.Renew(ctx, stale); !errors.Is(err, ErrNotHolder) {
			t.Fatalf("renewal after %s was deleted: %v", p, err)
		}
		if read(dc2).Holds("dc2") {
			t.Fatalf("dc2 holds with %s deleted", p)
		}
		if p == paths.activeSite() {
			if _, err := conn.Create(p, []byte("dc2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The lease is gone: a takeover of dc2 (the site active-site names)
	// creates it unowned and waits D, then grants it again.
	rep3, err := dc2.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second})
	if err != nil || !rep3.Activated {
		t.Fatalf("takeover with the lease deleted: %+v %v", rep3, err)
	}
	if !read(dc2).Holds("dc2") {
		t.Fatal("dc2 does not hold after its takeover")
	}

	// A takeover refuses while another site renews.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if st, err := dc2.ReadState(ctx); err == nil {
				h2.Renew(ctx, st)
			}
		}
	}()
	_, err = dc1.Takeover(ctx, TakeoverOptions{Wait: 3 * time.Second})
	close(stop)
	wg.Wait()
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("takeover while dc2 renews: %v, want ErrLeaseHeld", err)
	}
	if st := read(dc1); st.ActiveSite != "dc2" || !st.Holds("dc2") {
		t.Fatalf("a refused takeover changed something: %+v", st)
	}
	lease, err := dc1.readLease(ctx, paths)
	if err != nil || lease == nil {
		t.Fatal(lease, err)
	}
	t.Logf("status: lease %s", lease)
}

// TestIntegration_LeaseManyHolders (issue 29): every daemon of a site
// renews the lease, and a site has one daemon per machine. Before issue
// 29 each renewal compared-and-set the one lease node: with 24 daemons
// 40 ms from ZooKeeper 6 healthy ones lost their lease (and would have
// fenced their primary), 4 of 48 here. Renewals now check the epoch and
// active-site and set the lease at any version: they never conflict.
// Holders of one site renew through a link of 40 ms round trip for two
// leases; no renewal may fail but for the pass's own deadline (a loaded
// test machine), and none of them lapses while the server answers.
// CKPTFS_LEASE_HOLDERS sets how many (500: one per machine of a large
// site); the test logs the requests a second the server received, in all
// and per holder.
func TestIntegration_LeaseManyHolders(t *testing.T) {
	holders := 48
	if n, err := strconv.Atoi(os.Getenv("CKPTFS_LEASE_HOLDERS")); err == nil && n > 0 {
		holders = n
	}
	if testing.Short() {
		t.Skip("many ZooKeeper sessions")
	}
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	proxy := zktest.NewProxy(t, c.Servers()[0])
	proxy.SetLatency(20 * time.Millisecond)
	// A pass's deadline (D/16) long beside the round trip, as in
	// production (D 20 s, a pass bounded by 1 s).
	rule := LeaseRule{Duration: 8 * time.Second}
	withLease := func(cfg *Config) { cfg.ClusterID, cfg.LeaseDuration = "many", rule.Duration }
	ctx := testContext(t, 5*time.Minute)
	first := e.bridge("dc1", withLease)
	if rep, err := first.Takeover(ctx, TakeoverOptions{}); err != nil || !rep.Activated {
		t.Fatalf("first takeover: %+v %v", rep, err)
	}
	type holder struct {
		h      *LeaseHolder
		b      *Bridge
		lapses int
		failed []error // renewals that failed, but for the pass's deadline
	}
	hs := make([]*holder, holders)
	for i := range hs {
		b := e.bridge("dc1", withLease, func(cfg *Config) { cfg.Servers = []string{proxy.Addr()} })
		h, err := b.NewLeaseHolder(rule)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = &holder{h: h, b: b}
	}
	received := func() int64 {
		out, err := c.FourLetterWord(0, "srvr")
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "Received: "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
		t.Fatalf("srvr: %q %v", out, err)
		return 0
	}
	before := received()
	start := time.Now()
	run := 2 * rule.Duration
	var wg sync.WaitGroup
	for _, hd := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The daemon's loop: a pass every D/16, a renewal when due.
			claimed := false
			for time.Since(start) < run {
				now := time.Now()
				if d := hd.h.Deadline(); now.Before(d) {
					claimed = true
				} else if claimed {
					hd.lapses++
					claimed = false
				}
				if hd.h.Due(now) {
					pctx, cancel := context.WithTimeout(ctx, rule.Duration/16)
					st, err := hd.b.ReadState(pctx)
					if err == nil {
						err = hd.h.Renew(pctx, st)
					}
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						hd.failed = append(hd.failed, err)
					}
					cancel()
				}
				time.Sleep(rule.Duration / 16)
			}
		}()
	}
	wg.Wait()
	rate := float64(received()-before) / time.Since(start).Seconds()
	lapsed := 0
	for i, hd := range hs {
		if hd.h.LastRenewal().IsZero() {
			t.Errorf("holder %d never renewed", i)
		}
		if len(hd.failed) > 0 {
			t.Errorf("holder %d: %d renewals failed, the first: %v", i, len(hd.failed), hd.failed[0])
		}
		if hd.lapses > 0 {
			lapsed++
		}
	}
	t.Logf("%d holders, 40 ms round trip, %v: %d lapsed at least once (none would while the server answers in time); the server received %.0f requests a second, %.1f per holder (a pass every D/16, a renewal every D/8: D = %v)",
		holders, run, lapsed, rate, rate/float64(holders), rule.Duration)
}
