package fusefs

import (
	"context"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// castagnoli is the CRC-32C table; hash/crc32 uses SSE4.2 or ARMv8 CRC
// instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// handle is an open file served by the daemon. It forwards to go-fuse's
// loopback file, adds the write gate and computes the CRC-32C of data
// written in order. It deliberately does not implement
// fs.FilePassthroughFder (passthroughHandle adds that): go-fuse attaches
// an inode's backing file to every handle that implements it, and writes
// must never bypass the daemon.
type handle struct {
	lf          *fs.LoopbackFile
	node        *node
	writer      bool // opened for writing (or created)
	passthrough bool // wrapped in a passthroughHandle

	// mu is never held together with node.mu.
	mu sync.Mutex
	// Sealing state of a writer. INVARIANT: if inOrder, the file's first
	// next bytes are what this handle wrote, in order, and crc is their
	// CRC-32C. GUARDED_BY(mu)
	crc     uint32
	next    int64
	inOrder bool
	// active: opened, or written since the last flush; an active handle
	// will report at its next flush or release. dirty: there is
	// something to report. INVARIANT: dirty implies active. GUARDED_BY(mu)
	active bool
	dirty  bool

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

func newHandle(n *node, lf *fs.LoopbackFile, writer bool) *handle {
	return &handle{lf: lf, node: n, writer: writer, inOrder: true, active: writer}
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

var _ = (fs.FileReader)((*handle)(nil))

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fsys := h.node.fsys
	if h.passthrough && fsys.passthrough.CompareAndSwap(true, false) {
		fsys.log.Warn("kernel reads a passthrough handle through the daemon; passthrough disabled for this mount")
	}
	fsys.stats.daemonReads.Add(1)
	res, errno := h.lf.Read(ctx, dest, off)
	if errno == 0 {
		fsys.stats.daemonReadBytes.Add(uint64(res.Size()))
	}
	return res, errno
}

var _ = (fs.FileWriter)((*handle)(nil))

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return 0, errno
	}
	defer done()
	h.dropSetID(ctx)
	n, errno := h.lf.Write(ctx, data, off)
	bufs := [1][]byte{data}
	h.wrote(off, bufs[:], int(n))
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
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return 0, errno
	}
	defer done()
	h.dropSetID(ctx)
	n, errno := h.lf.Writev(ctx, data, off)
	h.wrote(off, data, int(n))
	return n, errno
}

// wrote updates the checksum after n bytes of bufs landed at off.
func (h *handle) wrote(off int64, bufs [][]byte, n int) {
	if n <= 0 || !h.node.fsys.sealing() {
		return
	}
	h.node.changedUnder(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active, h.dirty = true, true
	if !h.inOrder {
		return
	}
	if off != h.next {
		h.inOrder = false
		return
	}
	for rest := n; rest > 0 && len(bufs) > 0; bufs = bufs[1:] {
		b := bufs[0][:min(len(bufs[0]), rest)]
		h.crc = crc32.Update(h.crc, castagnoli, b)
		rest -= len(b)
	}
	h.next += int64(n)
}

// truncated records that the file was truncated to size, by this handle
// (self) or otherwise, and says whether this handle will report it.
func (h *handle) truncated(size int64, self bool) (reports bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if self {
		h.active = true
	}
	switch {
	case size == 0:
		h.crc, h.next, h.inOrder = 0, 0, true
	case h.inOrder && size == h.next:
	default:
		h.inOrder = false
	}
	h.dirty = h.dirty || h.active
	return h.active
}

// lostOrder records that another handle changed the file.
func (h *handle) lostOrder() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inOrder = false
}

// unsequenced records a change through this handle that the checksum
// cannot follow.
func (h *handle) unsequenced() {
	h.node.changedUnder(h)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active, h.dirty, h.inOrder = true, true, false
}

var _ = (fs.FileAllocater)((*handle)(nil))

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	done, errno := h.node.fsys.beginMutation()
	if errno != 0 {
		return errno
	}
	defer done()
	h.dropSetID(ctx)
	h.unsequenced()
	return h.lf.Allocate(ctx, off, size, mode)
}

var _ = (fs.FileFlusher)((*handle)(nil))

// Flush runs inside close(2), so a file is reported to the Sealer before
// the writer can rename it.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	errno := h.lf.Flush(ctx)
	h.report(ctx)
	return errno
}

var _ = (fs.FileReleaser)((*handle)(nil))

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.report(ctx)
	errno := h.lf.Release(ctx)
	h.node.dropOpen(h)
	return errno
}

// report tells the Sealer what this handle wrote since the last report.
func (h *handle) report(ctx context.Context) {
	fsys := h.node.fsys
	if !h.writer || !fsys.sealing() {
		return
	}
	h.mu.Lock()
	dirty := h.dirty
	h.active, h.dirty = false, false
	inOrder, crc, size := h.inOrder, h.crc, h.next
	h.mu.Unlock()
	if !dirty {
		return
	}

	rel, ok := h.node.rel()
	if !ok {
		return
	}
	var attr fuse.AttrOut
	if errno := h.lf.Getattr(ctx, &attr); errno != 0 || int64(attr.Size) != size {
		inOrder = false
	}
	if inOrder {
		fsys.written(rel, &sealRecord{size: size, crc: crc, at: fsys.now()})
	} else {
		fsys.writtenWithoutChecksum(rel)
	}
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
