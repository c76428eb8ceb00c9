package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// mountConfig is the daemon's configuration. Every field is a setting
// (see addSettings): flags, then CKPTFS_<NAME>, then the configuration
// file, then defaultMountConfig.
type mountConfig struct {
	Backing    string
	MountPoint string
	Mode       string
	Poll       time.Duration
	Hidden     []string
	Maps       []string
	Roots      []string
	// ReadUnwritten hashes, when sealing, files this mount did not see
	// written.
	ReadUnwritten bool
	AllowOther    bool
	Passthrough   bool
	LogFormat     string
	LogLevel      string
	Debug         bool
	// zkSettings name the site and, with ZK, locate Flink's HA data, as
	// for status.
	zkSettings
	// Lease turns a primary read-only when its ZooKeeper session is lost.
	Lease bool
	// MetricsAddr is where /metrics and /healthz are served (HOST:PORT;
	// empty: not served). LagInterval is how often the lag behind
	// Flink's pointers is computed for them (with ZK).
	MetricsAddr string
	LagInterval time.Duration
}

func defaultMountConfig() mountConfig {
	return mountConfig{
		Mode: "replica", Poll: 2 * time.Second, AllowOther: true, Passthrough: true,
		LogFormat: "text", LogLevel: "info", zkSettings: defaultZKSettings(), LagInterval: 10 * time.Second,
	}
}

// validate reports every problem with the settings, each naming its
// setting (settingError) but the overlap, which is of two.
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
	if filepath.IsAbs(c.Backing) && filepath.IsAbs(c.MountPoint) {
		if err := fusefs.CheckOverlap(c.Backing, c.MountPoint); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := fusefs.ParseMode(c.Mode); err != nil || c.Mode == "fenced" {
		errs = append(errs, badSetting("mode", "mode %q: want replica or primary", c.Mode))
	}
	if c.Poll < 10*time.Millisecond {
		errs = append(errs, badSetting("poll", "poll %v is too short", c.Poll))
	}
	for _, p := range c.Hidden {
		if err := manifest.CheckHiddenPattern(p); err != nil {
			errs = append(errs, badSetting("hidden", "hidden %q: %w", p, err))
		}
	}
	if _, err := c.resolver(); err != nil {
		errs = append(errs, err)
	}
	if err := checkLogFormat(c.LogFormat); err != nil {
		errs = append(errs, err)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, badSetting("log-level", "log-level %q: %w", c.LogLevel, err))
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, badSetting("metrics-addr", "metrics-addr %q: want HOST:PORT: %w", c.MetricsAddr, err))
		}
	}
	if c.LagInterval < 100*time.Millisecond {
		errs = append(errs, badSetting("lag-interval", "lag-interval %v is too short", c.LagInterval))
	}
	switch {
	case c.ZK == "" && c.Lease:
		errs = append(errs, missingSetting("zk", "lease needs zk"))
	case c.ZK != "" && c.Site == "":
		errs = append(errs, missingSetting("site", "zk needs site: markers and active-site name this site"))
	}
	if c.ZK != "" {
		if _, err := c.bridgeConfig(slog.New(slog.DiscardHandler)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// serveMount is the real daemon.
func serveMount(cmd *cobra.Command, cfg *mountConfig) error {
	return runMount(cmd.Context(), cfg, cmd.ErrOrStderr(), os.Getenv("CKPTFS_READY_FD"))
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

Signals: SIGTERM and SIGINT unmount and exit; SIGHUP is logged and
ignored (nothing is reloaded: restart to change settings); a closed log
reader (SIGPIPE) does not stop the mount.

Exit status:
  0  clean unmount after SIGTERM or SIGINT
  1  the unmount had to be forced, the mount failed (BACKING is not a
     directory, FUSE refused), or it was unmounted from outside
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
		f.StringArrayVar(&cfg.Hidden, "hidden", nil, "extra `PATTERN` of names never shown (repeatable)")
		f.StringArrayVar(&cfg.Maps, "map", nil, "`URI_PREFIX=LOCAL_DIR` for the absolute paths Flink stored (repeatable)")
		f.StringArrayVar(&cfg.Roots, "root", nil, "extra local `DIR` referenced files may lie in (repeatable)")
		f.BoolVar(&cfg.ReadUnwritten, "seal-read-unwritten", false, "when sealing, read and hash files not written through this mount")
		f.BoolVar(&cfg.AllowOther, "allow-other", cfg.AllowOther, "let other users (flink) use the mount")
		f.BoolVar(&cfg.Passthrough, "passthrough", cfg.Passthrough, "let the kernel read files directly (FUSE passthrough)")
		f.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "text or json")
		f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
		f.BoolVar(&cfg.Debug, "debug", false, "log every FUSE request")
		f.StringVar(&cfg.ZK, "zk", "", "ZooKeeper `HOST:PORT[,...]` (optional: promotion, fencing, markers)")
		f.StringVar(&cfg.ClusterID, "cluster-id", "", "Flink's high-availability.cluster-id")
		f.StringVar(&cfg.PathRoot, "path-root", cfg.PathRoot, "Flink's high-availability.zookeeper.path.root")
		f.BoolVar(&cfg.Lease, "lease", false, "turn read-only when the ZooKeeper session is lost")
		f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve /metrics and /healthz at `HOST:PORT` (for example 127.0.0.1:9477; default: not served)")
		f.DurationVar(&cfg.LagInterval, "lag-interval", cfg.LagInterval, "how often the lag behind Flink's ZooKeeper pointers is computed for /metrics (with --zk)")
	})
	return cmd
}

