package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// EphemeralKind says which Flink mechanism an ephemeral node belongs to.
type EphemeralKind string

const (
	KindLatch          EphemeralKind = "latch"
	KindLeader         EphemeralKind = "leader"
	KindCheckpointLock EphemeralKind = "checkpoint-lock"
	KindJobGraphLock   EphemeralKind = "jobgraph-lock"
)

// EphemeralNode is one ephemeral znode of a Flink JobManager session.
type EphemeralNode struct {
	Path  string        `json:"znode"`
	Kind  EphemeralKind `json:"kind"`
	Owner SessionID     `json:"session"`
	// Address is the leader address stored in a leader node, if any.
	Address string `json:"address,omitempty"`
	// Czxid is the transaction that created the node (set for locks).
	Czxid int64 `json:"-"`
}

// SessionID is a ZooKeeper session id, printed in hex as ZooKeeper does.
type SessionID int64

func (s SessionID) String() string { return fmt.Sprintf("0x%x", uint64(s)) }

// MarshalText writes String().
func (s SessionID) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Liveness says whether a Flink JobManager of the cluster is alive: it is
// while any ephemeral node exists under the latch, leader-info or lock
// paths. They vanish at most Flink's session timeout after the process
// dies (or at once when it closes its session).
type Liveness struct {
	Alive bool            `json:"alive"`
	Nodes []EphemeralNode `json:"nodes"`
}

// Addresses returns the distinct leader addresses found, sorted.
func (l *Liveness) Addresses() []string {
	var out []string
	for _, n := range l.Nodes {
		if n.Address != "" && !slices.Contains(out, n.Address) {
			out = append(out, n.Address)
		}
	}
	slices.Sort(out)
	return out
}

// Sessions returns the distinct owning sessions.
func (l *Liveness) Sessions() []SessionID {
	var out []SessionID
	for _, n := range l.Nodes {
		if !slices.Contains(out, n.Owner) {
			out = append(out, n.Owner)
		}
	}
	slices.Sort(out)
	return out
}

func (l *Liveness) String() string {
	if !l.Alive {
		return "no JobManager alive"
	}
	s := fmt.Sprintf("JobManager alive: %d ephemeral node(s) of session(s) %v", len(l.Nodes), l.Sessions())
	if a := l.Addresses(); len(a) > 0 {
		s += " at " + strings.Join(a, ", ")
	}
	return s
}

// WaitLiveness waits at most wait until counts (nil: every node) of the
// cluster's liveness shows no JobManager alive, watching the nodes so
// that it returns as soon as the last one vanishes, and returns the
// liveness read last (counted).
func (b *Bridge) WaitLiveness(ctx context.Context, wait time.Duration, counts func(*Liveness) *Liveness) (*Liveness, error) {
	l, err := b.discover(ctx)
	if errors.Is(err, ErrNoNamespace) {
		return &Liveness{}, nil
	}
	if err != nil {
		return nil, err
	}
	return b.waitDead(ctx, l, wait, 0, counts, nil)
}

// Liveness reads the cluster's liveness now.
func (b *Bridge) Liveness(ctx context.Context) (*Liveness, error) {
	l, err := b.discover(ctx)
	if err != nil {
		return nil, err
	}
	return b.liveness(ctx, l)
}

