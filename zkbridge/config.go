package zkbridge

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Config configures a Bridge. Start from DefaultConfig; Validate reports
// every problem at once.
type Config struct {
	// Servers are the ZooKeeper client addresses (host:port) of the
	// ensemble Flink uses (high-availability.zookeeper.quorum).
	Servers []string

	// SessionTimeout is the timeout ckptfs asks for its own session. The
	// takeover lock and its fencing live as long as this session.
	SessionTimeout time.Duration

	// ConnectTimeout bounds the wait for a session after connecting.
	ConnectTimeout time.Duration

	// RetryTimeout bounds how long one ZooKeeper call is retried while the
	// client reconnects (a server stopped, a leader election). A write
	// whose outcome is unknown is re-read, not blindly repeated.
	RetryTimeout time.Duration

	// PathRoot is Flink's high-availability.zookeeper.path.root.
	PathRoot string

	// ClusterID is Flink's high-availability.cluster-id. Empty means
	// discover it: the single child of PathRoot that looks like a Flink
	// namespace.
	ClusterID string

	// FlinkVersion overrides the layout detection ("" detects). See
	// ParseGeneration for the accepted spellings.
	FlinkVersion Generation

	// Site names this site (for example dc2) in markers, backups and
	// active-site. Takeover, RestorePruned and the Publisher need it.
	Site string

	// CkptfsRoot is where ckptfs keeps its own znodes:
	// <CkptfsRoot>/<cluster>/{epoch,active-site,takeover,pruned,sites}.
	CkptfsRoot string

	// FlinkSessionTimeout is Flink's
	// high-availability.zookeeper.client.session-timeout: how long the
	// ephemeral nodes of a dead JobManager may outlive it.
	FlinkSessionTimeout time.Duration

	// LivenessMargin is added to FlinkSessionTimeout for the default
	// takeover wait.
	LivenessMargin time.Duration

	// LivenessPoll is how often liveness is re-read while waiting for it
	// to clear, besides the watches on the ephemeral nodes.
	LivenessPoll time.Duration

	// LockWait is how long a takeover waits for a concurrent one (another
	// ckptfs holding the takeover lock) to finish. Zero refuses at once.
	LockWait time.Duration

	// MarkerInterval is the period of the Publisher's full passes;
	// MarkerJitter is the largest random delay added to it.
	MarkerInterval time.Duration
	MarkerJitter   time.Duration

	// MarkerRetryInterval is how soon the Publisher tries again after a
	// failed pass.
	MarkerRetryInterval time.Duration

	// CheckpointsDirs are Flink's state.checkpoints.dir values as Flink
	// wrote them (for example file:///flink/checkpoints). They let a
	// refused takeover name the newest L1-complete checkpoint even when no
	// HA file of the job is readable here.
	CheckpointsDirs []string

	// MaxBufferSize bounds a ZooKeeper reply (the server's jute.maxbuffer
	// bounds what it sends anyway).
	MaxBufferSize int

	// ACL is given to every znode ckptfs creates (Flink's default ACL
	// "open" is zk.WorldACL(zk.PermAll)).
	ACL []zk.ACL

	// Logger receives structured logs with the keys site (added from
	// Site: do not add it), job, checkpoint, znode and version.
	Logger *slog.Logger
}

// DefaultConfig returns defaults: Flink's /flink root and 60 s session
// timeout, a 10 s session of our own, markers every 30 s. The caller sets
// Servers and, for writes, Site.
func DefaultConfig() Config {
	return Config{
		SessionTimeout:      10 * time.Second,
		ConnectTimeout:      30 * time.Second,
		RetryTimeout:        30 * time.Second,
		PathRoot:            "/flink",
		CkptfsRoot:          "/ckptfs",
		FlinkSessionTimeout: 60 * time.Second,
		LivenessMargin:      15 * time.Second,
		LivenessPoll:        time.Second,
		LockWait:            2 * time.Minute,
		MarkerInterval:      30 * time.Second,
		MarkerJitter:        3 * time.Second,
		MarkerRetryInterval: 5 * time.Second,
		MaxBufferSize:       16 << 20,
		ACL:                 zk.WorldACL(zk.PermAll),
		Logger:              slog.New(slog.DiscardHandler),
	}
}

// DefaultTakeoverWait is how long a takeover waits by default for the
// JobManagers' ephemeral nodes to vanish.
func (c *Config) DefaultTakeoverWait() time.Duration {
	return c.FlinkSessionTimeout + c.LivenessMargin
}

