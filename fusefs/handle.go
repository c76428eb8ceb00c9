package fusefs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// handle is an open file. It forwards to go-fuse's loopback file, holds
// every write the daemon serves to the mode, and reports what writers
// leave behind to the Sealer. It deliberately does not implement
// fs.FilePassthroughFder (passthroughHandle adds that): go-fuse attaches
// an inode's backing file to every handle that implements it.
type handle struct {
	lf          *fs.LoopbackFile
	node        *node
	writer      bool // opened for writing (or created)
	passthrough bool // wrapped in a passthroughHandle

	mu sync.Mutex
	// reported is the version of the file last queued for the Sealer, nil
	// before the first FLUSH. GUARDED_BY(mu)
	reported *fileStamp

	// setID: the file may have setuid/setgid bits that an unprivileged
	// write must drop (privs.go); false almost always.
	setID atomic.Bool
}

// passthroughHandle is a read-only handle that offers the kernel its
// backing file: reads then never reach the daemon.
type passthroughHandle struct {
	*handle
}

var _ = (fs.FilePassthroughFder)((*passthroughHandle)(nil))

func (p *passthroughHandle) PassthroughFd() (int, bool) { return p.lf.PassthroughFd() }

func newHandle(n *node, lf *fs.LoopbackFile, writer, passthrough bool) *handle {
	return &handle{lf: lf, node: n, writer: writer, passthrough: passthrough}
}

// wrap returns what go-fuse gets for h.
func (h *handle) wrap() fs.FileHandle {
	if h.passthrough {
		return &passthroughHandle{h}
	}
	return h
}

// handleOf unwraps a handle this package created.
func handleOf(f fs.FileHandle) *handle {
	switch h := f.(type) {
	case *handle:
		return h
	case *passthroughHandle:
		return h.handle
	}
	return nil
}

// notPassedThrough handles a request that the kernel should have served
// from the backing file itself: go-fuse gives up on passthrough silently
// when registering a backing file fails, so passthrough stops here too.
func (h *handle) notPassedThrough(op string) {
	fsys := h.node.fsys
	if h.passthrough && fsys.passthrough.CompareAndSwap(true, false) {
		fsys.log.Warn("kernel sends "+op+" of a passthrough handle to the daemon; passthrough disabled for this mount", "op", op)
	}
}

var _ = (fs.FileReader)((*handle)(nil))

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.notPassedThrough("READ")
	fsys := h.node.fsys
	fsys.stats.daemonReads.Add(1)
	res, errno := h.lf.Read(ctx, dest, off)
	if errno == 0 {
		fsys.stats.daemonReadBytes.Add(uint64(res.Size()))
	}
	return res, errno
}

var _ = (fs.FileWriter)((*handle)(nil))

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.notPassedThrough("WRITE")
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return 0, errno
	}
	defer done()
	h.dropSetID(ctx)
	n, errno := h.lf.Write(ctx, data, off)
	if hook := testHookWritten.Load(); hook != nil {
		(*hook)()
	}
	return n, errno
}

// testHookWritten, when set by a test, runs after each WRITE reached the
// backing file, while the write still holds its place against SetMode.
var testHookWritten atomic.Pointer[func()]

var _ = (fs.FileWritever)((*handle)(nil))

func (h *handle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	h.notPassedThrough("WRITE")
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return 0, errno
	}
	defer done()
	h.dropSetID(ctx)
	return h.lf.Writev(ctx, data, off)
}

var _ = (fs.FileAllocater)((*handle)(nil))

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return errno
	}
	defer done()
	h.dropSetID(ctx)
	return h.lf.Allocate(ctx, off, size, mode)
}

var _ = (fs.FileFlusher)((*handle)(nil))

// Flush runs inside close(2), so a written file is reported to the Sealer
// before the writer can rename it, and the CloseGate can hold the close.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	errno := h.lf.Flush(ctx)
	h.report(false)
	if errno != 0 || !h.writer || h.node.fsys.closeGate == nil {
		return errno
	}
	rel, ok := h.node.rel()
	if !ok {
		return 0
	}
	return h.node.fsys.holdClose(ctx, rel, fdOf(h.lf))
}

var _ = (fs.FileReleaser)((*handle)(nil))

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.report(true)
	errno := h.lf.Release(ctx)
	h.node.dropOpen(h)
	return errno
}

// report queues what a writer leaves behind for the Sealer: at FLUSH,
// and at RELEASE again if the file changed since (through a descriptor
// still open after that close, or a shared mapping).
func (h *handle) report(release bool) {
	fsys := h.node.fsys
	if !h.writer || !fsys.sealing() {
		return
	}
	fd := fdOf(h.lf)
	h.mu.Lock()
	reported := h.reported
	h.mu.Unlock()
	if release && reported != nil {
		if st, err := fstamp(fd); err == nil && st == *reported {
			return // unchanged since FLUSH reported it: the common RELEASE
		}
	}
	rel, ok := h.node.rel()
	if !ok {
		return // unlinked, or never linked (O_TMPFILE)
	}
	st, err := fsys.reports.written(rel, fd, fsys.now())
	if err != nil {
		fsys.log.Warn("cannot read back a written file", "file", rel, "err", err)
	}
	h.mu.Lock()
	h.reported = &st
	h.mu.Unlock()
	if isMetadata(rel) {
		fsys.committed(rel)
	}
}

var _ = (fs.FileGetattrer)((*handle)(nil))

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.lf.Getattr(ctx, out)
}

var _ = (fs.FileStatxer)((*handle)(nil))

func (h *handle) Statx(ctx context.Context, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return h.lf.Statx(ctx, flags, mask, out)
}

var _ = (fs.FileLseeker)((*handle)(nil))

func (h *handle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return h.lf.Lseek(ctx, off, whence)
}

var _ = (fs.FileFsyncer)((*handle)(nil))

// Fsync makes durable what was already written; it is allowed in every
// mode.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.lf.Fsync(ctx, flags)
}

var _ = (fs.FileGetlker)((*handle)(nil))

func (h *handle) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return h.lf.Getlk(ctx, owner, lk, flags, out)
}

var _ = (fs.FileSetlker)((*handle)(nil))

func (h *handle) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlk(ctx, owner, lk, flags)
}

var _ = (fs.FileSetlkwer)((*handle)(nil))

func (h *handle) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return h.lf.Setlkw(ctx, owner, lk, flags)
}
