package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Writer nodes (docs/design.md §5.13).
//
// A mount turns primary only while its daemon holds a writer node: an
// ephemeral <ckptfs>/<cluster>/writers/<site>.<session>, created in one
// multi with a check of the epoch (no site took over since active-site
// was read) and a bump of the writers node's version. A takeover waits
// until no other site holds one, and its activation checks the writers
// node's version it read with none there. So a mount that turns primary
// again (its session came back before any site took over) and a takeover
// that activates another site are ordered by ZooKeeper: whichever comes
// second is refused. The node vanishes with the session that holds it,
// and the daemon deletes it once its mount's fence is complete.

// ErrWriterAlive: another site's mount may write (it holds a writer
// node); the takeover activated nothing.
var ErrWriterAlive = errors.New("zkbridge: another site's mount is writable")

// ErrNotActive: active-site names another site, or changed while the
// writer node was being created; the mount must not turn primary.
var ErrNotActive = errors.New("zkbridge: this site is not the active site")

// writers is the parent of the writer nodes.
func (p ckptfsPaths) writers() string { return join(p.base, "writers") }

// writerName is the node of site held by session: the session's 16 hex
// digits follow the site name and a dot.
func writerName(site string, session int64) string {
	return fmt.Sprintf("%s.%016x", site, uint64(session))
}

// writerSite is the site of a writer node's name ("" if it is none).
func writerSite(name string) string {
	if len(name) < 18 || name[len(name)-17] != '.' {
		return ""
	}
	return name[:len(name)-17]
}

// WriterNode is a writer node: the site whose mount may be primary.
type WriterNode struct {
	Znode string    `json:"znode"`
	Site  string    `json:"site"`
	Owner SessionID `json:"session"`
}

func (w WriterNode) String() string {
	return fmt.Sprintf("site %s's mount may write (writer node of session %s)", w.Site, w.Owner)
}

// writerRecord is a writer node's data, for people.
type writerRecord struct {
	Site    string    `json:"site"`
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Claimed time.Time `json:"claimed"`
}

// otherWriters lists the writer nodes of sites other than this one, with
// the writers node's version (-1 when it does not exist).
func (b *Bridge) otherWriters(ctx context.Context, paths ckptfsPaths) ([]WriterNode, int32, error) {
	return b.writerNodes(ctx, paths, b.cfg.Site)
}

// writerNodes lists the writer nodes of every site but skip ("": all).
func (b *Bridge) writerNodes(ctx context.Context, paths ckptfsPaths, skip string) ([]WriterNode, int32, error) {
	names, stat, err := b.zk.children(ctx, paths.writers())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var out []WriterNode
	for _, n := range names {
		site := writerSite(n)
		if skip != "" && site == skip {
			continue
		}
		if site == "" {
			site = "?"
		}
		st, err := b.zk.exists(ctx, join(paths.writers(), n))
		if err != nil {
			return nil, 0, err
		}
		if st == nil {
			continue
		}
		out = append(out, WriterNode{Znode: join(paths.writers(), n), Site: site, Owner: SessionID(st.EphemeralOwner)})
	}
	return out, stat.Version, nil
}

// writersGuard holds while no writer node was created since version was
// read (deletions do not change it).
func writersGuard(paths ckptfsPaths, version int32) txOp {
	return txOp{name: "writers", op: &zk.CheckVersionRequest{Path: paths.writers(), Version: version}, fence: ErrWriterAlive}
}

