package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// follower is the mode follower: on every pass it observes the mount
// (Observation), asks Decide, and applies the decision. With ZooKeeper it
// also connects the bridge and starts the marker publisher and the lag
// tracker in the daemon's group.
type follower struct {
	cfg      *Config
	verifier *manifest.Verifier
	catalog  *manifest.Catalog
	srv      *fusefs.Server
	zkm      *metrics.ZooKeeper
	pin      *backingPin
	log      *slog.Logger
	group    *errgroup.Group
	fo       *failover
	kicks    chan struct{}

	bridge atomic.Pointer[zkbridge.Bridge]
	// writer is the bridge's writer claim (nil until connected).
	writer atomic.Pointer[zkbridge.WriterClaim]
	// lastActive is active-site as last read ("" before).
	lastActive string
}

// kick asks for a pass now; it never blocks.
func (f *follower) kick() {
	select {
	case f.kicks <- struct{}{}:
	default:
	}
}

func (f *follower) run(ctx context.Context) error {
	if f.cfg.ZooKeeper != nil {
		f.group.Go(func() error { f.connect(ctx); return nil })
	}
	tick := time.NewTicker(f.interval())
	defer tick.Stop()
	for {
		f.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-f.kicks:
		}
	}
}

// interval is the period of the passes. With a liveness lease a pass
// comes at least every D/16, and its read of active-site is cut short
// after one period, so the mount is fenced at most D/2 + D/8 after the
// start of the last renewal that counted (design §5.10).
func (f *follower) interval() time.Duration {
	if f.cfg.LeaseDuration > 0 {
		return min(f.cfg.FollowInterval, f.cfg.LeaseDuration/16)
	}
	return f.cfg.FollowInterval
}

// pass makes one level-triggered pass.
func (f *follower) pass(ctx context.Context) {
	o := Observation{Site: f.cfg.Site, Mode: f.srv.Mode(), Lease: f.cfg.Lease, BackingReplaced: f.pin.replaced()}
	if f.cfg.ZooKeeper != nil {
		o.Session = SessionLost
		// A lease ends with the connection, or a read of active-site
		// that takes longer than a pass, not after the calls' retries:
		// the client notices silent servers within 2/3 of its session
		// timeout, before they expire its session and a takeover
		// elsewhere can get past its wait (Config.Validate). A liveness
		// lease lapses half a lease after the last renewal, and the pass
		// must get to judging it: a read stuck in its retries would let
		// another site take over beside a writable primary.
		leased := f.cfg.Lease || f.cfg.LeaseDuration > 0
		b := f.bridge.Load()
		if b != nil && leased && b.Session().State != zkbridge.SessionConnected {
			b = nil
		}
		if b != nil {
			rctx := ctx
			if leased {
				// A read that began just before the connection went
				// would retry for the calls' whole RetryTimeout.
				var cancel context.CancelFunc
				rctx, cancel = context.WithTimeout(ctx, f.interval())
				defer cancel()
			}
			active, epoch, err := b.ActiveSite(rctx)
			switch {
			case errors.Is(err, context.Canceled):
				return
			case err != nil:
				f.log.Warn("reading active-site", "err", err)
			default:
				o.Session, o.ActiveSite, o.Epoch = SessionUp, active, epoch
				f.zkm.SetActiveSite(active, epoch)
				f.lastActive = active
				if active == f.cfg.Site && f.fo.leaseLapsed(active) {
					// Renew before judging: a site just made active
					// has not renewed yet.
					f.fo.renew(ctx, epoch)
				}
			}
		}
		o.LeaseLapsed = f.fo.leaseLapsed(f.lastActive)
	}
	d := Decide(o)
	w := f.writer.Load()
	if d.Mode == fusefs.ModePrimary && o.Session == SessionUp && w != nil {
		// A primary holds this site's writer node, so that no takeover
		// elsewhere activates beside it (design §5.13). A mount primary
		// by configuration claims it on the first pass with a session.
		if err := w.Claim(ctx); err != nil {
			if d.Mode != o.Mode {
				f.log.Warn("not promoting the mount: no writer node", "reason", d.Reason, "err", err)
				return
			}
			f.log.Warn("claiming the writer node of a primary mount", "err", err)
		}
	}
	if d.Mode != o.Mode {
		if d.Mode == fusefs.ModePrimary {
			f.log.Info("promoting the mount to primary", "reason", d.Reason)
			f.pin.repin()
		} else {
			f.log.Warn("fencing the mount: read-only", "reason", d.Reason)
		}
		if err := f.srv.SetMode(d.Mode); err != nil {
			f.log.Error("changing the mount's mode", "to", d.Mode.String(), "err", err)
			return
		}
	}
	if d.Mode != fusefs.ModePrimary && w != nil && w.Held() {
		// The fence is complete (SetMode returned without error).
		if err := w.Release(ctx); err != nil {
			f.log.Warn("deleting the writer node", "err", err)
		}
	}
}

