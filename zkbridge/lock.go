package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ErrTakeoverInProgress means another takeover (or restore) of the
// cluster holds the takeover lock and did not finish within the wait.
var ErrTakeoverInProgress = errors.New("zkbridge: another takeover holds the lock")

// ErrLockLost means our session, and with it the takeover lock, expired
// during the operation; nothing more was written after that.
var ErrLockLost = errors.New("zkbridge: takeover lock lost (session expired)")

// lockHolder is the data of a takeover lock node, for messages.
type lockHolder struct {
	Site    string    `json:"site"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Op      string    `json:"op"`
	Started time.Time `json:"started"`
}

// takeoverLock is a held lock: an ephemeral sequential child of
// <ckptfs>/takeover that is the lowest. Every write made under it checks
// in the same multi that the node still exists (version 0: it is never
// written), so a write can never land after the session that held the
// lock expired and a second takeover started.
type takeoverLock struct {
	node string
	// czxid is the lock node's creation zxid: every pointer created after
	// it was created after the holder began to read (design §5.5.2).
	czxid int64
	// op is what the lock is held for ("takeover", "sweep", ...).
	op string
	// lease, when set, guards the writes made under the lock too.
	lease *LeaseGuard
}

// leaseCheck is the lease guard of a retraction, if any.
func (l *takeoverLock) leaseCheck() []txOp {
	if l.lease == nil {
		return nil
	}
	return []txOp{l.lease.check()}
}

const lockPrefix = "lock-"

// lockSeq returns the sequence number ZooKeeper appended to a lock node.
func lockSeq(name string) (string, bool) {
	i := strings.LastIndex(name, lockPrefix)
	if i < 0 || len(name)-i-len(lockPrefix) != 10 {
		return "", false
	}
	return name[i+len(lockPrefix):], true
}

// acquireLock takes the takeover lock, waiting at most wait for a holder
// to finish (zero: refuse at once).
func (b *Bridge) acquireLock(ctx context.Context, paths ckptfsPaths, op string, wait time.Duration) (*takeoverLock, error) {
	parent := paths.takeover()
	if err := b.zk.ensure(ctx, parent); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	data, err := json.Marshal(lockHolder{Site: b.cfg.Site, Host: host, PID: os.Getpid(), Op: op, Started: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	node, err := b.zk.createLock(ctx, join(parent, lockPrefix), data)
	if err != nil {
		return nil, fmt.Errorf("create takeover lock: %w", err)
	}
	lock := &takeoverLock{node: node, op: op}
	if st, err := b.zk.exists(ctx, node); err == nil && st != nil {
		lock.czxid = st.Czxid
	} else {
		b.releaseLock(lock)
		if err == nil {
			err = ErrLockLost
		}
		return nil, err
	}
	mine := node[strings.LastIndexByte(node, '/')+1:]
	mySeq, _ := lockSeq(mine)
	deadline := time.Now().Add(wait)
	for {
		names, _, err := b.zk.children(ctx, parent)
		if err != nil {
			b.releaseLock(lock)
			return nil, err
		}
		if !slices.Contains(names, mine) {
			b.zk.forgetLock(node)
			return nil, ErrLockLost
		}
		// The holder is the lowest sequence number; wait for the one
		// just before ours.
		pred := ""
		predSeq := ""
		for _, n := range names {
			s, ok := lockSeq(n)
			if !ok || s >= mySeq {
				continue
			}
			if s > predSeq {
				pred, predSeq = n, s
			}
		}
		if pred == "" {
			b.log.Debug("takeover lock acquired", "znode", node)
			return lock, nil
		}
		// settling is not nil when pred may be a node another call of
		// this client is creating: wait for it as for a holder, and
		// look again once that call ended.
		orphan, settling, err := b.zk.orphanLock(ctx, join(parent, pred))
		if err != nil {
			b.releaseLock(lock)
			return nil, err
		} else if orphan {
			b.log.Info("deleting a lock node of this session that a retried create left behind", "znode", join(parent, pred))
			b.releaseLock(&takeoverLock{node: join(parent, pred)})
			continue
		}
		holder := b.describeHolder(ctx, join(parent, pred))
		remaining := time.Until(deadline)
		if remaining <= 0 {
			b.releaseLock(lock)
			return nil, fmt.Errorf("%w: %s", ErrTakeoverInProgress, holder)
		}
		stat, ch, err := b.zk.existsW(ctx, join(parent, pred))
		if err != nil {
			b.releaseLock(lock)
			return nil, err
		}
		if stat == nil {
			continue
		}
		b.log.Info("waiting for another takeover to finish", "holder", holder, "remaining", remaining.Round(time.Second).String())
		t := time.NewTimer(remaining)
		select {
		case <-ch:
		case <-settling:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			// The node is nobody's from now on: an orphan to this
			// client's next lock call, and deleted meanwhile, without
			// keeping the caller, whose context ended.
			b.zk.forgetLock(node)
			go b.releaseLock(lock)
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// Orphan lock nodes. go-zookeeper retries a protected create whose reply
// was lost under a new name when it cannot list the first, and so does
// retry: the first then stays, a node of our session that nobody holds.
// Left, it would make every later takeover of this client wait for
// itself (a daemon's session lives for days), so a lock call deletes a
// node of its own session that no call of the client holds (orphanLock).
//
// No mutex is held across the create, which may take the whole retry
// timeout: the client's other lock calls, and their contexts, must not
// wait for it. That opens a race. A create's node exists in ZooKeeper
// from the moment the server made it, but the createLock call learns
// its name only with the reply, and records it after that. Another lock
// call that lists the lock nodes in between sees a node of our session
// that no call holds, and must not delete it. So:
//
//   - createLock counts itself in lockCreates before it sends the
//     create, and records the node it returns in locks in the same
//     critical section that counts it out;
//   - a node listed at time T was made by a createLock call that counted
//     itself before T (or by a request of a call that already gave up,
//     its context ended: that node is nobody's);
//   - orphanLock looks after T. If no createLock call counts then, every
//     call that could return the node has ended and recorded what it
//     returned (a node released since is gone, or forgotten: an orphan
//     again). A node of our session that is not in locks is an orphan
//     then, and stays one: no call under way can return it, and calls
//     that start later create other names. So the exists call that
//     tells the node's session runs without the mutex;
//   - while a createLock call counts, orphanLock cannot tell, and says
//     so: the caller waits as for a holder, and looks again when a call
//     ended (lockSettled), so that an orphan the call left is deleted
//     then.

// createLock creates a protected ephemeral sequential lock node and
// remembers it as one a call of this client holds.
func (c *client) createLock(ctx context.Context, path string, data []byte) (string, error) {
	c.locksMu.Lock()
	c.lockCreates++
	c.locksMu.Unlock()
	node, err := retry(ctx, c, "create lock", func() (string, error) {
		return c.conn.CreateProtectedEphemeralSequential(path, data, c.acls.forPath(path))
	})
	if err == nil && c.testLockCreated != nil {
		c.testLockCreated(node)
	}
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	if err == nil {
		c.locks[node] = true
	}
	c.lockCreates--
	close(c.lockSettled)
	c.lockSettled = make(chan struct{})
	return node, err
}

// orphanLock reports whether node is a lock node of this client's session
// that no call of the client holds. When a createLock call is under way
// it cannot tell: it returns false and a channel closed when a createLock
// call ended, to look again then (nil otherwise).
func (c *client) orphanLock(ctx context.Context, node string) (orphan bool, settling <-chan struct{}, err error) {
	c.locksMu.Lock()
	held, creating, settled := c.locks[node], c.lockCreates > 0, c.lockSettled
	c.locksMu.Unlock()
	switch {
	case held:
		return false, nil, nil
	case creating:
		return false, settled, nil
	}
	stat, err := c.exists(ctx, node)
	if err != nil || stat == nil {
		return false, nil, err
	}
	return stat.EphemeralOwner == c.conn.SessionID(), nil, nil
}

func (c *client) forgetLock(node string) {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	delete(c.locks, node)
}

func (b *Bridge) describeHolder(ctx context.Context, node string) string {
	data, stat, err := b.zk.get(ctx, node)
	if err != nil {
		return node
	}
	var h lockHolder
	if json.Unmarshal(data, &h) != nil || h.Site == "" || h.Op == "" || h.Started.IsZero() {
		return fmt.Sprintf("%s of session %s: not ckptfs's (its data is not a ckptfs lock holder)", node, SessionID(stat.EphemeralOwner))
	}
	return fmt.Sprintf("%s (site %s, host %s, pid %d, %s since %s)", node, h.Site, h.Host, h.PID, h.Op, h.Started.Format(time.RFC3339))
}

// releaseLock deletes the lock node. Failing to is harmless: it vanishes
// with the session.
func (b *Bridge) releaseLock(l *takeoverLock) {
	defer b.zk.forgetLock(l.node)
	if err := b.zk.remove(context.Background(), l.node, 0); err != nil && !errors.Is(err, ErrClosed) {
		b.log.Warn("could not delete the takeover lock; it vanishes with the session", "znode", l.node, "err", err)
	}
}
