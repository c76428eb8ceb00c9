package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/manifest"
)

// mountConfig is the daemon's configuration: defaults, then the YAML file
// (--config), then flags. Unknown YAML keys are rejected.
type mountConfig struct {
	Backing    string        `yaml:"backing"`
	MountPoint string        `yaml:"mountpoint"`
	Mode       string        `yaml:"mode"`
	Site       string        `yaml:"site"`
	Poll       time.Duration `yaml:"poll"`
	Hidden     []string      `yaml:"hidden"`
	Maps       []string      `yaml:"map"`
	Roots      []string      `yaml:"roots"`
	// ReadUnwritten hashes, when sealing, files this mount did not see
	// written.
	ReadUnwritten bool   `yaml:"seal-read-unwritten"`
	AllowOther    bool   `yaml:"allow-other"`
	Passthrough   bool   `yaml:"passthrough"`
	LogFormat     string `yaml:"log-format"`
	LogLevel      string `yaml:"log-level"`
	Debug         bool   `yaml:"debug"`
	// ZK, ClusterID and PathRoot locate Flink's HA data, as for status.
	ZK        string `yaml:"zk"`
	ClusterID string `yaml:"cluster-id"`
	PathRoot  string `yaml:"path-root"`
	// Lease turns a primary read-only when its ZooKeeper session is lost.
	Lease bool `yaml:"lease"`
}

func defaultMountConfig() mountConfig {
	return mountConfig{
		Mode: "replica", Poll: 2 * time.Second, AllowOther: true, Passthrough: true,
		LogFormat: "text", LogLevel: "info", PathRoot: "/flink",
	}
}

func (c *mountConfig) validate() error {
	var errs []error
	if !filepath.IsAbs(c.Backing) {
		errs = append(errs, fmt.Errorf("backing %q must be an absolute path", c.Backing))
	}
	if !filepath.IsAbs(c.MountPoint) {
		errs = append(errs, fmt.Errorf("mount point %q must be an absolute path", c.MountPoint))
	}
	if _, err := fusefs.ParseMode(c.Mode); err != nil || c.Mode == "fenced" {
		errs = append(errs, fmt.Errorf("mode %q: want replica or primary", c.Mode))
	}
	if c.Poll < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("poll %v is too short", c.Poll))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format %q: want text or json", c.LogFormat))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log-level %q: %w", c.LogLevel, err))
	}
	if c.ZK == "" && c.Lease {
		errs = append(errs, errors.New("lease needs --zk"))
	}
	if c.ZK != "" && c.Site == "" {
		errs = append(errs, errors.New("--zk needs --site: markers and active-site name this site"))
	}
	return errors.Join(errs...)
}

// loadConfigFile reads YAML into c, refusing unknown keys.
func loadConfigFile(path string, c *mountConfig) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (c *mountConfig) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h).With("site", c.Site)
}

