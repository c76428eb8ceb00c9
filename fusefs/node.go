package fusefs

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ckptfs/ckptfs/manifest"
)

// node is every inode of the mount: go-fuse's loopback node plus the
// policy. Operations not overridden here are the loopback's.
type node struct {
	*fs.LoopbackNode
	fsys *fileSystem

	mu sync.Mutex
	// passthroughOpens counts open handles that offered the kernel the
	// backing file, daemonOpens those served by the daemon. The kernel
	// refuses (EIO) to mix the two on one inode, so:
	// INVARIANT: passthroughOpens == 0 || daemonOpens == 0.
	// Both may overcount briefly (RELEASE arrives after close returned),
	// never undercount. GUARDED_BY(mu)
	passthroughOpens int
	daemonOpens      int
	// writers are the open handles that may write. GUARDED_BY(mu)
	writers map[*handle]struct{}
	// passthroughIdle is closed when passthroughOpens drops to 0; nil
	// while nobody waits. GUARDED_BY(mu)
	passthroughIdle chan struct{}
}

// writeBusyWait is how long an open served by the daemon waits for
// passthrough opens whose close is still on its way to the daemon.
const writeBusyWait = time.Second

var _ = (fs.NodeWrapChilder)((*node)(nil))

// WrapChild gives every inode the loopback creates the same policy.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// rel is the node's path relative to the mount root; false once it is
// in no directory (unlinked, or an O_TMPFILE file).
func (n *node) rel() (string, bool) {
	return relPath(n.EmbeddedInode())
}

func relPath(in *fs.Inode) (string, bool) {
	var segs []string
	for p := in; !p.IsRoot(); {
		name, parent := p.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		p = parent
	}
	slices.Reverse(segs)
	return strings.Join(segs, "/"), true
}

var _ = (fs.NodeLookuper)((*node)(nil))

// Lookup hides what the policy hides; READDIRPLUS comes through here too.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.IsRoot() && manifest.IsStateDir("", name) {
		n.fsys.stats.hiddenLookups.Add(1)
		return nil, syscall.ENOENT
	}
	// Outside replica mode nothing else is hidden, and the path (a walk
	// up the tree) is not needed.
	if n.fsys.currentMode().filtered() {
		dir, ok := n.rel()
		if !ok {
			return nil, syscall.ENOENT
		}
		if errno := n.fsys.visible(dir, name, func() error { return n.lstatChild(name) }); errno != 0 {
			return nil, errno
		}
	}
	return n.lookup(ctx, name, out)
}

var _ = (fs.NodeOpendirHandler)((*node)(nil))

// OpendirHandle lists what Lookup would find. go-fuse never calls
// Readdir when this exists.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	dir, ok := n.rel()
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	if errno := n.fsys.passGate(ctx, dir); errno != 0 {
		return nil, 0, errno
	}
	if dir != "" && !n.fsys.currentMode().filtered() {
		return n.opendirHandle(dir)
	}
	l, errno := openListing(ctx, n.fsys, dir)
	if errno != 0 {
		return nil, 0, errno
	}
	return l, 0, 0
}

var _ = (fs.NodeReaddirer)((*node)(nil))

// Readdir is unused while OpendirHandle exists; it filters the same way
// in case go-fuse ever calls it.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	fh, _, errno := n.OpendirHandle(ctx, 0)
	if errno != 0 {
		return nil, errno
	}
	if l, ok := fh.(*listing); ok {
		return l.stream(), 0
	}
	return fh.(fs.DirStream), 0
}

// childDir is the directory path for operations on a child of n.
func (n *node) childDir() (string, syscall.Errno) {
	dir, ok := n.rel()
	if !ok {
		return "", syscall.ENOENT
	}
	return dir, 0
}

// guardDelete applies the deletion guard to removing name from n.
func (n *node) guardDelete(ctx context.Context, name, op string) syscall.Errno {
	if n.fsys.guardUntil.Load() == 0 {
		return 0
	}
	dir, errno := n.childDir()
	if errno != 0 {
		return 0 // mutateChild answers it
	}
	return n.fsys.guardDelete(ctx, joinRel(dir, name), op)
}

