package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
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
// while an ephemeral node that Flink can have written exists under the
// latch, leader-info or lock paths (flinkEphemeral). They vanish at most
// Flink's session timeout after the process dies (or at once when it
// closes its session).
type Liveness struct {
	Alive bool            `json:"alive"`
	Nodes []EphemeralNode `json:"nodes"`
	// Foreign are the ephemeral nodes found there that no Flink
	// JobManager writes: another client's. They do not count.
	Foreign []ForeignNode `json:"foreign,omitempty"`
}

// ForeignNode is an ephemeral node where Flink keeps its leader election
// or its locks that Flink cannot have written: a name Flink never gives
// a node there, data that is not Flink's leader information, or an owner
// that is no session (a container or TTL node).
type ForeignNode struct {
	Path  string    `json:"znode"`
	Owner SessionID `json:"session"`
	// Why says what tells it from Flink's.
	Why string `json:"why"`
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
	s := "no JobManager alive"
	if l.Alive {
		s = fmt.Sprintf("JobManager alive: %d ephemeral node(s) of session(s) %v", len(l.Nodes), l.Sessions())
		if a := l.Addresses(); len(a) > 0 {
			s += " at " + strings.Join(a, ", ")
		}
	}
	if len(l.Foreign) > 0 {
		const shown = 3
		var names []string
		for i, n := range l.Foreign {
			if i == shown {
				names = append(names, fmt.Sprintf("and %d more", len(l.Foreign)-shown))
				break
			}
			names = append(names, fmt.Sprintf("%s (session %s: %s)", n.Path, n.Owner, n.Why))
		}
		s += fmt.Sprintf("; not counted: %d ephemeral node(s) no Flink JobManager writes there: %s", len(l.Foreign), strings.Join(names, "; "))
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
	classify := func(n EphemeralNode, data []byte) {
		if why := flinkEphemeral(l.Namespace, &n, data); why != "" {
			live.Foreign = append(live.Foreign, ForeignNode{Path: n.Path, Owner: n.Owner, Why: why})
			return
		}
		live.Nodes = append(live.Nodes, n)
	}
	ns := l.Namespace
	for _, root := range []string{join(ns, "leaderlatch"), join(ns, "leader")} {
		if err := b.walkEphemeral(ctx, root, 4, classify); err != nil {
			return nil, err
		}
	}
	type found struct {
		n    EphemeralNode
		data []byte
	}
	perJob := make([][]found, len(l.Jobs))
	_, err := forEachJob(ctx, len(l.Jobs), func(ctx context.Context, i int) error {
		j := l.Jobs[i]
		// The places of a job are read at once, and so are its
		// pointers' locks; what they hold is merged in the order of a
		// walk one after another.
		var leader, graph []found
		var pointers [][]found
		locks := func(node string, kind EphemeralKind, into *[]found) error {
			ls, err := b.lockChildren(ctx, node, kind)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
			for _, n := range ls.ephemeral {
				*into = append(*into, found{n, nil})
			}
			return nil
		}
		var wg sync.WaitGroup
		var leaderErr, graphErr, pointersErr error
		// Flink 1.14 keeps each job's leader election under jobs/<job>.
		wg.Go(func() {
			leaderErr = b.walkEphemeral(ctx, join(ns, "jobs", j.JobID, "leader"), 3, func(n EphemeralNode, data []byte) { leader = append(leader, found{n, data}) })
		})
		if j.JobGraph != "" {
			wg.Go(func() { graphErr = locks(j.JobGraph, KindJobGraphLock, &graph) })
		}
		if j.PointerDir != "" {
			wg.Go(func() {
				names, _, err := b.zk.children(ctx, j.PointerDir)
				if errors.Is(err, zk.ErrNoNode) {
					return
				}
				if err != nil {
					pointersErr = err
					return
				}
				pointers = make([][]found, len(names))
				errs := make([]error, len(names))
				var pwg sync.WaitGroup
				for k, n := range names {
					pwg.Go(func() { errs[k] = locks(join(j.PointerDir, n), KindCheckpointLock, &pointers[k]) })
				}
				pwg.Wait()
				pointersErr = errors.Join(errs...)
			})
		}
		wg.Wait()
		if err := errors.Join(leaderErr, graphErr, pointersErr); err != nil {
			return err
		}
		perJob[i] = append(perJob[i], leader...)
		perJob[i] = append(perJob[i], graph...)
		for _, p := range pointers {
			perJob[i] = append(perJob[i], p...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, nodes := range perJob {
		for _, f := range nodes {
			classify(f.n, f.data)
		}
	}
	live.Alive = len(live.Nodes) > 0
	b.noteForeign(live.Foreign)
	return live, nil
}

// walkEphemeral hands every node at or below root that has an ephemeral
// owner, down to depth levels, to found, with its data when it has any,
// in the order of a depth-first walk (a node before its children, the
// children in the order listed). The children of a node are read at
// once (forEachJob): a leader/ of Flink 1.18+ holds a component per
// job.
func (b *Bridge) walkEphemeral(ctx context.Context, root string, depth int, found func(EphemeralNode, []byte)) error {
	nodes, err := b.collectEphemeral(ctx, root, depth)
	if err != nil {
		return err
	}
	for _, f := range nodes {
		found(f.n, f.data)
	}
	return nil
}

// foundNode is an ephemeral node collectEphemeral found, with its data.
type foundNode struct {
	n    EphemeralNode
	data []byte
}

func (b *Bridge) collectEphemeral(ctx context.Context, root string, depth int) ([]foundNode, error) {
	kids, stat, err := b.zk.children(ctx, root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []foundNode
	if stat.EphemeralOwner != 0 {
		n := EphemeralNode{Path: root, Owner: SessionID(stat.EphemeralOwner), Czxid: stat.Czxid}
		var data []byte
		if stat.DataLength > 0 {
			data, _, err = b.zk.get(ctx, root)
			if errors.Is(err, zk.ErrNoNode) {
				return nil, nil // gone meanwhile
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, foundNode{n, data})
	}
	if depth == 0 || len(kids) == 0 {
		return out, nil
	}
	sub := make([][]foundNode, len(kids))
	if _, err := forEachJob(ctx, len(kids), func(ctx context.Context, i int) (err error) {
		sub[i], err = b.collectEphemeral(ctx, join(root, kids[i]), depth-1)
		return err
	}); err != nil {
		return nil, err
	}
	for _, s := range sub {
		out = append(out, s...)
	}
	return out, nil
}

// Which ephemeral nodes a Flink JobManager writes, by place and name
// (docs/design.md §5.2, docs/flink-formats.md §1.2-1.4). The rule is the
// union over every layout family, whatever the layout discovery found:
// discovery can be ambiguous, and Flink 1.15-1.17 with
// use-old-ha-services elects leaders as 1.14 does beside 1.15's locks.
//
//   - leader latch nodes, Curator LeaderLatch's protected
//     EPHEMERAL_SEQUENTIAL children _c_<uuid>-latch-<%010d> (Flink gives
//     them no data), anywhere below leaderlatch/ (1.4:
//     directly, 1.5-1.13: leaderlatch/<component>_lock/,
//     leaderlatch/<job>/job_manager_lock/), leader/ (1.14:
//     leader/<component>/latch/, 1.15+: leader/latch/) and
//     jobs/<job>/leader/ (1.14: .../latch/);
//   - leader information nodes below leader/ and jobs/<job>/leader/:
//     leader itself (1.4), <suffix>_lock (1.5-1.13: resource_manager_lock,
//     dispatcher_lock, rest_server_lock, <job>/job_manager_lock) and
//     connection_info (1.14+: leader/<component>/connection_info,
//     jobs/<job>/leader/connection_info); their data is empty (no leader
//     known, 1.15+ may write that) or Flink's leader information
//     (flinkha.DecodeLeaderInfo);
//   - locks, children of a job graph or pointer (up to 1.14) or of its
//     persistent locks child (1.15+): a ZooKeeperStateHandleStore's
//     instance id, UUID.randomUUID().toString() in every release; their
//     data is Curator's default (the host's address), not checked.
//
// Everything else there is foreign. A node that imitates Flink perfectly
// counts: nothing tells it apart, and waiting is the safe side.

// flinkEphemeral tells whether n, an ephemeral node found below the
// namespace ns with data (nil when it has none, or for a lock, unread),
// can be a Flink JobManager's: "" when it can, with n's kind and the
// leader address set; else why not.
func flinkEphemeral(ns string, n *EphemeralNode, data []byte) string {
	if !sessionOwner(int64(n.Owner)) {
		return "its owner is no session (a container or TTL node)"
	}
	rel := strings.Split(strings.TrimPrefix(n.Path, ns+"/"), "/")
	name := rel[len(rel)-1]
	switch n.Kind {
	case KindCheckpointLock, KindJobGraphLock:
		if !isUUID(name) {
			return "a lock of Flink's is named by a UUID"
		}
		return ""
	}
	election := rel[0] == "leader" || len(rel) >= 3 && rel[0] == "jobs" && rel[2] == "leader"
	switch {
	case isLatchNode(name):
		n.Kind = KindLatch
		return ""
	case !election:
		return "below leaderlatch/ Flink writes only leader latch nodes (_c_<uuid>-latch-<seq>)"
	case len(rel) == 1 || name == "connection_info" || strings.HasSuffix(name, "_lock"):
		n.Kind = KindLeader
		if len(data) == 0 {
			return ""
		}
		li, err := flinkha.DecodeLeaderInfo(data)
		if err != nil {
			return "its data is not Flink's leader information"
		}
		n.Address = li.Address
		return ""
	}
	return "no Flink JobManager writes a node of this name there"
}

// maxForeignSeen bounds the foreign nodes a Bridge remembers having
// logged; past it, it forgets them all (and may log them again).
const maxForeignSeen = 256

// noteForeign logs each foreign node once per Bridge (a takeover reads
// the liveness every LivenessPoll).
func (b *Bridge) noteForeign(nodes []ForeignNode) {
	for _, n := range nodes {
		key := n.Path + "@" + n.Owner.String()
		b.foreignMu.Lock()
		_, seen := b.foreignSeen[key]
		if !seen {
			if len(b.foreignSeen) >= maxForeignSeen || b.foreignSeen == nil {
				b.foreignSeen = map[string]bool{}
			}
			b.foreignSeen[key] = true
		}
		b.foreignMu.Unlock()
		if seen {
			continue
		}
		b.log.Warn("an ephemeral node where Flink keeps its leader election or locks is not a Flink JobManager's: it does not count as one",
			"znode", n.Path, "session", n.Owner.String(), "reason", n.Why)
	}
}

// sessionOwner reports whether an ephemeralOwner is a session: not 0
// (persistent), not a container's (the lowest int64) and not a TTL
// node's (top byte 0xff; ZooKeeper's EphemeralType).
func sessionOwner(owner int64) bool {
	return owner != 0 && owner != math.MinInt64 && uint64(owner)>>56 != 0xff
}

// isLatchNode reports whether name is one of Curator LeaderLatch's
// protected sequential nodes: _c_<uuid>-latch-<%010d>.
func isLatchNode(name string) bool {
	rest, ok := strings.CutPrefix(name, "_c_")
	if !ok || len(rest) < 36 || !isUUID(rest[:36]) {
		return false
	}
	seq, ok := strings.CutPrefix(rest[36:], "-latch-")
	if !ok || len(seq) != 10 {
		return false
	}
	digits := strings.TrimPrefix(seq, "-") // %010d of a sequence that wrapped
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(digits) > 0
}

// isUUID reports whether s is a UUID as Java's UUID.toString writes it:
// 8-4-4-4-12 hex digits.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
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
			foreign := live.Foreign
			live = counts(live)
			live.Foreign = foreign
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
