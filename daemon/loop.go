package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// loop is the daemon's one level-triggered loop (design §5.14, after
// consul's anti-entropy agent/ae): every pass reads ZooKeeper once into
// one Observation, applies the pure rules (Decide, DecideRenew,
// DecideActivate, DecideTakeover) and hands each part the values it
// needs. It is also the mount's Gate (DecideHold). With ZooKeeper it
// connects the bridge and starts the marker publisher, the sweeper and
// the lag tracker in the daemon's group.
type loop struct {
	// Settings, from Config.
	site       string
	configured fusefs.Mode
	takeover   TakeoverMode
	anyway     bool
	jms        []string
	hold       time.Duration
	rule       zkbridge.LeaseRule // zero without ZooKeeper
	interval   time.Duration
	// followEvery is the configured FollowInterval: the sweeper's, whose
	// grace is Flink's session timeout, not the lease's pace.
	followEvery time.Duration
	zkCfg       *zkbridge.Config
	mountPoint  string
	// backingTimeout bounds the sweeper's and the lag's waits for the NAS.
	backingTimeout time.Duration

	// Parts. srv is set once mounted (the gate may be asked before);
	// zkm and group before run.
	srv      atomic.Pointer[fusefs.Server]
	verifier *manifest.Verifier
	catalog  *manifest.Catalog
	pin      *backingPin
	wd       Watchdog
	zkm      *metrics.ZooKeeper
	log      *slog.Logger
	group    *errgroup.Group

	bridge atomic.Pointer[zkbridge.Bridge]
	holder atomic.Pointer[zkbridge.LeaseHolder]
	// gate holds HA files' closes in sync and strict replication (nil:
	// async); the loop activates it with the mount and fences it first.
	gate  *syncGate
	kicks chan struct{}

	// Only the loop's goroutine uses these.
	observer  *zkbridge.LeaseObserver
	armedFor  time.Time // the renewal the watchdog is armed for (zero: disarmed)
	lastCheck time.Time // the last look for this site's leading JobManagers
	// armed mirrors armedFor for metrics.
	armed atomic.Bool
	// held: the mount had a write deadline once.
	held bool
	// checking: a look for this site's leading JobManagers runs.
	checking atomic.Bool

	mu sync.Mutex
	// All GUARDED_BY(mu): what the gate, metrics and health read.
	lastObs Observation
	busy    bool
	// retryAt: no activation or takeover starts before it; failures in
	// a row since the last one that ended well set it (retryAfter).
	retryAt     time.Time
	failures    int
	renewals    uint64
	renewFails  uint64
	runs        map[string]uint64
	refused     string
	rollbacks   map[string]int64 // the last activated automatic takeover's, by job
	steps       []metrics.Step
	standby     []string
	lastStandby string
	overrun     time.Duration
	previous    watchdog.Ended
}

// Watchdog ends the daemon when its mount could still admit a change
// past the lease (design §5.14): internal/watchdog's Kernel in the
// mount command, a watchdog.Recorder for a daemon run inside a test
// binary. Previous says whether the daemon before this one, on the same
// mount point, ended with its watchdog armed.
type Watchdog interface {
	watchdog.Watchdog
	Previous() (watchdog.Ended, error)
}

const (
	// standbyCheckEvery is how often a daemon of a site that is not
	// active looks for a leading JobManager of its own site.
	standbyCheckEvery = 5 * time.Second
	maxSteps          = 32
)

func newLoop(cfg *Config, p *parts, pin *backingPin) *loop {
	l := &loop{
		site: cfg.Site, configured: cfg.Mount.Mode, takeover: cfg.Takeover, anyway: cfg.TakeoverActivateAnyway,
		jms: cfg.SiteJobManagers, hold: cfg.HoldTimeout, interval: cfg.FollowInterval, followEvery: cfg.FollowInterval, zkCfg: cfg.ZooKeeper, mountPoint: cfg.MountPoint,
		backingTimeout: cfg.Catalog.BackingTimeout,
		verifier:       p.verifier, catalog: p.catalog, pin: pin, wd: cfg.Watchdog,
		log:   cfg.Logger.With("site", cfg.Site, "component", "loop"),
		kicks: make(chan struct{}, 1), runs: map[string]uint64{},
	}
	if z := cfg.ZooKeeper; z != nil {
		l.rule = zkbridge.LeaseRule{Duration: z.LeaseDuration}
		// A pass every D/16 at most, and each bounded by it: the mount is
		// fenced within two passes of its write deadline, well before the
		// watchdog's D/4 after it.
		l.interval = min(cfg.FollowInterval, l.rule.Duration/16)
		l.observer, _ = zkbridge.NewLeaseObserver(l.rule)
	}
	return l
}