func newMountCmd() *cobra.Command {
	var configPath string
	flagCfg := defaultMountConfig()
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

Settings come from defaults, then --config FILE (YAML, keys as the long
flags), then flags. Also runs as the mount helper mount.fuse.ckptfs.

Exit status: 0 after a clean unmount, 1 when the unmount had to be forced
or the mount failed, 3 for usage errors.`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := defaultMountConfig()
			if configPath != "" {
				if err := loadConfigFile(configPath, &cfg); err != nil {
					return fail("%v", err)
				}
			}
			applyChangedFlags(cmd.Flags(), &cfg, &flagCfg)
			if len(args) == 2 {
				cfg.Backing, cfg.MountPoint = args[0], args[1]
			}
			for _, p := range []*string{&cfg.Backing, &cfg.MountPoint} {
				if *p != "" {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return fail("%v", err)
					}
					*p = abs
				}
			}
			if err := cfg.validate(); err != nil {
				return fail("%v", err)
			}
			return runMount(cmd.Context(), &cfg, cmd.ErrOrStderr(), os.Getenv("CKPTFS_READY_FD"))
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML configuration `FILE`")
	f.StringVar(&flagCfg.Mode, "mode", flagCfg.Mode, "replica or primary")
	f.StringVar(&flagCfg.Site, "site", "", "this site's `NAME` (for logs and ZooKeeper)")
	f.DurationVar(&flagCfg.Poll, "poll", flagCfg.Poll, "interval of full verification passes")
	f.StringArrayVar(&flagCfg.Hidden, "hidden", nil, "extra `PATTERN` of names never shown (repeatable)")
	f.StringArrayVar(&flagCfg.Maps, "map", nil, "`URI_PREFIX=LOCAL_DIR` for the absolute paths Flink stored (repeatable)")
	f.StringArrayVar(&flagCfg.Roots, "root", nil, "extra local `DIR` referenced files may lie in (repeatable)")
	f.BoolVar(&flagCfg.ReadUnwritten, "seal-read-unwritten", false, "when sealing, read and hash files not written through this mount")
	f.BoolVar(&flagCfg.AllowOther, "allow-other", flagCfg.AllowOther, "let other users (flink) use the mount")
	f.BoolVar(&flagCfg.Passthrough, "passthrough", flagCfg.Passthrough, "let the kernel read files directly (FUSE passthrough)")
	f.StringVar(&flagCfg.LogFormat, "log-format", flagCfg.LogFormat, "text or json")
	f.StringVar(&flagCfg.LogLevel, "log-level", flagCfg.LogLevel, "debug, info, warn or error")
	f.BoolVar(&flagCfg.Debug, "debug", false, "log every FUSE request")
	f.StringVar(&flagCfg.ZK, "zk", "", "ZooKeeper `HOST:PORT[,...]` (optional: promotion, fencing, markers)")
	f.StringVar(&flagCfg.ClusterID, "cluster-id", "", "Flink's high-availability.cluster-id")
	f.StringVar(&flagCfg.PathRoot, "path-root", flagCfg.PathRoot, "Flink's high-availability.zookeeper.path.root")
	f.BoolVar(&flagCfg.Lease, "lease", false, "turn read-only when the ZooKeeper session is lost")
	return cmd
}

// applyChangedFlags copies the flags given on the command line over cfg.
func applyChangedFlags(fs *pflag.FlagSet, cfg, flags *mountConfig) {
	set := map[string]func(){
		"mode": func() { cfg.Mode = flags.Mode }, "site": func() { cfg.Site = flags.Site },
		"poll": func() { cfg.Poll = flags.Poll }, "hidden": func() { cfg.Hidden = flags.Hidden },
		"map": func() { cfg.Maps = flags.Maps }, "root": func() { cfg.Roots = flags.Roots },
		"seal-read-unwritten": func() { cfg.ReadUnwritten = flags.ReadUnwritten },
		"allow-other":         func() { cfg.AllowOther = flags.AllowOther },
		"passthrough":         func() { cfg.Passthrough = flags.Passthrough },
		"log-format":          func() { cfg.LogFormat = flags.LogFormat },
		"log-level":           func() { cfg.LogLevel = flags.LogLevel },
		"debug":               func() { cfg.Debug = flags.Debug },
		"zk":                  func() { cfg.ZK = flags.ZK }, "cluster-id": func() { cfg.ClusterID = flags.ClusterID },
		"path-root": func() { cfg.PathRoot = flags.PathRoot }, "lease": func() { cfg.Lease = flags.Lease },
	}
	fs.Visit(func(f *pflag.Flag) {
		if apply, ok := set[f.Name]; ok {
			apply()
		}
	})
}

// runMount mounts, serves until a signal, and unmounts.
func runMount(ctx context.Context, cfg *mountConfig, logw io.Writer, readyFD string) error {
	log := cfg.logger(logw).With("component", "mount")
	roots := append([]string{cfg.Backing}, cfg.Roots...)
	var paths pathFlags
	paths.maps = cfg.Maps
	res, err := paths.resolver(roots...)
	if err != nil {
		return fail("%v", err)
	}
	vcfg := manifest.DefaultConfig()
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
	recorder, err := manifest.NewRecorder(manifest.SealerConfig{
		Backing: cfg.Backing, Resolver: res, ReadUnwritten: cfg.ReadUnwritten,
		OnSealed: func(chk, path string, err error) {
			if err != nil {
				log.Error("sealing failed", "checkpoint", chk, "err", err)
				return
			}
			log.Info("sealed", "checkpoint", chk, "manifest", path)
		},
	})
	if err != nil {
		return fail("%v", err)
	}

	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	// Verify once before mounting, so the mount starts with what is
	// complete rather than with nothing.
	catalog.Refresh(ctx)

	mode, _ := fusefs.ParseMode(cfg.Mode)
	fcfg := fusefs.DefaultConfig()
	fcfg.Backing, fcfg.MountPoint, fcfg.Mode = cfg.Backing, cfg.MountPoint, mode
	fcfg.Visibility, fcfg.Sealer, fcfg.Logger = catalog, recorder, cfg.logger(logw)
	fcfg.AllowOther, fcfg.Passthrough, fcfg.Debug = cfg.AllowOther, cfg.Passthrough, cfg.Debug
	srv, err := fusefs.Mount(fcfg)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	log.Info("mounted", "backing", cfg.Backing, "mountpoint", cfg.MountPoint, "mode", mode.String(), "passthrough", srv.Passthrough())
	catalog.OnChange(func(ch manifest.Change) {
		if ch.Visible {
			log.Info("checkpoint complete", "job", ch.Dir, "checkpoint", ch.Name)
		} else {
			log.Warn("checkpoint no longer complete", "job", ch.Dir, "checkpoint", ch.Name)
		}
		if err := srv.Invalidate(ch.Dir, ch.Name); err != nil {
			log.Warn("invalidating kernel cache", "job", ch.Dir, "checkpoint", ch.Name, "err", err)
		}
	})

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
			runZooKeeper(ctx, cfg, verifier, catalog, srv, log.With("component", "zkbridge"))
		}
	}()

	signalReady(readyFD, log)
	unmounted := make(chan struct{})
	go func() { srv.Wait(); close(unmounted) }()
	select {
	case <-ctx.Done():
	case <-unmounted:
		cancel()
		<-done
		stopSealing()
		<-sealDone
		return &exitError{code: 1, err: errors.New("unmounted from outside")}
	}
	<-done
	<-zkDone
	err = unmount(srv, cfg.MountPoint, log)
	stopSealing()
	<-sealDone
	return err
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
