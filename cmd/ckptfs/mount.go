package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/daemon"
	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/logsink"
	"github.com/ckptfs/ckptfs/internal/tlsconf"
	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/manifest"
)

// minBackingTimeout is the shortest backing-timeout accepted: with less,
// a busy but healthy NAS would count as hung.
const minBackingTimeout = 100 * time.Millisecond

// mountGCPercent is the mount's GOGC when its environment sets none.
const mountGCPercent = 50

// mountConfig is the daemon's configuration. Every field is a setting
// (see addSettings): flags, then CKPTFS_<NAME>, then the configuration
// file, then defaultMountConfig.
type mountConfig struct {
	Backing    string
	MountPoint string
	Mode       string
	Poll       time.Duration
	// BackingTimeout bounds how long a verification pass waits for one
	// directory of the backing file system.
	BackingTimeout time.Duration
	// AuditPeriod is how often each file found complete is stat'ed again
	// (design §3.6); BackingConcurrency how many stats are in flight.
	AuditPeriod        time.Duration
	BackingConcurrency int
	Hidden             []string
	Maps               []string
	Roots              []string
	// ReadUnwritten hashes, when sealing, files this mount did not see
	// written.
	ReadUnwritten bool
	AllowOther    bool
	Passthrough   bool
	LogFormat     string
	LogLevel      string
	// LogFile is where the log goes (appended; SIGHUP reopens it). Empty:
	// standard error, and once the mount helper's daemon serves the
	// journal, syslog or fallbackLog (logsink.Sink.Detach).
	LogFile string
	Debug   bool
	// zkSettings name the site and, with ZK, locate Flink's HA data, as
	// for status.
	zkSettings
	// DeleteGrace is how long after a promotion the newest complete
	// checkpoint of each job is kept from deletion (0: not);
	// DeleteGuard is "refuse" or "hold".
	DeleteGrace time.Duration
	DeleteGuard string
	// Takeover is auto or manual; TakeoverActivateAnyway lets an
	// automatic takeover activate a site with a refused job;
	// SiteJobManagers are this site's JobManager addresses; HoldTimeout
	// bounds a held open (design §5.11-5.12).
	Takeover               string
	TakeoverActivateAnyway bool
	SiteJobManagers        []string
	HoldTimeout            time.Duration
	// ReplicationMode is async, sync or strict; SyncTimeout bounds how
	// long sync and strict hold a checkpoint's completion (design §4.8).
	ReplicationMode string
	SyncTimeout     time.Duration
	// MetricsAddr is where /metrics and /healthz are served (HOST:PORT;
	// empty: not served). LagInterval is how often the lag behind
	// Flink's pointers is computed for them (with ZK).
	MetricsAddr string
	LagInterval time.Duration
	// MetricsTLSCert and MetricsTLSKey serve them over TLS;
	// MetricsTLSClientCA then asks clients for a certificate of its CAs.
	MetricsTLSCert, MetricsTLSKey, MetricsTLSClientCA string
}

func defaultMountConfig() mountConfig {
	return mountConfig{
		Mode: "replica", Poll: 2 * time.Second, BackingTimeout: 30 * time.Second, AuditPeriod: 10 * time.Minute, BackingConcurrency: 32, AllowOther: true, Passthrough: true,
		LogFormat: "text", LogLevel: "info", zkSettings: defaultZKSettings(), LagInterval: 10 * time.Second,
		DeleteGrace: 30 * time.Minute, DeleteGuard: "refuse",
		Takeover: "manual", HoldTimeout: 2 * time.Minute,
		ReplicationMode: "async", SyncTimeout: 10 * time.Second,
	}
}