// runMount mounts, serves until a signal, and unmounts.
func runMount(ctx context.Context, cfg *mountConfig, logw io.Writer, readyFD string) error {
	base := cfg.logger(logw)
	siteLog := base.With("site", cfg.Site)
	log := siteLog.With("component", "mount")
	res, err := cfg.resolver()
	if err != nil {
		return fail("%v", err)
	}
	// ZooKeeper's settings were checked, but fail before mounting anyway.
	var zcfg zkbridge.Config
	if cfg.ZK != "" {
		if zcfg, err = cfg.bridgeConfig(base); err != nil {
			return fail("%v", err)
		}
	}
	vcfg := manifest.DefaultVerifierConfig()
	// A file found complete is stat'ed again every other pass: a deletion
	// is noticed within two poll intervals, and a pass costs about half
	// of the files.
	vcfg.Resolver, vcfg.MaxAge, vcfg.SealedRoot = res, 2*cfg.Poll, cfg.Backing
	verifier, err := manifest.NewVerifier(vcfg)
	if err != nil {
		return fail("%v", err)
	}
	ccfg := manifest.DefaultCatalogConfig()
	ccfg.Backing, ccfg.Verifier, ccfg.Poll = cfg.Backing, verifier, cfg.Poll
	ccfg.HiddenPatterns = append(append([]string(nil), manifest.DefaultHiddenPatterns...), cfg.Hidden...)
	catalog, err := manifest.NewCatalog(ccfg)
	if err != nil {
		return fail("%v", err)
	}
	recorder, err := manifest.NewRecorder(manifest.RecorderConfig{
		Backing: cfg.Backing, Resolver: res, ReadUnwritten: cfg.ReadUnwritten, Verifier: verifier,
		OnSealed: func(chk, path string, err error) {
			if err != nil {
				log.Error("sealing failed", append(checkpointAttrs(chk), "err", err)...)
				return
			}
			log.Info("sealed", append(checkpointAttrs(chk), "manifest", path)...)
		},
	})
	if err != nil {
		return fail("%v", err)
	}

	// Listen before mounting, so that a taken port fails the start.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fail("metrics-addr: %v", err)
		}
		defer metricsLn.Close()
	}

	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// A mount must outlive its terminal and its log readers: SIGHUP is
	// logged and ignored (the daemon reloads nothing; restart it to
	// change settings), and a log write to a closed pipe fails with EPIPE
	// rather than killing the daemon with SIGPIPE.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	signal.Ignore(syscall.SIGPIPE)
	// Verify once before mounting, so the mount starts with what is
	// complete rather than with nothing.
	catalog.Refresh(ctx)

	mode, _ := fusefs.ParseMode(cfg.Mode)
	fcfg := fusefs.DefaultConfig()
	fcfg.Backing, fcfg.MountPoint, fcfg.Mode = cfg.Backing, cfg.MountPoint, mode
	fcfg.Visibility, fcfg.Sealer, fcfg.Logger = catalog, recorder, siteLog
	fcfg.AllowOther, fcfg.Passthrough, fcfg.Debug = cfg.AllowOther, cfg.Passthrough, cfg.Debug
	srv, err := fusefs.Mount(fcfg)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	log.Info("mounted", "backing", cfg.Backing, "mountpoint", cfg.MountPoint, "mode", mode.String(), "passthrough", srv.Passthrough())
	catalog.OnChange(func(ch manifest.Change) {
		attrs := checkpointAttrs(filepath.Join(ch.Dir, ch.Name))
		if ch.Visible {
			log.Info("checkpoint complete", attrs...)
		} else {
			log.Warn("checkpoint no longer complete", attrs...)
		}
		if err := srv.Invalidate(ch.Dir, ch.Name); err != nil {
			log.Warn("invalidating kernel cache", append(attrs, "err", err)...)
		}
	})

	var zkm *metrics.ZooKeeper
	if cfg.ZK != "" {
		zkm = &metrics.ZooKeeper{}
	}
	if metricsLn != nil {
		if zkm != nil {
			zkm.Lag = metrics.NewLagTracker(zkm.Status, cfg.LagInterval)
		}
		src := metrics.Sources{Site: cfg.Site, Version: version, Catalog: catalog, Poll: cfg.Poll, Mount: srv, ZooKeeper: zkm}
		hs := &http.Server{
			Handler:           metrics.Handler(metrics.NewRegistry(src), src),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go hs.Serve(metricsLn)
		defer hs.Close()
		log.Info("serving metrics", "addr", metricsLn.Addr().String())
	}

	done := make(chan struct{})
	go func() { defer close(done); catalog.Run(ctx) }()
	// The recorder outlives the mount: unmounting hands it what the mount
	// still had to report, and it seals what that commits.
	sealCtx, stopSealing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSealing()
	sealDone := make(chan struct{})
	go func() { defer close(sealDone); recorder.Run(sealCtx) }()
	go watchBacking(ctx, cfg.Backing, catalog, log)
	zkDone := make(chan struct{})
	go func() {
		defer close(zkDone)
		if cfg.ZK != "" {
			runZooKeeper(ctx, cfg, zcfg, verifier, catalog, srv, zkm, base)
		}
	}()

	signalReady(readyFD, log)
	unmounted := make(chan struct{})
	go func() { srv.Wait(); close(unmounted) }()
serve:
	for {
		select {
		case <-ctx.Done():
			break serve
		case <-hup:
			log.Warn("SIGHUP ignored: the mount reloads nothing; restart it to change its settings")
		case <-unmounted:
			cancel()
			<-done
			stopSealing()
			<-sealDone
			return &exitError{code: 1, err: errors.New("unmounted from outside")}
		}
	}
	<-done
	<-zkDone
	err = unmount(srv, cfg.MountPoint, log)
	stopSealing()
	<-sealDone
	return err
}

