package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// fileSystem is the state shared by every node of one mount.
type fileSystem struct {
	// Dependencies.
	vis  manifest.Visibility
	gate Gate // Config.Gate; nil admits everything
	// closeGate is Config.CloseGate; nil holds no close.
	closeGate CloseGate
	reports   *reporter // feeds the Sealer; nil: no sealing
	log       *slog.Logger
	now       func() time.Time
	backing   string // Config.Backing, cleaned: opened by every operation (beneath.go)

	// Constant data.
	deadlineFence bool // Config.DeadlineFence
	fenceTimeout  time.Duration
	guard         manifest.DeletionGuard // Config.DeleteGuard; nil: none
	guardGrace    time.Duration
	guardHold     bool

	// guardUntil is when the deletion guard armed by the last promotion
	// ends (Unix nanoseconds; 0: not armed).
	guardUntil atomic.Int64

	// passthrough is set once the kernel agreed to FUSE passthrough, and
	// cleared for good if a handle that offered a backing file is read
	// through the daemon anyway (go-fuse gives up on passthrough silently
	// when registering a backing file fails).
	passthrough atomic.Bool

	// Lock order: modeMu, then node.mu. handle.mu is never held together
	// with node.mu. modeMu is never held across a backing call: a hung
	// NAS must not hold up SetMode, or every mutation behind it.
	//
	// modeMu orders mutations against SetMode. A mutation is admitted
	// under it (the mode allows writes) and counted in inflight by the
	// fence epoch it was admitted in, until its backing syscall has
	// returned. SetMode to a mode that does not write starts a new epoch
	// under it and waits, at most fenceTimeout, until no mutation of an
	// older epoch is in flight. So once SetMode(read-only) returns, no
	// mutation starts; when it returns nil, none is running either.
	modeMu sync.Mutex
	// mode is the current mode. GUARDED_BY(modeMu)
	mode Mode
	// deadline is the write deadline (with deadlineFence): no change is
	// admitted from then on. GUARDED_BY(modeMu)
	deadline time.Time
	// admitted counts the changes admitted and not yet back from the
	// backing file system. GUARDED_BY(modeMu)
	admitted int
	// epoch counts the switches to a mode that does not write.
	// GUARDED_BY(modeMu)
	epoch uint64
	// inflight counts the admitted mutations by epoch. GUARDED_BY(modeMu)
	inflight map[uint64]int
	// abandoned is the newest epoch whose fence stopped waiting for
	// older mutations: one that ends later landed after the fence.
	abandoned atomic.Uint64
	// modeNow mirrors mode for readers that must not wait (visibility
	// checks). INVARIANT: it equals mode whenever modeMu is not held.
	modeNow atomic.Int32

	stats counters
	// latency and incompleteByDir are read by metrics (observe.go).
	latency         latencies
	incompleteByDir dirCounter

	incompleteLog logLimiter
	// refusedLog limits the lines about links where directories were
	// expected; noOpenat2 is set once openat2 is found missing;
	// rootIsLink once the backing path is found to name a link at mount
	// (its last component is then followed).
	refusedLog logLimiter
	noOpenat2  atomic.Bool
	rootIsLink *atomic.Bool
}

// counters are the mount's metrics. All fields are updated atomically.
type counters struct {
	incompleteLookups atomic.Uint64
	hiddenLookups     atomic.Uint64
	readOnlyRefusals  atomic.Uint64
	passthroughOpens  atomic.Uint64
	daemonOpens       atomic.Uint64
	daemonReads       atomic.Uint64
	daemonReadBytes   atomic.Uint64
	writeBusy         atomic.Uint64
	filesSealed       atomic.Uint64
	filesUnsealed     atomic.Uint64
	readBackBytes     atomic.Uint64
	metadataCommits   atomic.Uint64
	deadlineRefusals  atomic.Uint64
	writesAfterFence  atomic.Uint64
	deletionsRefused  atomic.Uint64
	deletionsHeld     atomic.Uint64
	openFiles         atomic.Int64
	gateRefusals      atomic.Uint64
	closesHeld        atomic.Uint64
	closesFailed      atomic.Uint64
}

func (c *counters) opened(passthrough, write bool) {
	c.openFiles.Add(1)
	if passthrough {
		c.passthroughOpens.Add(1)
	} else {
		c.daemonOpens.Add(1)
	}
}