// validate reports every problem with the settings, each naming its
// setting (settingError): the settings' own syntax here, the daemon's
// rules through daemonConfig.
func (c *mountConfig) validate() error {
	var errs []error
	for _, d := range []struct{ name, dir string }{{"backing", c.Backing}, {"mountpoint", c.MountPoint}} {
		switch {
		case d.dir == "":
			errs = append(errs, missingSetting(d.name, "%s is required: the argument %s, or --%s, %s or %s in the configuration file",
				d.name, strings.ToUpper(d.name), d.name, settingEnv(d.name), d.name))
		case !filepath.IsAbs(d.dir):
			errs = append(errs, badSetting(d.name, "%s %q must be an absolute path", d.name, d.dir))
		}
	}
	if _, err := fusefs.ParseMode(c.Mode); err != nil || c.Mode == "fenced" {
		errs = append(errs, badSetting("mode", "mode %q: want replica or primary", c.Mode))
	}
	if c.Poll < 10*time.Millisecond {
		errs = append(errs, badSetting("poll", "poll %v is too short", c.Poll))
	}
	if c.AuditPeriod < c.Poll {
		errs = append(errs, badSetting("audit-period", "audit-period %v is shorter than poll %v", c.AuditPeriod, c.Poll))
	}
	if c.BackingConcurrency < 1 || c.BackingConcurrency > 1024 {
		errs = append(errs, badSetting("backing-concurrency", "backing-concurrency %d: want 1 to 1024", c.BackingConcurrency))
	}
	if c.BackingTimeout < minBackingTimeout {
		errs = append(errs, badSetting("backing-timeout", "backing-timeout %v is too short", c.BackingTimeout))
	}
	for _, p := range c.Hidden {
		if err := manifest.CheckHiddenPattern(p); err != nil {
			errs = append(errs, badSetting("hidden", "hidden %q: %w", p, err))
		}
	}
	if err := checkLogFormat(c.LogFormat); err != nil {
		errs = append(errs, err)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, badSetting("log-level", "log-level %q: %w", c.LogLevel, err))
	}
	if _, err := c.daemonConfig(slog.New(slog.DiscardHandler), nil); len(errs) == 0 || (c.Backing == "" && c.MountPoint == "") {
		// Without the directories (config check of a file that leaves
		// them to the command line), the daemon's rules of the others.
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// warnings are what config check says about valid mount settings:
// metrics served beyond loopback to clients it does not authenticate,
// and a primary with no fence. (The lease of a manual primary is gone:
// with zk every mount takes part in it, design §5.14; without zk nothing
// fences a primary.)
func (c *mountConfig) warnings() []string {
	var out []string
	if c.MetricsAddr != "" && !loopbackAddr(c.MetricsAddr) {
		switch {
		case c.MetricsTLSCert == "":
			out = append(out, fmt.Sprintf("metrics-addr %s serves /metrics and /healthz beyond loopback over plain HTTP, to every client that reaches the port: set metrics-tls-cert and metrics-tls-key (HTTPS) and metrics-tls-client-ca (only clients with a certificate of that CA), or listen on 127.0.0.1 (docs/deploy.md#9-metrics-and-health)", c.MetricsAddr))
		case c.MetricsTLSClientCA == "":
			out = append(out, fmt.Sprintf("metrics-addr %s serves /metrics and /healthz beyond loopback to every client that reaches the port: set metrics-tls-client-ca (only clients with a certificate of that CA) (docs/deploy.md#9-metrics-and-health)", c.MetricsAddr))
		}
	}
	if c.Mode == "primary" && c.ZK == "" {
		out = append(out, "mode primary without zk: nothing fences this mount (no lease, no active-site to follow), so it writes beside another site's primary after a failover; set zk and cluster-id, and it writes only while its site holds the lease (docs/design.md §5.14); without zk, primary suits one site without failover only")
	}
	return out
}

// loopbackAddr reports whether a metrics address listens on loopback
// only: no host (the daemon listens on 127.0.0.1), localhost, or a
// loopback IP.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fileMountWarnings are the warnings of the mount's settings as config
// check filled them into mount's flags.
func fileMountWarnings(mount *cobra.Command) []string {
	get := func(name string) string { return mount.Flags().Lookup(name).Value.String() }
	c := mountConfig{Mode: get("mode"), MetricsAddr: get("metrics-addr"), MetricsTLSCert: get("metrics-tls-cert"),
		MetricsTLSKey: get("metrics-tls-key"), MetricsTLSClientCA: get("metrics-tls-client-ca")}
	c.ZK = get("zk")
	return c.warnings()
}

// daemonFieldSettings names the setting behind each daemon.Config field
// that daemonConfig fills from one.
var daemonFieldSettings = map[string]string{
	"Backing": "backing", "MountPoint": "mountpoint", "Resolver": "map", "Mount.Mode": "mode", "ZooKeeper": "zk",
	"Site": "site", "MetricsAddr": "metrics-addr", "LagInterval": "lag-interval",
	"Mount.DeleteGrace": "delete-guard-grace", "Takeover": "takeover", "SiteJobManagers": "site-jobmanagers", "HoldTimeout": "hold-timeout",
	"Replication": "replication-mode", "SyncTimeout": "sync-timeout",
}

// daemonSettingErrors names the setting behind each of the daemon's
// errors (settingError).
func daemonSettingErrors(err error) error {
	var errs []error
	for _, e := range leaves(err) {
		var fe *daemon.FieldError
		if errors.As(e, &fe) {
			required := errors.Is(fe.Err, daemon.ErrRequired)
			if (fe.Field == "ZooKeeper" && !required) || errors.Is(fe.Err, daemon.ErrNotAbsolute) {
				continue // bridgeConfig or validate said it, by setting
			}
			switch name := daemonFieldSettings[fe.Field]; {
			case name != "" && required:
				e = missingSetting(name, "%s %w", name, fe.Err)
			case name != "":
				e = badSetting(name, "%s %w", name, fe.Err)
			}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// daemonConfig maps the settings onto the daemon's configuration, logging
// to log (through sink, if set), and validates it. Each problem names its
// setting (settingError).
func (c *mountConfig) daemonConfig(log *slog.Logger, sink *logsink.Sink) (daemon.Config, error) {
	d := daemon.DefaultConfig()
	var errs []error
	res, err := c.resolver()
	errs = append(errs, err)
	if c.ZK != "" {
		zcfg, err := c.bridgeConfig(log)
		errs = append(errs, err)
		d.ZooKeeper = &zcfg
	}
	if err := errors.Join(errs...); err != nil {
		return d, err
	}
	d.Site, d.Backing, d.MountPoint, d.Resolver = c.Site, c.Backing, c.MountPoint, res
	// A file found complete is trusted until its directory loses its
	// name or the audit, every AuditPeriod, finds it changed; MaxAge
	// bounds the trust should the audit fall behind (design §3.6).
	d.Verifier.MaxAge, d.Verifier.Workers = 2*c.AuditPeriod, c.BackingConcurrency
	d.Catalog.Poll, d.Catalog.BackingTimeout = c.Poll, c.BackingTimeout
	d.Catalog.HiddenPatterns = append(append([]string(nil), manifest.DefaultHiddenPatterns...), c.Hidden...)
	d.Recorder.ReadUnwritten = c.ReadUnwritten
	d.Mount.Mode, _ = fusefs.ParseMode(c.Mode)
	d.Mount.AllowOther, d.Mount.Passthrough, d.Mount.Debug = c.AllowOther, c.Passthrough, c.Debug
	d.Mount.DeleteGrace = c.DeleteGrace
	switch c.DeleteGuard {
	case "refuse", "hold":
		d.Mount.DeleteHold = c.DeleteGuard == "hold"
	default:
		errs = append(errs, badSetting("delete-guard", "delete-guard %q: want refuse or hold", c.DeleteGuard))
	}
	d.MetricsAddr, d.LagInterval, d.Version = c.MetricsAddr, c.LagInterval, version
	d.TakeoverActivateAnyway, d.SiteJobManagers, d.HoldTimeout = c.TakeoverActivateAnyway, c.SiteJobManagers, c.HoldTimeout
	d.Takeover = daemon.TakeoverMode(c.Takeover)
	d.Replication, d.SyncTimeout = daemon.ReplicationMode(c.ReplicationMode), c.SyncTimeout
	d.Watchdog = watchdog.New(watchdogRecord(c.MountPoint))
	if c.MetricsTLSCert != "" || c.MetricsTLSKey != "" || c.MetricsTLSClientCA != "" {
		tc, err := tlsconf.Server(c.MetricsTLSCert, c.MetricsTLSKey, c.MetricsTLSClientCA)
		if err != nil {
			errs = append(errs, badSetting("metrics-tls-cert", "metrics-tls-cert, metrics-tls-key, metrics-tls-client-ca: %w", err))
		}
		d.MetricsTLS = tc
	}
	d.Logger, d.Log = log, sink
	errs = append(errs, daemonSettingErrors(d.Validate()))
	return d, errors.Join(errs...)
}

// watchdogRecord is where the watchdog of the daemon of mountPoint keeps
// its deadline: in systemd's RuntimeDirectory= when the unit has one,
// else under /run/ckptfs (tmpfs: a record outlives the daemon, not the
// machine).
func watchdogRecord(mountPoint string) string {
	dir := os.Getenv("RUNTIME_DIRECTORY")
	if dir == "" || strings.Contains(dir, ":") {
		dir = "/run/ckptfs"
	}
	return filepath.Join(dir, mountName(mountPoint)+".watchdog")
}

// mountName names a mount point in a file name: /flink/x is flink-x.
func mountName(mountPoint string) string {
	name := strings.ReplaceAll(strings.Trim(filepath.Clean(mountPoint), "/"), "/", "-")
	if name == "" {
		name = "-"
	}
	return name
}

// fallbackLog is where the daemon of mountPoint started by the mount
// helper logs when it has no log-file, no journal and no syslog: in
// systemd's LogsDirectory= when the unit has one, else under
// /var/log/ckptfs.
func fallbackLog(mountPoint string) string {
	dir := os.Getenv("LOGS_DIRECTORY")
	if dir == "" || strings.Contains(dir, ":") {
		dir = "/var/log/ckptfs"
	}
	return filepath.Join(dir, mountName(mountPoint)+".log")
}

// resolver resolves Flink's paths inside the backing directory and the
// settings map and root.
func (c *mountConfig) resolver() (*manifest.Resolver, error) {
	return newResolver(c.Maps, c.Roots, c.Backing)
}

// logger is the daemon's logger without attributes; each part adds the
// site (zkbridge adds it itself) and its component once.
func (c *mountConfig) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h)
}

// mountServer runs the daemon with a validated configuration.
type mountServer func(cmd *cobra.Command, cfg *mountConfig) error

// serveMount runs the daemon: SIGTERM and SIGINT end it, SIGHUP reopens
// its log file, and a closed log reader (EPIPE) does not kill it. Under
// the mount helper it tells the helper when it serves (CKPTFS_READY_FD)
// and then leaves the caller's standard streams (CKPTFS_DETACH).
func serveMount(cmd *cobra.Command, cfg *mountConfig) error {
	sink, err := logsink.New(cfg.LogFile, cmd.ErrOrStderr())
	if err != nil {
		return fail("log-file: %v", err)
	}
	sink.Fallback = fallbackLog(cfg.MountPoint)
	log := cfg.logger(sink)
	d, err := cfg.daemonConfig(log, sink)
	if err != nil {
		return fail("%v", err)
	}
	if cfg.ZK != "" {
		cfg.warnAtStart(log.With("site", cfg.Site, "component", "mount"))
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	signal.Ignore(syscall.SIGPIPE)
	d.Hangup = hup
	d.Notify.Socket = os.Getenv("NOTIFY_SOCKET")
	if fd, err := strconv.Atoi(os.Getenv("CKPTFS_READY_FD")); err == nil {
		d.Notify.Ready = os.NewFile(uintptr(fd), "ready")
	}
	d.Notify.Detach = os.Getenv("CKPTFS_DETACH") == "1"
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the catalog, which lives as long as the
		// mount: half Go's headroom above it costs few collections and
		// keeps the RSS near 1.5 times it rather than twice (deploy.md).
		debug.SetGCPercent(mountGCPercent)
	}
	switch err := daemon.Run(ctx, d); {
	case err == nil:
		return nil
	case errors.Is(err, daemon.ErrConfig):
		return fail("%v", daemonSettingErrors(err))
	case ctx.Err() != nil && (errors.Is(err, daemon.ErrForcedUnmount) || errors.Is(err, fusefs.ErrRequestsStuck)):
		// Asked to stop, and stopped: the mount is gone from this
		// machine; Run logged what it had to force.
		log.Warn("stopped, but not cleanly", "err", err)
		return nil
	default:
		return &exitError{code: 1, err: err}
	}
}

func newMountCmd(serve mountServer, checks settingsChecks) *cobra.Command {
	cfg := defaultMountConfig()
	cmd := &cobra.Command{
		Use:   "mount [flags] BACKING MOUNTPOINT",
		Short: "Serve a checkpoint directory that shows only complete checkpoints",
		Long: `Mount serves BACKING (the NAS, or its replica) at MOUNTPOINT (the directory
Flink uses for checkpoints), in the foreground, until SIGTERM or SIGINT.

replica: read-only (every change fails with EROFS); checkpoint directories
that are not complete on this site, replication temporary files, Flink's
._metadata.inprogress.* and .ckptfs are invisible. A checkpoint appears
within one poll interval of becoming complete.

primary: read-write passthrough; when a chk-N/_metadata is committed a
manifest with the checksums seen while Flink wrote is sealed under
BACKING/.ckptfs, which a replica uses to verify at level L3.

BACKING and MOUNTPOINT may instead be given as the settings backing and
mountpoint. Settings come from flags, then CKPTFS_<FLAG>, then the YAML
file of --config (keys as the long flags), then defaults. Also runs as
the mount helper mount.fuse.ckptfs.

Logs go to standard error, or to the file of log-file. Started as the
mount helper, the daemon leaves the caller's terminal or pipe once the
mount serves: its log then goes to log-file, or to the journal when its
standard error is one, or to syslog, or else (saying so first) to
/var/log/ckptfs/<mount point>.log ($LOGS_DIRECTORY under systemd), or
nowhere when that cannot be opened.

Signals: SIGTERM and SIGINT unmount and exit; SIGHUP reopens log-file
(for logrotate) and reloads nothing else (restart to change settings); a
closed log reader (SIGPIPE) does not stop the mount.

Exit status:
  0  unmounted after SIGTERM or SIGINT: cleanly, or, with files still
     open or requests waiting on a hung BACKING, by detaching the mount
     (what is still open then fails with ENOTCONN; the log says so)
  1  the mount failed (BACKING is not a directory, FUSE refused), or it
     was unmounted from outside
  3  usage or settings error (BACKING and MOUNTPOINT overlap, a bad
     ZooKeeper connect string, metrics-addr cannot be listened on, ...):
     nothing was mounted`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return fmt.Errorf("want BACKING and MOUNTPOINT, or neither (the settings backing and mountpoint); got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				cfg.Backing, cfg.MountPoint = args[0], args[1]
				for _, name := range []string{"backing", "mountpoint"} {
					delete(cmd.Flags().Lookup(name).Annotations, originAnnotation) // the argument wins
				}
			}
			if err := checkSettings(cmd, checks[cmd]); err != nil {
				return fail("%v", err)
			}
			return serve(cmd, &cfg)
		},
	}
	checks[cmd] = func() error {
		for _, d := range []*string{&cfg.Backing, &cfg.MountPoint} {
			if *d != "" {
				abs, err := filepath.Abs(*d)
				if err != nil {
					return err
				}
				*d = abs
			}
		}
		return cfg.validate()
	}
	addSettings(cmd, func(f *pflag.FlagSet) {
		f.StringVar(&cfg.Backing, "backing", "", "`DIR` to serve (the first argument wins)")
		f.StringVar(&cfg.MountPoint, "mountpoint", "", "`DIR` to mount at (the second argument wins)")
		f.StringVar(&cfg.Mode, "mode", cfg.Mode, "replica or primary")
		f.StringVar(&cfg.Site, "site", "", "this site's `NAME` (for logs and ZooKeeper)")
		f.DurationVar(&cfg.Poll, "poll", cfg.Poll, "interval of full verification passes")
		f.DurationVar(&cfg.AuditPeriod, "audit-period", cfg.AuditPeriod, "how often each file of a complete checkpoint is stat'ed again, to notice one truncated in place (a removed one is noticed within a pass)")
		f.IntVar(&cfg.BackingConcurrency, "backing-concurrency", cfg.BackingConcurrency, "how many stats of the backing file system are in flight at once (a NAS serves many)")
		f.DurationVar(&cfg.BackingTimeout, "backing-timeout", cfg.BackingTimeout, "how long a verification pass waits for one directory of the backing file system before its checkpoints count as unknown (a hung NAS)")
		f.StringArrayVar(&cfg.Hidden, "hidden", nil, "extra `PATTERN` of names never shown (repeatable)")
		f.StringArrayVar(&cfg.Maps, "map", nil, "`URI_PREFIX=LOCAL_DIR` for the absolute paths Flink stored (repeatable)")
		f.StringArrayVar(&cfg.Roots, "root", nil, "extra local `DIR` referenced files may lie in (repeatable)")
		f.BoolVar(&cfg.ReadUnwritten, "seal-read-unwritten", false, "when sealing, read and hash files not written through this mount")
		f.BoolVar(&cfg.AllowOther, "allow-other", cfg.AllowOther, "let other users (flink) use the mount")
		f.BoolVar(&cfg.Passthrough, "passthrough", cfg.Passthrough, "let the kernel read files directly (FUSE passthrough)")
		f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "text or json")
		f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
		f.StringVar(&cfg.LogFile, "log-file", "", "append the log to `FILE` (SIGHUP reopens it; default: standard error; under the mount helper once mounted the journal, syslog or /var/log/ckptfs)")
		f.BoolVar(&cfg.Debug, "debug", false, "log every FUSE request")
		f.StringVar(&cfg.ZK, "zk", "", "ZooKeeper `HOST:PORT[,...]` (optional: promotion, fencing, markers)")
		f.StringVar(&cfg.ClusterID, "cluster-id", "", "Flink's high-availability.cluster-id")
		f.StringVar(&cfg.PathRoot, "path-root", cfg.PathRoot, "Flink's high-availability.zookeeper.path.root")
		f.DurationVar(&cfg.FlinkSessionTimeout, "flink-session-timeout", cfg.FlinkSessionTimeout, "Flink's high-availability.zookeeper.client.session-timeout: the sweeper's grace for a pointer a JobManager that just died wrote")
		f.DurationVar(&cfg.DeleteGrace, "delete-guard-grace", cfg.DeleteGrace, "after a promotion, keep the newest complete checkpoint of each job from deletion this long (0: not): Flink deletes it when a job reaches FAILED")
		f.StringVar(&cfg.DeleteGuard, "delete-guard", cfg.DeleteGuard, "what the guard does with such a deletion: refuse (EPERM) or hold (until the grace period ends)")
		addLeaseSetting(f, &cfg.zkSettings)
		f.StringVar(&cfg.Takeover, "takeover", cfg.Takeover, "manual (ckptfs takeover only) or auto (take over when the lease expired and none of the active site's JobManagers leads)")
		f.BoolVar(&cfg.TakeoverActivateAnyway, "takeover-activate-anyway", false, "let an automatic takeover activate this site although a job has no complete recovery point here")
		f.StringArrayVar(&cfg.SiteJobManagers, "site-jobmanagers", nil, "this site's JobManager `HOST[:PORT]` as Flink publishes it (repeatable): tells this site's ZooKeeper sessions from the others'")
		f.DurationVar(&cfg.HoldTimeout, "hold-timeout", cfg.HoldTimeout, "with takeover auto, how long one of Flink's opens is held until this site's takeover decided")
		f.StringVar(&cfg.ReplicationMode, "replication-mode", cfg.ReplicationMode, "async (Flink completes checkpoints at once), sync or strict (a checkpoint completes once another site holds it; after sync-timeout sync lets it complete and raises an alarm, strict fails it); sync and strict need --zk")
		f.DurationVar(&cfg.SyncTimeout, "sync-timeout", cfg.SyncTimeout, "how long replication-mode sync or strict holds a checkpoint's completion for another site")
		addConnectionSettings(f, &cfg.zkSettings)
		f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve /metrics and /healthz at `HOST:PORT` (:9477 listens on loopback only; 0.0.0.0:9477 on every interface; default: not served)")
		f.StringVar(&cfg.MetricsTLSCert, "metrics-tls-cert", "", "serve metrics-addr over TLS with the certificate in `FILE` (PEM)")
		f.StringVar(&cfg.MetricsTLSKey, "metrics-tls-key", "", "the key `FILE` (PEM) of metrics-tls-cert")
		f.StringVar(&cfg.MetricsTLSClientCA, "metrics-tls-client-ca", "", "with metrics-tls-cert, serve only clients with a certificate of the CAs in `FILE` (PEM)")
		f.DurationVar(&cfg.LagInterval, "lag-interval", cfg.LagInterval, "how often the lag behind Flink's ZooKeeper pointers is computed for /metrics (with --zk)")
	})
	return cmd
}