// mutateChild admits a mutation of name in n.
func (n *node) mutateChild(name string) (done func(), dir string, errno syscall.Errno) {
	done, errno = n.fsys.beginMutation()
	if errno != 0 {
		return nil, "", errno
	}
	dir, errno = n.childDir()
	if errno == 0 && manifest.IsStateDir(dir, name) {
		errno = syscall.EPERM
	}
	if errno != 0 {
		done()
		return nil, "", errno
	}
	return done, dir, 0
}

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.fsys.gate != nil {
		rel, ok := n.rel()
		if !ok {
			return nil, 0, syscall.ENOENT
		}
		if errno := n.fsys.passGate(ctx, rel); errno != 0 {
			return nil, 0, errno
		}
	}
	write := opensForWrite(flags)
	// Refuse a write before waiting on anything, and wait without
	// holding up SetMode.
	if write && !n.fsys.currentMode().writable() {
		return nil, 0, n.fsys.refuseReadOnly()
	}
	// Only reads are passed through: the daemon admits every write
	// (design §5.14).
	passthrough, errno := n.reserve(ctx, !write)
	if errno != 0 {
		return nil, 0, errno
	}
	var adm *admission
	if write {
		if adm, errno = n.fsys.admit(); errno != 0 {
			n.unreserve(passthrough)
			return nil, 0, errno
		}
		defer adm.done()
	}
	fh, fuseFlags, errno := n.open(ctx, flags)
	if errno != 0 {
		n.unreserve(passthrough)
		return nil, 0, errno
	}
	h := newHandle(n, fh.(*fs.LoopbackFile), write, passthrough)
	n.fsys.stats.opened(passthrough, write)
	if !write {
		// Nothing to do at close: spare the kernel the FLUSH.
		return h.wrap(), fuseFlags | fuse.FOPEN_NOFLUSH, 0
	}
	h.learnSetID(ctx)
	n.addWriter(h)
	return h.wrap(), fuseFlags, 0
}

func opensForWrite(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// reserve counts an open of n and says whether it uses passthrough: it
// does when it may and nobody has the file open through the daemon.
// Otherwise it is served by the daemon, and waits a little for
// passthrough opens whose close is still in flight (RELEASE is sent after
// close(2) returned, and a loaded machine delays it), then gives up with
// ETXTBSY.
func (n *node) reserve(ctx context.Context, passthroughOK bool) (passthrough bool, errno syscall.Errno) {
	passthroughOK = passthroughOK && n.fsys.passthrough.Load()
	var deadline <-chan time.Time
	for {
		n.mu.Lock()
		switch {
		case passthroughOK && n.daemonOpens == 0:
			n.passthroughOpens++
			n.checkInvariants()
			n.mu.Unlock()
			return true, 0
		case n.passthroughOpens == 0:
			n.daemonOpens++
			n.checkInvariants()
			n.mu.Unlock()
			return false, 0
		}
		if n.passthroughIdle == nil {
			n.passthroughIdle = make(chan struct{})
		}
		idle := n.passthroughIdle
		n.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(writeBusyWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return false, syscall.EINTR
		case <-deadline:
			n.fsys.stats.writeBusy.Add(1)
			return false, syscall.ETXTBSY
		}
	}
}

// checkInvariants panics (go-fuse answers EIO) when the open counts are
// impossible. LOCKS_REQUIRED(n.mu)
func (n *node) checkInvariants() {
	if n.passthroughOpens < 0 || n.daemonOpens < 0 || n.passthroughOpens > 0 && n.daemonOpens > 0 {
		panic(fmt.Sprintf("fusefs: inode open counts broken: %d passthrough, %d daemon", n.passthroughOpens, n.daemonOpens))
	}
}

// addWriter registers an open write handle (already counted by
// reserve).
func (n *node) addWriter(h *handle) {
	n.mu.Lock()
	if n.writers == nil {
		n.writers = make(map[*handle]struct{})
	}
	n.writers[h] = struct{}{}
	n.mu.Unlock()
}

// dropOpen forgets h when it is released.
func (n *node) dropOpen(h *handle) {
	n.mu.Lock()
	delete(n.writers, h)
	n.mu.Unlock()
	n.unreserve(h.passthrough)
	n.fsys.stats.openFiles.Add(-1)
}

// unreserve undoes reserve.
func (n *node) unreserve(passthrough bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	defer n.checkInvariants()
	if !passthrough {
		n.daemonOpens--
		return
	}
	n.passthroughOpens--
	if n.passthroughOpens == 0 && n.passthroughIdle != nil {
		close(n.passthroughIdle)
		n.passthroughIdle = nil
	}
}

// otherWriters lists the open write handles other than h (all of them
// when h is nil).
func (n *node) otherWriters(h *handle) []*handle {
	n.mu.Lock()
	defer n.mu.Unlock()
	var others []*handle
	for o := range n.writers {
		if o != h {
			others = append(others, o)
		}
	}
	return others
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	adm, errno := n.fsys.admit()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer adm.done()
	dir, errno := n.childDir()
	if errno == 0 && manifest.IsStateDir(dir, name) {
		errno = syscall.EPERM
	}
	if errno != 0 {
		return nil, nil, 0, errno
	}
	ch, fh, fuseFlags, errno := n.create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child := ch.Operations().(*node)
	// A new inode: nothing else has it open, so this does not wait.
	if _, errno := child.reserve(ctx, false); errno != 0 {
		fh.(*fs.LoopbackFile).Release(ctx)
		return nil, nil, 0, errno
	}
	n.fsys.stats.opened(false, true)
	h := newHandle(child, fh.(*fs.LoopbackFile), true, false)
	h.setID.Store(setIDBits(mode) != 0)
	child.addWriter(h)
	return ch, h.wrap(), fuseFlags, 0
}

var _ = (fs.NodeTmpfiler)((*node)(nil))

// Tmpfile is written through the daemon, as every file is.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	done, errno := n.fsys.beginMutation()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer done()
	ch, fh, fuseFlags, errno := n.tmpfile(ctx, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	child := ch.Operations().(*node)
	if _, errno := child.reserve(ctx, false); errno != 0 {
		fh.(*fs.LoopbackFile).Release(ctx)
		return nil, nil, 0, errno
	}
	n.fsys.stats.opened(false, true)
	h := newHandle(child, fh.(*fs.LoopbackFile), true, false)
	h.setID.Store(setIDBits(mode) != 0)
	child.addWriter(h)
	return ch, h, fuseFlags, 0
}

var _ = (fs.NodeMkdirer)((*node)(nil))

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, _, errno := n.mutateChild(name)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	return n.mkdir(ctx, name, mode, out)
}

