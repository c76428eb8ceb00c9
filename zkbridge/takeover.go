package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
)

// Errors of Takeover and RestorePruned.
var (
	// ErrJobManagerAlive: a Flink JobManager of the cluster kept
	// ephemeral nodes past the wait, or locked a pointer meanwhile.
	ErrJobManagerAlive = errors.New("zkbridge: a Flink JobManager is alive")
	// ErrEpochChanged: another site took over meanwhile; nothing more was
	// written.
	ErrEpochChanged = errors.New("zkbridge: another site took over meanwhile (epoch changed)")
	// ErrBackupConflict: a backup of a different pointer is in the way.
	ErrBackupConflict = errors.New("zkbridge: conflicting backup")
)

// Job statuses of a takeover.
const (
	StatusOK      = "ok"
	StatusRefused = "refused"
)

// TakeoverOptions are the choices of one takeover.
type TakeoverOptions struct {
	// Wait bounds the wait for Flink's JobManagers to vanish (zero: do not
	// wait). Config.DefaultTakeoverWait is Flink's session timeout plus a
	// margin. The lease is waited for at least 2 Config.LeaseDuration,
	// whatever Wait is: no takeover can conclude sooner than D that no
	// holder claims it.
	Wait time.Duration
	// Quiet is how long no JobManager may be seen before the takeover
	// believes none is alive (at most Wait). A JobManager that lost its
	// connection but not its site (cut off from this site only) has no
	// ephemeral nodes from when Flink revokes its leadership until it
	// reconnects and is elected again, within Flink's session timeout:
	// one read in that gap must not let the takeover through. Zero: the
	// first read without one suffices.
	Quiet time.Duration
	// DryRun computes and reports the plan and writes nothing (not even
	// the lock).
	DryRun bool
	// ActivateAnyway makes this site active although some job was
	// refused.
	ActivateAnyway bool
	// AcceptStateLoss lets Flink start a job with no checkpoint pointer
	// although it had a complete checkpoint (RefusedCheckpointsLost).
	AcceptStateLoss bool
	// NewCluster says that the configured cluster id is a new cluster's,
	// although the path root holds other Flink clusters (a misspelt id
	// looks the same): when its namespace does not exist the takeover
	// creates it empty (not with DryRun), so that every later takeover
	// finds it, and goes on as for a cluster that has not run yet.
	// Markers of jobs of the cluster still refuse it: Flink ran with that
	// id under another path root.
	NewCluster bool
	// Lease, when set, is the guard of a lease the caller already saw
	// expired (an automatic takeover): the takeover does not observe it
	// again. Otherwise the takeover observes the lease itself, in the
	// same wait as the JobManagers (design §5.14). Either way the
	// retractions check it and the activation grants it to this site.
	Lease *LeaseGuard
	// Counts, when set, keeps of the liveness only what must vanish
	// before the takeover writes (an automatic takeover ignores this
	// site's own JobManagers and standby contenders, design §5.11); nil
	// counts every ephemeral node.
	Counts func(*Liveness) *Liveness

	// Journal, when set, is why an automatic takeover started: the
	// takeover then keeps its journal (AutoTakeover) while it holds the
	// lock, unless this site is active already.
	Journal string

	// beforeRetraction is a test seam, called before every retraction,
	// one call at a time; beforeActivation, before the activation's
	// multi.
	beforeRetraction func(job string, id int64)
	beforeActivation func()
}

// DefaultTakeoverOptions waits Config.DefaultTakeoverWait, and wants no
// JobManager seen for Flink's session timeout.
func (b *Bridge) DefaultTakeoverOptions() TakeoverOptions {
	return TakeoverOptions{Wait: b.cfg.DefaultTakeoverWait(), Quiet: b.cfg.FlinkSessionTimeout}
}

// TakeoverReport is what a takeover decided and did.
type TakeoverReport struct {
	Site       string     `json:"site"`
	ClusterID  string     `json:"cluster_id"`
	Namespace  string     `json:"namespace"`
	Generation Generation `json:"flink_layout"`
	DryRun     bool       `json:"dry_run"`
	// Epoch is the epoch after the takeover (bumped when Activated).
	Epoch int64 `json:"epoch"`
	// Activated: this takeover made the site active; AlreadyActive: it
	// was before.
	Activated     bool   `json:"activated"`
	AlreadyActive bool   `json:"already_active,omitempty"`
	ActiveSite    string `json:"active_site"`
	// JobManager is the liveness read last.
	JobManager *Liveness `json:"jobmanager,omitempty"`
	// NewNamespace is the namespace of a new cluster (NewCluster) this
	// takeover created, or would create in a dry run.
	NewNamespace string `json:"new_namespace,omitempty"`
	// Lease is the lease as the takeover saw it last (nil: none read, or
	// this site owns it).
	Lease  *LeaseView     `json:"lease,omitempty"`
	Waited Duration       `json:"waited"`
	Jobs   []*JobTakeover `json:"jobs"`
	// Decision says in one sentence what happened and why.
	Decision string `json:"decision"`
}

// Refused reports whether some job had no L2-complete pointer.
func (r *TakeoverReport) Refused() bool {
	for _, j := range r.Jobs {
		if j.Status == StatusRefused {
			return true
		}
	}
	return false
}

