package fusefs

import (
	"errors"
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
	vis     manifest.Visibility
	gate    Gate      // Config.Gate; nil admits everything
	reports *reporter // feeds the Sealer; nil: no sealing
	log     *slog.Logger
	now     func() time.Time

	// Constant data.
	passthroughWrites bool // Config.PassthroughWrites
	fenceTimeout      time.Duration

	// passthrough is set once the kernel agreed to FUSE passthrough, and
	// cleared for good if a handle that offered a backing file is read
	// through the daemon anyway (go-fuse gives up on passthrough silently
	// when registering a backing file fails).
	passthrough atomic.Bool

	// Lock order: modeMu, then node.mu. handle.mu is never held together
	// with node.mu.
	//
	// modeMu orders mutations against SetMode. A mutation holds it shared
	// from checking the mode until its backing syscall has returned;
	// SetMode holds it exclusively. So once SetMode(read-only) returns, no
	// mutation is running and none will start.
	modeMu sync.RWMutex
	// mode is the current mode. GUARDED_BY(modeMu)
	mode Mode
	// modeNow mirrors mode for readers that must not wait (visibility
	// checks). INVARIANT: modeNow == mode whenever modeMu is not held
	// exclusively.
	modeNow atomic.Int32

	// pwMu guards pwriters, the open write handles that use
	// passthrough: fencing has to revoke them (revoke.go). Lock order:
	// modeMu, then pwMu.
	pwMu     sync.Mutex
	pwriters map[*handle]struct{} // GUARDED_BY(pwMu)

	stats counters
	// latency and incompleteByDir are read by metrics (observe.go).
	latency         latencies
	incompleteByDir dirCounter

	incompleteLog logLimiter
}

// counters are the mount's metrics. All fields are updated atomically.
type counters struct {
	incompleteLookups atomic.Uint64
	hiddenLookups     atomic.Uint64
	readOnlyRefusals  atomic.Uint64
	passthroughOpens  atomic.Uint64
	passthroughWrites atomic.Uint64
	daemonOpens       atomic.Uint64
	daemonReads       atomic.Uint64
	daemonReadBytes   atomic.Uint64
	writeBusy         atomic.Uint64
	filesSealed       atomic.Uint64
	filesUnsealed     atomic.Uint64
	readBackBytes     atomic.Uint64
	metadataCommits   atomic.Uint64
	revokedWriters    atomic.Uint64
	writesAfterFence  atomic.Uint64
	openFiles         atomic.Int64
	gateRefusals      atomic.Uint64
}

func (c *counters) opened(passthrough, write bool) {
	c.openFiles.Add(1)
	switch {
	case !passthrough:
		c.daemonOpens.Add(1)
	case write:
		c.passthroughOpens.Add(1)
		c.passthroughWrites.Add(1)
	default:
		c.passthroughOpens.Add(1)
	}
}

// Stats is a snapshot of a mount's counters.
type Stats struct {
	// IncompleteLookups counts lookups of chk-N directories refused
	// because the checkpoint is not complete on this site: Flink asked for
	// a checkpoint too early.
	IncompleteLookups uint64
	// HiddenLookups counts other lookups refused by the Visibility policy
	// or of the reserved .ckptfs directory.
	HiddenLookups uint64
	// ReadOnlyRefusals counts mutations answered with EROFS.
	ReadOnlyRefusals uint64
	// PassthroughOpens counts opens that offered the kernel the backing
	// file, so reads and writes bypass the daemon; PassthroughWrites
	// counts the write-only ones among them.
	PassthroughOpens  uint64
	PassthroughWrites uint64
	// DaemonOpens counts opens whose reads and writes go through the
	// daemon (read-write opens, and opens of a file that is open through
	// the daemon already).
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
	// RevokedWriters counts passthrough write handles that fencing cut
	// off; WritesAfterFence counts files found changed when such a handle
	// was closed (a write the kernel let through, see revoke.go).
	RevokedWriters   uint64
	WritesAfterFence uint64
	// OpenFiles is the number of files open through the mount now (the
	// kernel releases a file shortly after its last close(2) returned).
	OpenFiles int64
	// GateRefusals counts opens and opendirs the Gate refused.
	GateRefusals uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		IncompleteLookups: c.incompleteLookups.Load(),
		HiddenLookups:     c.hiddenLookups.Load(),
		ReadOnlyRefusals:  c.readOnlyRefusals.Load(),
		PassthroughOpens:  c.passthroughOpens.Load(),
		PassthroughWrites: c.passthroughWrites.Load(),
		DaemonOpens:       c.daemonOpens.Load(),
		DaemonReads:       c.daemonReads.Load(),
		DaemonReadBytes:   c.daemonReadBytes.Load(),
		WriteBusy:         c.writeBusy.Load(),
		FilesSealed:       c.filesSealed.Load(),
		FilesUnsealed:     c.filesUnsealed.Load(),
		ReadBackBytes:     c.readBackBytes.Load(),
		MetadataCommits:   c.metadataCommits.Load(),
		RevokedWriters:    c.revokedWriters.Load(),
		WritesAfterFence:  c.writesAfterFence.Load(),
		OpenFiles:         c.openFiles.Load(),
		GateRefusals:      c.gateRefusals.Load(),
	}
}

func (fsys *fileSystem) currentMode() Mode { return Mode(fsys.modeNow.Load()) }

// setMode switches modes; see modeMu.
func (fsys *fileSystem) setMode(m Mode) (old Mode) {
	fsys.modeMu.Lock()
	defer fsys.modeMu.Unlock()
	old = fsys.mode
	fsys.mode = m
	fsys.modeNow.Store(int32(m))
	return old
}

// beginMutation admits one mutation. On success the caller must call
// done once the backing file system has answered.
func (fsys *fileSystem) beginMutation() (done func(), errno syscall.Errno) {
	fsys.modeMu.RLock()
	if !fsys.mode.writable() {
		fsys.modeMu.RUnlock()
		return nil, fsys.refuseReadOnly()
	}
	return fsys.modeMu.RUnlock, 0
}

// refuseReadOnly is the one answer to a change the mode does not allow
// (a replica, a fenced primary): EROFS, counted.
func (fsys *fileSystem) refuseReadOnly() syscall.Errno {
	fsys.stats.readOnlyRefusals.Add(1)
	return syscall.EROFS
}

// visible decides whether name in dir (relative to the mount root) is
// shown. It never touches the backing file system.
func (fsys *fileSystem) visible(dir, name string) syscall.Errno {
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
	if id, ok := manifest.CheckpointIDFromDirName(name); ok && errors.Is(err, manifest.ErrIncomplete) {
		fsys.stats.incompleteLookups.Add(1)
		fsys.incompleteByDir.add(dir)
		rel := joinRel(dir, name)
		if fsys.incompleteLog.allow(rel, fsys.now()) {
			fsys.log.Warn("Flink asked for incomplete chk-N", "job", path.Base(dir), "checkpoint", id, "dir", rel)
		}
	} else {
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

// logLimiter lets one log line per key through per interval, so a
// client retrying in a loop does not flood the log.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time // GUARDED_BY(mu)
}

const (
	logInterval   = 10 * time.Second
	logLimiterCap = 4096
)

func (l *logLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < logInterval {
		return false
	}
	if l.last == nil || len(l.last) >= logLimiterCap {
		l.last = make(map[string]time.Time)
	}
	l.last[key] = now
	return true
}