var _ = (fs.NodeMknoder)((*node)(nil))

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, _, errno := n.mutateChild(name)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	return n.mknod(ctx, name, mode, rdev, out)
}

var _ = (fs.NodeSymlinker)((*node)(nil))

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, _, errno := n.mutateChild(name)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	return n.symlink(ctx, target, name, out)
}

var _ = (fs.NodeLinker)((*node)(nil))

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	done, _, errno := n.mutateChild(name)
	if errno != 0 {
		return nil, errno
	}
	defer done()
	return n.link(ctx, target, name, out)
}

var _ = (fs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if errno := n.guardDelete(ctx, name, "unlink"); errno != 0 {
		return errno
	}
	done, dir, errno := n.mutateChild(name)
	if errno != 0 {
		return errno
	}
	defer done()
	if errno := n.unlink(ctx, name); errno != 0 {
		return errno
	}
	n.fsys.removed(joinRel(dir, name))
	return 0
}

var _ = (fs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if errno := n.guardDelete(ctx, name, "rmdir"); errno != 0 {
		return errno
	}
	done, _, errno := n.mutateChild(name)
	if errno != 0 {
		return errno
	}
	defer done()
	return n.rmdir(ctx, name)
}

var _ = (fs.NodeRenamer)((*node)(nil))

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if errno := n.guardDelete(ctx, name, "rename"); errno != 0 {
		return errno
	}
	done, dir, errno := n.mutateChild(name)
	if errno != 0 {
		return errno
	}
	defer done()
	newDir, ok := relPath(newParent.EmbeddedInode())
	if !ok {
		return syscall.ENOENT
	}
	if manifest.IsStateDir(newDir, newName) {
		return syscall.EPERM
	}
	src := n.GetChild(name)
	if errno := n.rename(ctx, name, newParent, newName, flags); errno != 0 {
		return errno
	}
	n.fsys.renamed(joinRel(dir, name), src, joinRel(newDir, newName), flags)
	return 0
}

var _ = (fs.NodeSetattrer)((*node)(nil))

// Setattr covers chmod, chown, truncate and utimens, with or without an
// open handle.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	done, errno := n.fsys.beginMutation()
	if errno != 0 {
		return errno
	}
	defer done()
	h := handleOf(f)
	var lf fs.FileHandle
	if h != nil {
		lf = h.lf
	}
	if errno := n.setattr(ctx, lf, in, out); errno != 0 {
		return errno
	}
	n.dropSetIDAfterSetattr(in, h)
	// A truncate by path changes a file that no writer will report on
	// close (writers read back whatever the file holds then).
	if _, ok := in.GetSize(); ok && h == nil && len(n.otherWriters(nil)) == 0 {
		if rel, ok := n.rel(); ok {
			n.fsys.writtenWithoutChecksum(rel)
		}
	}
	return 0
}

var _ = (fs.NodeSetxattrer)((*node)(nil))

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	done, errno := n.fsys.beginMutation()
	if errno != 0 {
		return errno
	}
	defer done()
	return n.setxattr(ctx, attr, data, flags)
}

var _ = (fs.NodeRemovexattrer)((*node)(nil))

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	done, errno := n.fsys.beginMutation()
	if errno != 0 {
		return errno
	}
	defer done()
	return n.removexattr(ctx, attr)
}

var _ = (fs.NodeCopyFileRanger)((*node)(nil))

// CopyFileRange copies between backing files without the data passing
// through the daemon; the target's writer reports it on close.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	done, errno := n.fsys.beginMutation()
	if errno != 0 {
		return 0, errno
	}
	defer done()
	hIn, hOut := handleOf(fhIn), handleOf(fhOut)
	if hIn == nil || hOut == nil {
		return 0, syscall.EBADF
	}
	hOut.dropSetID(ctx)
	return n.LoopbackNode.CopyFileRange(ctx, hIn.lf, offIn, out, hOut.lf, offOut, length, flags)
}

// isMetadata reports whether rel names a checkpoint's _metadata file.
func isMetadata(rel string) bool { return path.Base(rel) == "_metadata" }