// connect connects the bridge, retrying every second, then publishes this
// site's markers and runs the sweeper and the lag tracker until ctx ends.
func (f *follower) connect(ctx context.Context) {
	var b *zkbridge.Bridge
	for b == nil {
		var err error
		if b, err = zkbridge.New(ctx, *f.cfg.ZooKeeper, zkbridge.NewSiteVerifier(f.verifier, f.cfg.Catalog.BackingTimeout)); err != nil {
			f.log.Warn("connecting to ZooKeeper", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	f.zkm.SetBridge(b)
	f.fo.start(ctx, b)
	if f.cfg.Site != "" {
		if w, err := b.NewWriterClaim(); err == nil {
			f.writer.Store(w)
		}
	}
	f.bridge.Store(b)
	defer func() {
		f.bridge.Store(nil)
		if w := f.writer.Swap(nil); w != nil && w.Held() && f.srv.Mode() == fusefs.ModePrimary {
			// Closing the session deletes the writer node, and the
			// unmount comes after: a takeover elsewhere must not find
			// this mount writable meanwhile (design §5.13).
			f.log.Info("stopping: fencing the mount before its writer node goes")
			if err := f.srv.SetMode(fusefs.ModeFenced); err != nil {
				f.log.Error("changing the mount's mode", "to", fusefs.ModeFenced.String(), "err", err)
			}
		}
		b.Close()
	}()
	g, gctx := errgroup.WithContext(ctx)
	if f.cfg.Site != "" {
		if pub, err := b.NewPublisher(catalogMarkers{catalog: f.catalog, mountPoint: f.cfg.MountPoint}); err != nil {
			f.log.Error("marker publisher", "err", err)
		} else {
			f.zkm.SetPublisher(pub)
			f.catalog.OnChange(func(manifest.Change) { pub.Trigger() })
			g.Go(func() error { pub.Run(gctx); return nil })
		}
	}
	if f.cfg.Site != "" {
		// On the active site, retract pointers a returning JobManager of
		// another site adds after the takeover (zkbridge.Sweeper). Like
		// the lag, it waits for the NAS at most the backing timeout
		// (zkbridge.NewSiteVerifier).
		if sw, err := b.NewSweeper(f.cfg.ZooKeeper.FlinkSessionTimeout); err != nil {
			f.log.Error("stray pointer sweeper", "err", err)
		} else {
			f.zkm.SetSweeper(sw)
			g.Go(func() error { sw.Run(gctx, f.cfg.FollowInterval); return nil })
		}
	}
	if f.cfg.LeaseDuration > 0 || f.cfg.Takeover == TakeoverAuto || len(f.cfg.SiteJobManagers) > 0 {
		g.Go(func() error { f.fo.run(gctx, b); return nil })
	}
	if f.zkm.Lag != nil {
		f.catalog.OnChange(func(manifest.Change) { f.zkm.Lag.Trigger() })
		g.Go(func() error { f.zkm.Lag.Run(gctx); return nil })
	}
	<-ctx.Done()
	g.Wait()
}
