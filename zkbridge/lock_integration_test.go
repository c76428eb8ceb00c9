package zkbridge

import (
	"errors"
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
