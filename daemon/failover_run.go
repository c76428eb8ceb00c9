package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// failover renews this site's liveness lease, watches the active site's,
// runs the automatic takeover (DecideTakeover) and is the mount's Gate:
// with takeover auto a mount that is not primary holds Flink's opens
// until its site is active and the mount primary (admit), or the
// takeover refused (fail), at most HoldTimeout each.
type failover struct {
	cfg  *Config
	srv  atomic.Pointer[fusefs.Server] // set once mounted
	log  *slog.Logger
	kick func() // asks the mode follower for a pass now; set before mounting

	mu sync.Mutex
	// All GUARDED_BY(mu).
	holder      *zkbridge.LeaseHolder
	observer    *zkbridge.LeaseObserver
	observed    *zkbridge.LeaseView
	renewals    uint64
	renewFails  uint64
	runs        map[string]uint64
	refused     string
	steps       []metrics.Step
	standby     []string
	lastStandby string
	// active is the last active-site read ("" none yet).
	active string

	// lastCheck is when the runner last looked for this site's leading
	// JobManagers (only the runner's goroutine uses it).
	lastCheck time.Time
}

// standbyCheckEvery is how often a daemon of a site that is not active
// looks for a leading JobManager of its own site.
const standbyCheckEvery = 5 * time.Second

const maxSteps = 32

func newFailover(cfg *Config, log *slog.Logger) *failover {
	return &failover{cfg: cfg, log: log.With("component", "failover"), runs: map[string]uint64{}, kick: func() {}}
}

func (f *failover) rule() zkbridge.LeaseRule {
	return zkbridge.LeaseRule{Duration: f.cfg.LeaseDuration}
}

// step records and logs one step of the automatic takeover.
func (f *failover) step(level slog.Level, what string, attrs ...any) {
	f.log.Log(context.Background(), level, what, attrs...)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(attrs) > 0 {
		what += " (" + fmt.Sprint(attrs...) + ")"
	}
	f.steps = append(f.steps, metrics.Step{At: time.Now().UTC(), What: what})
	if len(f.steps) > maxSteps {
		f.steps = f.steps[len(f.steps)-maxSteps:]
	}
}

// leaseLapsed is Observation.LeaseLapsed: the lease is configured,
// active-site named this site when last read (by the mode follower,
// lastActive, or by the runner: a daemon cut off right after its first
// renewal may never have read it in the follower), and the holder does
// not claim.
func (f *failover) leaseLapsed(lastActive string) bool {
	if f.cfg.LeaseDuration <= 0 {
		return false
	}
	f.mu.Lock()
	h, runnerActive := f.holder, f.active
	f.mu.Unlock()
	if lastActive != f.cfg.Site && runnerActive != f.cfg.Site {
		return false
	}
	return h == nil || !h.Claiming(time.Now())
}

// interval is the period of the runner's passes.
func (f *failover) interval() time.Duration {
	if f.cfg.LeaseDuration > 0 {
		return min(f.cfg.FollowInterval, f.rule().RenewEvery())
	}
	return f.cfg.FollowInterval
}

// start makes the holder and renews once, before the mode follower reads
// ZooKeeper, so that a primary of the active site does not fence itself
// for want of a first renewal.
func (f *failover) start(ctx context.Context, b *zkbridge.Bridge) {
	if f.cfg.LeaseDuration <= 0 {
		return
	}
	if z := f.cfg.ZooKeeper; f.cfg.Takeover == TakeoverAuto && z != nil && f.cfg.LeaseDuration > z.FlinkSessionTimeout {
		f.log.Warn("lease-duration is longer than Flink's session timeout: an automatic takeover starts that much later than Flink's own failover (design §5.11)",
			"timeout", z.FlinkSessionTimeout.String())
	}
	h, err := b.NewLeaseHolder(f.rule())
	if err != nil {
		f.log.Error("liveness lease", "err", err)
		return
	}
	f.mu.Lock()
	f.holder = h
	f.mu.Unlock()
	if active, epoch, err := b.ActiveSite(ctx); err == nil {
		if active == f.cfg.Site {
			f.renew(ctx, epoch)
		}
		// After the renewal: the mount is judged by the lease from now.
		f.mu.Lock()
		f.active = active
		f.mu.Unlock()
	}
}