// kick asks for a pass now; it never blocks.
func (l *loop) kick() {
	select {
	case l.kicks <- struct{}{}:
	default:
	}
}

// run makes a pass every interval, at the instant the observed lease
// would expire if that comes first, and when kicked, until ctx ends; then
// it fences a primary and disarms the watchdog.
func (l *loop) run(ctx context.Context) error {
	if z := l.zkCfg; z != nil {
		if l.takeover == TakeoverAuto && z.LeaseDuration > z.FlinkSessionTimeout {
			l.log.Warn("lease-duration is longer than Flink's session timeout: an automatic takeover starts that much later than Flink's own failover (design §5.11)",
				"configured", z.LeaseDuration.String(), "timeout", z.FlinkSessionTimeout.String())
		}
		if prev, err := l.wd.Previous(); err != nil {
			l.log.Warn("reading the watchdog's record", "err", err)
		} else if prev.Fired {
			l.log.Error("the previous daemon of this mount ended with its watchdog armed: it did not run past its write deadline (stopped, frozen or starved) and was killed, or died otherwise; nothing reached the backing directory through the mount after that deadline",
				"pid", prev.PID, "late", prev.Ago.Round(time.Second).String())
			l.mu.Lock()
			l.previous = prev
			l.mu.Unlock()
		}
		l.group.Go(func() error { l.connect(ctx); return nil })
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stop()
			return nil
		case <-t.C:
		case <-l.kicks:
		}
		next := l.pass(ctx)
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(next)
	}
}

// stop fences a primary before the mount goes, and disarms the watchdog
// once nothing admitted is left.
func (l *loop) stop() {
	if l.gate != nil {
		l.gate.fence()
	}
	if l.srv.Load().Mode() == fusefs.ModePrimary && l.zkCfg != nil {
		l.log.Info("stopping: fencing the mount")
		if err := l.srv.Load().SetMode(fusefs.ModeFenced); err != nil {
			l.log.Error("changing the mount's mode", "to", fusefs.ModeFenced.String(), "err", err)
		}
	}
	l.srv.Load().SetWriteDeadline(time.Time{})
	if !l.armedFor.IsZero() && l.srv.Load().InFlight() == 0 {
		if err := l.wd.Disarm(); err != nil {
			l.log.Warn("disarming the watchdog", "err", err)
		}
	}
}

// testHookMounted, when set by a test, gets every mount the daemons of
// the test binary make.
var testHookMounted atomic.Pointer[func(mountPoint string, srv *fusefs.Server)]

// testHookPass, when set by a test, runs at the start of every pass: a
// test stops the loop there, as a stopped or starved daemon would.
var testHookPass atomic.Pointer[func()]

// pass makes one pass and returns when the next should come.
func (l *loop) pass(ctx context.Context) time.Duration {
	if hook := testHookPass.Load(); hook != nil {
		(*hook)()
	}
	pctx, cancel := context.WithTimeout(ctx, l.interval)
	defer cancel()
	o := l.observe(pctx)
	if ctx.Err() != nil {
		return l.interval
	}
	if h := l.holder.Load(); h != nil {
		switch {
		case DecideRenew(o):
			err := h.Renew(pctx, o.State)
			l.mu.Lock()
			if err != nil {
				l.renewFails++
			} else {
				l.renewals++
			}
			l.mu.Unlock()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				l.log.Warn("renewing the lease", "err", err)
			}
		case o.Session == SessionUp && !o.State.Holds(l.site):
			// The read shows that this site does not hold the lease: its
			// claim ends now, not at the deadline.
			h.End()
		}
		o.Deadline = h.Deadline()
	}
	l.apply(o)
	l.act(ctx, o)
	next := l.interval
	if v := o.Lease; v.State == zkbridge.LeaseFresh && v.ExpiresIn > 0 && l.takeover == TakeoverAuto {
		next = min(next, time.Duration(v.ExpiresIn))
	}
	return next
}

