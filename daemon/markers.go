package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// catalogMarkers publishes what the mount's catalog found: for every job
// directory, its newest complete checkpoint.
type catalogMarkers struct {
	catalog    *manifest.Catalog
	mountPoint string
}

var _ zkbridge.MarkerSource = catalogMarkers{}

func (c catalogMarkers) Markers(context.Context) ([]zkbridge.Marker, error) {
	var out []zkbridge.Marker
	for _, job := range c.catalog.Jobs() {
		id := filepath.Base(job.Dir)
		v := job.NewestComplete()
		if v == nil {
			out = append(out, zkbridge.NoMarker(id))
			continue
		}
		out = append(out, zkbridge.Marker{
			JobID: id, CheckpointID: v.CheckpointID, Level: v.Level,
			// Flink reads the checkpoint through the mount.
			Path:  "file:" + filepath.Join(c.mountPoint, job.Dir, "chk-"+strconv.FormatInt(v.CheckpointID, 10)),
			Files: v.Files, Bytes: v.Bytes, VerifiedAt: time.Now().UTC(),
		})
	}
	return out, nil
}

func (c catalogMarkers) Level(_ context.Context, job string, id int64) (manifest.Level, error) {
	for _, j := range c.catalog.Jobs() {
		if filepath.Base(j.Dir) != job {
			continue
		}
		for _, v := range j.Checkpoints {
			if v.CheckpointID == id && v.Complete {
				return v.Level, nil
			}
		}
	}
	return manifest.LevelNone, nil
}

// runZooKeeper publishes this site's markers and follows active-site:
// a replica mount of the active site becomes primary (promotion); a
// primary mount of another site becomes read-only (fencing), as does a
// primary whose ZooKeeper session is lost in lease mode. It tells zkm
// what it connected and read, and runs zkm's lag tracker if it has one.
// It returns when ctx ends. zcfg is cfg's bridgeConfig, logging to the
// daemon's logger without attributes (zkbridge adds the site).
func runZooKeeper(ctx context.Context, cfg *mountConfig, zcfg zkbridge.Config, verifier *manifest.Verifier, catalog *manifest.Catalog, srv *fusefs.Server, zkm *metrics.ZooKeeper, base *slog.Logger) {
	log := base.With("site", cfg.Site, "component", "mount")
	var bridge *zkbridge.Bridge
	var err error
	for bridge == nil {
		if bridge, err = zkbridge.New(ctx, zcfg, zkbridge.NewSiteVerifier(verifier)); err != nil {
			log.Warn("connecting to ZooKeeper", "err", err)
			if cfg.Lease {
				fence(srv, log, "no ZooKeeper session (lease)")
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	defer bridge.Close()
	zkm.SetBridge(bridge)
	if cfg.Site != "" {
		if pub, err := bridge.NewPublisher(catalogMarkers{catalog: catalog, mountPoint: cfg.MountPoint}); err != nil {
			log.Error("marker publisher", "err", err)
		} else {
			zkm.SetPublisher(pub)
			catalog.OnChange(func(manifest.Change) { pub.Trigger() })
			go pub.Run(ctx)
		}
	}
	if zkm.Lag != nil {
		catalog.OnChange(func(manifest.Change) { zkm.Lag.Trigger() })
		go zkm.Lag.Run(ctx)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		followActiveSite(ctx, bridge, cfg, srv, zkm, log)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// followActiveSite makes one level-triggered pass of promotion and fencing.
func followActiveSite(ctx context.Context, bridge *zkbridge.Bridge, cfg *mountConfig, srv *fusefs.Server, zkm *metrics.ZooKeeper, log *slog.Logger) {
	active, epoch, err := bridge.ActiveSite(ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		log.Warn("reading active-site", "err", err)
		if cfg.Lease {
			fence(srv, log, "ZooKeeper session lost (lease)")
		}
		return
	}
	zkm.SetActiveSite(active, epoch)
	mode := srv.Mode()
	switch {
	case active == "":
		// No site ever took over: keep the configured mode.
	case active == cfg.Site && mode != fusefs.ModePrimary:
		log.Info("this site is active: promoting the mount to primary", "epoch", epoch)
		if err := srv.SetMode(fusefs.ModePrimary); err != nil {
			log.Error("promotion", "err", err)
		}
	case active != cfg.Site && mode == fusefs.ModePrimary:
		fence(srv, log, "site "+active+" is active (epoch "+strconv.FormatInt(epoch, 10)+")")
	}
}

func fence(srv *fusefs.Server, log *slog.Logger, why string) {
	if srv.Mode() != fusefs.ModePrimary {
		return
	}
	log.Warn("fencing the mount: read-only", "reason", why)
	if err := srv.SetMode(fusefs.ModeFenced); err != nil {
		log.Error("fencing", "err", err)
	}
}