// JobTakeover is what a takeover decided for one job.
type JobTakeover struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
	// Reason explains the status in words.
	Reason string `json:"reason"`
	// NewestComplete is the newest pointer complete at L2 here.
	NewestComplete *int64 `json:"newest_complete"`
	// Kept are the pointers Flink will see, ascending.
	Kept []int64 `json:"kept"`
	// Retracted are the pointers this run retracted (or, in a dry run,
	// would retract), newest first; Retractions gives the reasons.
	Retracted   []int64      `json:"retracted"`
	Retractions []Retraction `json:"retractions"`
	// AlreadyPruned are backups of pointers earlier runs retracted.
	AlreadyPruned []int64 `json:"already_pruned,omitempty"`
	// BackedUp are the kept pointers backed up (marked kept) by this run
	// or an earlier one: restore-pruned brings them back if Flink deletes
	// them afterwards.
	BackedUp []int64 `json:"backed_up,omitempty"`
	// Ignored are 1.15+ pointers without locks, which Flink skips.
	Ignored []int64 `json:"ignored,omitempty"`
	// Refusal names why a refused job was refused.
	Refusal RefusalReason `json:"refusal,omitempty"`
	// HA is the verdict on the job graph, blobs and job results here.
	HA *manifest.JobHAVerdict `json:"ha,omitempty"`
	// RestoreHint says how to start a refused job by hand.
	RestoreHint *RestoreHint `json:"restore_hint"`
	// Rollback is what Flink completed on the old site after the
	// checkpoint it restores here; nil when the job was refused or has
	// no pointer.
	Rollback *Rollback `json:"rollback,omitempty"`
}

// Duration marshals as a Go duration string.
type Duration time.Duration

// MarshalText writes the duration as "1m5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// epochState is the epoch node's value and version.
type epochState struct {
	value   int64
	version int32
	// mzxid is the zxid of the epoch's last write: every activation's.
	mzxid  int64
	exists bool
}

func (b *Bridge) readEpoch(ctx context.Context, paths ckptfsPaths) (epochState, error) {
	data, stat, err := b.zk.get(ctx, paths.epoch())
	if errors.Is(err, zk.ErrNoNode) {
		return epochState{version: -1}, nil
	}
	if err != nil {
		return epochState{}, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || v < 0 {
		return epochState{}, fmt.Errorf("epoch %s holds %q, want a decimal number", paths.epoch(), data)
	}
	return epochState{value: v, version: stat.Version, mzxid: stat.Mzxid, exists: true}, nil
}

func (b *Bridge) readActiveSite(ctx context.Context, paths ckptfsPaths) (site string, stat *zk.Stat, err error) {
	data, stat, err := b.zk.get(ctx, paths.activeSite())
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil, nil
	}
	return strings.TrimSpace(string(data)), stat, err
}