// Validate reports every problem with c, joined.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("zkbridge: "+format, args...)) }

	if len(c.Servers) == 0 {
		bad("no ZooKeeper servers")
	}
	for _, s := range c.Servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			bad("server %q: want HOST:PORT", s)
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad("server %q: bad port", s)
		}
	}
	if c.SessionTimeout < time.Second {
		bad("SessionTimeout %v is below 1s", c.SessionTimeout)
	}
	if c.ConnectTimeout <= 0 {
		bad("ConnectTimeout %v must be positive", c.ConnectTimeout)
	}
	if c.RetryTimeout < c.SessionTimeout {
		bad("RetryTimeout %v must be at least SessionTimeout %v: a reconnect can take that long", c.RetryTimeout, c.SessionTimeout)
	}
	if err := checkAbsPath(c.PathRoot); err != nil {
		bad("PathRoot: %v", err)
	}
	if err := checkAbsPath(c.CkptfsRoot); err != nil {
		bad("CkptfsRoot: %v", err)
	}
	if c.CkptfsRoot != "" && c.PathRoot != "" && (isBelow(c.CkptfsRoot, c.PathRoot) || isBelow(c.PathRoot, c.CkptfsRoot)) {
		bad("CkptfsRoot %s and PathRoot %s must not contain each other", c.CkptfsRoot, c.PathRoot)
	}
	if c.ClusterID != "" {
		if key := clusterKey(c.ClusterID); key == "" {
			bad("ClusterID %q is only slashes", c.ClusterID)
		}
	}
	if c.Site != "" {
		if err := checkNodeName(c.Site); err != nil {
			bad("Site: %v", err)
		}
	}
	if c.FlinkVersion != GenUnknown && !c.FlinkVersion.valid() {
		bad("FlinkVersion %d is not a known generation", c.FlinkVersion)
	}
	if c.FlinkSessionTimeout <= 0 {
		bad("FlinkSessionTimeout %v must be positive", c.FlinkSessionTimeout)
	}
	if c.LivenessMargin < 0 {
		bad("LivenessMargin %v is negative", c.LivenessMargin)
	}
	if c.LivenessPoll <= 0 {
		bad("LivenessPoll %v must be positive", c.LivenessPoll)
	}
	if c.LockWait < 0 {
		bad("LockWait %v is negative", c.LockWait)
	}
	if c.MarkerInterval <= 0 {
		bad("MarkerInterval %v must be positive", c.MarkerInterval)
	}
	if c.MarkerJitter < 0 || c.MarkerJitter > c.MarkerInterval {
		bad("MarkerJitter %v must be between 0 and MarkerInterval %v", c.MarkerJitter, c.MarkerInterval)
	}
	if c.MarkerRetryInterval <= 0 || c.MarkerRetryInterval > c.MarkerInterval {
		bad("MarkerRetryInterval %v must be positive and at most MarkerInterval %v", c.MarkerRetryInterval, c.MarkerInterval)
	}
	for _, d := range c.CheckpointsDirs {
		if strings.TrimSpace(d) == "" {
			bad("empty CheckpointsDirs entry")
		}
	}
	if c.MaxBufferSize < 64<<10 {
		bad("MaxBufferSize %d is below 64 KiB", c.MaxBufferSize)
	}
	if len(c.ACL) == 0 {
		bad("ACL is empty")
	}
	if c.Logger == nil {
		bad("Logger is nil (use slog.New(slog.DiscardHandler) for none)")
	}
	return errors.Join(errs...)
}

// checkAbsPath accepts a ZooKeeper path: absolute, no empty, "." or ".."
// elements, no trailing slash (except "/" itself is refused too: ckptfs
// never works at the root).
func checkAbsPath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return fmt.Errorf("%q is not an absolute ZooKeeper path below /", p)
	}
	for i, el := range strings.Split(p[1:], "/") {
		if err := checkNodeName(el); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		if i == 0 && el == "zookeeper" {
			return fmt.Errorf("%q: /zookeeper is ZooKeeper's own", p)
		}
	}
	return nil
}

// checkNodeName accepts one path element.
func checkNodeName(name string) error {
	switch {
	case name == "":
		return errors.New("empty path element")
	case name == "." || name == "..":
		return fmt.Errorf("path element %q is reserved", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("path element %q contains / or NUL", name)
	}
	for _, r := range name {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return fmt.Errorf("path element %q contains a control character", name)
		}
	}
	return nil
}

func isBelow(p, parent string) bool {
	return p == parent || strings.HasPrefix(p, parent+"/")
}