func (b *Bridge) liveness(ctx context.Context, l *Layout) (*Liveness, error) {
	live := &Liveness{}
	add := func(n EphemeralNode) { live.Nodes = append(live.Nodes, n) }
	ns := l.Namespace
	for _, root := range []string{join(ns, "leaderlatch"), join(ns, "leader")} {
		if err := b.walkEphemeral(ctx, ns, root, 4, add); err != nil {
			return nil, err
		}
	}
	perJob := make([][]EphemeralNode, len(l.Jobs))
	_, err := forEachJob(ctx, len(l.Jobs), func(ctx context.Context, i int) error {
		j := l.Jobs[i]
		add := func(n EphemeralNode) { perJob[i] = append(perJob[i], n) }
		// Flink 1.14 keeps each job's leader election under jobs/<job>.
		if err := b.walkEphemeral(ctx, ns, join(ns, "jobs", j.JobID, "leader"), 3, add); err != nil {
			return err
		}
		if j.JobGraph != "" {
			ls, err := b.lockChildren(ctx, j.JobGraph, KindJobGraphLock)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			perJob[i] = append(perJob[i], ls.ephemeral...)
		}
		if j.PointerDir == "" {
			return nil
		}
		names, _, err := b.zk.children(ctx, j.PointerDir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range names {
			ls, err := b.lockChildren(ctx, join(j.PointerDir, n), KindCheckpointLock)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			perJob[i] = append(perJob[i], ls.ephemeral...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, nodes := range perJob {
		live.Nodes = append(live.Nodes, nodes...)
	}
	live.Alive = len(live.Nodes) > 0
	return live, nil
}

// walkEphemeral records every ephemeral node at or below root, down to
// depth levels. Leader nodes get their address decoded.
func (b *Bridge) walkEphemeral(ctx context.Context, ns, root string, depth int, add func(EphemeralNode)) error {
	kids, stat, err := b.zk.children(ctx, root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if stat.EphemeralOwner != 0 {
		n := EphemeralNode{Path: root, Kind: KindLeader, Owner: SessionID(stat.EphemeralOwner)}
		rel := strings.Split(strings.TrimPrefix(root, ns+"/"), "/")
		if slices.Contains(rel, "leaderlatch") || slices.Contains(rel, "latch") {
			n.Kind = KindLatch
		} else if stat.DataLength > 0 {
			data, _, err := b.zk.get(ctx, root)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			if len(data) > 0 {
				if li, err := flinkha.DecodeLeaderInfo(data); err == nil && li != nil {
					n.Address = li.Address
				} else if err != nil {
					b.log.Debug("undecodable leader node", "znode", root, "err", err)
				}
			}
		}
		add(n)
	}
	if depth == 0 {
		return nil
	}
	for _, k := range kids {
		if err := b.walkEphemeral(ctx, ns, join(root, k), depth-1, add); err != nil {
			return err
		}
	}
	return nil
}

// waitDead waits until no JobManager is alive, at most wait, and then
// until none was seen for quiet (TakeoverOptions.Quiet). It re-reads
// liveness whenever a watched ephemeral node changes and every
// LivenessPoll (a new JobManager creates nodes nobody watches yet). It
// returns the last liveness read. counts, when set, keeps what must
// vanish (TakeoverOptions.Counts).
func (b *Bridge) waitDead(ctx context.Context, l *Layout, wait, quiet time.Duration, counts func(*Liveness) *Liveness, j *journal) (*Liveness, error) {
	deadline := time.Now().Add(wait)
	// armed holds one watch per ephemeral node until it fires.
	armed := map[string]<-chan zk.Event{}
	var lastSessions string
	var clear time.Time // since when no JobManager was seen
	for {
		live, err := b.liveness(ctx, l)
		if err == nil && counts != nil {
			live = counts(live)
		}
		if err != nil {
			return live, err
		}
		if !live.Alive {
			if clear.IsZero() {
				clear = time.Now()
				if quiet > 0 {
					b.log.Info("no Flink JobManager in ZooKeeper: making sure none comes back", "remaining", quiet.String())
					j.waiting(ctx, fmt.Sprintf("no Flink JobManager to come back for %v", quiet))
				}
			}
			left := quiet - time.Since(clear)
			if left <= 0 {
				return live, nil
			}
			select {
			case <-ctx.Done():
				return live, ctx.Err()
			case <-time.After(min(left, b.cfg.LivenessPoll)):
			}
			continue
		}
		if !clear.IsZero() {
			b.log.Warn("a Flink JobManager is in ZooKeeper again", "waited", time.Since(clear).Round(time.Millisecond).String())
			clear = time.Time{}
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return live, nil
		}
		level := slog.LevelDebug
		if s := fmt.Sprint(live.Sessions()); s != lastSessions {
			level, lastSessions = slog.LevelInfo, s
		}
		j.waiting(ctx, fmt.Sprintf("Flink's JobManager session(s) %s (%s) to end, at most until %s", lastSessions, strings.Join(live.Addresses(), ", "), deadline.UTC().Format(time.RFC3339)))
		b.log.Log(ctx, level, "waiting for Flink's JobManagers to vanish from ZooKeeper", "nodes", len(live.Nodes),
			"sessions", lastSessions, "addresses", strings.Join(live.Addresses(), ","), "remaining", remaining.Round(time.Second).String())
		gone := false
		for _, n := range live.Nodes {
			if _, ok := armed[n.Path]; ok {
				continue
			}
			stat, ch, err := b.zk.existsW(ctx, n.Path)
			if err != nil {
				return live, err
			}
			armed[n.Path] = ch
			if stat == nil || stat.EphemeralOwner != int64(n.Owner) {
				gone = true
			}
		}
		if gone {
			continue
		}
		timer := time.NewTimer(min(remaining, b.cfg.LivenessPoll))
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		}
		paths := []string{"", ""}
		for p, ch := range armed {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
			paths = append(paths, p)
		}
		chosen, _, _ := reflect.Select(cases)
		timer.Stop()
		switch chosen {
		case 0:
			return live, ctx.Err()
		case 1:
		default:
			delete(armed, paths[chosen])
		}
	}
}