// Takeover makes this site's ZooKeeper state safe for Flink to start here
// (docs/design.md §5.5): it takes the takeover lock, waits (bounded) until
// no JobManager is alive, retracts for every job the pointers this site
// cannot restore, each in one version-checked multi with a backup, and
// finally sets active-site and bumps the epoch, unless a job was refused
// or this site was active already.
//
// Running it again after a crash or a ZooKeeper failure converges to the
// same result: every step re-reads and re-plans, and every write is
// checked against the versions read.
//
// The report is returned also with ErrJobManagerAlive (what was alive);
// refused jobs are not an error (see TakeoverReport.Refused).
func (b *Bridge) Takeover(ctx context.Context, opts TakeoverOptions) (*TakeoverReport, error) {
	if err := b.requireSite("takeover"); err != nil {
		return nil, err
	}
	// What it keeps is judged from the NAS, not from what a mount's
	// verifier trusts (design §3.6).
	ctx = manifest.WithoutTrust(ctx)
	l, created, err := b.discoverForTakeover(ctx, opts)
	if err != nil {
		return nil, err
	}
	paths := b.ckptfsFor(l)
	rep := &TakeoverReport{Site: b.cfg.Site, ClusterID: l.ClusterID, Namespace: l.Namespace, Generation: l.Generation, DryRun: opts.DryRun, Jobs: []*JobTakeover{},
		NewNamespace: created}
	log := b.log.With("namespace", l.Namespace)

	var lock *takeoverLock
	if !opts.DryRun {
		for _, p := range []string{paths.prunedRoot(), paths.takeover()} {
			if err := b.zk.ensure(ctx, p); err != nil {
				return nil, err
			}
		}
		if err := b.zk.createIfAbsent(ctx, paths.epoch(), []byte("0")); err != nil {
			return nil, err
		}
		lock, err = b.acquireLock(ctx, paths, "takeover", b.cfg.LockWait)
		if err != nil {
			return nil, err
		}
		defer b.releaseLock(lock)
		lock.lease = opts.Lease
	}
	var j *journal
	if opts.Journal != "" && lock != nil {
		if active, _, err := b.readActiveSite(ctx, paths); err == nil && active != b.cfg.Site {
			j = b.openJournal(ctx, paths, lock, opts.Journal)
		}
	}
	defer func() {
		if j != nil && j.rec.State == AutoRunning {
			j.end(ctx, AutoStopped, "ended without a decision: "+rep.Decision, rep.Epoch)
		}
	}()
	j.step(ctx, "takeover lock acquired", "ok")

	start := time.Now()
	// The lease is observed from the start, so that its D and the
	// JobManagers' quiet period run at once.
	observer, err := NewLeaseObserver(LeaseRule{Duration: b.cfg.LeaseDuration})
	if err != nil {
		return nil, err
	}
	guard := opts.Lease
	owned := false
	if guard == nil {
		if owned, err = b.startLease(ctx, observer, opts.DryRun, rep); err != nil {
			return nil, err
		}
	}
	live, err := b.waitDead(ctx, l, opts.Wait, min(opts.Quiet, opts.Wait), opts.Counts, j)
	rep.Waited = Duration(time.Since(start).Round(time.Millisecond))
	if err != nil {
		rep.Decision = err.Error()
		return nil, err
	}
	j.waiting(ctx, "")
	if live.Alive {
		j.step(ctx, fmt.Sprintf("%s after waiting %v", live, time.Duration(rep.Waited)), "refused")
	} else {
		j.step(ctx, fmt.Sprintf("no JobManager that must vanish is alive (waited %v)", time.Duration(rep.Waited)), "ok")
	}
	rep.JobManager = live
	if live.Alive && !opts.DryRun {
		rep.Decision = fmt.Sprintf("refused: %s after waiting %v; nothing changed", live, time.Duration(rep.Waited))
		log.Warn("takeover refused: a JobManager is alive", "sessions", fmt.Sprint(live.Sessions()), "addresses", strings.Join(live.Addresses(), ","))
		return rep, fmt.Errorf("%w: %s", ErrJobManagerAlive, live)
	}
	// Then until no daemon of another site claims the lease (§5.14): the
	// activation checks that it stayed so. No takeover can conclude that
	// sooner than D, whatever Wait says: it waits at least twice that.
	if guard == nil && !owned && !opts.DryRun {
		guard, err = b.waitLease(ctx, observer, start.Add(max(opts.Wait, 2*b.cfg.LeaseDuration)), j)
		rep.Waited = Duration(time.Since(start).Round(time.Millisecond))
		if err != nil {
			rep.Decision = fmt.Sprintf("refused: %v after waiting %v; nothing changed", err, time.Duration(rep.Waited))
			if errors.Is(err, ErrLeaseHeld) {
				j.step(ctx, rep.Decision, "refused")
				log.Warn("takeover refused: another site's daemons still renew the lease", "err", err)
				return rep, err
			}
			return nil, err
		}
		if guard != nil {
			j.step(ctx, fmt.Sprintf("no other site's daemon claims the lease (waited %v)", time.Duration(rep.Waited)), "ok")
		}
	}
	if lock != nil {
		lock.lease = guard
	}
	// Jobs may have changed while we waited.
	if l, _, err = b.discoverForTakeover(ctx, opts); err != nil {
		return nil, err
	}
	// Refuse an ambiguous layout before writing anything.
	for _, jl := range l.Jobs {
		if jl.LockStyle != LockStyleUnknown {
			continue
		}
		js, err := b.readJob(ctx, jl)
		if err != nil {
			return nil, err
		}
		if err := ambiguous(l, js); err != nil {
			return nil, err
		}
	}

	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return nil, err
	}
	active, activeStat, err := b.readActiveSite(ctx, paths)
	if err != nil {
		return nil, err
	}
	rep.Epoch, rep.ActiveSite = ep.value, active
	markers, err := b.readMarkers(ctx, paths)
	if err != nil {
		return nil, err
	}
	err = b.takeoverJobs(ctx, paths, lock, ep, l, markers[b.cfg.Site], opts, rep)
	j.jobs(ctx, rep.Jobs)
	if err != nil {
		return rep, err
	}

	switch {
	case live.Alive:
		rep.Decision = fmt.Sprintf("dry run: %s; a takeover would refuse", live)
		return rep, fmt.Errorf("%w: %s", ErrJobManagerAlive, live)
	case active == b.cfg.Site && owned:
		rep.AlreadyActive = true
		rep.Decision = fmt.Sprintf("site %s was already active (epoch %d)", b.cfg.Site, ep.value)
	case rep.Refused() && !opts.ActivateAnyway:
		rep.Decision = fmt.Sprintf("site %s not activated: some job has no pointer this site holds completely", b.cfg.Site)
		j.end(ctx, AutoRefused, rep.Decision, ep.value)
	case opts.DryRun:
		rep.Decision = fmt.Sprintf("dry run: would make site %s active with epoch %d", b.cfg.Site, ep.value+1)
	default:
		if err := b.activate(ctx, paths, lock, ep, activeStat, lock.czxid, opts.beforeActivation); err != nil {
			rep.Decision = fmt.Sprintf("activation failed: %v", err)
			return rep, err
		}
		rep.Activated, rep.Epoch, rep.ActiveSite = true, ep.value+1, b.cfg.Site
		rep.Decision = fmt.Sprintf("site %s is active with epoch %d", b.cfg.Site, rep.Epoch)
		if rep.Refused() {
			rep.Decision += " (activated anyway although some job was refused)"
		}
		log.Info("site activated", "epoch", rep.Epoch)
		j.end(ctx, AutoActivated, rep.Decision, rep.Epoch)
	}
	return rep, nil
}

