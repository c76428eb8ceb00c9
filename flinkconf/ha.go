package flinkconf

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The options ckptfs reads, with the keys, deprecated keys and defaults of
// Flink 1.20's HighAvailabilityOptions, CheckpointingOptions and
// CoreOptions.
var (
	HAType = Option{Key: "high-availability.type",
		Deprecated: []string{"recovery.mode", "high-availability"}, Default: "NONE"}
	HAClusterID = Option{Key: "high-availability.cluster-id",
		Deprecated: []string{"high-availability.zookeeper.path.namespace", "recovery.zookeeper.path.namespace"},
		Default:    "/default"}
	HAStorageDir = Option{Key: "high-availability.storageDir",
		Deprecated: []string{"high-availability.zookeeper.storageDir", "recovery.zookeeper.storageDir"}}
	ZooKeeperQuorum = Option{Key: "high-availability.zookeeper.quorum",
		Deprecated: []string{"recovery.zookeeper.quorum"}}
	ZooKeeperRoot = Option{Key: "high-availability.zookeeper.path.root",
		Deprecated: []string{"recovery.zookeeper.path.root"}, Default: "/flink"}
	ZooKeeperSessionTimeout = Option{Key: "high-availability.zookeeper.client.session-timeout",
		Deprecated: []string{"recovery.zookeeper.client.session-timeout"}, Default: "60000"}
	CheckpointsDir = Option{Key: "execution.checkpointing.dir",
		Deprecated: []string{"state.checkpoints.dir", "state.backend.fs.checkpointdir"}}
	SavepointsDir = Option{Key: "execution.checkpointing.savepoint-dir",
		Deprecated: []string{"state.savepoints.dir", "savepoints.state.backend.fs.dir"}}
	DefaultScheme = Option{Key: "fs.default-scheme"}
)

// ZooKeeperDefaultPort is the client port ZooKeeper assumes for a quorum
// host without one.
const ZooKeeperDefaultPort = "2181"

// Source says where a derived value came from.
type Source struct {
	// Option is the option's key; Key the key the value was read from
	// (a deprecated one, or Option itself).
	Option string
	Key    string
	// Line is the line of Key; 0 when the value is Flink's default.
	Line int
}

// Default reports whether the value is Flink's default.
func (s Source) Default() bool { return s.Line == 0 }

func (s Source) String() string {
	switch {
	case s.Default():
		return fmt.Sprintf("Flink's default (%s is not set)", s.Option)
	case s.Key != s.Option:
		return fmt.Sprintf("%s, the deprecated key of %s (line %d)", s.Key, s.Option, s.Line)
	}
	return fmt.Sprintf("%s (line %d)", s.Key, s.Line)
}

// ZooKeeperHA is what ckptfs needs of Flink's ZooKeeper high availability
// and checkpoint storage.
type ZooKeeperHA struct {
	// Quorum lists host:port, with ZooKeeper's default port added where
	// Flink's quorum names none.
	Quorum []string
	// PathRoot is the ZooKeeper path root, with one leading slash.
	PathRoot string
	// ClusterID is the cluster id as configured (Flink's default is
	// /default; YARN and Kubernetes deployments use the application id
	// when it is not set).
	ClusterID string
	// SessionTimeout is Flink's ZooKeeper session timeout.
	SessionTimeout time.Duration
	// StorageDir, CheckpointsDir and SavepointsDir are URIs as Flink
	// writes them (the default scheme applied); SavepointsDir is "" when
	// not set.
	StorageDir     string
	CheckpointsDir string
	SavepointsDir  string
	// Sources maps each option's key to where its value came from.
	Sources map[string]Source
}

