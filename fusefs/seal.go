package fusefs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/internal/idle"
	"github.com/ckptfs/ckptfs/manifest"
)

// reporter tells the Sealer what happened to files, in the order the
// mount saw it, from one goroutine. FUSE requests only queue events, so
// a checksum costs Flink's close(2) an fstat(2) and an open(2) of the
// same file: the reporter reads it back afterwards (from the page cache,
// as a rule) and sends FileWritten only if the file did not change
// between the close and the end of the read.
type reporter struct {
	sealer manifest.Sealer
	log    *slog.Logger
	stats  *counters

	mu sync.Mutex
	// more is signalled when events are queued and when the queue drains.
	more *sync.Cond
	// events waits for delivery, oldest first; at most maxQueuedEvents.
	// GUARDED_BY(mu)
	events []sealEvent
	// readbacks counts the descriptors held by queued events, at most
	// maxQueuedReadbacks. GUARDED_BY(mu)
	readbacks int
	// closed: no more events are accepted. GUARDED_BY(mu)
	closed bool
	// thread is the goroutine's idle-priority thread, back at normal
	// priority once closed (what is left has someone waiting for it).
	// GUARDED_BY(mu)
	thread *idle.Thread
	done   chan struct{}

	buf []byte // read-back buffer; only the reporter goroutine uses it
}

// The queue is bounded: a FUSE request that would exceed maxQueuedEvents
// waits (only a Sealer that stops returning gets there), and a written
// file beyond maxQueuedReadbacks is reported without checksum rather than
// holding another descriptor.
const (
	maxQueuedEvents    = 1 << 16
	maxQueuedReadbacks = 256
	readBackChunk      = 1 << 20
)

type sealOp int

const (
	opWritten sealOp = iota + 1
	opWithoutChecksum
	opRemoved
	opRenamed
	opCommitted
	opSync
)

type sealEvent struct {
	op       sealOp
	rel      string
	newRel   string // opRenamed
	exchange bool   // opRenamed
	at       time.Time
	// fd is the written file opened again for reading, and stamp the
	// file when the writer closed it (opWritten only: 0 is a descriptor).
	fd    int
	stamp fileStamp
	// synced is closed once every earlier event was delivered (opSync).
	synced chan struct{}
}

// fileStamp identifies one version of a file: a write changes its size
// or modification time (renames change neither).
type fileStamp struct {
	dev, ino uint64
	size     int64
	mtime    unix.Timespec
}

func stampOf(st *unix.Stat_t) fileStamp {
	return fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim}
}

func fstamp(fd int) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileStamp{}, err
	}
	return stampOf(&st), nil
}

func newReporter(sealer manifest.Sealer, log *slog.Logger, stats *counters) *reporter {
	r := &reporter{sealer: sealer, log: log, stats: stats, done: make(chan struct{})}
	r.more = sync.NewCond(&r.mu)
	go r.run()
	return r
}

// add queues ev, waiting while the queue is full. Events after close are
// dropped (their descriptor closed).
func (r *reporter) add(ev sealEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.events) >= maxQueuedEvents && !r.closed {
		r.more.Wait()
	}
	if r.closed {
		if ev.op == opWritten {
			unix.Close(ev.fd)
		}
		if ev.synced != nil {
			close(ev.synced)
		}
		return
	}
	if ev.op == opWritten {
		if r.readbacks >= maxQueuedReadbacks {
			unix.Close(ev.fd)
			ev.op = opWithoutChecksum
		} else {
			r.readbacks++
		}
	}
	r.events = append(r.events, ev)
	r.more.Broadcast()
}

// written queues a read-back of the file behind fd, which its writer is
// closing, under the name rel. It returns the file's stamp.
func (r *reporter) written(rel string, fd int, at time.Time) (fileStamp, error) {
	st, err := fstamp(fd)
	if err == nil {
		var rfd int
		if rfd, err = reopen(fd); err == nil {
			r.add(sealEvent{op: opWritten, rel: rel, at: at, fd: rfd, stamp: st})
			return st, nil
		}
	}
	r.add(sealEvent{op: opWithoutChecksum, rel: rel, at: at})
	return st, err
}

// reopen opens the file behind fd again, for reading and without
// touching its access time (a write-only descriptor cannot be read, and
// reading through the writer's own one would change what the writer's
// stat shows). It returns a plain descriptor: an os.File would cost a
// finalizer and the poller on every close(2) through the mount.
func reopen(fd int) (int, error) {
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	nfd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOATIME|unix.O_CLOEXEC, 0)
	if err == unix.EPERM { // O_NOATIME needs the file's owner or CAP_FOWNER
		nfd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, &os.PathError{Op: "reopen", Path: p, Err: err}
	}
	return nfd, nil
}

// sync returns once every event queued before it was delivered.
func (r *reporter) sync() {
	ch := make(chan struct{})
	r.add(sealEvent{op: opSync, synced: ch})
	<-ch
}