// discoverForTakeover is discover, except that a cluster that has not run
// yet is not an error: the first start of Flink on the first site passes
// through the takeover too. The namespace of the configured cluster id
// must be absent and newClusterDoubt find nothing (with opts.NewCluster,
// nothing but other clusters beside it); otherwise the cluster id or path
// root is more likely wrong, and a takeover that looked in the wrong
// place would let Flink restore unchecked pointers. With NewCluster it
// creates the namespace (not in a dry run) and returns its path.
func (b *Bridge) discoverForTakeover(ctx context.Context, opts TakeoverOptions) (*Layout, string, error) {
	l, err := b.discover(ctx)
	if !errors.Is(err, ErrNoNamespace) || b.cfg.ClusterID == "" {
		return l, "", err
	}
	beside, ran, derr := b.newClusterDoubt(ctx)
	switch {
	case derr != nil:
		return nil, "", derr
	case ran != "":
		return nil, "", fmt.Errorf("%w; %s", err, ran)
	case beside != "" && !opts.NewCluster:
		return nil, "", fmt.Errorf("%w; %s (or, for the first start of a new cluster beside them, --new-cluster)", err, beside)
	}
	ns := namespaceCandidates(b.cfg.PathRoot, b.cfg.ClusterID)[0]
	if !opts.NewCluster {
		b.log.Info("Flink's namespace does not exist: a cluster that has not run yet", "namespace", ns)
		return &Layout{PathRoot: b.cfg.PathRoot, ClusterID: b.cfg.ClusterID, Namespace: ns,
			Evidence: []string{ns + " does not exist: Flink has not run in this cluster yet"}}, "", nil
	}
	if !opts.DryRun {
		if err := b.createNamespace(ctx, ns); err != nil {
			return nil, "", err
		}
		b.log.Info("created the empty namespace of a new cluster", "namespace", ns)
		l, err = b.discover(ctx)
		return l, ns, err
	}
	return &Layout{PathRoot: b.cfg.PathRoot, ClusterID: b.cfg.ClusterID, Namespace: ns,
		Evidence: []string{ns + " does not exist: a new cluster (--new-cluster)"}}, ns, nil
}

// createNamespace creates Flink's namespace ns of a new cluster, empty,
// with its missing parents, open to every client as zkCli's create makes
// them: Flink creates its own znodes below it with its own ACL.
func (b *Bridge) createNamespace(ctx context.Context, ns string) error {
	missing, err := b.missingParents(ctx, ns, "")
	if err != nil {
		return err
	}
	for _, p := range missing {
		if err := b.zk.createOpen(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// newClusterDoubt says why a missing namespace of the configured cluster
// id looks like a wrong cluster id or path root rather than a cluster
// that has not run yet: beside, the path root holds Flink's znodes
// itself or another Flink cluster; ran, some site published markers of
// jobs of this cluster. "" when nothing does.
func (b *Bridge) newClusterDoubt(ctx context.Context) (beside, ran string, err error) {
	root := b.cfg.PathRoot
	names, _, err := b.zk.children(ctx, root)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", "", err
	}
	if looksLikeNamespace(names) {
		beside = fmt.Sprintf("%s itself holds Flink's znodes (an empty cluster id): check the cluster id", root)
	}
	var others []string
	for _, n := range names {
		kids, _, err := b.zk.children(ctx, join(root, n))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return "", "", err
		}
		if looksLikeNamespace(kids) {
			others = append(others, n)
		}
	}
	if beside == "" && len(others) > 0 {
		beside = fmt.Sprintf("%s holds Flink cluster(s) %s: check the cluster id and path root", root, strings.Join(others, ", "))
	}
	// Markers of jobs mean Flink ran here: then its namespace is missing
	// because the path root is wrong, not because the cluster is new.
	ck := newCkptfsPaths(b.cfg.CkptfsRoot, strings.Trim(b.cfg.ClusterID, "/"))
	sites, _, err := b.zk.children(ctx, ck.sites())
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", "", err
	}
	for _, site := range sites {
		jobs, _, err := b.zk.children(ctx, ck.markers(site))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return "", "", err
		}
		if len(jobs) > 0 {
			ran = fmt.Sprintf("yet site %s published markers for %d job(s) of this cluster, so Flink ran here: check the path root", site, len(jobs))
			break
		}
	}
	return beside, ran, nil
}