// Stats is a snapshot of a mount's counters.
type Stats struct {
	// IncompleteLookups counts lookups of chk-N directories refused
	// because the checkpoint is not complete on this site: Flink asked for
	// a checkpoint too early. A chk-N with nothing by that name on the
	// backing file system is not counted (manifest.RefusedAbsent).
	IncompleteLookups uint64
	// HiddenLookups counts other lookups refused by the Visibility policy
	// or of the reserved .ckptfs directory.
	HiddenLookups uint64
	// ReadOnlyRefusals counts mutations answered with EROFS.
	ReadOnlyRefusals uint64
	// PassthroughOpens counts read-only opens that offered the kernel the
	// backing file, so their reads bypass the daemon.
	PassthroughOpens uint64
	// DaemonOpens counts opens whose reads and writes go through the
	// daemon (every open for writing, and a read-only open of a file
	// open through the daemon already).
	DaemonOpens uint64
	// DaemonReads and DaemonReadBytes count READ requests the daemon
	// served. With working passthrough, read-only opens add nothing here.
	DaemonReads     uint64
	DaemonReadBytes uint64
	// WriteBusy counts write opens refused with ETXTBSY because the file
	// stayed open for passthrough reading.
	WriteBusy uint64
	// FilesSealed counts Sealer.FileWritten calls; FilesUnsealed counts
	// Sealer.FileWrittenWithoutChecksum calls; ReadBackBytes is what was
	// read back to take checksums.
	FilesSealed   uint64
	FilesUnsealed uint64
	ReadBackBytes uint64
	// MetadataCommits counts Sealer.MetadataCommitted calls.
	MetadataCommits uint64
	// DeadlineRefusals counts changes refused because the write deadline
	// had passed while the mode still wrote (the daemon had not fenced
	// yet: it was slow, stopped or frozen). WritesAfterFence counts
	// changes admitted before a fence that came back from the backing
	// file system after SetMode stopped waiting for them (a hung NAS).
	DeadlineRefusals uint64
	WritesAfterFence uint64
	// DeletionsRefused and DeletionsHeld count deletions of what the
	// newest complete checkpoint of a job holds that the deletion guard
	// refused or held after a promotion (Config.DeleteGuard).
	DeletionsRefused uint64
	DeletionsHeld    uint64
	// OpenFiles is the number of files open through the mount now (the
	// kernel releases a file shortly after its last close(2) returned).
	OpenFiles int64
	// GateRefusals counts opens and opendirs the Gate refused.
	GateRefusals uint64
	// ClosesHeld counts closes the CloseGate held; ClosesFailed those it
	// failed.
	ClosesHeld, ClosesFailed uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		IncompleteLookups: c.incompleteLookups.Load(),
		HiddenLookups:     c.hiddenLookups.Load(),
		ReadOnlyRefusals:  c.readOnlyRefusals.Load(),
		PassthroughOpens:  c.passthroughOpens.Load(),
		DaemonOpens:       c.daemonOpens.Load(),
		DaemonReads:       c.daemonReads.Load(),
		DaemonReadBytes:   c.daemonReadBytes.Load(),
		WriteBusy:         c.writeBusy.Load(),
		FilesSealed:       c.filesSealed.Load(),
		FilesUnsealed:     c.filesUnsealed.Load(),
		ReadBackBytes:     c.readBackBytes.Load(),
		MetadataCommits:   c.metadataCommits.Load(),
		DeadlineRefusals:  c.deadlineRefusals.Load(),
		WritesAfterFence:  c.writesAfterFence.Load(),
		DeletionsRefused:  c.deletionsRefused.Load(),
		DeletionsHeld:     c.deletionsHeld.Load(),
		OpenFiles:         c.openFiles.Load(),
		GateRefusals:      c.gateRefusals.Load(),
		ClosesHeld:        c.closesHeld.Load(),
		ClosesFailed:      c.closesFailed.Load(),
	}
}

func (fsys *fileSystem) currentMode() Mode { return Mode(fsys.modeNow.Load()) }

// setMode switches modes and returns the epoch whose older mutations
// must end before the switch is complete; see modeMu.
func (fsys *fileSystem) setMode(m Mode) (old Mode, epoch uint64) {
	fsys.modeMu.Lock()
	defer fsys.modeMu.Unlock()
	old = fsys.mode
	fsys.mode = m
	fsys.modeNow.Store(int32(m))
	if !m.writable() && old.writable() {
		fsys.epoch++
	}
	if m.writable() && !old.writable() && fsys.guard != nil && fsys.guardGrace > 0 {
		fsys.guardUntil.Store(fsys.now().Add(fsys.guardGrace).UnixNano())
		what := "refused"
		if fsys.guardHold {
			what = "held"
		}
		fsys.log.Info("deletion guard armed: deletions of the newest complete checkpoint of a job are "+what, "remaining", fsys.guardGrace.String())
	}
	return old, fsys.epoch
}

