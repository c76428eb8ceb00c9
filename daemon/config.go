package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/logsink"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Config is one mount daemon: the configurations of the parts it joins,
// and its own settings. Run joins the parts: it sets, in each part's
// configuration, the fields that name another part or a setting held
// once here (Backing, MountPoint, Resolver, the Verifier, Visibility,
// Sealer, SealedRoot, Logger); what they hold is replaced.
type Config struct {
	// Site names this site in logs, metrics and ZooKeeper.
	Site string
	// Backing is the directory served (the NAS, or its replica);
	// MountPoint is where Flink finds it. Both absolute, apart.
	Backing    string
	MountPoint string
	// Resolver maps the paths Flink stored onto local ones.
	Resolver *manifest.Resolver

	Verifier manifest.VerifierConfig
	Catalog  manifest.CatalogConfig
	Recorder manifest.RecorderConfig
	Mount    fusefs.Config
	// ZooKeeper is nil when the daemon runs without ZooKeeper (no
	// promotion, fencing, markers or lag). Its LeaseDuration is the
	// lease's D: with ZooKeeper a mount writes only until D/2 after its
	// daemon's last renewal of the lease (design §5.14).
	ZooKeeper *zkbridge.Config
	// Watchdog, required with ZooKeeper, kills the daemon when its mount
	// could still admit a change 3D/4 after a renewal (design §5.14):
	// watchdog.New in the mount command; a daemon run inside a test
	// binary gives a recording one.
	Watchdog Watchdog
	// Takeover is manual (only `ckptfs takeover`) or auto: a replica of a
	// standby site takes over by itself once the lease expired and none
	// of the active site's JobManagers leads (DecideTakeover), and holds
	// Flink's opens until then (HoldTimeout bounds each).
	Takeover TakeoverMode
	// TakeoverActivateAnyway lets an automatic takeover activate this
	// site although a job has no complete recovery point here.
	TakeoverActivateAnyway bool
	// SiteJobManagers are this site's JobManager addresses as Flink
	// publishes them (HOST or HOST:PORT): their sessions are this site's
	// (zkbridge.MatchesJobManager).
	SiteJobManagers []string
	// HoldTimeout bounds how long one open is held (takeover auto).
	HoldTimeout time.Duration
	// Replication is how a primary mount lets Flink complete a checkpoint
	// (design §4.8): async (at once), sync or strict (once another site
	// holds it, at most SyncTimeout; then sync lets it complete and
	// degrades, strict fails it). Sync and strict need ZooKeeper.
	Replication ReplicationMode
	SyncTimeout time.Duration

	// MetricsAddr is where /metrics and /healthz are served (HOST:PORT;
	// empty: not served; no host, :PORT, means loopback only). MetricsTLS,
	// when set, serves them over TLS only (with ClientCAs set, only to
	// clients with a certificate of those CAs). LagInterval is how often
	// the lag behind Flink's pointers is computed for them (with
	// ZooKeeper).
	MetricsAddr string
	MetricsTLS  *tls.Config
	LagInterval time.Duration
	// Version is reported in metrics.
	Version string
	// FollowInterval is how often the daemon's loop makes a pass (at
	// most; with ZooKeeper every min(FollowInterval, D/16)).
	FollowInterval time.Duration

	// Logger receives every part's log lines; Log, if set, is the sink
	// behind it, which SIGHUP reopens and Notify.Detach moves.
	Logger *slog.Logger
	Log    *logsink.Sink
	// Hangup delivers SIGHUP (nil: none): the daemon reopens Log and
	// reloads nothing else.
	Hangup <-chan os.Signal
	Notify Notify
}

// Notify says whom the daemon tells that it serves.
type Notify struct {
	// Socket is systemd's NOTIFY_SOCKET (Type=notify units).
	Socket string
	// Ready, if set, receives "READY\n" and is closed: the pipe of the
	// mount helper, which waits for it.
	Ready *os.File
	// Detach moves the log away from the standard streams once ready
	// (Log.Detach): the mount helper's caller must not be held.
	Detach bool
}

// ErrRequired: a field that must be set is not (a caller may still set it).
var ErrRequired = errors.New("is required")

// ErrNotAbsolute: Backing or MountPoint is not an absolute path.
var ErrNotAbsolute = errors.New("not an absolute path")