// observe builds the pass's observation: the mount, the backing, and
// with a session one read of the epoch, active-site and the lease.
func (l *loop) observe(ctx context.Context) Observation {
	o := Observation{Site: l.site, Configured: l.configured, Mode: l.srv.Load().Mode(), Now: time.Now(), BackingReplaced: l.pin.replaced()}
	l.mu.Lock()
	o.Busy = l.busy
	l.mu.Unlock()
	if l.zkCfg == nil {
		return o
	}
	o.Session = SessionLost
	if h := l.holder.Load(); h != nil {
		o.Deadline, o.RenewalDue = h.Deadline(), h.Due(o.Now)
	}
	b := l.bridge.Load()
	if b == nil || b.Session().State != zkbridge.SessionConnected {
		return o
	}
	st, err := b.ReadState(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			l.log.Warn("reading active-site, the epoch and the lease", "err", err)
		}
		return o
	}
	o.Session, o.State = SessionUp, st
	l.zkm.SetActiveSite(st.ActiveSite, st.Epoch)
	if !st.Holds(l.site) {
		o.Lease = l.observer.See(st)
	}
	return o
}

// apply gives the mount its write deadline, keeps the watchdog armed
// while the mount may admit changes, and sets the mode Decide chose.
func (l *loop) apply(o Observation) {
	if l.zkCfg != nil {
		// The watchdog covers every deadline the mount may admit by: armed
		// for a renewal before the mount gets its deadline, disarmed only
		// once the mount's deadline is that of the pass. A promotion
		// never admits without a deadline (it is set before the mode).
		l.watch(o, func() { l.srv.Load().SetWriteDeadline(o.Deadline) })
	}
	d := Decide(o)
	defer func() { l.held = l.held || !o.Deadline.IsZero() }()
	if d.Mode != o.Mode {
		if d.Mode == fusefs.ModePrimary {
			l.log.Info("promoting the mount to primary", "reason", d.Reason)
			l.pin.repin()
		} else {
			if late := o.Now.Sub(o.Deadline); !o.Deadline.IsZero() && late > 2*l.interval {
				l.mu.Lock()
				l.overrun = late
				l.mu.Unlock()
				l.log.Warn("the daemon did not run for a while past its write deadline (stopped, frozen or starved): the mount refused every change since", "late", late.Round(time.Millisecond).String())
			}
			if !l.held && l.zkCfg != nil && !o.BackingReplaced {
				// A primary by configuration that never held the lease.
				l.log.Info("the mount is read-only until its site holds the lease", "reason", d.Reason)
			} else {
				l.log.Warn("fencing the mount: read-only", "reason", d.Reason)
			}
		}
		if d.Mode != fusefs.ModePrimary && l.gate != nil {
			l.gate.fence() // a held close fails at once (design §4.8)
		}
		if err := l.srv.Load().SetMode(d.Mode); err != nil {
			l.log.Error("changing the mount's mode", "to", d.Mode.String(), "err", err)
		}
	}
	if l.gate != nil && l.srv.Load().Mode() == fusefs.ModePrimary {
		l.gate.activate(o.State.Epoch)
	}
	l.mu.Lock()
	o.Mode = l.srv.Load().Mode()
	l.lastObs = o
	l.mu.Unlock()
}

// watch arms the watchdog for 3D/4 after each renewal that moved the
// deadline, then gives the mount the deadline (setDeadline); or gives it
// first, and disarms the watchdog once the deadline has passed (or the
// claim ended) with no admitted change left (design §5.14).
func (l *loop) watch(o Observation, setDeadline func()) {
	h := l.holder.Load()
	if h == nil {
		setDeadline()
		return
	}
	last := h.LastRenewal()
	if last.IsZero() || !o.Now.Before(o.Deadline) {
		setDeadline()
	} else {
		defer setDeadline()
	}
	switch {
	case !last.IsZero() && o.Now.Before(o.Deadline):
		if last.Equal(l.armedFor) {
			return
		}
		if err := l.wd.Arm(time.Until(last.Add(l.rule.WatchdogAfter()))); err != nil {
			l.log.Error("arming the watchdog", "err", err)
		}
		l.armedFor = last
		l.armed.Store(true)
	case !l.armedFor.IsZero() && l.srv.Load().InFlight() == 0:
		if err := l.wd.Disarm(); err != nil {
			l.log.Error("disarming the watchdog", "err", err)
			return
		}
		l.armedFor = time.Time{}
		l.armed.Store(false)
	}
}