// admission is one admitted mutation; done must be called once the
// backing file system has answered.
type admission struct {
	fsys  *fileSystem
	epoch uint64
}

// admit admits one mutation, or refuses it (EROFS) if the mode does not
// write or, with the deadline fence, the write deadline has passed
// (design §5.14: the mount's own clock decides, not the daemon's loop).
func (fsys *fileSystem) admit() (*admission, syscall.Errno) {
	fsys.modeMu.Lock()
	defer fsys.modeMu.Unlock()
	if !fsys.mode.writable() {
		return nil, fsys.refuseReadOnly()
	}
	if fsys.deadlineFence && !time.Now().Before(fsys.deadline) {
		fsys.stats.deadlineRefusals.Add(1)
		return nil, fsys.refuseReadOnly()
	}
	if fsys.inflight == nil {
		fsys.inflight = make(map[uint64]int)
	}
	fsys.inflight[fsys.epoch]++
	fsys.admitted++
	return &admission{fsys: fsys, epoch: fsys.epoch}, 0
}

// setDeadline sets the write deadline.
func (fsys *fileSystem) setDeadline(t time.Time) {
	fsys.modeMu.Lock()
	defer fsys.modeMu.Unlock()
	fsys.deadline = t
}

// inFlight is the number of changes admitted and not yet back from the
// backing file system.
func (fsys *fileSystem) inFlight() int {
	fsys.modeMu.Lock()
	defer fsys.modeMu.Unlock()
	return fsys.admitted
}

// done ends the mutation. One whose fence stopped waiting for it landed
// after the fence: it is counted and logged (Stats.WritesAfterFence).
func (a *admission) done() {
	fsys := a.fsys
	fsys.modeMu.Lock()
	if fsys.inflight[a.epoch]--; fsys.inflight[a.epoch] == 0 {
		delete(fsys.inflight, a.epoch)
	}
	fsys.admitted--
	fsys.modeMu.Unlock()
	if fsys.abandoned.Load() > a.epoch {
		fsys.stats.writesAfterFence.Add(1)
		fsys.log.Error("a change admitted before fencing reached the backing file system after fencing gave up waiting for it (a hung NAS answered late)")
	}
}

// guardDelete applies the deletion guard to removing rel: 0 when it may
// go ahead (at once, or, holding, once the grace period is over), EPERM
// when it is refused. It must be called before beginMutation: a held
// deletion must not hold up SetMode.
func (fsys *fileSystem) guardDelete(ctx context.Context, rel, op string) syscall.Errno {
	until := fsys.guardUntil.Load()
	if fsys.guard == nil || until == 0 || !fsys.currentMode().writable() {
		return 0
	}
	left := time.Duration(until - fsys.now().UnixNano())
	if left <= 0 {
		return 0
	}
	err := fsys.guard.ProtectsDeletion(rel)
	if err == nil {
		return 0
	}
	if !fsys.guardHold {
		fsys.stats.deletionsRefused.Add(1)
		fsys.log.Warn("deletion refused: it would remove the newest complete checkpoint of a job after a takeover", "op", op, "file", rel, "reason", err.Error(), "remaining", left.Round(time.Second).String())
		return fsys.errnoFor(err)
	}
	fsys.stats.deletionsHeld.Add(1)
	fsys.log.Warn("deletion held until the grace period ends: it would remove the newest complete checkpoint of a job after a takeover", "op", op, "file", rel, "reason", err.Error(), "remaining", left.Round(time.Second).String())
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-ctx.Done():
		return syscall.EINTR
	}
}

// beginMutation admits one mutation. On success the caller must call
// done once the backing file system has answered.
func (fsys *fileSystem) beginMutation() (done func(), errno syscall.Errno) {
	a, errno := fsys.admit()
	if errno != 0 {
		return nil, errno
	}
	return a.done, 0
}