// close delivers what is queued and stops the goroutine; it may be
// called more than once.
func (r *reporter) close() {
	r.mu.Lock()
	r.closed = true
	r.more.Broadcast()
	th := r.thread
	r.mu.Unlock()
	if th != nil {
		th.Restore()
	}
	<-r.done
}

// run delivers events on a thread of idle priority: reading back what
// Flink wrote is not on Flink's path and must not take its CPU.
func (r *reporter) run() {
	defer close(r.done)
	th, err := idle.Lower()
	if err != nil {
		r.log.Debug("reading back at normal priority", "err", err)
	}
	defer th.Release()
	r.mu.Lock()
	r.thread = th
	if r.closed {
		th.Restore()
	}
	r.mu.Unlock()
	for {
		r.mu.Lock()
		for len(r.events) == 0 && !r.closed {
			r.more.Wait()
		}
		if len(r.events) == 0 {
			r.mu.Unlock()
			return
		}
		ev := r.events[0]
		r.events[0] = sealEvent{}
		r.events = r.events[1:]
		if ev.op == opWritten {
			r.readbacks--
		}
		r.more.Broadcast()
		r.mu.Unlock()
		r.deliver(ev)
	}
}

func (r *reporter) deliver(ev sealEvent) {
	switch ev.op {
	case opWritten:
		ver, crc, err := r.readBack(ev.fd, ev.stamp)
		unix.Close(ev.fd)
		if err != nil {
			r.log.Debug("no checksum for a written file", "file", ev.rel, "err", err)
			r.withoutChecksum(ev.rel, ev.at)
			return
		}
		r.stats.filesSealed.Add(1)
		r.sealer.FileWritten(ev.rel, ver, crc, ev.at)
	case opWithoutChecksum:
		r.withoutChecksum(ev.rel, ev.at)
	case opRemoved:
		r.sealer.FileRemoved(ev.rel)
	case opRenamed:
		r.sealer.Renamed(ev.rel, ev.newRel, ev.exchange)
	case opCommitted:
		r.stats.metadataCommits.Add(1)
		r.sealer.MetadataCommitted(ev.rel)
	case opSync:
		close(ev.synced)
	}
}

func (r *reporter) withoutChecksum(rel string, at time.Time) {
	r.stats.filesUnsealed.Add(1)
	r.sealer.FileWrittenWithoutChecksum(rel, at)
}

// testHookReadBack, when set by a test, runs before each read-back.
var testHookReadBack atomic.Pointer[func()]

// errChanged: the file is not the version its writer closed.
var errChanged = errors.New("file changed after its writer closed it")

// readBack returns the version and CRC-32C of the file behind fd,
// provided that, once read, it is still the version stamped when its
// writer closed it: the stamped size was read and the stamp is
// unchanged. A file changed before or during the read fails one of the
// two (a write changes the size or the modification time).
func (r *reporter) readBack(fd int, want fileStamp) (manifest.FileVersion, uint32, error) {
	if hook := testHookReadBack.Load(); hook != nil {
		(*hook)()
	}
	if r.buf == nil {
		r.buf = make([]byte, readBackChunk)
	}
	crc := manifest.NewChecksum()
	var off int64
	for off < want.size {
		n, err := unix.Pread(fd, r.buf[:min(int64(len(r.buf)), want.size-off)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return manifest.FileVersion{}, 0, fmt.Errorf("read back: %w", err)
		}
		if n == 0 {
			return manifest.FileVersion{}, 0, errChanged // shorter than when its writer closed it
		}
		crc.Write(r.buf[:n])
		off += int64(n)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return manifest.FileVersion{}, 0, err
	} else if stampOf(&st) != want {
		return manifest.FileVersion{}, 0, errChanged
	}
	r.stats.readBackBytes.Add(uint64(off))
	return manifest.VersionOf(&st), crc.Sum32(), nil
}

// The mount's side: fileSystem methods that queue events, and do nothing
// without a Sealer.

func (fsys *fileSystem) sealing() bool { return fsys.reports != nil }

func (fsys *fileSystem) writtenWithoutChecksum(rel string) {
	if fsys.sealing() {
		fsys.reports.add(sealEvent{op: opWithoutChecksum, rel: rel, at: fsys.now()})
	}
}

func (fsys *fileSystem) removed(rel string) {
	if fsys.sealing() {
		fsys.reports.add(sealEvent{op: opRemoved, rel: rel})
	}
}

func (fsys *fileSystem) committed(rel string) {
	if fsys.sealing() {
		fsys.reports.add(sealEvent{op: opCommitted, rel: rel})
	}
}

// renamed reports a rename of a file or a directory (src). Renaming a
// file to .../_metadata commits the checkpoint.
func (fsys *fileSystem) renamed(oldRel string, src *fs.Inode, newRel string, flags uint32) {
	if !fsys.sealing() {
		return
	}
	fsys.reports.add(sealEvent{op: opRenamed, rel: oldRel, newRel: newRel, exchange: flags&unix.RENAME_EXCHANGE != 0})
	if src != nil && src.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG && isMetadata(newRel) {
		fsys.committed(newRel)
	}
}
