package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/idle"
	"github.com/ckptfs/ckptfs/internal/logsink"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
)

// ErrConfig marks an error of Run that comes from its configuration
// (Validate, or the metrics address cannot be listened on): nothing was
// mounted.
var ErrConfig = errors.New("daemon configuration")

// ErrUnmounted is Run's error when the mount was unmounted from outside.
var ErrUnmounted = errors.New("unmounted from outside")

// ErrForcedUnmount is Run's error when a clean unmount failed (open files)
// and the mount was detached lazily.
var ErrForcedUnmount = errors.New("unmount was forced")

type configError struct{ err error }

func (e *configError) Error() string      { return e.err.Error() }
func (e *configError) Unwrap() []error    { return []error{ErrConfig, e.err} }
func configErr(err error) error           { return &configError{err: err} }
func configErrf(f string, a ...any) error { return configErr(fmt.Errorf(f, a...)) }

// Run mounts cfg.Backing at cfg.MountPoint and serves it until ctx ends
// or the mount is unmounted from outside. Every part runs in one group:
// when one fails, or ctx ends, the others are stopped, the mount is
// unmounted, the recorder seals what the mount still reported, and Run
// returns the first error once all have ended.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return configErr(err)
	}
	p, err := cfg.build()
	if err != nil {
		return configErr(err)
	}
	started := time.Now()
	log := cfg.Logger.With("site", cfg.Site, "component", "mount")

	// Listen before mounting, so that a taken port fails the start.
	var metricsLn net.Listener
	if cfg.MetricsAddr != "" {
		if metricsLn, err = listenMetrics(cfg.MetricsAddr, cfg.MetricsTLS); err != nil {
			return configErr(&FieldError{Field: "MetricsAddr", Err: err})
		}
		defer metricsLn.Close()
	}
	pin, err := pinBacking(cfg.Backing, cfg.Catalog.BackingTimeout, log)
	if err != nil {
		return err
	}

	// A checkpoint hidden because its contents differ from what the
	// primary sealed says so, once per set of mismatches (the catalog's
	// Change), from the first pass on; verify --checksums names them all.
	p.catalog.OnChange(func(ch manifest.Change) {
		if ch.Mismatch != nil {
			log.Warn("checkpoint hidden: its contents differ from the checksums the primary sealed", append(checkpointAttrs(filepath.Join(ch.Dir, ch.Name)),
				"file", ch.Mismatch.Path, "sealed", ch.Mismatch.ExpectedChecksum, "found", ch.Mismatch.FoundChecksum, "mismatches", ch.Mismatches)...)
		}
	})
	// The mount is served at once; the catalog's first pass (Run) judges
	// what it shows (afterFirstPass).
	lp := newLoop(&cfg, p, pin)
	if cfg.Takeover == TakeoverAuto {
		p.mount.Gate = lp
	}
	if cfg.Replication == ReplicationSync || cfg.Replication == ReplicationStrict {
		uri := func(rel string) string { return "file:" + filepath.Join(cfg.MountPoint, rel) }
		lp.gate = newSyncGate(cfg.Replication, cfg.SyncTimeout, loopSyncer{lp}, uri, log.With("component", "sync"))
		p.mount.CloseGate = lp.gate
	}
	srv, err := fusefs.Mount(p.mount)
	if err != nil {
		return err
	}
	lp.srv.Store(srv)
	if hook := testHookMounted.Load(); hook != nil {
		(*hook)(cfg.MountPoint, srv)
	}
	log.Info("mounted", "backing", cfg.Backing, "mountpoint", cfg.MountPoint, "mode", srv.Mode().String(), "passthrough", srv.Passthrough())
	go func() {
		select {
		case <-p.catalog.Judged():
			complete, all := 0, 0
			for _, j := range p.catalog.Jobs() {
				for _, c := range j.Checkpoints {
					all++
					if c.Complete {
						complete++
					}
				}
			}
			log.Info("first verification pass done: the mount shows what it judged", "waited", time.Since(started).Round(time.Millisecond),
				"jobs", len(p.catalog.Jobs()), "checkpoints", all, "complete", complete)
		case <-ctx.Done():
		}
	}()
	p.catalog.OnChange(func(ch manifest.Change) {
		attrs := checkpointAttrs(filepath.Join(ch.Dir, ch.Name))
		// Both are routine: Flink deletes every subsumed checkpoint, and
		// the replication deletes it on the replica. What is not (ZooKeeper
		// pointing at what is not complete) is health's to tell. The
		// first pass's are the mount's start, told in one line above.
		switch {
		case !judged(p.catalog):
		case ch.Visible:
			log.Info("checkpoint complete", attrs...)
		case ch.Mismatch == nil: // with one, logged above
			log.Info("checkpoint no longer complete", attrs...)
		}
		// Off the catalog's pass: the kernel takes the directory's lock
		// to invalidate, and a lookup hung on the NAS in that directory
		// holds it. The entry expires within EntryTimeout meanwhile.
		go func() {
			if err := srv.Invalidate(ch.Dir, ch.Name); err != nil {
				log.Warn("invalidating kernel cache", append(attrs, "err", err)...)
			}
		}()
	})
	unmounted := make(chan struct{})
	go func() { srv.Wait(); close(unmounted) }()
	// The recorder outlives the mount: unmounting hands it what the mount
	// still had to report, and it seals what that commits.
	sealCtx, stopSealing := context.WithCancel(context.WithoutCancel(ctx))
	sealed := make(chan struct{})
	sealing := make(chan *idle.Thread, 1)
	go func() {
		defer close(sealed)
		th, err := idle.Lower()
		if err != nil {
			log.Debug("sealing at normal priority", "err", err)
		}
		defer th.Release()
		sealing <- th
		p.recorder.Run(sealCtx)
	}()

	g, gctx := errgroup.WithContext(ctx)
	var zkm *metrics.ZooKeeper
	if cfg.ZooKeeper != nil {
		zkm = &metrics.ZooKeeper{Failover: lp.snapshot}
		if metricsLn != nil {
			zkm.Lag = metrics.NewLagTracker(zkm.Status, cfg.LagInterval)
		}
	}
	lp.zkm, lp.group = zkm, g
	g.Go(func() error { p.catalog.Run(gctx); return nil })
	// These two call the backing file system directly: on a hung NAS
	// they are left behind when the daemon stops.
	g.Go(func() error { detached(gctx, func() { watchBacking(gctx, cfg.Backing, p.catalog, log) }); return nil })
	g.Go(func() error { detached(gctx, func() { pin.run(gctx, cfg.FollowInterval, srv, log) }); return nil })
	probe := &backingProbe{backing: cfg.Backing, timeout: cfg.Catalog.BackingTimeout}
	g.Go(func() error { probe.run(gctx, cfg.Catalog.Poll, srv.Mode); return nil })
	g.Go(func() error { return lp.run(gctx) })
	if metricsLn != nil {
		src := metrics.Sources{Site: cfg.Site, Version: cfg.Version, Catalog: p.catalog, Poll: cfg.Catalog.Poll, Mount: srv, ZooKeeper: zkm, Backing: pin.problem,
			Probe: probe.problem, ProbeDuration: probe.Duration}
		hs := metrics.NewServer(metrics.Handler(metrics.NewRegistry(src), src), slog.NewLogLogger(log.Handler(), slog.LevelWarn))
		g.Go(func() error {
			go func() { <-gctx.Done(); hs.Close() }()
			if err := hs.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics: %w", err)
			}
			return nil
		})
		log.Info("serving metrics", "addr", metricsLn.Addr().String())
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-unmounted:
				return ErrUnmounted
			case <-cfg.Hangup:
				if cfg.Log == nil {
					log.Warn("SIGHUP ignored: the mount reloads nothing; restart it to change its settings")
				} else if err := cfg.Log.Reopen(); err != nil {
					log.Error("SIGHUP: reopening the log", "err", err)
				} else {
					log.Info("SIGHUP: log reopened; nothing else is reloaded (restart to change settings)", "log", cfg.Log.Where())
				}
			}
		}
	})
	ready(cfg.Notify, cfg.Log, log)

	err = g.Wait()
	if !errors.Is(err, ErrUnmounted) {
		if uerr := unmount(srv, cfg.MountPoint, log); uerr != nil && err == nil {
			err = uerr
		}
	}
	if !waitAtMost(unmounted, stopGrace) {
		// Files held open after the detach, or requests waiting on a hung
		// NAS: the kernel ends the connection when this process exits.
		log.Warn("the mount's connection still serves (files held open after the detach, or requests waiting on the backing file system); stopping without them: they fail with ENOTCONN", "waited", stopGrace)
	}
	// What is left to seal now has a caller waiting for it.
	(<-sealing).Restore()
	stopSealing()
	// Sealing may have much left; wait as long as it gets on.
	for last := p.recorder.Attempts(); !waitAtMost(sealed, sealGrace); {
		if now := p.recorder.Attempts(); now != last {
			last = now
			continue
		}
		log.Error("sealing waits on the backing file system; stopping without it: the checkpoints it had left stay unsealed", "waited", sealGrace)
		break
	}
	return err
}

