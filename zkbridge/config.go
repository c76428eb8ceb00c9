package zkbridge

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

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

	// LeaseDuration is D of the lease (design §5.10): the active site's
	// daemons renew it every D/8 and their mounts write until D/2 after
	// a renewal; a takeover sees it unchanged for D before it activates.
	// Every site must use the same D.
	LeaseDuration time.Duration

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

	// JobResultStore is Flink's job-result-store.storage-path as Flink
	// wrote it. Empty means Flink's default, beside the directory of each
	// job graph's HA file (manifest.JobHARef).
	JobResultStore string

	// MaxBufferSize bounds a ZooKeeper reply (the server's jute.maxbuffer
	// bounds what it sends anyway).
	MaxBufferSize int

	// Auth are the credentials ckptfs authenticates with on every
	// connection, before its first request; nil connects anonymously.
	Auth *Credentials

	// TLS, when set, connects over TLS (ZooKeeper's secureClientPort)
	// and verifies the servers with it. A client certificate in it is
	// ckptfs's identity to ZooKeeper's x509 provider.
	TLS *tls.Config

	// ACL is the ACL of the znodes ckptfs creates below CkptfsRoot
	// (docs/deploy.md#security); active-site, the epoch, the markers and
	// their parents get world read on top. Empty means: only the
	// session's own identity (zk.AuthACL) when ckptfs authenticates, by
	// Auth or a client certificate; everyone (zk.WorldACL, Flink's
	// default "open") when it connects anonymously.
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
		LeaseDuration:       DefaultLeaseDuration,
		LivenessMargin:      15 * time.Second,
		LivenessPoll:        time.Second,
		LockWait:            2 * time.Minute,
		MarkerInterval:      30 * time.Second,
		MarkerJitter:        3 * time.Second,
		MarkerRetryInterval: 5 * time.Second,
		MaxBufferSize:       16 << 20,
		Logger:              slog.New(slog.DiscardHandler),
	}
}

// DefaultTakeoverWait is how long a takeover waits by default for the
// JobManagers' ephemeral nodes to vanish.
func (c *Config) DefaultTakeoverWait() time.Duration {
	return c.FlinkSessionTimeout + c.LivenessMargin
}

