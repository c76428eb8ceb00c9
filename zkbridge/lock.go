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

// leaseRevoke is the lease guard of an activation by site at epoch, if
// any.
func (l *takeoverLock) leaseRevoke(site string, epoch int64) []txOp {
	if l.lease == nil {
		return nil
	}
	return []txOp{l.lease.revoke(site, epoch)}
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
	lock := &takeoverLock{node: node}
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
		if orphan, err := b.zk.orphanLock(ctx, join(parent, pred)); err != nil {
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
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// createLock creates a protected ephemeral sequential lock node and
// remembers it as one a call of this client holds. go-zookeeper retries
// a protected create whose reply was lost under a new name when it cannot
// list the first, which then stays, a node of our session that nobody
// holds: left, it would make every later takeover of this client wait
// for itself (a daemon's session lives for days).
func (c *client) createLock(ctx context.Context, path string, data []byte) (string, error) {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	node, err := retry(ctx, c, "create lock", func() (string, error) {
		return c.conn.CreateProtectedEphemeralSequential(path, data, c.acls.forPath(path))
	})
	if err == nil {
		c.locks[node] = true
	}
	return node, err
}

// orphanLock reports whether node is a lock node of this client's session
// that no call of the client holds.
func (c *client) orphanLock(ctx context.Context, node string) (bool, error) {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	if c.locks[node] {
		return false, nil
	}
	stat, err := c.exists(ctx, node)
	if err != nil || stat == nil {
		return false, err
	}
	return stat.EphemeralOwner == c.conn.SessionID(), nil
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