// sealGrace is how long a stopping daemon waits for a seal that does not
// end (a hung NAS) before it stops without it.
const sealGrace = 30 * time.Second

// stopGrace bounds each wait of a stopping daemon for work that waits on
// the backing file system (a hung NAS): the rest ends without it.
const stopGrace = 2 * time.Second

// waitAtMost waits until done is closed or d has passed, and says which.
func waitAtMost(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// detached runs fn, which ends when ctx does unless it waits on the
// backing file system, and returns when fn does or when ctx ends.
func detached(ctx context.Context, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
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
		if errors.Is(err, fusefs.ErrRequestsStuck) {
			return err // unmounted; Run says what waits
		}
		time.Sleep(300 * time.Millisecond)
	}
	log.Warn("clean unmount failed (files open on the mount); detaching it", "err", err)
	if derr := syscall.Unmount(mountPoint, syscall.MNT_DETACH); derr != nil {
		return fmt.Errorf("%w: unmount %s: %v; detach: %v", ErrForcedUnmount, mountPoint, err, derr)
	}
	return fmt.Errorf("%w: %s: %v", ErrForcedUnmount, mountPoint, err)
}

// afterFirstPass is the mount's Visibility and DeleteGuard: it answers
// once the catalog's first pass has ended, so that a replica mount served
// before that pass (a million files take a minute or more on a NAS)
// neither hides what is complete nor lets a promoted mount's deletion
// guard pass what is protected. Requests wait for the pass, as they
// waited for the mount before; then it answers from memory only.
type afterFirstPass struct{ catalog *manifest.Catalog }

