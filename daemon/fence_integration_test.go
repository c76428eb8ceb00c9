package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// writer appends 8-byte sequence numbers to a file through a mount as
// fast as it can, and remembers when each write that succeeded started.
type writer struct {
	mu      sync.Mutex
	started []time.Time // of each acknowledged write, by sequence number
	errs    int
	last    error
}

func (w *writer) run(ctx context.Context, path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.mu.Lock()
		w.last = err
		w.mu.Unlock()
		return
	}
	defer f.Close()
	var buf [8]byte
	for ctx.Err() == nil {
		w.mu.Lock()
		seq := len(w.started)
		w.mu.Unlock()
		binary.BigEndian.PutUint64(buf[:], uint64(seq))
		start := time.Now()
		_, err := f.Write(buf[:])
		w.mu.Lock()
		if err == nil {
			w.started = append(w.started, start)
		} else {
			w.errs++
			w.last = err
		}
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *writer) acked() []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.started...)
}

// TestIntegration_OneFence (design §5.14): a primary whose daemon's loop
// stops running keeps no write past its write deadline. dc1's mount,
// configured primary in a cluster no site was activated in, activates
// its site only after seeing the lease absent for D, then writes; its
// loop is stopped (as SIGSTOP or a starved process would): the mount
// refuses every change from D/2 after its last renewal, by its own
// clock, while its mode still says primary; the watchdog would have
// killed the daemon at 3D/4, before dc2's takeover activates, which it
// does only after D with the lease unchanged; no write dc1's writer was
// told succeeded started after D/2. When the loop runs again it fences
// the mount at once and says how late it was.
func TestIntegration_OneFence(t *testing.T) {
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 1)
	top := t.TempDir()
	nas1 := filepath.Join(top, "dc1")
	if err := os.MkdirAll(filepath.Join(nas1, "ha"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, nil)
	for os.WriteFile(filepath.Join(dc1.mnt, "ha", "probe"), nil, 0o644) != nil {
		if time.Since(start) > 10*testLease {
			t.Fatal("dc1's configured primary never became writable")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(start); took < testLease {
		t.Fatalf("dc1's mount was writable %v after its start, before the lease could be seen absent for D %v", took, testLease)
	}
	b2, err := zkbridge.New(context.Background(), testBridgeConfig(t, c, "dc2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	st, err := b2.ReadState(context.Background())
	if err != nil || !st.Holds("dc1") {
		t.Fatalf("after dc1's bootstrap: %+v %v", st, err)
	}

	ctx, stopWriting := context.WithCancel(context.Background())
	w := &writer{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(ctx, filepath.Join(dc1.mnt, "ha", "stream")) }()
	defer func() { stopWriting(); wg.Wait() }()
	time.Sleep(testLease / 2)

	// Stop dc1's loop.
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func() {
		once.Do(func() { close(stalled) })
		<-resume
	}
	testHookPass.Store(&hook)
	resumed := false
	defer func() {
		testHookPass.Store(nil)
		if !resumed {
			close(resume)
		}
	}()
	<-stalled
	dc1.stalled = true
	stalledAt := time.Now()

	// dc2's manual takeover activates once the lease stayed unchanged
	// for D.
	rep, err := b2.Takeover(context.Background(), zkbridge.TakeoverOptions{Wait: 5 * testLease})
	if err != nil || !rep.Activated {
		t.Fatalf("dc2's takeover: %+v %v", rep, err)
	}
	activated := time.Now()
	t.Logf("dc2 activated %v after dc1's loop stopped", activated.Sub(stalledAt).Round(time.Millisecond))
	if activated.Sub(stalledAt) < testLease/2 {
		t.Fatalf("dc2 activated %v after dc1's loop stopped: before half a lease", activated.Sub(stalledAt))
	}
	time.Sleep(testLease / 4)
	stopWriting()
	wg.Wait()

	acked := w.acked()
	if len(acked) == 0 {
		t.Fatal("dc1's writer never wrote")
	}
	last := acked[len(acked)-1]
	// The last renewal started at most D/8 plus a pass before the loop
	// stopped, so the mount stopped admitting at most D/2 after that.
	if margin := activated.Sub(last); margin < testLease/4 {
		t.Errorf("dc1's last acknowledged write started %v before dc2's activation (lease %v): want at least D/4", margin, testLease)
	}
	if last.After(stalledAt.Add(testLease / 2)) {
		t.Errorf("a write started %v after dc1's loop stopped was acknowledged: past D/2", last.Sub(stalledAt))
	}
	if w.errs == 0 || !errors.Is(w.last, syscall.EROFS) {
		t.Errorf("dc1's writer saw %d errors, the last %v: want EROFS once the deadline passed", w.errs, w.last)
	}
	if got := dc1Mode(t, dc1); got != fusefs.ModePrimary {
		t.Errorf("dc1's mount is %v with its loop stopped: the mount itself must refuse, its mode still primary", got)
	}
	// Everything acknowledged is on dc1's NAS, and nothing else.
	data, err := os.ReadFile(filepath.Join(nas1, "ha", "stream"))
	if err != nil || len(data) != 8*len(acked) {
		t.Errorf("dc1's NAS holds %d bytes, %d writes were acknowledged (%v)", len(data), len(acked), err)
	}
	at, fired := dc1.wd.Fired()
	if !fired || !at.Before(activated) {
		t.Errorf("the watchdog fired %v (at %v), want before dc2's activation at %v: a stopped daemon is killed before another site activates", fired, at, activated)
	}

	// The loop runs again: the next pass fences at once.
	close(resume)
	resumed = true
	testHookPass.Store(nil)
	deadline := time.Now().Add(5 * time.Second)
	for dc1Mode(t, dc1) != fusefs.ModeFenced {
		if time.Now().After(deadline) {
			t.Fatal("dc1's loop did not fence its mount after it ran again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dc1.mnt, "ha", "after"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write on dc1's fenced mount: %v", err)
	}
}

// dc1Mode is a test daemon's mount's mode now.
func dc1Mode(t *testing.T, d *testDaemon) fusefs.Mode {
	t.Helper()
	srv := mounted(d.mnt)
	if srv == nil {
		t.Fatalf("no mount known at %s", d.mnt)
	}
	return srv.Mode()
}