// waitWriters waits until no other site holds a writer node, at most
// until deadline, watching the nodes; it returns those still held.
func (b *Bridge) waitWriters(ctx context.Context, paths ckptfsPaths, deadline time.Time, j *journal) ([]WriterNode, error) {
	logged := ""
	// armed is the node watched, until its watch fires: one watch per
	// node, not one per poll.
	var armed string
	var fired <-chan zk.Event
	for {
		ws, _, err := b.otherWriters(ctx, paths)
		if err != nil || len(ws) == 0 {
			return ws, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return ws, nil
		}
		if s := fmt.Sprint(ws); s != logged {
			logged = s
			b.log.Info("waiting for another site's mount to be fenced", "detail", s, "remaining", remaining.Round(time.Second).String())
			j.waiting(ctx, fmt.Sprintf("%s to end, at most until %s", ws[0], deadline.UTC().Format(time.RFC3339)))
		}
		if armed != ws[0].Znode {
			stat, ch, err := b.zk.existsW(ctx, ws[0].Znode)
			if err != nil {
				return ws, err
			}
			if stat == nil {
				continue
			}
			armed, fired = ws[0].Znode, ch
		}
		timer := time.NewTimer(min(remaining, b.cfg.LivenessPoll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ws, ctx.Err()
		case <-fired:
			armed = ""
		case <-timer.C:
		}
		timer.Stop()
	}
}

// WriterClaim is a daemon's writer node: Claim before the mount turns
// primary, Release once its fence is complete. Its methods may be called
// concurrently.
type WriterClaim struct {
	b *Bridge

	mu sync.Mutex
	// session is the session that created the node (0: none).
	// GUARDED_BY(mu).
	session int64
	node    string

	// beforeMulti is a test seam, called between the reads and the
	// multi of a claim.
	beforeMulti func()
}

// NewWriterClaim returns this site's claim, not held yet.
func (b *Bridge) NewWriterClaim() (*WriterClaim, error) {
	if err := b.requireSite("a writer claim"); err != nil {
		return nil, err
	}
	return &WriterClaim{b: b}, nil
}

// Held reports whether the claim's node exists: it was created by the
// session the client has now, and that session is connected.
func (w *WriterClaim) Held() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.session != 0 && w.b.Session().State == SessionConnected && w.b.zk.conn.SessionID() == w.session
}

// Claim creates this site's writer node if the session does not hold it
// yet. It fails with ErrNotActive when active-site names another site or
// a takeover changed the epoch meanwhile.
func (w *WriterClaim) Claim(ctx context.Context) error {
	if w.Held() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.b
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return err
	}
	if err := b.zk.ensure(ctx, paths.writers()); err != nil {
		return err
	}
	if err := b.zk.createIfAbsent(ctx, paths.epoch(), []byte("0")); err != nil {
		return err
	}
	// The epoch first: an activation between the two reads changes it,
	// and the multi below checks it.
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return err
	}
	active, _, err := b.readActiveSite(ctx, paths)
	if err != nil {
		return err
	}
	if active != "" && active != b.cfg.Site {
		return fmt.Errorf("%w: site %s is active (epoch %d)", ErrNotActive, active, ep.value)
	}
	session := b.zk.conn.SessionID()
	node := join(paths.writers(), writerName(b.cfg.Site, session))
	host, _ := os.Hostname()
	data, err := json.Marshal(writerRecord{Site: b.cfg.Site, Host: host, PID: os.Getpid(), Claimed: time.Now().UTC()})
	if err != nil {
		return err
	}
	if w.beforeMulti != nil {
		w.beforeMulti()
	}
	// The node's name carries the session read here: a claim in a
	// session that changed meanwhile would leave a node Release does not
	// know. Checked below.
	failed, err := b.zk.multi(
		&zk.CheckVersionRequest{Path: paths.epoch(), Version: ep.version},
		&zk.CreateRequest{Path: node, Data: data, Acl: b.zk.acls.forPath(node), Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: paths.writers(), Version: -1},
	)
	switch {
	case err == nil:
	case failed == 0:
		return fmt.Errorf("%w: the epoch changed from %d while claiming", ErrNotActive, ep.value)
	case failed == 1 && errors.Is(err, zk.ErrNodeExists), errors.Is(err, errOutcomeUnknown):
		// A lost reply, or a claim of this session before: the node is
		// ours if this session owns it.
		stat, serr := b.zk.exists(ctx, node)
		if serr != nil {
			return serr
		}
		if stat == nil || stat.EphemeralOwner != session {
			return fmt.Errorf("claim %s: %w", node, err)
		}
	default:
		return fmt.Errorf("claim %s: %w", node, err)
	}
	if now := b.zk.conn.SessionID(); now != session {
		_ = b.zk.remove(ctx, node, -1)
		return fmt.Errorf("claim %s: the ZooKeeper session changed while claiming", node)
	}
	w.session, w.node = session, node
	b.log.Info("writer node created: this site's mount may turn primary", "znode", node, "epoch", ep.value)
	return nil
}

// Release deletes the writer node if this session holds it. Call it only
// once the mount's fence is complete.
func (w *WriterClaim) Release(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.session == 0 {
		return nil
	}
	node, session := w.node, w.session
	w.session, w.node = 0, ""
	stat, err := w.b.zk.exists(ctx, node)
	if err != nil || stat == nil || stat.EphemeralOwner != session {
		return err
	}
	if err := w.b.zk.remove(ctx, node, stat.Version); err != nil {
		return err
	}
	w.b.log.Info("writer node deleted: the mount's fence is complete", "znode", node)
	return nil
}

// describeWriters joins the nodes' descriptions.
func describeWriters(ws []WriterNode) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	return strings.Join(s, "; ")
}
