package zkbridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Bridge is ckptfs's view of one Flink cluster's ZooKeeper namespace from
// one site: layout, liveness, pointers with their verdicts on this site,
// markers, takeover and restore. It holds one ZooKeeper connection.
//
// When the context of a method ends, the method returns the context's
// error; the connection stays (go-zookeeper calls take no context: the
// call in flight is abandoned and ends by itself). The connection lives
// until Close, across any outage of ZooKeeper and any session expiry.
// Methods may be called concurrently.
type Bridge struct {
	cfg      Config
	log      *slog.Logger
	verifier Verifier
	zk       *client
	paths    ckptfsPaths // valid once the cluster id is known
	// foreignSeen: GUARDED_BY(foreignMu). The foreign ephemeral nodes
	// (path@session) already logged (noteForeign).
	foreignMu   sync.Mutex
	foreignSeen map[string]bool
}

// New validates cfg, connects and waits for a session. The verifier
// judges checkpoints on this site; nil means every pointer is reported
// without a verdict (and treated as incomplete).
func New(ctx context.Context, cfg Config, verifier Verifier) (*Bridge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Every line of the Bridge, its client and its publishers names the
	// site once; each adds its own component to this logger.
	if cfg.Site != "" {
		cfg.Logger = cfg.Logger.With("site", cfg.Site)
	}
	c, err := dial(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	return &Bridge{cfg: cfg, log: cfg.Logger.With("component", "zkbridge"), verifier: verifier, zk: c}, nil
}

// Close closes the connection; ephemeral nodes of this session (a
// takeover lock) vanish at once.
func (b *Bridge) Close() { b.zk.close() }

// Conn is the underlying connection.
//
// NOTE: exposed for tests (zktest.ExpireConnSession) and diagnostics; do
// not write through it.
func (b *Bridge) Conn() *zk.Conn { return b.zk.conn }

// Config returns the configuration the Bridge was built with.
func (b *Bridge) Config() Config { return b.cfg }

// ckptfsFor returns ckptfs's paths for the cluster of l.
func (b *Bridge) ckptfsFor(l *Layout) ckptfsPaths {
	id := l.ClusterID
	if id == "" {
		id = "default"
	}
	return newCkptfsPaths(b.cfg.CkptfsRoot, id)
}

// clusterPaths returns ckptfs's paths of the configured cluster, or of
// the discovered one.
func (b *Bridge) clusterPaths(ctx context.Context) (ckptfsPaths, error) {
	if b.cfg.ClusterID != "" {
		return newCkptfsPaths(b.cfg.CkptfsRoot, b.cfg.ClusterID), nil
	}
	l, err := b.discover(ctx)
	if err != nil {
		return ckptfsPaths{}, err
	}
	return b.ckptfsFor(l), nil
}

// requireSite fails when the operation needs a site name.
func (b *Bridge) requireSite(op string) error {
	if b.cfg.Site == "" {
		return errors.New("zkbridge: " + op + " needs a site name (Config.Site, --site)")
	}
	return nil
}
