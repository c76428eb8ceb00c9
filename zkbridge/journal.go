package zkbridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
)

// The automatic takeover's journal (design §5.11): what the daemon that
// runs an automatic takeover did, step by step, in one znode,
// <ckptfs>/<cluster>/auto-takeover, so that `ckptfs status` on any
// machine shows it. Only the holder of the takeover lock writes it, each
// write one multi that checks the lock node and the journal's version:
// one owner, and a journal never overwritten by a daemon whose lock
// expired.

// AutoTakeover is the journal of the latest automatic takeover.
type AutoTakeover struct {
	// Site, Host and PID name the daemon that ran it.
	Site    string    `json:"site"`
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Started time.Time `json:"started"`
	// State is running, activated, refused or stopped (the takeover
	// ended without a decision; the daemon tries again).
	State string `json:"state"`
	// WaitingFor says what a running takeover waits for ("" nothing).
	WaitingFor string     `json:"waiting_for,omitempty"`
	Steps      []AutoStep `json:"steps"`
	// Refused are the jobs the takeover refused, with the reasons.
	Refused []JobRefusal `json:"refused,omitempty"`
	// Rollbacks are the rollback windows of the jobs that lost completed
	// checkpoints, the largest first, at most maxJournalRollbacks of
	// them; RolledBack counts them all.
	Rollbacks  []JobRollback `json:"rollbacks,omitempty"`
	RolledBack int           `json:"rolled_back,omitempty"`
	Epoch      int64         `json:"epoch"`
}

// JobRollback is a job's rollback window in the journal, without the
// words.
type JobRollback struct {
	JobID string `json:"job_id"`
	Rollback
}

// AutoStep is one step: when, what, and how it ended.
type AutoStep struct {
	At      time.Time `json:"at"`
	What    string    `json:"what"`
	Outcome string    `json:"outcome"`
}

// JobRefusal is a refused job and why.
type JobRefusal struct {
	JobID  string        `json:"job_id"`
	Reason RefusalReason `json:"reason"`
	Detail string        `json:"detail"`
}

// Journal states.
const (
	AutoRunning   = "running"
	AutoActivated = "activated"
	AutoRefused   = "refused"
	AutoStopped   = "stopped"
)

func (p ckptfsPaths) autoTakeover() string { return join(p.base, "auto-takeover") }

// maxJournalSteps and maxJournalRollbacks bound the journal (a takeover
// takes a dozen steps; a window is about 100 bytes).
const (
	maxJournalSteps     = 64
	maxJournalRollbacks = 1000
)

// journal writes an AutoTakeover under a held takeover lock.
type journal struct {
	b       *Bridge
	path    string
	lock    *takeoverLock
	version int32 // -1: absent
	rec     AutoTakeover
}

// openJournal starts the journal of an automatic takeover that holds
// lock, with its first step (what made the daemon start it).
func (b *Bridge) openJournal(ctx context.Context, paths ckptfsPaths, lock *takeoverLock, trigger string) *journal {
	host, _ := os.Hostname()
	j := &journal{b: b, path: paths.autoTakeover(), lock: lock, version: -1,
		rec: AutoTakeover{Site: b.cfg.Site, Host: host, PID: os.Getpid(), Started: time.Now().UTC(), State: AutoRunning, Steps: []AutoStep{}}}
	if _, stat, err := b.zk.get(ctx, j.path); err == nil {
		j.version = stat.Version
	} else if !errors.Is(err, zk.ErrNoNode) {
		b.log.Warn("reading the automatic takeover's journal", "err", err)
	}
	j.step(ctx, trigger, "started")
	return j
}

// step appends a step and writes the journal.
func (j *journal) step(ctx context.Context, what, outcome string) {
	if j == nil {
		return
	}
	j.rec.Steps = append(j.rec.Steps, AutoStep{At: time.Now().UTC(), What: what, Outcome: outcome})
	if n := len(j.rec.Steps); n > maxJournalSteps {
		j.rec.Steps = j.rec.Steps[n-maxJournalSteps:]
	}
	j.write(ctx)
}

// jobs records what the takeover decided for its jobs, in one write
// (the jobs are taken over concurrently).
func (j *journal) jobs(ctx context.Context, jts []*JobTakeover) {
	if j == nil || len(jts) == 0 {
		return
	}
	now := time.Now().UTC()
	for _, jt := range jts {
		if jt.Status == StatusRefused {
			j.rec.Refused = append(j.rec.Refused, JobRefusal{JobID: jt.JobID, Reason: jt.Refusal, Detail: jt.Reason})
		}
		if r := jt.Rollback; r != nil && r.Checkpoints > 0 {
			jr := JobRollback{JobID: jt.JobID, Rollback: *r}
			jr.ExactlyOnce = ""
			j.rec.Rollbacks = append(j.rec.Rollbacks, jr)
		}
		j.rec.Steps = append(j.rec.Steps, AutoStep{At: now, What: "job " + jt.JobID + ": " + jt.Reason, Outcome: jt.Status})
	}
	if n := len(j.rec.Steps); n > maxJournalSteps {
		j.rec.Steps = j.rec.Steps[n-maxJournalSteps:]
	}
	slices.SortStableFunc(j.rec.Rollbacks, func(a, b JobRollback) int { return cmp.Compare(b.Checkpoints, a.Checkpoints) })
	j.rec.RolledBack = len(j.rec.Rollbacks)
	j.rec.Rollbacks = j.rec.Rollbacks[:min(len(j.rec.Rollbacks), maxJournalRollbacks)]
	j.write(ctx)
}

// waiting says what the takeover waits for now ("" nothing) and writes.
func (j *journal) waiting(ctx context.Context, what string) {
	if j == nil || j.rec.WaitingFor == what {
		return
	}
	j.rec.WaitingFor = what
	j.write(ctx)
}

// end records the outcome.
func (j *journal) end(ctx context.Context, state, what string, epoch int64) {
	if j == nil {
		return
	}
	j.rec.State, j.rec.WaitingFor, j.rec.Epoch = state, "", epoch
	j.step(ctx, what, state)
}

// write stores the record by compare-and-set, guarded by the lock. A
// failure is logged: the journal is for people, the takeover goes on.
func (j *journal) write(ctx context.Context) {
	data, err := json.Marshal(j.rec)
	if err != nil {
		j.b.log.Warn("the automatic takeover's journal", "err", err)
		return
	}
	var op any = &zk.SetDataRequest{Path: j.path, Data: data, Version: j.version}
	if j.version < 0 {
		op = &zk.CreateRequest{Path: j.path, Data: data, Acl: j.b.zk.acls.forPath(j.path)}
	}
	if _, err := j.b.zk.multi(j.lock.guard().op, op); err != nil {
		j.b.log.Warn("writing the automatic takeover's journal", "err", err)
		// Re-read the version: the next write may apply.
		if _, stat, gerr := j.b.zk.get(ctx, j.path); gerr == nil {
			j.version = stat.Version
		} else if errors.Is(gerr, zk.ErrNoNode) {
			j.version = -1
		}
		return
	}
	if j.version < 0 {
		j.version = 0
	} else {
		j.version++
	}
}

// readAutoTakeover reads the journal (nil: none).
func (b *Bridge) readAutoTakeover(ctx context.Context, paths ckptfsPaths) (*AutoTakeover, error) {
	data, _, err := b.zk.get(ctx, paths.autoTakeover())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a AutoTakeover
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("automatic takeover journal %s: %w", paths.autoTakeover(), err)
	}
	return &a, nil
}
