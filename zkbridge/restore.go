package zkbridge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// RestoreOptions are the choices of one RestorePruned.
type RestoreOptions struct {
	// Jobs limits the restore to these job ids (all when empty).
	Jobs []string
	// Unverified puts pointers back even when their checkpoint is not
	// L2-complete on this site. Flink restores the newest pointer, so a
	// pointer that is put back unverified may make it fail again.
	Unverified bool
	// DryRun reports and writes nothing.
	DryRun bool
	// RecreateJob puts pointers back also for a job whose checkpoint
	// store Flink removed (a job that reached FAILED): the missing
	// parents of the pointer and the checkpoint id counter (the highest
	// id put back plus one) are created with the pointer's ACL, in the
	// same multi. Flink recovers the job only if its job graph is there
	// too; otherwise the pointers name its checkpoints for people.
	RecreateJob bool

	// beforeRestore is a test seam, called before every restore's
	// multi, one call at a time.
	beforeRestore func(job string, id int64)
}

// RestoreReport is what RestorePruned did.
type RestoreReport struct {
	Site string `json:"site"`
	// ActiveSite is the site active-site names ("" before any
	// activation).
	ActiveSite string        `json:"active_site"`
	DryRun     bool          `json:"dry_run"`
	Jobs       []*JobRestore `json:"jobs"`
}

// JobRestore is what RestorePruned did for one job.
type JobRestore struct {
	JobID    string          `json:"job_id"`
	Restored []int64         `json:"restored"`
	Skipped  []SkippedBackup `json:"skipped"`
}

// SkippedBackup is a backup left in place, and why.
type SkippedBackup struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