// FieldError is a problem with one field of a Config. Validate joins
// them, so that a caller can say which of its own settings is wrong.
type FieldError struct {
	// Field names the Config field, for example "PathRoot".
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "zkbridge: " + e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Validate reports every problem with c, joined; each is a *FieldError.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}

	if len(c.Servers) == 0 {
		bad("Servers", "no ZooKeeper servers")
	}
	for _, s := range c.Servers {
		if err := checkServer(s); err != nil {
			bad("Servers", "%w", err)
		}
	}
	if c.SessionTimeout < time.Second {
		bad("SessionTimeout", "%v is below 1s", c.SessionTimeout)
	}
	if c.ConnectTimeout <= 0 {
		bad("ConnectTimeout", "%v must be positive", c.ConnectTimeout)
	}
	if c.RetryTimeout < c.SessionTimeout {
		bad("RetryTimeout", "%v must be at least SessionTimeout %v: a reconnect can take that long", c.RetryTimeout, c.SessionTimeout)
	}
	if err := checkAbsPath(c.PathRoot); err != nil {
		bad("PathRoot", "%w", err)
	}
	if err := checkAbsPath(c.CkptfsRoot); err != nil {
		bad("CkptfsRoot", "%w", err)
	}
	if c.CkptfsRoot != "" && c.PathRoot != "" && (isBelow(c.CkptfsRoot, c.PathRoot) || isBelow(c.PathRoot, c.CkptfsRoot)) {
		bad("PathRoot", "%s and CkptfsRoot %s must not contain each other", c.PathRoot, c.CkptfsRoot)
	}
	if err := (LeaseRule{Duration: c.LeaseDuration}).Validate(); err != nil {
		bad("LeaseDuration", "%w", err)
	}
	if c.ClusterID != "" {
		if key := clusterKey(c.ClusterID); key == "" {
			bad("ClusterID", "%q is only slashes", c.ClusterID)
		}
	}
	if c.Site != "" {
		if err := checkNodeName(c.Site); err != nil {
			bad("Site", "%w", err)
		}
	}
	if c.FlinkVersion != GenUnknown && !c.FlinkVersion.valid() {
		bad("FlinkVersion", "%d is not a known generation", c.FlinkVersion)
	}
	if c.FlinkSessionTimeout <= 0 {
		bad("FlinkSessionTimeout", "%v must be positive", c.FlinkSessionTimeout)
	}
	if c.LivenessMargin < 0 {
		bad("LivenessMargin", "%v is negative", c.LivenessMargin)
	}
	if c.LivenessPoll <= 0 {
		bad("LivenessPoll", "%v must be positive", c.LivenessPoll)
	}
	if c.LockWait < 0 {
		bad("LockWait", "%v is negative", c.LockWait)
	}
	if c.MarkerInterval <= 0 {
		bad("MarkerInterval", "%v must be positive", c.MarkerInterval)
	}
	if c.MarkerJitter < 0 || c.MarkerJitter > c.MarkerInterval {
		bad("MarkerJitter", "%v must be between 0 and MarkerInterval %v", c.MarkerJitter, c.MarkerInterval)
	}
	if c.MarkerRetryInterval <= 0 || c.MarkerRetryInterval > c.MarkerInterval {
		bad("MarkerRetryInterval", "%v must be positive and at most MarkerInterval %v", c.MarkerRetryInterval, c.MarkerInterval)
	}
	for _, d := range c.CheckpointsDirs {
		if strings.TrimSpace(d) == "" {
			bad("CheckpointsDirs", "empty entry")
		}
	}
	if c.MaxBufferSize < 64<<10 {
		bad("MaxBufferSize", "%d is below 64 KiB", c.MaxBufferSize)
	}
	if c.Auth != nil {
		if _, err := ParseCredentials([]byte(c.Auth.User+":"+c.Auth.Password), c.Auth.Scheme); err != nil {
			bad("Auth", "%w", err)
		}
	}
	if err := c.checkACL(); err != nil {
		bad("ACL", "%w", err)
	}
	if c.Logger == nil {
		bad("Logger", "nil (use slog.New(slog.DiscardHandler) for none)")
	}
	return errors.Join(errs...)
}

// ParseServers parses a ZooKeeper connect string as Flink's
// high-availability.zookeeper.quorum holds it, HOST:PORT[,HOST:PORT...],
// into Servers. Blanks around each server are dropped; an empty server
// (two commas, or one at an end) and every server Validate would refuse
// are errors, joined, each naming the server by its position.
func ParseServers(connect string) ([]string, error) {
	if strings.TrimSpace(connect) == "" {
		return nil, errors.New("no ZooKeeper servers")
	}
	var servers []string
	var errs []error
	for i, s := range strings.Split(connect, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			errs = append(errs, fmt.Errorf("server %d is empty", i+1))
			continue
		}
		if err := checkServer(s); err != nil {
			errs = append(errs, err)
			continue
		}
		servers = append(servers, s)
	}
	return servers, errors.Join(errs...)
}

// checkServer accepts one ZooKeeper client address: HOST:PORT, a host
// without blanks, a port from 1 to 65535.
func checkServer(s string) error {
	host, port, err := net.SplitHostPort(s)
	switch {
	case err != nil || host == "":
		return fmt.Errorf("server %q: want HOST:PORT", s)
	case strings.ContainsFunc(host, unicode.IsSpace):
		return fmt.Errorf("server %q: blank in the host", s)
	case strings.Contains(port, "/"):
		return fmt.Errorf("server %q: bad port: a chroot suffix is not supported (the path root is set apart)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("server %q: bad port", s)
	}
	return nil
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