func (f *failover) renew(ctx context.Context, epoch int64) {
	f.mu.Lock()
	h := f.holder
	f.mu.Unlock()
	if h == nil {
		return
	}
	err := h.Renew(ctx, epoch)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.renewFails++
		if !errors.Is(err, context.Canceled) {
			f.log.Warn("renewing the liveness lease", "err", err)
		}
		return
	}
	f.renewals++
}

// run makes a pass every interval until ctx ends, and one at the
// moment the active site's lease would expire if that comes first.
func (f *failover) run(ctx context.Context, b *zkbridge.Bridge) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		next := f.interval()
		if at := f.pass(ctx, b); at > 0 && at < next {
			next = at
		}
		t.Reset(max(0, next-time.Since(start)))
	}
}

// pass makes one pass; it returns when the active site's lease would
// expire (zero: not observed or not fresh).
func (f *failover) pass(ctx context.Context, b *zkbridge.Bridge) time.Duration {
	active, epoch, err := b.ActiveSite(ctx)
	if err != nil {
		return 0 // the mode follower logs it
	}
	f.mu.Lock()
	f.active = active
	f.mu.Unlock()
	if active == f.cfg.Site {
		f.renew(ctx, epoch)
		f.setStandby(nil)
		return 0
	}
	auto := f.cfg.Takeover == TakeoverAuto
	var view zkbridge.LeaseView
	if auto && active != "" {
		var err error
		if view, err = f.observe(ctx, b, active); err != nil {
			f.log.Warn("reading site "+active+"'s liveness lease", "err", err)
			return 0
		}
	}
	expiresIn := time.Duration(view.ExpiresIn)
	// Flink's liveness is a walk of its znodes: read it when the lease
	// expired, and for the standby check every standbyCheckEvery.
	standbyDue := len(f.cfg.SiteJobManagers) > 0 && time.Since(f.lastCheck) >= standbyCheckEvery
	if view.State != zkbridge.LeaseExpired && !standbyDue {
		return expiresIn
	}
	live, err := b.Liveness(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, zkbridge.ErrNoNamespace) {
			f.log.Warn("reading Flink's liveness", "err", err)
		}
		if !errors.Is(err, zkbridge.ErrNoNamespace) {
			return 0
		}
		live = &zkbridge.Liveness{}
	}
	if standbyDue {
		f.lastCheck = time.Now()
		f.checkStandby(live, active)
	}
	if !auto || active == "" {
		return expiresIn
	}
	f.mu.Lock()
	refused := f.refused != ""
	f.mu.Unlock()
	counts := zkbridge.OtherSitesLeading(f.cfg.SiteJobManagers)
	leading := counts(live).Alive
	if leading && view.State == zkbridge.LeaseExpired && !refused {
		// The lease expired before the other sites' JobManager sessions
		// ended: wait for them with watches, so that the takeover starts
		// the moment the last one ends rather than a period later. (The
		// lease guard still catches a renewal meanwhile.)
		if l, err := b.WaitLiveness(ctx, f.cfg.LeaseDuration, counts); err == nil {
			leading = l.Alive
		}
	}
	d := DecideTakeover(TakeoverObservation{
		Site: f.cfg.Site, Mode: f.cfg.Takeover, Session: SessionUp, ActiveSite: active, Epoch: epoch,
		Lease: view.State, Leading: leading, Refused: refused,
	})
	if !d.Run {
		return expiresIn
	}
	guard, _ := view.Guard()
	f.step(slog.LevelWarn, "automatic takeover: "+d.Reason, "lease_unchanged", time.Duration(view.Unchanged).String())
	start := time.Now()
	rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{
		Wait: f.cfg.LeaseDuration, ActivateAnyway: f.cfg.TakeoverActivateAnyway, Lease: &guard, Counts: counts,
		Journal: fmt.Sprintf("%s (lease of site %s unchanged for %v)", d.Reason, active, time.Duration(view.Unchanged).Round(time.Millisecond)),
	})
	took := time.Since(start).Round(time.Millisecond).String()
	switch {
	case err == nil && rep.Activated:
		f.count("activated")
		f.step(slog.LevelWarn, "automatic takeover: "+rep.Decision, "took", took)
		// A primary of the active site claims: renew before the
		// follower promotes the mount.
		f.renew(ctx, rep.Epoch)
		f.kick()
	case err == nil && rep.Refused():
		f.count("refused")
		var jobs []string
		for _, j := range rep.Jobs {
			if j.Status == zkbridge.StatusRefused {
				jobs = append(jobs, j.JobID+": "+j.Reason)
			}
		}
		f.mu.Lock()
		f.refused = rep.Decision + " [" + strings.Join(jobs, "; ") + "]"
		f.mu.Unlock()
		f.step(slog.LevelError, "automatic takeover refused: "+rep.Decision, "jobs", strings.Join(jobs, "; "), "took", took)
	case err == nil:
		f.count("lost-race")
		f.step(slog.LevelInfo, "automatic takeover: "+rep.Decision, "took", took)
		f.kick()
	case errors.Is(err, zkbridge.ErrJobManagerAlive):
		f.count("jobmanager-alive")
		f.step(slog.LevelWarn, "automatic takeover: a JobManager is alive; trying again", "err", err.Error())
	case errors.Is(err, zkbridge.ErrWriterAlive):
		f.count("writer-alive")
		f.step(slog.LevelWarn, "automatic takeover: another site's mount is writable; trying again", "err", err.Error())
	case errors.Is(err, zkbridge.ErrLeaseRenewed), errors.Is(err, zkbridge.ErrEpochChanged), errors.Is(err, zkbridge.ErrTakeoverInProgress):
		f.count("lost-race")
		f.step(slog.LevelInfo, "automatic takeover: another daemon or site came first", "err", err.Error())
		f.kick()
	case errors.Is(err, context.Canceled):
	default:
		f.count("failed")
		f.step(slog.LevelError, "automatic takeover failed; trying again", "err", err.Error())
	}
	return 0
}