// takeoverJobs runs takeoverJob for every job of l, several at once, and
// appends their reports to rep in l's order. The jobs' writes are
// independent: each retraction is its own multi, checked against the
// same epoch and lock versions, none of which changes before activate.
// When a job fails the others are stopped; rep then holds the jobs that
// finished, and Decision names the first job that failed.
func (b *Bridge) takeoverJobs(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, l *Layout, markers map[string]Marker, opts TakeoverOptions, rep *TakeoverReport) error {
	if hook := opts.beforeRetraction; hook != nil {
		var mu sync.Mutex
		opts.beforeRetraction = func(job string, id int64) {
			mu.Lock()
			defer mu.Unlock()
			hook(job, id)
		}
	}
	results := make([]*JobTakeover, len(l.Jobs))
	failed, err := forEachJob(ctx, len(l.Jobs), func(ctx context.Context, i int) error {
		jl := l.Jobs[i]
		marker, ok := markers[jl.JobID]
		if !ok {
			marker = NoMarker(jl.JobID)
		}
		jt, err := b.takeoverJob(ctx, paths, lock, ep, l, jl, marker, opts)
		if err == nil && ctx.Err() != nil {
			// Another job failed meanwhile: this one's judgement may have
			// been cut short (verifications under a canceled context are
			// unknown), so it is not reported as done.
			err = ctx.Err()
		}
		if err == nil {
			results[i] = jt
		}
		return err
	})
	for _, jt := range results {
		if jt != nil {
			rep.Jobs = append(rep.Jobs, jt)
		}
	}
	switch {
	case failed >= 0:
		rep.Decision = fmt.Sprintf("stopped at job %s: %v", l.Jobs[failed].JobID, err)
	case err != nil:
		rep.Decision = fmt.Sprintf("stopped: %v", err)
	}
	return err
}

// maxJobRounds bounds re-planning of one job whose znodes keep changing.
const maxJobRounds = 6

// takeoverJob re-reads, verifies and plans one job until a plan needs no
// retraction, retracting as planned in between.
func (b *Bridge) takeoverJob(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, l *Layout, jl JobLayout, marker Marker, opts TakeoverOptions) (*JobTakeover, error) {
	log := b.log.With("job", jl.JobID)
	jt := &JobTakeover{JobID: jl.JobID, Status: StatusOK, Kept: []int64{}, Retracted: []int64{}, Retractions: []Retraction{}}
	pruned, kept, err := b.backups(ctx, paths, jl.JobID)
	if err != nil {
		return nil, err
	}
	jt.AlreadyPruned = pruned
	allBackups := append(slices.Clone(pruned), kept...)
	win := newWindow(pruned)
	for round := 0; ; round++ {
		js, err := b.readJob(ctx, jl)
		if err != nil {
			return nil, err
		}
		win.saw(js)
		if err := ambiguous(l, js); err != nil {
			return nil, err
		}
		b.verifyJob(ctx, l, js)
		plan := PlanJob(facts(js))
		jt.Ignored = plan.Ignored
		if plan.NewestComplete >= 0 {
			nc := plan.NewestComplete
			jt.NewestComplete = &nc
		}
		jt.HA = js.HA
		if d := DecideJob(jobFacts(js, plan, marker.CheckpointID, allBackups, opts.AcceptStateLoss)); d.Refused {
			jt.Status, jt.Refusal = StatusRefused, d.Reason
			jt.Kept = plan.Keep
			jt.Reason = d.Detail + "; nothing changed for the job"
			js.MarkerPath = marker.Path
			jt.RestoreHint = b.restoreHint(ctx, l, js)
			log.Warn("job refused", "reason", string(d.Reason)+": "+d.Detail, "pointers", fmt.Sprint(plan.Keep))
			return jt, nil
		}
		if len(plan.Retract) == 0 || opts.DryRun {
			jt.Kept = plan.Keep
			if opts.DryRun {
				for _, r := range plan.Retract {
					jt.Retracted = append(jt.Retracted, r.ID)
					jt.Retractions = append(jt.Retractions, r)
				}
			}
			jt.Reason = jobReason(plan, jt, js, opts.DryRun)
			jt.Rollback = win.rollback(js, plan.NewestComplete)
			if !opts.DryRun {
				if jt.BackedUp, err = b.backupKept(ctx, paths, lock, ep, js, plan.Keep); err != nil {
					return nil, err
				}
			}
			return jt, nil
		}
		if round == maxJobRounds {
			return nil, fmt.Errorf("job %s: its pointers kept changing during the takeover (%d rounds)", jl.JobID, round)
		}
		if err := b.zk.ensure(ctx, paths.prunedJob(jl.JobID)); err != nil {
			return nil, err
		}
		for _, r := range plan.Retract {
			p := js.pointer(r.ID)
			if opts.beforeRetraction != nil {
				opts.beforeRetraction(jl.JobID, r.ID)
			}
			applied, err := b.retract(ctx, paths, lock, ep, js, p, r, false)
			if err != nil {
				return nil, err
			}
			if !applied {
				log.Info("pointers changed during the takeover: re-reading", "checkpoint", r.ID)
				break
			}
			jt.Retracted = append(jt.Retracted, r.ID)
			jt.Retractions = append(jt.Retractions, r)
		}
	}
}

// ambiguous fails for a job whose pointers may be live (1.14) or marked
// for deletion (1.15+): retracting by the wrong rule could leave Flink
// without a pointer it reads.
func ambiguous(l *Layout, js *JobState) error {
	if js.LockStyle != LockStyleUnknown || len(js.Pointers) == 0 {
		return nil
	}
	return fmt.Errorf("%w: job %s has only childless pointers under %s and nothing else tells Flink 1.14 (live) from 1.15+ (marked for deletion); pass the Flink version (evidence: %s)",
		ErrAmbiguousLayout, js.JobID, js.PointerDir, strings.Join(l.Evidence, "; "))
}