// act starts what the observation asks for beside the passes: a
// self-activation, an automatic takeover, a look for this site's leading
// JobManagers. At most one activation or takeover runs at a time; its
// end kicks a pass.
func (l *loop) act(ctx context.Context, o Observation) {
	b := l.bridge.Load()
	if o.Session != SessionUp || b == nil {
		return
	}
	if why, ok := DecideActivate(o); ok {
		l.spawn(ctx, func(ctx context.Context) bool { return l.activate(ctx, b, why) })
		return
	}
	active := o.State.ActiveSite
	if len(l.jms) > 0 && time.Since(l.lastCheck) >= standbyCheckEvery && l.checking.CompareAndSwap(false, true) {
		l.lastCheck = time.Now()
		l.group.Go(func() error {
			defer l.checking.Store(false)
			l.checkStandby(ctx, b, active)
			return nil
		})
	}
	l.mu.Lock()
	refused := l.refused != ""
	l.mu.Unlock()
	d := DecideTakeover(TakeoverObservation{
		Site: l.site, Mode: l.takeover, Session: o.Session, ActiveSite: active, Epoch: o.State.Epoch,
		Lease: o.Lease.State, Refused: refused,
	})
	if d.Run && !o.Busy {
		// Leading is read in the takeover's own goroutine: a walk of
		// Flink's znodes does not fit a pass.
		view := o.Lease
		l.spawn(ctx, func(ctx context.Context) bool { return l.autoTakeover(ctx, b, active, o.State.Epoch, view) })
	}
}

// spawn runs fn beside the passes unless one runs already or a failed
// one's retry time has not come. fn reports whether it ended well; one
// that failed is tried again after retryAfter, not at the next pass: an
// error that stays (another Flink cluster under the path root, a
// JobManager alive) would otherwise start one every pass.
func (l *loop) spawn(ctx context.Context, fn func(context.Context) bool) {
	l.mu.Lock()
	if l.busy || time.Now().Before(l.retryAt) {
		l.mu.Unlock()
		return
	}
	l.busy = true
	l.mu.Unlock()
	l.group.Go(func() error {
		ok := false
		defer func() {
			l.mu.Lock()
			l.busy = false
			if ok {
				l.failures, l.retryAt = 0, time.Time{}
			} else {
				l.failures++
				l.retryAt = time.Now().Add(l.retryAfter(l.failures))
			}
			l.mu.Unlock()
			l.kick()
		}()
		ok = fn(ctx)
		return nil
	})
}

