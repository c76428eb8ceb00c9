package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SweptPointer is a pointer the active site's sweep retracted.
type SweptPointer struct {
	JobID  string        `json:"job_id"`
	ID     int64         `json:"id"`
	Reason RetractReason `json:"reason"`
}

// SweepStats counts what a Sweeper did.
type SweepStats struct {
	Passes    uint64 `json:"passes"`
	Retracted uint64 `json:"retracted"`
	Failures  uint64 `json:"failures"`
	// SkippedLocked counts passes that had stray pointers due but found
	// the takeover lock held: a lock held for ever (a stuck takeover, or
	// a node another client made under takeover/) keeps the sweeper off.
	SkippedLocked uint64 `json:"skipped_locked"`
	// LeftNoComplete counts each judgement (one a pass, two when the
	// pass also retracts other strays under the lock) of a job whose
	// pointers since the activation are all incomplete here, left
	// because this site's marker names a complete checkpoint of the job:
	// retracting them would start the job from empty state (design
	// §5.5.2).
	LeftNoComplete uint64 `json:"left_no_complete"`
	// LockHolder names the lock node that made the last pass skip, and
	// who holds it; LockForeign is set when its data is not a ckptfs
	// lock holder's; LockedSince is when passes first found it holding
	// the lock. All three clear when a pass takes the lock.
	LockHolder  string    `json:"lock_holder,omitempty"`
	LockForeign bool      `json:"lock_foreign,omitempty"`
	LockedSince time.Time `json:"locked_since,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// Sweeper keeps ZooKeeper from pointing, after a takeover, at what the
// active site does not hold. A takeover judges the pointers that exist
// when it runs; a JobManager of the old site that comes back may still
// add one afterwards: Curator retries a create cut off by a partition
// with a new session once the link is back, and Flink's stores do not
// check leadership in that write. Its HA file is on the old site's NAS
// only, and the next recovery on the active site would fail on it
// forever. On the active site, under a lease naming it, each pass
// applies the takeover's rule (PlanJob) to the pointers created after
// the zxid the lease says its activation judged, and retracts, with the
// same fenced multi and backup, those that:
//
//   - PlanJob would retract (not L2-complete here, or above the newest
//     one that is), or, when none of the job's visible pointers is
//     complete, all of them were created since (unless this site's
//     marker names a complete checkpoint of the job: then it is the
//     operator's, and warned);
//   - were not written by a session that leads now: Flink adds a pointer
//     and its lock in one transaction, so the running JobManager's own
//     pointers are never judged, whatever a stale read of the NAS says
//     (a lock it adds later, recovering, does not count: a new leader
//     locks a stray pointer too before failing on it);
//   - were not put back by this site's restore-pruned during this
//     activation: its record, written in the multi that created the
//     pointer, has the pointer's czxid as mzxid and names the epoch's
//     last write (Restored); such pointers are the operator's;
//   - have a verdict (an I/O error decides nothing);
//   - stayed so for the grace period (the daemon passes Flink's session
//     timeout: the lease of a writer's creating lock), and again when
//     judged under the takeover lock.
//
// A stray pointer's lock, held by the old site's JobManager, is deleted
// with it.
type Sweeper struct {
	b     *Bridge
	grace time.Duration
	now   func() time.Time

	mu    sync.Mutex
	seen  map[strayKey]time.Time // GUARDED_BY(mu): when a candidate was first seen
	stats SweepStats             // GUARDED_BY(mu)
	// held: GUARDED_BY(mu). The lock node that made passes skip since
	// stats.LockedSince (its path and czxid: a node made again is
	// another), and when that was last logged as a warning.
	held       strayKey
	heldWarned time.Time
	// leftWarned: GUARDED_BY(mu). Per job left without a complete
	// pointer, the marker's checkpoint last warned of.
	leftWarned map[string]int64

	// beforeRetract is a test seam, called under the takeover lock with
	// the strays judged there, before they are retracted.
	beforeRetract func(due []SweptPointer)
}

// strayKey names one pointer node: a pointer deleted and created again
// is another.
type strayKey struct {
	znode string
	czxid int64
}

type stray struct {
	js *JobState
	p  *Pointer
	r  Retraction
}

func (s stray) key() strayKey { return strayKey{s.p.Znode, s.p.Stat.Czxid} }

// NewSweeper returns a sweeper that retracts a stray pointer once it was
// seen for grace. The bridge must have a site.
func (b *Bridge) NewSweeper(grace time.Duration) (*Sweeper, error) {
	if err := b.requireSite("sweep"); err != nil {
		return nil, err
	}
	if grace < 0 {
		return nil, fmt.Errorf("zkbridge: sweep grace %v is negative", grace)
	}
	return &Sweeper{b: b, grace: grace, now: time.Now, seen: map[strayKey]time.Time{}, leftWarned: map[string]int64{}}, nil
}

// Stats returns the counts so far.
func (s *Sweeper) Stats() SweepStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Run makes a pass every interval, and at least a quarter of the grace
// apart (design §5.5.3: a pass reads every job's pointers; the quarter
// only delays a retraction), until ctx ends. After a pass that failed,
// the next waits twice as long as before it, up to 32 intervals: a
// failure that stays (a conflicting backup) takes the takeover lock and
// warns that often, not every interval. A run starts with no candidate:
// their grace counts from passes of this run (the site duty's holder's,
// whose tenure may have gaps).
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	interval = max(interval, s.grace/4)
	s.keep(nil)
	wait := interval
	for {
		if _, err := s.Pass(ctx); err != nil && ctx.Err() == nil {
			wait = min(2*wait, 32*interval)
			s.b.log.Warn("sweeping stray pointers", "err", err, "retry", wait.String())
		} else {
			wait = interval
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Pass makes one pass and returns what it retracted. It does nothing
// unless this site is active.
func (s *Sweeper) Pass(ctx context.Context) (swept []SweptPointer, err error) {
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stats.Passes++
		s.stats.Retracted += uint64(len(swept))
		if err != nil && ctx.Err() == nil {
			s.stats.Failures++
			s.stats.LastError = err.Error()
		}
	}()
	b := s.b
	// Without a session there is nothing to judge, and the outage is the
	// session's to report (health, metrics), not each pass's.
	if b.Session().State != SessionConnected {
		return nil, nil
	}
	// Cheap first: the mode follower reads active-site as often.
	active, _, err := b.ActiveSite(ctx)
	if errors.Is(err, ErrNoNamespace) || err == nil && active != b.cfg.Site {
		s.keep(nil)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := b.discover(ctx)
	if errors.Is(err, ErrNoNamespace) {
		return nil, nil // Flink has not run here yet: no pointer to judge
	}
	if err != nil {
		return nil, err
	}
	paths := b.ckptfsFor(l)
	cands, err := s.strays(ctx, paths, l)
	if err != nil {
		return nil, err
	}
	due := s.keep(cands)
	if len(due) == 0 {
		return nil, nil
	}
	lock, err := b.acquireLock(ctx, paths, "sweep", 0)
	if errors.Is(err, ErrTakeoverInProgress) {
		// The next pass judges what it leaves; but a lock that stays
		// held keeps the sweeper off, so every skip is counted and told.
		s.skipped(ctx, paths, due)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer b.releaseLock(lock)
	s.mu.Lock()
	s.stats.LockHolder, s.stats.LockForeign, s.stats.LockedSince = "", false, time.Time{}
	s.held, s.heldWarned = strayKey{}, time.Time{}
	s.mu.Unlock()
	// Under the lock, neither the epoch nor active-site can change
	// without the multis below failing their guards.
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return nil, err
	}
	if cands, err = s.strays(ctx, paths, l); err != nil {
		return nil, err
	}
	due = s.keep(cands)
	if s.beforeRetract != nil {
		var ds []SweptPointer
		for _, c := range due {
			ds = append(ds, SweptPointer{JobID: c.p.JobID, ID: c.p.ID, Reason: c.r.Reason})
		}
		s.beforeRetract(ds)
	}
	for _, c := range due {
		if err := b.zk.ensure(ctx, paths.prunedJob(c.p.JobID)); err != nil {
			return swept, err
		}
		applied, err := b.retract(ctx, paths, lock, ep, c.js, c.p, c.r, true)
		if err != nil {
			return swept, err
		}
		if applied {
			b.log.Warn("stray pointer retracted: written after this site's takeover, not held here",
				"job", c.p.JobID, "checkpoint", c.p.ID, "reason", string(c.r.Reason), "backup", paths.pruned(c.p.JobID, c.p.ID))
			swept = append(swept, SweptPointer{JobID: c.p.JobID, ID: c.p.ID, Reason: c.r.Reason})
		}
	}
	return swept, nil
}

// keep remembers when each candidate was first seen, forgets the others,
// and returns those seen for the grace period.
func (s *Sweeper) keep(cands []stray) []stray {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	seen := make(map[strayKey]time.Time, len(cands))
	var due []stray
	for _, c := range cands {
		first, ok := s.seen[c.key()]
		if !ok {
			first = now
		}
		seen[c.key()] = first
		if now.Sub(first) >= s.grace {
			due = append(due, c)
		}
	}
	s.seen = seen
	return due
}

// strays reads and judges every job's pointers; nothing when this site
// is not active.
func (s *Sweeper) strays(ctx context.Context, paths ckptfsPaths, l *Layout) ([]stray, error) {
	b := s.b
	active, _, err := b.readActiveSite(ctx, paths)
	if err != nil || active != b.cfg.Site {
		return nil, err
	}
	since, ok, err := b.judgedSince(ctx, paths)
	if err != nil || !ok {
		return nil, err
	}
	// A put-back is this activation's while the epoch's last write is
	// the one its record names; without an epoch none is.
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return nil, err
	}
	epochZxid := int64(-1)
	if ep.exists {
		epochZxid = ep.mzxid
	}
	live, err := b.liveness(ctx, l)
	if err != nil {
		return nil, err
	}
	var leaders []SessionID
	for _, n := range live.Nodes {
		if n.Kind == KindLeader {
			leaders = append(leaders, n.Owner)
		}
	}
	perJob := make([][]stray, len(l.Jobs))
	// orphans: per job with no complete visible pointer, every visible
	// one when all are suspects with a verdict.
	orphans := make([][]stray, len(l.Jobs))
	_, err = forEachJob(ctx, len(l.Jobs), func(ctx context.Context, i int) error {
		js, err := b.readJob(ctx, l.Jobs[i])
		if err != nil || js.LockStyle == LockStyleUnknown {
			return err // an ambiguous layout is the takeover's to refuse
		}
		// Only pointers the activation may not have judged, not
		// written by a leader nor put back during this activation, are
		// suspects; a job without one costs no verification.
		var suspects, restored []int64
		for _, p := range js.Pointers {
			own := slices.ContainsFunc(p.Locks, func(n EphemeralNode) bool {
				return n.Czxid == p.Stat.Czxid && slices.Contains(leaders, n.Owner)
			})
			if p.Stat.Czxid <= since || own {
				continue
			}
			// Read after p: a record written with p is seen.
			back, err := b.putBack(ctx, paths, p, epochZxid)
			if err != nil {
				return err
			}
			if back {
				restored = append(restored, p.ID)
			} else {
				suspects = append(suspects, p.ID)
			}
		}
		if len(suspects) == 0 {
			return nil
		}
		for _, p := range js.Pointers {
			p.Verdict = b.verifyPointer(ctx, p)
		}
		plan := PlanJob(facts(js))
		if plan.Refused {
			// With a put-back left the job keeps a pointer: the
			// marker's exception (starting empty) does not apply.
			if o, kept := allSuspects(js, suspects, restored); kept {
				perJob[i] = o
			} else {
				orphans[i] = o
			}
			return nil
		}
		for _, r := range plan.Retract {
			if p := js.pointer(r.ID); slices.Contains(suspects, r.ID) && !p.Verdict.Verdict.Unknown {
				perJob[i] = append(perJob[i], stray{js: js, p: p, r: r})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(orphans, func(o []stray) bool { return len(o) > 0 }) {
		markers, err := b.readMarkers(ctx, paths)
		if err != nil {
			return nil, err
		}
		for i, o := range orphans {
			if len(o) == 0 {
				continue
			}
			if m, ok := markers[b.cfg.Site][l.Jobs[i].JobID]; ok && m.CheckpointID >= 0 {
				s.leftNoComplete(o, m)
				continue
			}
			perJob[i] = o
		}
	}
	return slices.Concat(perJob...), nil
}

// allSuspects returns every visible pointer of a job none of whose
// visible pointers is complete, to retract, when all of them but those
// put back during this activation (restored, which stay) are suspects
// (created after the judged bound, not a leader's) with a verdict; nil
// otherwise: a pointer the activation judged (it refused the job) or a
// leader's makes the job the operator's as it stands. kept reports that
// a visible put-back stays.
func allSuspects(js *JobState, suspects, restored []int64) (out []stray, kept bool) {
	for _, p := range js.Pointers {
		switch {
		case !p.Visible:
			continue
		case slices.Contains(restored, p.ID):
			kept = true
			continue
		case !slices.Contains(suspects, p.ID) || p.Verdict.Verdict.Unknown:
			return nil, false
		}
		out = append(out, stray{js: js, p: p, r: Retraction{ID: p.ID, Reason: ReasonNoneCompleteSinceActivation}})
	}
	return out, kept
}

// leftNoComplete counts a job whose pointers since the activation are
// all incomplete here, left because this site holds complete checkpoint
// m of it, and warns once per job and checkpoint.
func (s *Sweeper) leftNoComplete(o []stray, m Marker) {
	job := o[0].p.JobID
	s.mu.Lock()
	s.stats.LeftNoComplete++
	last, warned := s.leftWarned[job]
	s.leftWarned[job] = m.CheckpointID
	s.mu.Unlock()
	warn := !warned || last != m.CheckpointID
	if !warn {
		return
	}
	var ids []string
	for _, c := range o {
		ids = append(ids, strconv.FormatInt(c.p.ID, 10))
	}
	s.b.log.Warn("stray pointers left: none of the job's pointers is complete on this site and all were written after its activation, but retracting them would start the job from empty state although this site holds a complete checkpoint of it; stop Flink on the other site, then start the job from that checkpoint or delete the pointers (docs/runbook.md)",
		"job", job, "pointers", strings.Join(ids, ","), "checkpoint", m.CheckpointID, "detail", "flink run -s "+m.Path)
}

// judgedSince is the zxid after which a pointer was not judged by the
// activation that made this site active: the bound its lease records
// (design §5.5.2). ok is false without a lease naming this site: then
// no bound is known, and nothing is judged until an activation writes
// one.
func (b *Bridge) judgedSince(ctx context.Context, paths ckptfsPaths) (since int64, ok bool, err error) {
	lease, err := b.readLease(ctx, paths)
	if err != nil || lease == nil || lease.Site != b.cfg.Site {
		return 0, false, err
	}
	return lease.Judged, true, nil
}

// stuckLockAfter is how long the takeover lock may keep the sweeper off
// before each skipped pass warns (at most once per this long): longer
// than a takeover holds it, which waits at most LockWait for an earlier
// holder and then its wait, by default Flink's session timeout plus a
// margin (4.5 min with the defaults: 2 min + 2 × 75 s).
func (b *Bridge) stuckLockAfter() time.Duration {
	return b.cfg.LockWait + 2*b.cfg.DefaultTakeoverWait()
}

// skipped counts a pass that found the takeover lock held with due
// stray pointers, records who holds it, and logs: a warning at once when
// the holder is not ckptfs's, and whenever it has held the lock past
// stuckLockAfter (at most once per that long); else an info line for a
// new holder and a debug line for the same.
func (s *Sweeper) skipped(ctx context.Context, paths ckptfsPaths, due []stray) {
	b := s.b
	h := b.lockHolderNow(ctx, paths)
	now := s.now()
	s.mu.Lock()
	s.stats.SkippedLocked++
	key := strayKey{h.node, h.czxid}
	fresh := key != s.held || s.stats.LockedSince.IsZero()
	if fresh {
		s.held, s.heldWarned = key, time.Time{}
		s.stats.LockedSince = now
	}
	s.stats.LockHolder, s.stats.LockForeign = h.describe, h.foreign
	since := s.stats.LockedSince
	held := now.Sub(since)
	bound := b.stuckLockAfter()
	warn := (h.foreign || held >= bound) && (s.heldWarned.IsZero() || now.Sub(s.heldWarned) >= bound)
	if warn {
		s.heldWarned = now
	}
	s.mu.Unlock()

	var ids []string
	for _, d := range due {
		ids = append(ids, d.p.JobID+"/"+strconv.FormatInt(d.p.ID, 10))
	}
	log := b.log.With("holder", h.describe, "waited", held.Round(time.Second).String(), "pointers", strings.Join(ids, ","))
	switch {
	case warn && h.foreign:
		log.Warn("the takeover lock is held by a znode that is not ckptfs's (its data is not a ckptfs lock holder): the sweeper retracts no stray pointer while it stays; delete it (zkCli.sh delete, as ZooKeeper's super user if its ACL needs one) and let ckptfs authenticate so that no other client may create there (docs/runbook.md)",
			"znode", h.node, "session", h.owner.String())
	case warn:
		log.Warn("the takeover lock has kept the sweeper off for longer than a takeover holds it: a takeover or restore-pruned may be stuck",
			"znode", h.node, "session", h.owner.String(), "timeout", bound.String())
	case fresh:
		log.Info("sweep deferred: the takeover lock is held; the next pass judges again")
	default:
		log.Debug("sweep deferred: the takeover lock is still held")
	}
}

// heldLock is who holds the takeover lock, for messages.
type heldLock struct {
	node  string
	czxid int64
	owner SessionID
	// foreign: the node's data is not a ckptfs lockHolder (another
	// client made it).
	foreign  bool
	describe string
}

// lockHolderNow reads the takeover lock's holder: the lock node with the
// lowest sequence number. Errors and a lock released meanwhile give an
// empty node, described as such.
func (b *Bridge) lockHolderNow(ctx context.Context, paths ckptfsPaths) heldLock {
	names, _, err := b.zk.children(ctx, paths.takeover())
	if err != nil {
		return heldLock{describe: fmt.Sprintf("unknown (%v)", err)}
	}
	low, lowSeq := "", ""
	for _, n := range names {
		if seq, ok := lockSeq(n); ok && (low == "" || seq < lowSeq) {
			low, lowSeq = n, seq
		}
	}
	if low == "" {
		return heldLock{describe: "none (released since)"}
	}
	node := join(paths.takeover(), low)
	data, stat, err := b.zk.get(ctx, node)
	if err != nil {
		return heldLock{node: node, describe: fmt.Sprintf("%s (unreadable: %v)", node, err)}
	}
	h := heldLock{node: node, czxid: stat.Czxid, owner: SessionID(stat.EphemeralOwner)}
	var lh lockHolder
	if json.Unmarshal(data, &lh) != nil || lh.Site == "" || lh.Op == "" || lh.Started.IsZero() {
		h.foreign = true
	}
	h.describe = b.describeHolder(ctx, node)
	if !h.foreign {
		h.describe = fmt.Sprintf("%s of session %s", h.describe, h.owner)
	}
	return h
}