// RestorePruned puts retracted pointers back from their backups
// (docs/design.md §5.6): the original bytes and, for 1.15+, the persistent
// locks child without which Flink treats the pointer as deleted, with its
// original bytes (empty from a backup that predates Backup.LocksData),
// and records the put-back in the same multi (Restored). A
// backup is put back only where the pointer is absent and its parent
// still exists, its id is below the job's checkpoint counter (ids stay
// ascending) and, unless Unverified, the checkpoint is L2-complete here;
// then the backup is deleted, in the same multi. It runs only on the
// site active-site names (a *NotActiveError otherwise, dry run too), holds
// the takeover lock (except in a dry run), checks in every multi the
// epoch, the lock and active-site's version, and refuses while a
// JobManager is alive (it would not see the pointers). Under the lock it
// also drops the records of put-backs whose pointer is gone.
func (b *Bridge) RestorePruned(ctx context.Context, opts RestoreOptions) (*RestoreReport, error) {
	ctx = manifest.WithoutTrust(ctx) // it acts on what it finds complete
	if err := b.requireSite("restore-pruned"); err != nil {
		return nil, err
	}
	l, err := b.discover(ctx)
	if err != nil {
		return nil, err
	}
	paths := b.ckptfsFor(l)
	rep := &RestoreReport{Site: b.cfg.Site, DryRun: opts.DryRun, Jobs: []*JobRestore{}}
	// Only the active site's Flink reads these pointers, and only its
	// replica vouches for them: refuse elsewhere before writing
	// anything (the lock, the epoch).
	activeStat, err := b.requireActive(ctx, paths, rep)
	if err != nil {
		return rep, err
	}
	var lock *takeoverLock
	if !opts.DryRun {
		if err := b.zk.ensure(ctx, paths.takeover()); err != nil {
			return nil, err
		}
		if err := b.zk.createIfAbsent(ctx, paths.epoch(), []byte("0")); err != nil {
			return nil, err
		}
		if lock, err = b.acquireLock(ctx, paths, "restore-pruned", b.cfg.LockWait); err != nil {
			return nil, err
		}
		defer b.releaseLock(lock)
		// Again under the lock: the version every restore multi checks.
		if activeStat, err = b.requireActive(ctx, paths, rep); err != nil {
			return rep, err
		}
	}
	live, err := b.liveness(ctx, l)
	if err != nil {
		return nil, err
	}
	if live.Alive {
		return rep, fmt.Errorf("%w: %s; pointers put back now would not be seen by it", ErrJobManagerAlive, live)
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		// Under the lock: records whose pointer went match nothing.
		recJobs, _, err := b.zk.children(ctx, paths.restoredRoot())
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		for _, job := range recJobs {
			if len(opts.Jobs) == 0 || slices.Contains(opts.Jobs, job) {
				if err := b.dropStaleRecords(ctx, paths, job); err != nil {
					return nil, err
				}
			}
		}
	}
	jobs, _, err := b.zk.children(ctx, paths.prunedRoot())
	if errors.Is(err, zk.ErrNoNode) {
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	layouts := map[string]JobLayout{}
	for _, jl := range l.Jobs {
		layouts[jl.JobID] = jl
	}
	for _, job := range jobs {
		if len(opts.Jobs) > 0 && !slices.Contains(opts.Jobs, job) {
			continue
		}
		jr, err := b.restoreJob(ctx, paths, lock, ep, activeStat, l, layouts[job], job, opts)
		if err != nil {
			return rep, err
		}
		rep.Jobs = append(rep.Jobs, jr)
	}
	return rep, nil
}

func (b *Bridge) restoreJob(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, ep epochState, activeStat *zk.Stat, l *Layout, jl JobLayout, job string, opts RestoreOptions) (*JobRestore, error) {
	jr := &JobRestore{JobID: job, Restored: []int64{}, Skipped: []SkippedBackup{}}
	ids, err := b.backupIDs(ctx, paths, job)
	if err != nil {
		return nil, err
	}
	skip := func(id int64, format string, args ...any) {
		jr.Skipped = append(jr.Skipped, SkippedBackup{ID: id, Reason: fmt.Sprintf(format, args...)})
	}
	for _, id := range ids {
		bpath := paths.pruned(job, id)
		log := b.log.With("job", job, "checkpoint", id, "znode", bpath)
		data, bstat, err := b.zk.get(ctx, bpath)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		bk, err := decodeBackup(data)
		if err != nil {
			skip(id, "unreadable backup: %v", err)
			continue
		}
		if bk.JobID != job || bk.CheckpointID != id {
			skip(id, "backup names job %s checkpoint %d", bk.JobID, bk.CheckpointID)
			continue
		}
		// The counter: ids must stay below the next one Flink hands out.
		counterPath := bk.CounterZnode
		if counterPath == "" {
			counterPath = jl.CounterPath
		}
		counter := int64(-1)
		if counterPath != "" {
			cdata, _, err := b.zk.get(ctx, counterPath)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return nil, err
			}
			if v, ok := decodeCounter(cdata); ok {
				counter = v
			}
		}
		// With RecreateJob, what Flink removed with the job is created
		// again in the restore's multi: missing parents, then the counter.
		var recreate []txOp
		pointerACL, locksACL := bk.restoreACLs()
		if counter < 0 {
			if !opts.RecreateJob || counterPath == "" {
				skip(id, "the job's checkpoint counter %s is missing: the job is gone (--recreate-job puts it back)", counterPath)
				continue
			}
			// Above every backup of the job, so that all fit below it.
			counter = slices.Max(ids) + 1
			recreate = append(recreate, txOp{name: "counter", op: &zk.CreateRequest{Path: counterPath, Data: encodeCounter(counter), Acl: pointerACL}})
		}
		if id > counter-1 {
			skip(id, "id is not below the checkpoint counter %d", counter)
			continue
		}
		parent := bk.Znode[:len(bk.Znode)-len(checkpointName(id))-1]
		missing, err := b.missingParents(ctx, parent, l.Namespace)
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 && !opts.RecreateJob {
			skip(id, "%s is gone: Flink removed the job's checkpoint store (--recreate-job puts it back)", parent)
			continue
		}
		var parents []txOp
		for _, m := range missing {
			parents = append(parents, txOp{name: "parent " + m, op: &zk.CreateRequest{Path: m, Acl: pointerACL}})
		}
		// The counter's own parent may be among them.
		recreate = append(parents, recreate...)
		cur, _, err := b.zk.get(ctx, bk.Znode)
		if err == nil {
			switch {
			case bytes.Equal(cur, bk.Data) && bk.Kept:
				skip(id, "kept by a takeover and still in ZooKeeper (the backup stays)")
			case bytes.Equal(cur, bk.Data):
				skip(id, "%s exists already with the same bytes", bk.Znode)
			default:
				skip(id, "%s exists with other bytes", bk.Znode)
			}
			continue
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		if !opts.Unverified {
			h, err := flinkha.DecodeStateHandle(bk.Data)
			if err != nil {
				skip(id, "backup data undecodable: %v", err)
				continue
			}
			v := b.verifyPointer(ctx, &Pointer{JobID: job, ID: id, Znode: bk.Znode, Data: bk.Data, Handle: h})
			if !v.L2Complete() {
				skip(id, "checkpoint not complete here at L2 (%s); use --unverified to put it back anyway", v.Verdict)
				continue
			}
		}
		if opts.DryRun {
			jr.Restored = append(jr.Restored, id)
			continue
		}
		// The record of the put-back, in its multi: the sweeper leaves the
		// pointer for this activation (design §5.5.2).
		if err := b.zk.ensure(ctx, paths.restoredJob(job)); err != nil {
			return nil, err
		}
		rec, err := b.restoredOp(ctx, paths, &Restored{Format: restoredFormat, JobID: job, CheckpointID: id, Znode: bk.Znode,
			Site: b.cfg.Site, Epoch: ep.value, EpochZxid: ep.mzxid, Unverified: opts.Unverified, RestoredAt: time.Now().UTC()})
		if err != nil {
			return nil, err
		}
		if opts.beforeRestore != nil {
			opts.beforeRestore(job, id)
		}
		ops := append([]txOp{epochGuard(paths, ep), lock.guard(), activeGuard(paths, activeStat)}, recreate...)
		ops = append(ops, txOp{name: "pointer", op: &zk.CreateRequest{Path: bk.Znode, Data: bk.Data, Acl: pointerACL}})
		if bk.HadLocks {
			ops = append(ops, txOp{name: "locks child", op: &zk.CreateRequest{Path: join(bk.Znode, "locks"), Data: bk.LocksData, Acl: locksACL}})
		}
		ops = append(ops, rec, txOp{name: "backup", op: &zk.DeleteRequest{Path: bpath, Version: bstat.Version}})
		err = b.fencedMulti("restore "+bk.Znode, ops...)
		if errors.Is(err, errOutcomeUnknown) {
			ok, rerr := b.restoreApplied(ctx, bk, bpath)
			if rerr != nil {
				return nil, rerr
			}
			if ok {
				err = nil
			}
		}
		if err != nil {
			if errors.Is(err, ErrEpochChanged) || errors.Is(err, ErrLockLost) || errors.Is(err, ErrNotActiveSite) {
				return nil, err
			}
			skip(id, "changed meanwhile (%v); run restore-pruned again", err)
			continue
		}
		log.Info("pointer restored", "restored", bk.Znode, "locks", bk.HadLocks)
		jr.Restored = append(jr.Restored, id)
	}
	return jr, nil
}

// restoreApplied decides, by reading, whether a restore whose reply was
// lost took effect.
func (b *Bridge) restoreApplied(ctx context.Context, bk *Backup, bpath string) (bool, error) {
	cur, _, err := b.zk.get(ctx, bk.Znode)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	st, err := b.zk.exists(ctx, bpath)
	if err != nil {
		return false, err
	}
	return st == nil && bytes.Equal(cur, bk.Data), nil
}

// missingParents lists, top-down, the znodes from below the namespace ns
// down to path that do not exist.
func (b *Bridge) missingParents(ctx context.Context, path, ns string) ([]string, error) {
	var missing []string
	for p := path; len(p) > len(ns) && strings.HasPrefix(p, ns+"/"); p = p[:strings.LastIndexByte(p, '/')] {
		st, err := b.zk.exists(ctx, p)
		if err != nil {
			return nil, err
		}
		if st != nil {
			break
		}
		missing = append([]string{p}, missing...)
	}
	return missing, nil
}

// encodeCounter writes what decodeCounter reads.
func encodeCounter(v int64) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(int32(v)))
}