// retryAfter is the pause after n failed activations or takeovers in a
// row: 250 ms, doubled each time, at most half a lease (and at least a
// second): a takeover that failed once is tried again at once, one that
// keeps failing twice a lease.
func (l *loop) retryAfter(n int) time.Duration {
	limit := max(l.rule.Duration/2, time.Second)
	d := 250 * time.Millisecond
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// activate runs a self-activation (design §5.14) and reports whether it
// ended well.
func (l *loop) activate(ctx context.Context, b *zkbridge.Bridge, why zkbridge.SelfActivation) bool {
	wait := 3 * l.rule.ObserverDead()
	l.step(slog.LevelWarn, "activating this site by its own daemon ("+string(why)+"): waiting until the lease stayed unchanged for "+l.rule.ObserverDead().String())
	epoch, err := b.ActivateSelf(ctx, why, wait)
	switch {
	case err == nil:
		l.step(slog.LevelWarn, fmt.Sprintf("this site is active with epoch %d (%s)", epoch, why))
	case errors.Is(err, context.Canceled):
	case errors.Is(err, zkbridge.ErrNotApplicable), errors.Is(err, zkbridge.ErrEpochChanged), errors.Is(err, zkbridge.ErrLeaseRenewed), errors.Is(err, zkbridge.ErrTakeoverInProgress):
		l.step(slog.LevelInfo, "activation ("+string(why)+") not needed any more: "+err.Error())
	default:
		l.step(slog.LevelError, "activation ("+string(why)+") failed; trying again", "err", err.Error())
		return false
	}
	return true
}

// autoTakeover runs the automatic takeover that a pass decided on: it
// waits, with watches, for JobManagers of other sites that still lead,
// decides again, and takes over with the guard of the lease the pass saw
// expired (design §5.11). It reports whether it ended well: activated,
// refused, not needed or beaten by another.
func (l *loop) autoTakeover(ctx context.Context, b *zkbridge.Bridge, active string, epoch int64, view zkbridge.LeaseView) bool {
	counts := zkbridge.OtherSitesLeading(l.jms)
	live, err := b.Liveness(ctx)
	switch {
	case errors.Is(err, zkbridge.ErrNoNamespace):
		live = &zkbridge.Liveness{}
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			l.log.Warn("reading Flink's liveness", "err", err)
		}
		return false
	}
	leading := counts(live).Alive
	if leading {
		// The lease expired before the other sites' JobManager sessions
		// ended: wait for them with watches, so that the takeover starts
		// the moment the last one ends.
		if lv, err := b.WaitLiveness(ctx, l.rule.Duration, counts); err == nil {
			leading = lv.Alive
		}
	}
	d := DecideTakeover(TakeoverObservation{
		Site: l.site, Mode: l.takeover, Session: SessionUp, ActiveSite: active, Epoch: epoch, Lease: view.State, Leading: leading,
	})
	if !d.Run {
		return true
	}
	var guard *zkbridge.LeaseGuard
	if g, ok := view.Guard(); ok {
		guard = &g
	}
	l.step(slog.LevelWarn, "automatic takeover: "+d.Reason, "lease_unchanged", time.Duration(view.Unchanged).String())
	start := time.Now()
	wait := l.rule.Duration
	if guard == nil {
		wait = 3 * l.rule.ObserverDead() // it observes the lease itself
	}
	rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{
		Wait: wait, ActivateAnyway: l.anyway, Lease: guard, Counts: counts,
		Journal: fmt.Sprintf("%s (the lease owned by %s unchanged for %v)", d.Reason, view.Owner, time.Duration(view.Unchanged).Round(time.Millisecond)),
	})
	took := time.Since(start).Round(time.Millisecond).String()
	switch {
	case err == nil && rep.Activated:
		l.count("activated")
		rollbacks := map[string]int64{}
		for _, j := range rep.Jobs {
			if j.Rollback != nil {
				rollbacks[j.JobID] = j.Rollback.Checkpoints
			}
		}
		l.mu.Lock()
		l.rollbacks = rollbacks
		l.mu.Unlock()
		l.step(slog.LevelWarn, "automatic takeover: "+rep.Decision, "took", took)
	case err == nil && rep.Refused():
		l.count("refused")
		var jobs []string
		for _, j := range rep.Jobs {
			if j.Status == zkbridge.StatusRefused {
				jobs = append(jobs, j.JobID+": "+j.Reason)
			}
		}
		l.mu.Lock()
		l.refused = rep.Decision + " [" + strings.Join(jobs, "; ") + "]"
		l.mu.Unlock()
		l.step(slog.LevelError, "automatic takeover refused: "+rep.Decision, "jobs", strings.Join(jobs, "; "), "took", took)
	case err == nil:
		l.count("lost-race")
		l.step(slog.LevelInfo, "automatic takeover: "+rep.Decision, "took", took)
	case errors.Is(err, zkbridge.ErrJobManagerAlive):
		l.count("jobmanager-alive")
		l.step(slog.LevelWarn, "automatic takeover: a JobManager is alive; trying again", "err", err.Error())
		return false
	case errors.Is(err, zkbridge.ErrLeaseHeld):
		l.count("lease-held")
		l.step(slog.LevelWarn, "automatic takeover: another site's daemons still renew the lease; trying again", "err", err.Error())
		return false
	case errors.Is(err, zkbridge.ErrLeaseRenewed), errors.Is(err, zkbridge.ErrEpochChanged), errors.Is(err, zkbridge.ErrTakeoverInProgress):
		l.count("lost-race")
		l.step(slog.LevelInfo, "automatic takeover: another daemon or site came first", "err", err.Error())
	case errors.Is(err, context.Canceled):
	default:
		l.count("failed")
		l.step(slog.LevelError, "automatic takeover failed; trying again", "err", err.Error())
		return false
	}
	return true
}

