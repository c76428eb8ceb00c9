package zkbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// dutyDaemon runs one daemon's Duty; working says whether its work runs.
type dutyDaemon struct {
	b       *Bridge
	d       *Duty
	working atomic.Bool
	starts  atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{}
}

func startDuty(t *testing.T, b *Bridge) *dutyDaemon {
	t.Helper()
	d, err := b.NewDuty()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dd := &dutyDaemon{b: b, d: d, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(dd.done)
		d.Run(ctx, func(ctx context.Context) {
			dd.starts.Add(1)
			dd.working.Store(true)
			<-ctx.Done()
			dd.working.Store(false)
		})
	}()
	t.Cleanup(dd.stop)
	return dd
}

func (dd *dutyDaemon) stop() {
	dd.cancel()
	<-dd.done
}

// holders returns the daemons whose work runs.
func holders(ds []*dutyDaemon) (n int, which []int) {
	for i, d := range ds {
		if d.working.Load() {
			n++
			which = append(which, i)
		}
	}
	return n, which
}

// TestIntegration_Duty: one daemon of a site at a time holds its duty and
// runs the site's work (design §5.5.3); another site has its own; the
// holder's session ending, or its stopping, hands the duty on; a
// persistent znode in the duty's place does not keep it from everyone.
func TestIntegration_Duty(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	proxies, addrs := e.proxies()
	first := e.bridge("dc2", func(cfg *Config) { cfg.Servers = addrs; cfg.ClusterID = "default" })
	ds := []*dutyDaemon{startDuty(t, first)}
	waitFor(t, 10*time.Second, "the first daemon holds dc2's duty", func() (bool, error) { return ds[0].working.Load() && ds[0].d.Held(), nil })
	for range 3 {
		ds = append(ds, startDuty(t, e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "default" })))
	}
	other := startDuty(t, e.bridge("dc1", func(cfg *Config) { cfg.ClusterID = "default" }))
	waitFor(t, 10*time.Second, "dc1's one daemon holds dc1's duty", func() (bool, error) { return other.working.Load(), nil })
	waitFor(t, 10*time.Second, "the others know the holder", func() (bool, error) {
		for _, d := range ds[1:] {
			if d.d.Holder() == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if n, which := holders(ds); n != 1 || which[0] != 0 {
		t.Fatalf("dc2's duty held by %v, want daemon 0 alone", which)
	}
	t.Logf("daemon 1 sees the holder: %s", ds[1].d.Holder())

	obs := zktest.Connect(t, c.Servers())
	path := e.ckptfs + "/default/duty/dc2"
	data, stat, err := obs.Conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	var h dutyHolder
	if err := json.Unmarshal(data, &h); err != nil || h.Site != "dc2" || h.PID == 0 {
		t.Errorf("duty data %s: %v", data, err)
	}
	if stat.EphemeralOwner != first.Conn().SessionID() {
		t.Errorf("duty owned by %x, want the first daemon's session %x", stat.EphemeralOwner, first.Conn().SessionID())
	}
	acl, _, err := obs.Conn.GetACL(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := first.zk.acls.forPath(e.ckptfs + "/default/sites/dc2/jobs/x"); fmt.Sprint(acl) != fmt.Sprint(want) {
		t.Errorf("duty ACL %v, want the markers' %v", acl, want)
	}

	// The holder's session expires: another takes the duty, and the old
	// holder stops its work once it has its new session.
	zktest.ExpireConnSession(t, first.Conn(), proxies)
	waitFor(t, 15*time.Second, "one other daemon holds dc2's duty after the holder's session expired", func() (bool, error) {
		n, which := holders(ds)
		return n == 1 && which[0] != 0, nil
	})
	_, which := holders(ds)
	holder := ds[which[0]]

	// The holder stops: it gives the duty up, and another takes it well
	// before a session timeout.
	start := time.Now()
	holder.stop()
	waitFor(t, 10*time.Second, "another daemon holds dc2's duty after the holder stopped", func() (bool, error) {
		n, _ := holders(ds)
		return n == 1, nil
	})
	if took := time.Since(start); took > e.config("dc2").SessionTimeout/2 {
		t.Errorf("the duty moved %v after its holder stopped: not given up", took)
	}
	if !other.working.Load() {
		t.Error("dc1's daemon lost its site's duty")
	}

	// Every daemon stops; a persistent znode in the duty's place.
	for _, d := range ds {
		d.stop()
	}
	waitFor(t, 10*time.Second, "the duty's znode is gone", func() (bool, error) {
		ok, _, err := obs.Conn.Exists(path)
		return !ok, err
	})
	if _, err := obs.Conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	last := startDuty(t, e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "default" }))
	waitFor(t, 10*time.Second, "a daemon holds dc2's duty past a persistent znode", func() (bool, error) { return last.working.Load(), nil })
	if st := last.d.Stats(); st.Taken != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestIntegration_DutyWorkStops: losing the duty stops the work and
// waits for it before the next holder's look matters to this daemon.
func TestIntegration_DutyWorkStops(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b := e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "default" })
	d, err := b.NewDuty()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var running, ended int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, func(ctx context.Context) {
			mu.Lock()
			running++
			mu.Unlock()
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // a pass finishing
			mu.Lock()
			running--
			ended++
			mu.Unlock()
		})
	}()
	waitFor(t, 10*time.Second, "the daemon holds the duty", func() (bool, error) { return d.Held(), nil })
	// Another session takes the znode's place: delete it and create it
	// as someone else's.
	obs := zktest.Connect(t, c.Servers())
	path := e.ckptfs + "/default/duty/dc2"
	if err := obs.Conn.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Conn.Create(path, []byte(`{"site":"dc2","host":"other","pid":1}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
		t.Fatal(err)
	}
	// The daemon may have re-created it first: then it still holds.
	time.Sleep(time.Second)
	_, stat, err := obs.Conn.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	r := running
	mu.Unlock()
	switch mine := stat.EphemeralOwner == b.Conn().SessionID(); {
	case mine && r != 1:
		t.Errorf("holding the duty with %d works running", r)
	case !mine && (r != 0 || d.Held()):
		t.Errorf("another session holds the duty; this daemon: held %v, %d works running", d.Held(), r)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if running != 0 {
		t.Errorf("%d works still running after Run returned", running)
	}
}
