package zkbridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// A lock node of the Bridge's own session that no call holds (what a
// lock create whose reply was lost leaves behind) does not block the
// Bridge's next takeover; a lock another call of the same Bridge holds
// does.
func TestIntegration_LockOrphanOfOwnSession(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	paths := newCkptfsPaths(e.ckptfs, "default")
	if err := b.zk.ensure(ctx, paths.takeover()); err != nil {
		t.Fatal(err)
	}
	orphan, err := b.Conn().CreateProtectedEphemeralSequential(join(paths.takeover(), lockPrefix), nil, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := b.acquireLock(ctx, paths, "test", 0)
	if err != nil {
		t.Fatalf("a takeover behind an orphan of its own session: %v", err)
	}
	if ok, _, _ := b.Conn().Exists(orphan); ok {
		t.Errorf("the orphan %s is still there", orphan)
	}
	if _, err := b.acquireLock(ctx, paths, "second", 0); !errors.Is(err, ErrTakeoverInProgress) {
		t.Errorf("a second takeover of the same Bridge while the first holds the lock: %v, want ErrTakeoverInProgress", err)
	}
	if ok, _, _ := b.Conn().Exists(lock.node); !ok {
		t.Errorf("the held lock %s was deleted", lock.node)
	}
	b.releaseLock(lock)
}

// A lock create that hangs (its connection cut: go-zookeeper and the
// client's retry keep trying for RetryTimeout) holds up no other lock
// call of the same Bridge beyond that call's own context: telling an
// orphan from a held node, and creating another lock node, wait for
// ZooKeeper at most as long as their caller lets them, never for a
// mutex held across the hung create.
func TestIntegration_LockWaiterNotBehindHungCreate(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	proxies, addrs := e.proxies()
	b := e.bridge("dc2", func(cfg *Config) { cfg.Servers, cfg.RetryTimeout = addrs, 15*time.Second })
	ctx := testContext(t, time.Minute)
	paths := newCkptfsPaths(e.ckptfs, "default")
	if err := b.zk.ensure(ctx, paths.takeover()); err != nil {
		t.Fatal(err)
	}
	for _, p := range proxies {
		p.Block()
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hung := make(chan error, 1)
	go func() {
		_, err := b.zk.createLock(hctx, join(paths.takeover(), lockPrefix), nil)
		hung <- err
	}()
	waitFor(t, 10*time.Second, "the create to be under way", func() (bool, error) {
		b.zk.locksMu.Lock()
		defer b.zk.locksMu.Unlock()
		return b.zk.lockCreates > 0, nil
	})
	var wg sync.WaitGroup
	for name, call := range map[string]func(context.Context) error{
		"telling an orphan": func(ctx context.Context) error {
			_, _, err := b.zk.orphanLock(ctx, join(paths.takeover(), "_c_0-"+lockPrefix+"0000000009"))
			return err
		},
		"another create": func(ctx context.Context) error {
			_, err := b.zk.createLock(ctx, join(paths.takeover(), lockPrefix), nil)
			return err
		},
	} {
		wg.Go(func() {
			wctx, wcancel := context.WithTimeout(ctx, time.Second)
			defer wcancel()
			start := time.Now()
			err := call(wctx)
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("%s took %v (%v) while another call's create hung: want at most its own second", name, d.Round(time.Millisecond), err)
			}
		})
	}
	wg.Wait()
	cancel()
	for _, p := range proxies {
		p.Unblock()
	}
	<-hung
}

// A lock node that a concurrent call of the same Bridge is creating
// (ZooKeeper made it, the call has not recorded it yet: its reply is on
// the way) is never taken for an orphan: another lock call of the Bridge
// waits for it rather than deleting it. A node of our session that such
// a call leaves behind (a retried create's) is deleted once the call
// ended.
func TestIntegration_LockCreateInFlightIsNoOrphan(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	paths := newCkptfsPaths(e.ckptfs, "default")
	if err := b.zk.ensure(ctx, paths.takeover()); err != nil {
		t.Fatal(err)
	}

	t.Run("held", func(t *testing.T) {
		var called atomic.Bool // a sync.Once would hold the second call's create
		second := make(chan error, 1)
		b.zk.testLockCreated = func(string) {
			if !called.Swap(true) {
				// The first call's node exists; the second call comes
				// now and finds it before its own.
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, err := b.acquireLock(ctx, paths, "second", 0)
					second <- err
				}()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Errorf("the second lock call is blocked behind the first's create")
				}
			}
		}
		defer func() { b.zk.testLockCreated = nil }()
		first, err := b.acquireLock(ctx, paths, "first", 0)
		if err != nil {
			t.Fatalf("the first lock call: %v (its node taken for an orphan?)", err)
		}
		defer b.releaseLock(first)
		if err := <-second; !errors.Is(err, ErrTakeoverInProgress) {
			t.Errorf("the second lock call: %v, want ErrTakeoverInProgress: the first's node is held", err)
		}
		if ok, _, _ := b.Conn().Exists(first.node); !ok {
			t.Errorf("the first call's lock %s was deleted", first.node)
		}
	})

	t.Run("orphan left by a call in flight", func(t *testing.T) {
		var called atomic.Bool
		var orphan string
		third := make(chan error, 1)
		b.zk.testLockCreated = func(string) {
			if !called.Swap(true) {
				// A node of our session that no call will hold, made
				// while the first call's create is in flight, before
				// the third call's node.
				var err error
				orphan, err = b.Conn().CreateProtectedEphemeralSequential(join(paths.takeover(), lockPrefix), nil, zk.WorldACL(zk.PermAll))
				if err != nil {
					t.Error(err)
				}
				go func() {
					l, err := b.acquireLock(ctx, paths, "third", 30*time.Second)
					if err == nil {
						b.releaseLock(l)
					}
					third <- err
				}()
				time.Sleep(500 * time.Millisecond) // the third call meets the orphan
			}
		}
		defer func() { b.zk.testLockCreated = nil }()
		first, err := b.acquireLock(ctx, paths, "first", 0)
		if err != nil {
			t.Fatalf("the first lock call: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		b.releaseLock(first)
		select {
		case err := <-third:
			if err != nil {
				t.Errorf("the third lock call: %v, want the lock once the first released it", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("the third lock call still waits 10s after the first released the lock (for the orphan %s?)", orphan)
		}
		if ok, _, _ := b.Conn().Exists(orphan); ok {
			t.Errorf("the orphan %s is still there", orphan)
		}
	})
}

// A lock call whose context ends while it waits leaves no lock node that
// is held by nobody yet counts as held: the Bridge's next lock call (a
// daemon's session lives for days) and other sessions' do not wait for it.
func TestIntegration_LockWaitCanceled(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b, other := e.bridge("dc2"), e.bridge("dc1")
	ctx := testContext(t, time.Minute)
	paths := newCkptfsPaths(e.ckptfs, "default")
	holder, err := other.acquireLock(ctx, paths, "holder", 0)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = b.acquireLock(wctx, paths, "canceled", time.Minute)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait whose context ended: %v", err)
	}
	other.releaseLock(holder)
	l, err := b.acquireLock(ctx, paths, "next", 5*time.Second)
	if err != nil {
		t.Fatalf("the next lock call of the same Bridge: %v, want the lock", err)
	}
	b.releaseLock(l)
	l, err = other.acquireLock(ctx, paths, "other", 5*time.Second)
	if err != nil {
		t.Fatalf("another session's lock call: %v, want the lock", err)
	}
	other.releaseLock(l)
}