func (l *loop) count(result string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[result]++
}

// step records and logs one step of an activation or automatic takeover.
func (l *loop) step(level slog.Level, what string, attrs ...any) {
	l.log.Log(context.Background(), level, what, attrs...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(attrs) > 0 {
		what += " (" + fmt.Sprint(attrs...) + ")"
	}
	l.steps = append(l.steps, metrics.Step{At: time.Now().UTC(), What: what})
	if len(l.steps) > maxSteps {
		l.steps = l.steps[len(l.steps)-maxSteps:]
	}
}

// checkStandby finds leader sessions of this site's JobManagers while
// another site is active (issue 16 item 4): with takeover manual Flink
// reads pointers here before any takeover, which is an error.
func (l *loop) checkStandby(ctx context.Context, b *zkbridge.Bridge, active string) {
	var out []string
	if active != "" && active != l.site {
		live, err := b.Liveness(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, zkbridge.ErrNoNamespace) {
				l.log.Warn("reading Flink's liveness", "err", err)
			}
			return
		}
		for _, s := range live.SessionsAt(l.jms) {
			var addrs []string
			for _, n := range live.Nodes {
				if n.Owner == s && n.Address != "" && !slices.Contains(addrs, n.Address) {
					addrs = append(addrs, n.Address)
				}
			}
			out = append(out, fmt.Sprintf("session %s at %s", s, strings.Join(addrs, ", ")))
		}
	}
	l.mu.Lock()
	key, last := strings.Join(out, ";"), l.lastStandby
	l.standby, l.lastStandby = out, key
	l.mu.Unlock()
	if key == last || len(out) == 0 {
		return
	}
	if l.takeover == TakeoverAuto {
		l.log.Info("a JobManager of this site leads while site "+active+" is active: the mount holds its reads until the takeover decided", "sessions", key)
	} else {
		l.log.Error("a JobManager of this site leads while site "+active+" is active: with takeover manual no JobManager may run on a standby site (it reads Flink's pointers before any takeover)", "sessions", key)
	}
}