func (a afterFirstPass) Visible(dir, name string) error {
	<-a.catalog.Judged()
	return a.catalog.Visible(dir, name)
}

func (a afterFirstPass) ProtectsDeletion(rel string) error {
	<-a.catalog.Judged()
	return a.catalog.ProtectsDeletion(rel)
}

func judged(c *manifest.Catalog) bool {
	select {
	case <-c.Judged():
		return true
	default:
		return false
	}
}

// ready tells systemd (Type=notify) and the mount helper that the mount
// serves, then detaches the log from the standard streams if asked.
func ready(n Notify, sink *logsink.Sink, log *slog.Logger) {
	if n.Socket != "" {
		addr := &net.UnixAddr{Name: n.Socket, Net: "unixgram"}
		if strings.HasPrefix(n.Socket, "@") {
			addr.Name = "\x00" + n.Socket[1:]
		}
		if conn, err := net.DialUnix("unixgram", nil, addr); err != nil {
			log.Warn("notifying systemd", "err", err)
		} else {
			conn.Write([]byte("READY=1"))
			conn.Close()
		}
	}
	if n.Detach {
		// A warning of where the log goes reaches the caller's stream.
		where, err := sink.Detach("ckptfs", log.Warn)
		if err != nil {
			log.Warn("detaching from the standard streams", "err", err)
		} else {
			log.Info("detached from the standard streams", "log", where)
		}
	}
	if n.Ready != nil {
		n.Ready.Write([]byte("READY\n"))
		n.Ready.Close()
	}
}