func (f *failover) count(result string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[result]++
}

// observe reads the active site's lease, with an observer of that site.
func (f *failover) observe(ctx context.Context, b *zkbridge.Bridge, active string) (zkbridge.LeaseView, error) {
	f.mu.Lock()
	o := f.observer
	f.mu.Unlock()
	if o == nil || o.Site() != active {
		var err error
		if o, err = b.NewLeaseObserver(f.rule(), active); err != nil {
			return zkbridge.LeaseView{}, err
		}
	}
	v, err := o.Observe(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observer = o
	if err == nil {
		f.observed = &v
	}
	return v, err
}

// checkStandby finds leader sessions of this site's JobManagers while
// another site is active (issue 16 item 4): with takeover manual Flink
// reads pointers here before any takeover, which is an error.
func (f *failover) checkStandby(live *zkbridge.Liveness, active string) {
	if len(f.cfg.SiteJobManagers) == 0 || active == "" {
		f.setStandby(nil)
		return
	}
	mine := live.SessionsAt(f.cfg.SiteJobManagers)
	var out []string
	for _, s := range mine {
		var addrs []string
		for _, n := range live.Nodes {
			if n.Owner == s && n.Address != "" && !slices.Contains(addrs, n.Address) {
				addrs = append(addrs, n.Address)
			}
		}
		out = append(out, fmt.Sprintf("session %s at %s", s, strings.Join(addrs, ", ")))
	}
	f.setStandby(out)
	if key := strings.Join(out, ";"); key != f.lastStandbyKey() && len(out) > 0 {
		if f.cfg.Takeover == TakeoverAuto {
			f.log.Info("a JobManager of this site leads while site "+active+" is active: the mount holds its reads until the takeover decided", "sessions", key)
		} else {
			f.log.Error("a JobManager of this site leads while site "+active+" is active: with takeover manual no JobManager may run on a standby site (it reads Flink's pointers before any takeover)", "sessions", key)
		}
	}
}

func (f *failover) lastStandbyKey() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.lastStandby
	f.lastStandby = strings.Join(f.standby, ";")
	return k
}