// connect connects the bridge, retrying every second, then, while this
// daemon holds its site's duty (zkbridge.Duty, design §5.5.3), publishes
// the site's markers and runs the sweeper and the lag tracker, until ctx
// ends.
func (l *loop) connect(ctx context.Context) {
	var b *zkbridge.Bridge
	for b == nil {
		var err error
		if b, err = zkbridge.New(ctx, *l.zkCfg, zkbridge.NewSiteVerifier(l.verifier, l.backingTimeout)); err != nil {
			l.log.Warn("connecting to ZooKeeper", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	defer b.Close()
	l.zkm.SetBridge(b)
	if h, err := b.NewLeaseHolder(l.rule); err != nil {
		l.log.Error("lease holder", "err", err)
	} else {
		l.holder.Store(h)
	}
	l.bridge.Store(b)
	l.kick()
	var work []func(context.Context)
	if pub, err := b.NewPublisher(newCatalogMarkers(l.catalog, l.mountPoint)); err != nil {
		l.log.Error("marker publisher", "err", err)
	} else {
		l.zkm.SetPublisher(pub)
		l.catalog.OnChange(func(manifest.Change) { pub.Trigger() })
		work = append(work, func(ctx context.Context) {
			// Markers say what the catalog judged (catalogMarkers).
			select {
			case <-l.catalog.Judged():
				pub.Run(ctx)
			case <-ctx.Done():
			}
		})
	}
	// On the active site, retract pointers a returning JobManager of
	// another site adds after the takeover (zkbridge.Sweeper). Like the
	// lag, it waits for the NAS at most the backing timeout
	// (zkbridge.NewSiteVerifier).
	if sw, err := b.NewSweeper(l.zkCfg.FlinkSessionTimeout); err != nil {
		l.log.Error("stray pointer sweeper", "err", err)
	} else {
		l.zkm.SetSweeper(sw)
		work = append(work, func(ctx context.Context) { sw.Run(ctx, l.followEvery) })
	}
	// Answer the active site's sync requests for this site (design
	// §4.8), on every site: the acker skips its own site's.
	acker := b.NewSyncAcker(b.SyncHolds)
	work = append(work, func(ctx context.Context) { acker.Run(ctx, syncRetry) })
	if lag := l.zkm.Lag; lag != nil {
		l.catalog.OnChange(func(manifest.Change) { lag.Trigger() })
		lag.Idle()
		work = append(work, func(ctx context.Context) { lag.Run(ctx); lag.Idle() })
	}
	all := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, w := range work {
			wg.Go(func() { w(ctx) })
		}
		wg.Wait()
	}
	duty, err := b.NewDuty()
	if err != nil {
		l.log.Error("site duty: running the site's work here", "err", err)
		all(ctx)
		return
	}
	l.zkm.SetDuty(duty)
	duty.Run(ctx, all)
	// The loop fences the mount when ctx ends; closing the session
	// (deferred) changes nothing of the lease.
}

// Admit is the mount's Gate (fusefs.Gate) with takeover auto: a mount
// that is not primary holds Flink's opens until its site is active and
// the mount primary, or the takeover refused, at most hold-timeout.
func (l *loop) Admit(ctx context.Context, rel string) error {
	var deadline <-chan time.Time
	var t *time.Ticker
	for {
		hold, err := l.holding()
		if !hold {
			return err
		}
		if t == nil {
			l.log.Info("holding an open until this site's takeover decided", "dir", rel)
			t = time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			timer := time.NewTimer(l.hold)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			l.log.Error("an open was held for hold-timeout and fails: this site's takeover has not decided", "dir", rel, "timeout", l.hold.String())
			return fmt.Errorf("held for %v: %w", l.hold, syscall.EIO)
		case <-t.C:
		}
	}
}

// holding says whether an open waits now, and if not, its error.
func (l *loop) holding() (bool, error) {
	if l.takeover != TakeoverAuto {
		return false, nil
	}
	mode := fusefs.ModeReplica
	if srv := l.srv.Load(); srv != nil {
		mode = srv.Mode()
	}
	l.mu.Lock()
	o := HoldObservation{Site: l.site, Mode: mode, ActiveSite: l.lastObs.State.ActiveSite, Lease: l.lastObs.Lease, Refused: l.refused != ""}
	l.mu.Unlock()
	return DecideHold(o)
}

// snapshot is what metrics and health show.
func (l *loop) snapshot() metrics.Failover {
	hold, _ := l.holding()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := metrics.Failover{
		Takeover: string(l.takeover), LeaseDuration: zkbridge.Duration(l.rule.Duration),
		Renewals: l.renewals, RenewalFailures: l.renewFails,
		Holding: hold, Runs: map[string]uint64{}, Refused: l.refused,
		Steps: slices.Clone(l.steps), StandbyJobManagers: slices.Clone(l.standby),
		Overrun: zkbridge.Duration(l.overrun), WatchdogArmed: l.armed.Load(),
	}
	if out.Takeover == "" {
		out.Takeover = string(TakeoverManual)
	}
	if l.lastObs.Session == SessionUp && !l.lastObs.State.Holds(l.site) {
		v := l.lastObs.Lease
		out.Observed = &v
	}
	if l.previous.Fired {
		p := l.previous
		out.PreviousWatchdog = &p
	}
	for k, v := range l.runs {
		out.Runs[k] = v
	}
	out.Rollbacks = maps.Clone(l.rollbacks)
	if l.gate != nil {
		out.Sync = l.gate.state()
	}
	if h := l.holder.Load(); h != nil {
		w := h.Deadline()
		out.Claiming = time.Now().Before(w)
		if !w.IsZero() {
			out.WriteDeadline = &w
		}
		if t := h.LastRenewal(); !t.IsZero() {
			out.LastRenewal = &t
		}
	}
	return out
}