// checkpointAttrs are the log attributes of a checkpoint directory
// (relative to the backing directory, <job dir>/chk-N): its job id,
// checkpoint id and directory.
func checkpointAttrs(dir string) []any {
	attrs := []any{"job", filepath.Base(filepath.Dir(dir))}
	if id, ok := manifest.CheckpointIDFromDirName(filepath.Base(dir)); ok {
		attrs = append(attrs, "checkpoint", id)
	}
	return append(attrs, "dir", dir)
}

// unmount tries a clean unmount for a while (open files make it fail with
// EBUSY), then detaches the mount lazily and reports that it had to.
func unmount(srv *fusefs.Server, mountPoint string, log *slog.Logger) error {
	var err error
	for i := 0; i < 10; i++ {
		if err = srv.Unmount(); err == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	log.Error("clean unmount failed; detaching", "err", err)
	if derr := syscall.Unmount(mountPoint, syscall.MNT_DETACH); derr != nil {
		return &exitError{code: 1, err: fmt.Errorf("unmount %s: %v; detach: %v", mountPoint, err, derr)}
	}
	return &exitError{code: 1, err: fmt.Errorf("unmount of %s was forced: %v", mountPoint, err)}
}

// signalReady tells systemd (Type=notify) or the mount helper that the
// mount serves.
func signalReady(readyFD string, log *slog.Logger) {
	if sock := os.Getenv("NOTIFY_SOCKET"); sock != "" {
		addr := &net.UnixAddr{Name: sock, Net: "unixgram"}
		if strings.HasPrefix(sock, "@") {
			addr.Name = "\x00" + sock[1:]
		}
		if conn, err := net.DialUnix("unixgram", nil, addr); err != nil {
			log.Warn("notifying systemd", "err", err)
		} else {
			conn.Write([]byte("READY=1"))
			conn.Close()
		}
	}
	if readyFD != "" {
		var fd int
		if _, err := fmt.Sscan(readyFD, &fd); err == nil {
			f := os.NewFile(uintptr(fd), "ready")
			f.Write([]byte("READY\n"))
			f.Close()
		}
	}
}

// watchBacking is the fast path of the catalog: local writes into job and
// checkpoint directories poke it. On NFS it sees nothing from other
// machines; polling stays the source of truth.
func watchBacking(ctx context.Context, backing string, catalog *manifest.Catalog, log *slog.Logger) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("no file system notifications; polling only", "err", err)
		return
	}
	defer w.Close()
	watched := map[string]bool{}
	resync := func() {
		want := map[string]bool{backing: true}
		for _, job := range catalog.Jobs() {
			jobDir := filepath.Join(backing, job.Dir)
			want[jobDir] = true
			for _, v := range job.Checkpoints {
				if !v.Complete {
					want[v.Dir] = true
				}
			}
		}
		for p := range watched {
			if !want[p] {
				w.Remove(p)
				delete(watched, p)
			}
		}
		for p := range want {
			if !watched[p] && w.Add(p) == nil {
				watched[p] = true
			}
		}
	}
	resync()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Events:
			catalog.Poke()
		case err := <-w.Errors:
			log.Debug("file system notifications", "err", err)
		case <-tick.C:
			resync()
		}
	}
}