func (f *failover) setStandby(s []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.standby = s
}

// Admit is the mount's Gate (fusefs.Gate): see failover.
func (f *failover) Admit(ctx context.Context, rel string) error {
	var deadline <-chan time.Time
	var t *time.Ticker
	for {
		hold, err := f.holding()
		if !hold {
			return err
		}
		if t == nil {
			f.log.Info("holding an open until this site's takeover decided", "dir", rel)
			t = time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			timer := time.NewTimer(f.cfg.HoldTimeout)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			f.log.Error("an open was held for hold-timeout and fails: this site's takeover has not decided", "dir", rel, "timeout", f.cfg.HoldTimeout.String())
			return fmt.Errorf("held for %v: %w", f.cfg.HoldTimeout, syscall.EIO)
		case <-t.C:
		}
	}
}

// holding says whether an open waits now, and if not, its error.
func (f *failover) holding() (bool, error) {
	if f.cfg.Takeover != TakeoverAuto {
		return false, nil
	}
	o := HoldObservation{Site: f.cfg.Site, Mode: fusefs.ModeReplica}
	if srv := f.srv.Load(); srv != nil {
		o.Mode = srv.Mode()
	}
	f.mu.Lock()
	o.ActiveSite, o.Refused = f.active, f.refused != ""
	if f.observed != nil && f.observed.Site == f.active {
		o.ActiveLease = f.observed.State
	}
	f.mu.Unlock()
	return DecideHold(o)
}

// HoldObservation is what the gate's rule looks at (takeover auto).
type HoldObservation struct {
	Site string
	Mode fusefs.Mode
	// ActiveSite is active-site as the failover runner last read it,
	// and ActiveLease that site's lease as last observed ("" unknown).
	ActiveSite  string
	ActiveLease zkbridge.LeaseState
	// Refused: this site's automatic takeover refused.
	Refused bool
}

// DecideHold is the gate's rule with takeover auto (design §5.12), the
// one place it is written; true means the open waits, false admits it
// or, with an error, fails it:
//
//   - a primary admits;
//   - a fenced mount admits while another site is active and seen alive
//     (its lease fresh, or absent: no takeover can conclude it dead):
//     this site lost a takeover that has decided, and its mount answers
//     as with takeover manual (listings filtered, writes EROFS) instead
//     of failing every open after hold-timeout;
//   - after this site's automatic takeover refused, an open fails (EIO);
//   - otherwise the open waits: a replica of a standby site, and a fenced
//     mount while a takeover towards its site may come (the active
//     site's lease is not seen fresh, or its own lease lapsed).
func DecideHold(o HoldObservation) (bool, error) {
	switch {
	case o.Mode == fusefs.ModePrimary:
		return false, nil
	case o.Mode == fusefs.ModeFenced && o.ActiveSite != "" && o.ActiveSite != o.Site &&
		(o.ActiveLease == zkbridge.LeaseFresh || o.ActiveLease == zkbridge.LeaseAbsent):
		return false, nil
	case o.Refused:
		return false, fmt.Errorf("the automatic takeover refused: %w", syscall.EIO)
	}
	return true, nil
}

// snapshot is what metrics and health show.
func (f *failover) snapshot() metrics.Failover {
	hold, _ := f.holding()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := metrics.Failover{
		Takeover: string(f.cfg.Takeover), LeaseDuration: zkbridge.Duration(f.cfg.LeaseDuration),
		Renewals: f.renewals, RenewalFailures: f.renewFails, Observed: f.observed,
		Holding: hold, Runs: map[string]uint64{}, Refused: f.refused,
		Steps: slices.Clone(f.steps), StandbyJobManagers: slices.Clone(f.standby),
	}
	if out.Takeover == "" {
		out.Takeover = string(TakeoverManual)
	}
	for k, v := range f.runs {
		out.Runs[k] = v
	}
	if f.holder != nil {
		out.Claiming = f.holder.Claiming(time.Now())
		if t := f.holder.LastRenewal(); !t.IsZero() {
			out.LastRenewal = &t
		}
	}
	return out
}