// ErrNotActiveSite means restore-pruned ran on a site that active-site
// does not name, or active-site changed while it ran.
var ErrNotActiveSite = errors.New("zkbridge: this site is not the active one")

// NotActiveError is restore-pruned refused on a site that active-site
// does not name.
type NotActiveError struct {
	// Site is this site; Active the one active-site names ("" before
	// any activation).
	Site, Active string
}

func (e *NotActiveError) Error() string {
	if e.Active == "" {
		return fmt.Sprintf("zkbridge: restore-pruned refused on site %s: no site is active yet; pointers go back only on the active site, whose Flink reads them and whose replica vouches for them: make this site active first (ckptfs takeover, with --activate-anyway if a job is refused), then run restore-pruned again", e.Site)
	}
	return fmt.Sprintf("zkbridge: restore-pruned refused on site %s: active-site names %s; pointers go back only on the active site, whose Flink reads them and whose replica vouches for them: run restore-pruned on %s", e.Site, e.Active, e.Active)
}

// Unwrap gives ErrNotActiveSite.
func (e *NotActiveError) Unwrap() error { return ErrNotActiveSite }

// requireActive reads active-site and fails with a *NotActiveError
// unless it names this site; it returns active-site's stat, for the
// guard of the restores (activeGuard).
func (b *Bridge) requireActive(ctx context.Context, paths ckptfsPaths, rep *RestoreReport) (*zk.Stat, error) {
	active, stat, err := b.readActiveSite(ctx, paths)
	if err != nil {
		return nil, err
	}
	rep.ActiveSite = active
	if stat == nil || active != b.cfg.Site {
		return nil, &NotActiveError{Site: b.cfg.Site, Active: active}
	}
	return stat, nil
}