// jobReason explains a job that was not refused.
func jobReason(plan JobPlan, jt *JobTakeover, js *JobState, dryRun bool) string {
	switch {
	case len(js.Pointers) == 0:
		return "no checkpoint pointers: Flink starts the job as its job graph says"
	case plan.NewestComplete < 0:
		return "every pointer is marked for deletion (no locks child): Flink skips them and starts the job as its job graph says"
	}
	verb := "retracted"
	if dryRun {
		verb = "would retract"
	}
	s := fmt.Sprintf("newest pointer complete here at L2 is %d", plan.NewestComplete)
	var above, unreadable []string
	for _, r := range jt.Retractions {
		if r.Reason == ReasonAboveNewestComplete {
			above = append(above, strconv.FormatInt(r.ID, 10))
		} else {
			unreadable = append(unreadable, strconv.FormatInt(r.ID, 10))
		}
	}
	if len(above) > 0 {
		s += fmt.Sprintf("; %s %s (newer, not complete here)", verb, strings.Join(above, ", "))
	}
	if len(unreadable) > 0 {
		s += fmt.Sprintf("; %s %s (HA file unreadable here)", verb, strings.Join(unreadable, ", "))
	}
	if len(jt.Retractions) == 0 {
		s += "; nothing to retract"
	}
	return s
}