// waitMutations waits, at most fenceTimeout, until no mutation admitted
// before epoch is in flight. If some still are, it gives up on them
// (they are counted when they end, see admission.done) and says how many.
func (fsys *fileSystem) waitMutations(epoch uint64) error {
	deadline := time.Now().Add(fsys.fenceTimeout)
	for {
		fsys.modeMu.Lock()
		n := 0
		for e, c := range fsys.inflight {
			if e < epoch {
				n += c
			}
		}
		fsys.modeMu.Unlock()
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for {
				old := fsys.abandoned.Load()
				if old >= epoch || fsys.abandoned.CompareAndSwap(old, epoch) {
					break
				}
			}
			fsys.log.Error("fenced, but changes admitted before still wait on the backing file system", "changes", n, "waited", fsys.fenceTimeout)
			return fmt.Errorf("%w: %d changes admitted before fencing still wait on the backing file system after %v", ErrFenceIncomplete, n, fsys.fenceTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// ErrFenceIncomplete: SetMode gave up waiting for changes admitted before
// fencing to come back from the backing file system (a hung NAS); one
// that lands later is counted in Stats.WritesAfterFence.
var ErrFenceIncomplete = errors.New("changes admitted before fencing still wait on the backing file system")

// refuseReadOnly is the one answer to a change the mode does not allow
// (a replica, a fenced primary): EROFS, counted.
func (fsys *fileSystem) refuseReadOnly() syscall.Errno {
	fsys.stats.readOnlyRefusals.Add(1)
	return syscall.EROFS
}

// visible decides whether name in dir (relative to the mount root) is
// shown. It touches the backing file system only through lstat, for a
// chk-N it hides as incomplete (manifest.ClassifyRefusal: is it there at
// all?).
func (fsys *fileSystem) visible(dir, name string, lstat func() error) syscall.Errno {
	if manifest.IsStateDir(dir, name) {
		fsys.stats.hiddenLookups.Add(1)
		return syscall.ENOENT
	}
	if !fsys.currentMode().filtered() {
		return 0
	}
	err := fsys.vis.Visible(dir, name)
	if err == nil {
		return 0
	}
	switch manifest.ClassifyRefusal(name, err, lstat) {
	case manifest.RefusedCheckpoint:
		fsys.stats.incompleteLookups.Add(1)
		fsys.incompleteByDir.add(dir)
		rel := joinRel(dir, name)
		if ok, suppressed := fsys.incompleteLog.allow(rel, fsys.now()); ok {
			id, _ := manifest.CheckpointIDFromDirName(name)
			attrs := []any{"job", path.Base(dir), "checkpoint", id, "dir", rel}
			if suppressed > 0 {
				attrs = append(attrs, "suppressed", suppressed)
			}
			fsys.log.Warn("Flink asked for incomplete chk-N", attrs...)
		}
	case manifest.RefusedAbsent:
		// Nothing hidden: ENOENT, as without ckptfs.
	default:
		fsys.stats.hiddenLookups.Add(1)
	}
	return fsys.errnoFor(err)
}

// listed is visible without counters or logs, for directory listings.
func (fsys *fileSystem) listed(dir, name string) bool {
	if manifest.IsStateDir(dir, name) {
		return false
	}
	if !fsys.currentMode().filtered() {
		return true
	}
	return fsys.vis.Visible(dir, name) == nil
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// logLimiter lets the first log line of each key through, then at most
// one per interval, and counts the lines it held back in between: a
// client retrying in a loop does not flood the log.
type logLimiter struct {
	mu   sync.Mutex
	keys map[string]*limited // GUARDED_BY(mu)
}

// limited is one key's last line and the lines held back since.
type limited struct {
	last       time.Time
	suppressed uint64
}

const (
	logInterval   = 10 * time.Second
	logLimiterCap = 4096
)

// allow says whether a line for key may be logged at now, and how many
// lines for key it held back since the last one it let through.
func (l *logLimiter) allow(key string, now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k, ok := l.keys[key]; ok {
		if now.Sub(k.last) < logInterval {
			k.suppressed++
			return false, 0
		}
		n := k.suppressed
		k.last, k.suppressed = now, 0
		return true, n
	}
	if len(l.keys) >= logLimiterCap {
		// Forget the keys quiet for an interval; if that frees
		// nothing, start over (a line per key and interval at most).
		for key, k := range l.keys {
			if now.Sub(k.last) >= logInterval {
				delete(l.keys, key)
			}
		}
		if len(l.keys) >= logLimiterCap {
			clear(l.keys)
		}
	}
	if l.keys == nil {
		l.keys = make(map[string]*limited)
	}
	l.keys[key] = &limited{last: now}
	return true, 0
}