// ZooKeeperHA derives the ZooKeeper high availability settings. It fails,
// naming the keys, when high availability is not ZooKeeper's or a value
// ckptfs needs is missing or malformed.
func (c *Config) ZooKeeperHA() (*ZooKeeperHA, error) {
	ha := &ZooKeeperHA{Sources: map[string]Source{}}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// lookup returns an option's value or default and records its source.
	lookup := func(o Option) (string, bool) {
		v, ok := c.Lookup(o)
		if !ok {
			if o.Default == "" {
				return "", false
			}
			ha.Sources[o.Key] = Source{Option: o.Key, Key: o.Key}
			return o.Default, true
		}
		ha.Sources[o.Key] = Source{Option: o.Key, Key: v.Key, Line: v.Line}
		if c.Format == Legacy && strings.ContainsAny(v.Value[:1], `"'`) {
			bad("%s (line %d): %s: flink-conf.yaml keeps quotes as part of the value, and so does Flink: remove them", v.Key, v.Line, v.Value)
		}
		return v.Value, true
	}
	where := func(o Option) string { return ha.Sources[o.Key].String() }

	mode, _ := lookup(HAType)
	if !strings.EqualFold(mode, "zookeeper") {
		return nil, fmt.Errorf("%s: high availability is %q, from %s: ckptfs needs Flink's ZooKeeper high availability", c.Path, mode, where(HAType))
	}

	if q, ok := lookup(ZooKeeperQuorum); !ok || strings.TrimSpace(q) == "" {
		bad("%s is not set: Flink needs the ZooKeeper quorum", ZooKeeperQuorum.Key)
	} else if servers, err := parseQuorum(q); err != nil {
		bad("%s from %s: %v", ZooKeeperQuorum.Key, where(ZooKeeperQuorum), err)
	} else {
		ha.Quorum = servers
	}

	root, _ := lookup(ZooKeeperRoot)
	if r := strings.Trim(root, "/"); r == "" {
		bad("%s %q from %s: the path root is empty", ZooKeeperRoot.Key, root, where(ZooKeeperRoot))
	} else {
		ha.PathRoot = "/" + r
	}
	ha.ClusterID, _ = lookup(HAClusterID)
	if strings.Trim(ha.ClusterID, "/") == "" {
		bad("%s %q from %s: the cluster id is empty", HAClusterID.Key, ha.ClusterID, where(HAClusterID))
	}

	st, _ := lookup(ZooKeeperSessionTimeout)
	if d, err := ParseDuration(st); err != nil || d <= 0 {
		bad("%s %q from %s: want a positive duration (%v)", ZooKeeperSessionTimeout.Key, st, where(ZooKeeperSessionTimeout), err)
	} else {
		ha.SessionTimeout = d
	}

	scheme, _ := lookup(DefaultScheme)
	dir := func(o Option, required string) string {
		v, ok := lookup(o)
		if !ok {
			if required != "" {
				bad("neither %s nor %s is set: %s", o.Key, strings.Join(o.Deprecated, " nor "), required)
			}
			return ""
		}
		u, err := absoluteURI(v, scheme)
		if err != nil {
			bad("%s from %s: %v", o.Key, where(o), err)
		}
		return u
	}
	ha.StorageDir = dir(HAStorageDir, "Flink's ZooKeeper high availability needs it")
	ha.CheckpointsDir = dir(CheckpointsDir, "ckptfs must know where Flink writes checkpoints (set it in Flink's configuration even if jobs also set it in code)")
	ha.SavepointsDir = dir(SavepointsDir, "")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	return ha, nil
}

// parseQuorum splits a ZooKeeper connect string into host:port entries.
func parseQuorum(q string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(q, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			return nil, fmt.Errorf("%q: a chroot suffix is not supported; use %s instead", s, ZooKeeperRoot.Key)
		}
		host, port := s, ZooKeeperDefaultPort
		if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
			var err error
			if host, port, err = net.SplitHostPort(s); err != nil {
				return nil, fmt.Errorf("%q: %v", s, err)
			}
		} else if strings.Contains(s, ":") {
			return nil, fmt.Errorf("%q: write an IPv6 address as [address]:port", s)
		}
		if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: want HOST[:PORT]", s)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	if len(out) == 0 {
		return nil, errors.New("no servers")
	}
	return out, nil
}

// absoluteURI checks that a Flink path is absolute and gives it the
// default scheme (fs.default-scheme) when it has none, as Flink's
// FileSystem does.
func absoluteURI(s, defaultScheme string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" {
		if !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("%q is not an absolute path or URI", s)
		}
		if defaultScheme != "" {
			return strings.TrimSuffix(defaultScheme, "/") + s, nil
		}
		return s, nil
	}
	if !strings.HasPrefix(u.Path, "/") || u.Opaque != "" {
		return "", fmt.Errorf("%q has no absolute path", s)
	}
	return s, nil
}

// ParseDuration reads a duration as Flink's TimeUtils.parseDuration does:
// a number and an optional unit; no unit means milliseconds.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q does not start with a number", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	unit, ok := durationUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q: unknown time unit", s)
	}
	if n > int64(time.Duration(1<<63-1)/unit) {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(n) * unit, nil
}

var durationUnits = map[string]time.Duration{
	"":  time.Millisecond,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"min": time.Minute, "m": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond,
	"nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
}