// backups lists the backups of a job: of retracted pointers, and of
// kept ones (Backup.Kept). An unreadable backup counts as retracted.
func (b *Bridge) backups(ctx context.Context, paths ckptfsPaths, job string) (retracted, kept []int64, err error) {
	ids, err := b.backupIDs(ctx, paths, job)
	if err != nil {
		return nil, nil, err
	}
	kinds := make([]int, len(ids)) // 0 gone, 1 retracted, 2 kept
	if _, err := forEachJob(ctx, len(ids), func(ctx context.Context, i int) error {
		data, _, err := b.zk.get(ctx, paths.pruned(job, ids[i]))
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil
		case err != nil:
			return err
		}
		if bk, derr := decodeBackup(data); derr == nil && bk.Kept {
			kinds[i] = 2
		} else {
			kinds[i] = 1
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	for i, id := range ids {
		switch kinds[i] {
		case 1:
			retracted = append(retracted, id)
		case 2:
			kept = append(kept, id)
		}
	}
	return retracted, kept, nil
}

// backupKept backs up the kept pointers that have no backup yet, each in
// one fenced multi, marked kept, and returns every kept pointer with a
// backup. A pointer that changed meanwhile is left for the next run.
func (b *Bridge) backupKept(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, js *JobState, keep []int64) ([]int64, error) {
	if len(keep) > 0 {
		if err := b.zk.ensure(ctx, paths.prunedJob(js.JobID)); err != nil {
			return nil, err
		}
	}
	// Each kept pointer's backup is its own fenced multi, independent of
	// the others': they are written at once.
	done := make([]bool, len(keep))
	if _, err := forEachJob(ctx, len(keep), func(ctx context.Context, i int) (err error) {
		done[i], err = b.backupKeptOne(ctx, paths, lock, ep, js, keep[i])
		return err
	}); err != nil {
		return nil, err
	}
	var out []int64
	for i, id := range keep {
		if done[i] {
			out = append(out, id)
		}
	}
	return out, nil
}

// backupKeptOne backs up one kept pointer (backupKept) and reports
// whether it has a backup now.
func (b *Bridge) backupKeptOne(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, js *JobState, id int64) (bool, error) {
	p := js.pointer(id)
	if p == nil {
		return false, nil
	}
	backupPath := paths.pruned(p.JobID, p.ID)
	old, _, err := b.zk.get(ctx, backupPath)
	switch {
	case err == nil:
		if prev, derr := decodeBackup(old); derr == nil && prev.sameOriginal(p.Znode, p.Data, p.HasLocksNode) {
			return true, nil
		}
		b.log.Warn("a backup of another pointer is in the way: the kept pointer is not backed up", "job", p.JobID, "checkpoint", p.ID, "backup", backupPath)
		return false, nil
	case !errors.Is(err, zk.ErrNoNode):
		return false, err
	}
	bk, ok, err := b.backupOf(ctx, ep, js, p, ReasonKept)
	if err != nil || !ok {
		return false, err
	}
	bk.Kept = true
	data, err := bk.encode()
	if err != nil {
		return false, err
	}
	err = b.fencedMulti("back up kept "+p.Znode, epochGuard(paths, ep), lock.guard(),
		txOp{name: "backup", op: &zk.CreateRequest{Path: backupPath, Data: data, Acl: b.zk.acls.forPath(backupPath)}})
	switch {
	case err == nil, errors.Is(err, zk.ErrNodeExists):
	case errors.Is(err, ErrEpochChanged), errors.Is(err, ErrLockLost):
		return false, err
	case errors.Is(err, errOutcomeUnknown):
		if st, xerr := b.zk.exists(ctx, backupPath); xerr != nil || st == nil {
			return false, fmt.Errorf("backing up kept pointer %s: %w", p.Znode, err)
		}
	default:
		return false, err
	}
	b.log.Info("kept pointer backed up", "job", p.JobID, "checkpoint", p.ID, "backup", backupPath)
	return true, nil
}

// backupOf is the backup of pointer p as read now: its bytes, its locks
// child's bytes and both ACLs at the versions read. ok is false when the
// pointer changed since it was read.
func (b *Bridge) backupOf(ctx context.Context, ep epochState, js *JobState, p *Pointer, reason RetractReason) (*Backup, bool, error) {
	bk := &Backup{
		Format: backupFormat, JobID: p.JobID, CheckpointID: p.ID, Znode: p.Znode, Data: p.Data,
		HadLocks: p.HasLocksNode, CounterZnode: js.CounterPath, Reason: reason,
		Site: b.cfg.Site, Epoch: ep.value, RetractedAt: time.Now().UTC(),
	}
	// The locks child's bytes and both ACLs at once.
	var (
		acl, locksACL []ACL
		same          bool
		aclErr        error
		wg            sync.WaitGroup
	)
	wg.Go(func() { acl, locksACL, same, aclErr = b.backupACLs(ctx, p) })
	defer wg.Wait()
	if p.HasLocksNode {
		// The locks child's bytes, at the version the multi deletes: the
		// backup holds what it removes.
		data, stat, err := b.zk.get(ctx, join(p.Znode, "locks"))
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		case stat.Version != p.LocksStat.Version:
			return nil, false, nil
		}
		bk.LocksData = data
	}
	if p.Handle != nil {
		bk.HAFile = p.Handle.URI
	}
	wg.Wait()
	if aclErr != nil || !same {
		return nil, false, aclErr
	}
	bk.ACL, bk.LocksACL = acl, locksACL
	return bk, true, nil
}

// backupIDs lists the backups of a job.
func (b *Bridge) backupIDs(ctx context.Context, paths ckptfsPaths, job string) ([]int64, error) {
	names, _, err := b.zk.children(ctx, paths.prunedJob(job))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, n := range names {
		if id, ok := parseCheckpointName(n); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// retract removes one pointer in one multi: the epoch is unchanged, the
// lock still ours, the backup is created (or already holds exactly this
// pointer), locks and the pointer are deleted at the versions read. With
// dropLocks the JobManagers' ephemeral locks read are deleted too (a
// takeover finds none: it runs once no JobManager is alive). It returns
// false (and no error) when the pointer changed meanwhile: the caller
// re-reads and re-plans.
func (b *Bridge) retract(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, js *JobState, p *Pointer, r Retraction, dropLocks bool) (bool, error) {
	log := b.log.With("job", p.JobID, "checkpoint", p.ID, "znode", p.Znode, "version", p.Stat.Version)
	backupPath := paths.pruned(p.JobID, p.ID)
	// The backup's znode is read beside the pointer's state.
	var (
		old     []byte
		oldStat *zk.Stat
		oldErr  error
		wg      sync.WaitGroup
	)
	wg.Go(func() { old, oldStat, oldErr = b.zk.get(ctx, backupPath) })
	bk, ok, err := b.backupOf(ctx, ep, js, p, r.Reason)
	wg.Wait()
	if err != nil || !ok {
		if err == nil {
			log.Info("pointer, its locks child or their ACLs changed since read")
		}
		return false, err
	}
	data, err := bk.encode()
	if err != nil {
		return false, err
	}
	ops := append([]txOp{epochGuard(paths, ep), lock.guard()}, lock.leaseCheck()...)
	switch {
	case errors.Is(oldErr, zk.ErrNoNode):
		ops = append(ops, txOp{name: "backup", op: &zk.CreateRequest{Path: backupPath, Data: data, Acl: b.zk.acls.forPath(backupPath)}})
	case oldErr != nil:
		return false, oldErr
	default:
		prev, derr := decodeBackup(old)
		if derr != nil || !prev.sameOriginal(p.Znode, p.Data, p.HasLocksNode) {
			return false, fmt.Errorf("%w: %s holds another pointer than %s (version %d); move it away first", ErrBackupConflict, backupPath, p.Znode, p.Stat.Version)
		}
		if prev.Kept {
			// The backup of a kept pointer becomes that of a retracted one.
			log.Info("backup of this pointer (kept by an earlier takeover) exists: marking it retracted")
			ops = append(ops, txOp{name: "backup", op: &zk.SetDataRequest{Path: backupPath, Data: data, Version: oldStat.Version}})
		} else {
			log.Info("backup of this pointer exists already: reusing it")
			ops = append(ops, txOp{name: "backup", op: &zk.CheckVersionRequest{Path: backupPath, Version: oldStat.Version}})
		}
	}
	if dropLocks {
		for _, n := range p.Locks {
			// Flink never writes a lock node: version 0.
			ops = append(ops, txOp{name: "lock " + n.Owner.String(), op: &zk.DeleteRequest{Path: n.Path, Version: 0}})
		}
	}
	if p.HasLocksNode {
		ops = append(ops, txOp{name: "locks child", op: &zk.DeleteRequest{Path: join(p.Znode, "locks"), Version: p.LocksStat.Version}})
	}
	ops = append(ops, txOp{name: "pointer", op: &zk.DeleteRequest{Path: p.Znode, Version: p.Stat.Version}})

	err = b.fencedMulti("retract "+p.Znode, ops...)
	switch {
	case err == nil:
		log.Info("pointer retracted", "reason", string(r.Reason), "backup", backupPath)
		return true, nil
	case errors.Is(err, errOutcomeUnknown):
		log.Warn("retraction outcome unknown: re-reading", "err", err)
		return b.retractionApplied(ctx, p, backupPath)
	case errors.Is(err, ErrEpochChanged), errors.Is(err, ErrLockLost), errors.Is(err, ErrLeaseRenewed):
		return false, err
	case errors.Is(err, zk.ErrNotEmpty):
		return false, fmt.Errorf("%w: %s got a lock during the takeover: %w", ErrJobManagerAlive, p.Znode, err)
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists):
		log.Info("changed since read", "op", refusedBy(err), "err", err)
		return false, nil
	}
	return false, err
}

// retractionApplied decides, by reading, whether a retraction whose reply
// was lost took effect: the pointer is gone and the backup holds it.
func (b *Bridge) retractionApplied(ctx context.Context, p *Pointer, backupPath string) (bool, error) {
	stat, err := b.zk.exists(ctx, p.Znode)
	if err != nil {
		return false, err
	}
	if stat != nil {
		return false, nil // not applied (or the pointer changed): re-plan
	}
	data, _, err := b.zk.get(ctx, backupPath)
	if errors.Is(err, zk.ErrNoNode) {
		b.log.Warn("pointer vanished without our backup", "job", p.JobID, "checkpoint", p.ID, "znode", p.Znode)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	bk, err := decodeBackup(data)
	if err != nil || !bk.sameOriginal(p.Znode, p.Data, p.HasLocksNode) {
		return false, nil
	}
	b.log.Info("pointer retracted (confirmed after a lost reply)", "job", p.JobID, "checkpoint", p.ID, "znode", p.Znode)
	return true, nil
}

// startLease starts observing the lease for a takeover: owned reports
// that this site holds it already (nothing to wait for). A missing lease
// is created, owned by nobody, so that it has a version to observe and
// to guard (not in a dry run).
func (b *Bridge) startLease(ctx context.Context, o *LeaseObserver, dryRun bool, rep *TakeoverReport) (owned bool, err error) {
	st, err := b.ReadState(ctx)
	if err != nil {
		return false, err
	}
	if st.Holds(b.cfg.Site) {
		return true, nil
	}
	if !st.leaseExists && !dryRun {
		if err := b.ensureLease(ctx, st.paths, st.Epoch); err != nil {
			return false, err
		}
		if st, err = b.ReadState(ctx); err != nil {
			return false, err
		}
	}
	v := o.See(st)
	rep.Lease = &v
	return false, nil
}

// activate sets active-site, bumps the epoch and grants the lease to
// this site in one multi, checked against the epoch version every
// retraction was checked against and against the lease in the state in
// which no other site's daemon claimed it (the lock's guard). judged is
// the zxid up to which the caller judged every pointer (design §5.5.2).
func (b *Bridge) activate(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, activeStat *zk.Stat, judged int64, before func()) error {
	if lock.lease == nil {
		return errors.New("activate: no lease guard: the lease was not observed")
	}
	site := []byte(b.cfg.Site)
	next := []byte(strconv.FormatInt(ep.value+1, 10))
	host, _ := os.Hostname()
	rec := LeaseRecord{Site: b.cfg.Site, Epoch: ep.value + 1, Judged: judged,
		GrantedBy: fmt.Sprintf("%s's %s (%s pid %d)", b.cfg.Site, lock.op, host, os.Getpid()), GrantedAt: time.Now().UTC()}
	for attempt := 0; attempt < 5; attempt++ {
		if before != nil {
			before()
		}
		ops := []txOp{lock.guard(), epochBump(paths, ep, next), lock.lease.grant(rec)}
		if activeStat == nil {
			ops = append(ops, txOp{name: "active-site", op: &zk.CreateRequest{Path: paths.activeSite(), Data: site, Acl: b.zk.acls.forPath(paths.activeSite())}})
		} else {
			ops = append(ops, txOp{name: "active-site", op: &zk.SetDataRequest{Path: paths.activeSite(), Data: site, Version: activeStat.Version}})
		}
		err := b.fencedMulti("activate "+b.cfg.Site, ops...)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrLockLost), errors.Is(err, ErrEpochChanged), errors.Is(err, ErrLeaseRenewed):
			return err
		case refusedBy(err) == "active-site" || errors.Is(err, errOutcomeUnknown):
			// Re-read: did it apply, or did active-site change beside the
			// epoch?
			cur, err := b.readEpoch(ctx, paths)
			if err != nil {
				return err
			}
			active, stat, err := b.readActiveSite(ctx, paths)
			if err != nil {
				return err
			}
			switch {
			case cur.value == ep.value+1 && active == b.cfg.Site:
				return nil
			case cur.version != ep.version:
				return fmt.Errorf("%w (activating): epoch is %d", ErrEpochChanged, cur.value)
			}
			activeStat = stat
			continue
		}
		return err
	}
	return errors.New("activate: active-site kept changing")
}