// DefaultConfig returns the defaults of a replica mount; the caller sets
// Site, Backing, MountPoint, Resolver and Logger.
func DefaultConfig() Config {
	m := fusefs.DefaultConfig()
	m.Mode = fusefs.ModeReplica
	return Config{
		Verifier: manifest.DefaultVerifierConfig(), Catalog: manifest.DefaultCatalogConfig(), Mount: m,
		LagInterval: 10 * time.Second, FollowInterval: time.Second,
		Takeover: TakeoverManual, HoldTimeout: 2 * time.Minute,
		Replication: ReplicationAsync, SyncTimeout: 10 * time.Second,
	}
}

// FieldError is a problem with one field of a Config (the field's name,
// as "Lease" or "Mount.Mode"). Validate joins them, so that a caller can
// say which of its own settings is wrong.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "daemon: " + e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Validate reports every problem with c, joined; each is a *FieldError.
// Run validates again.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	if c.Logger == nil {
		bad("Logger", errors.New("required"))
	}
	dirsOK := true
	for _, d := range []struct{ field, dir string }{{"Backing", c.Backing}, {"MountPoint", c.MountPoint}} {
		if !filepath.IsAbs(d.dir) {
			bad(d.field, fmt.Errorf("%q: %w", d.dir, ErrNotAbsolute))
			dirsOK = false
		}
	}
	if dirsOK {
		if err := fusefs.CheckOverlap(c.Backing, c.MountPoint); err != nil {
			bad("MountPoint", err)
			dirsOK = false
		}
	}
	if c.Resolver == nil {
		bad("Resolver", errors.New("required"))
	} else if dirsOK {
		if err := checkMountMappings(c.Resolver, c.Backing, c.MountPoint); err != nil {
			bad("Resolver", err)
		}
		if _, err := c.build(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Mount.Mode == fusefs.ModeFenced {
		bad("Mount.Mode", errors.New("a mount starts as replica or primary"))
	}
	if c.ZooKeeper != nil {
		if err := c.ZooKeeper.Validate(); err != nil {
			bad("ZooKeeper", err)
		}
		if c.Site == "" {
			bad("Site", fmt.Errorf("%w with ZooKeeper: markers and active-site name this site", ErrRequired))
		}
		if c.Watchdog == nil {
			bad("Watchdog", fmt.Errorf("%w with ZooKeeper: it fences a daemon that stops running (design §5.14)", ErrRequired))
		}
	}
	switch c.Takeover {
	case TakeoverManual, "":
	case TakeoverAuto:
		if c.ZooKeeper == nil {
			bad("ZooKeeper", fmt.Errorf("%w for takeover auto", ErrRequired))
		}
		if c.HoldTimeout <= 0 {
			bad("HoldTimeout", fmt.Errorf("%v must be positive", c.HoldTimeout))
		}
	default:
		bad("Takeover", fmt.Errorf("%q: want auto or manual", c.Takeover))
	}
	switch c.Replication {
	case ReplicationAsync, "":
	case ReplicationSync, ReplicationStrict:
		if c.ZooKeeper == nil {
			bad("ZooKeeper", fmt.Errorf("%w for replication %s: the other site acknowledges through it", ErrRequired, c.Replication))
		}
		if c.SyncTimeout <= 0 {
			bad("SyncTimeout", fmt.Errorf("%v must be positive", c.SyncTimeout))
		}
	default:
		bad("Replication", fmt.Errorf("%q: want async, sync or strict", c.Replication))
	}
	for _, a := range c.SiteJobManagers {
		if _, _, ok := zkbridge.AddressHostPort(a); !ok || strings.ContainsAny(a, " ,") {
			bad("SiteJobManagers", fmt.Errorf("%q: want HOST or HOST:PORT", a))
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("MetricsAddr", fmt.Errorf("%q: want HOST:PORT: %w", c.MetricsAddr, err))
		}
	}
	if c.LagInterval < 100*time.Millisecond {
		bad("LagInterval", fmt.Errorf("%v is too short", c.LagInterval))
	}
	if c.FollowInterval <= 0 {
		bad("FollowInterval", fmt.Errorf("%v must be positive", c.FollowInterval))
	}
	if c.Notify.Detach && c.Log == nil {
		bad("Notify.Detach", errors.New("needs Log"))
	}
	return errors.Join(errs...)
}

// parts are the daemon's parts, built and joined (see Config).
type parts struct {
	verifier *manifest.Verifier
	catalog  *manifest.Catalog
	recorder *manifest.Recorder
	mount    fusefs.Config
}

// build builds the parts that exist before mounting; every error is a
// *FieldError. It has no effects: Validate calls it too.
func (c *Config) build() (*parts, error) {
	var p parts
	var errs []error
	bad := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	vcfg := c.Verifier
	vcfg.Resolver, vcfg.SealedRoot = c.Resolver, c.Backing
	var err error
	if p.verifier, err = manifest.NewVerifier(vcfg); err != nil {
		return nil, &FieldError{Field: "Verifier", Err: err}
	}
	ccfg := c.Catalog
	ccfg.Backing, ccfg.Verifier = c.Backing, p.verifier
	if p.catalog, err = manifest.NewCatalog(ccfg); err != nil {
		bad("Catalog", err)
	}
	rcfg := c.Recorder
	rcfg.Backing, rcfg.Resolver, rcfg.Verifier = c.Backing, c.Resolver, p.verifier
	if c.Logger != nil {
		log := c.Logger.With("site", c.Site, "component", "mount")
		rcfg.OnSealed = func(chk, path string, err error) {
			if err != nil {
				log.Error("sealing failed", append(checkpointAttrs(chk), "err", err)...)
				return
			}
			log.Info("sealed", append(checkpointAttrs(chk), "manifest", path)...)
		}
	}
	if p.recorder, err = manifest.NewRecorder(rcfg); err != nil {
		bad("Recorder", err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.mount = c.Mount
	p.mount.Backing, p.mount.MountPoint = c.Backing, c.MountPoint
	// With ZooKeeper the lease's write deadline fences the mount (design
	// §5.14): the mount admits nothing until the daemon's first renewal.
	p.mount.DeadlineFence = c.ZooKeeper != nil
	p.mount.Visibility, p.mount.Sealer = afterFirstPass{p.catalog}, p.recorder
	if p.mount.DeleteGrace > 0 {
		p.mount.DeleteGuard = afterFirstPass{p.catalog}
	}
	if c.Logger != nil {
		p.mount.Logger = c.Logger.With("site", c.Site)
	}
	if err := p.mount.Validate(); err != nil {
		return nil, &FieldError{Field: "Mount", Err: err}
	}
	return &p, nil
}

// checkMountMappings is the rule for a mount's mappings: Flink reads a
// path inside the mount point through the mount, which serves it from the
// same place below Backing, so a mapping that covers such a path must
// resolve it there. A mapping of paths outside the mount point (files
// Flink reads elsewhere) may lead anywhere.
func checkMountMappings(res *manifest.Resolver, backing, mountPoint string) error {
	var errs []error
	for _, m := range res.Mappings() {
		prefix, ok := localPath(m.Prefix)
		if !ok {
			continue // not a local path: Flink does not read it through the mount
		}
		var probe string
		switch {
		case within(mountPoint, prefix):
			probe = prefix
		case within(prefix, mountPoint):
			probe = mountPoint
		default:
			continue
		}
		rel, _ := filepath.Rel(mountPoint, probe)
		want := filepath.Join(backing, rel)
		got, err := res.Local("file://" + probe)
		if err != nil || filepath.Clean(got) != want {
			errs = append(errs, fmt.Errorf("map %s=%s: Flink reads %s through the mount, which serves it from %s; the map must lead there", m.Prefix, m.Dir, probe, want))
		}
	}
	return errors.Join(errs...)
}

// localPath is the local path a mapping prefix names (file:///x, /x), or
// false for other file systems.
func localPath(prefix string) (string, bool) {
	switch {
	case strings.HasPrefix(prefix, "/"):
		return filepath.Clean(prefix), true
	case strings.HasPrefix(strings.ToLower(prefix), "file:"):
		p := prefix[len("file:"):]
		p = strings.TrimPrefix(p, "//localhost")
		p = "/" + strings.TrimLeft(p, "/")
		return filepath.Clean(p), true
	}
	return "", false
}

// within reports whether p is dir or lies below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
