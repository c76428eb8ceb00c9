package faultfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a loopback node whose operations ask the rules first.
type node struct {
	*fs.LoopbackNode
	fs *server
}

func (n *node) rel() string { return n.Path(nil) }

func (n *node) child(name string) string {
	if p := n.rel(); p != "" {
		return p + "/" + name
	}
	return name
}

var _ = (fs.NodeWrapChilder)((*node)(nil))

func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

var _ = (fs.NodeLookuper)((*node)(nil))

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.fs.fault(ctx, OpLookup, n.child(name)); e != 0 {
		return nil, e
	}
	return n.LoopbackNode.Lookup(ctx, name, out)
}

var _ = (fs.NodeGetattrer)((*node)(nil))

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.fs.fault(ctx, OpGetattr, n.rel()); e != 0 {
		return e
	}
	return n.LoopbackNode.Getattr(ctx, unwrap(f), out)
}

var _ = (fs.NodeStatxer)((*node)(nil))

func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if e := n.fs.fault(ctx, OpGetattr, n.rel()); e != 0 {
		return e
	}
	return n.LoopbackNode.Statx(ctx, unwrap(f), flags, mask, out)
}

var _ = (fs.NodeOpendirHandler)((*node)(nil))

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.fs.fault(ctx, OpReaddir, n.rel()); e != 0 {
		return nil, 0, e
	}
	return n.LoopbackNode.OpendirHandle(ctx, flags)
}

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.fs.fault(ctx, OpOpen, n.rel()); e != 0 {
		return nil, 0, e
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return n.wrap(fh), fl, errno
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.fs.fault(ctx, OpCreate, n.child(name)); e != 0 {
		return nil, nil, 0, e
	}
	ino, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return ino, n.wrapChild(ino, fh), fl, errno
}

var _ = (fs.NodeMkdirer)((*node)(nil))

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.fs.fault(ctx, OpMkdir, n.child(name)); e != 0 {
		return nil, e
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

var _ = (fs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.fs.fault(ctx, OpUnlink, n.child(name)); e != 0 {
		return e
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

var _ = (fs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.fs.fault(ctx, OpUnlink, n.child(name)); e != 0 {
		return e
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

var _ = (fs.NodeRenamer)((*node)(nil))

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.fs.fault(ctx, OpRename, n.child(name)); e != 0 {
		return e
	}
	if np, ok := newParent.(*node); ok {
		newParent = np.LoopbackNode
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

var _ = (fs.NodeSetattrer)((*node)(nil))

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.fs.fault(ctx, OpSetattr, n.rel()); e != 0 {
		return e
	}
	return n.LoopbackNode.Setattr(ctx, unwrap(f), in, out)
}

var _ = (fs.NodeStatfser)((*node)(nil))

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if e := n.fs.fault(ctx, OpStatfs, n.rel()); e != 0 {
		return e
	}
	return n.LoopbackNode.Statfs(ctx, out)
}

var _ = (fs.NodeGetxattrer)((*node)(nil))

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if e := n.fs.fault(ctx, OpXattr, n.rel()); e != 0 {
		return 0, e
	}
	return n.LoopbackNode.Getxattr(ctx, attr, dest)
}

var _ = (fs.NodeSetxattrer)((*node)(nil))

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if e := n.fs.fault(ctx, OpXattr, n.rel()); e != 0 {
		return e
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

func (n *node) wrap(fh fs.FileHandle) fs.FileHandle { return n.wrapChild(n.EmbeddedInode(), fh) }

func (n *node) wrapChild(ino *fs.Inode, fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok || ino == nil {
		return fh
	}
	return &file{LoopbackFile: lf, fs: n.fs, ino: ino}
}

func unwrap(f fs.FileHandle) fs.FileHandle {
	if ff, ok := f.(*file); ok {
		return ff.LoopbackFile
	}
	return f
}

// file is an open loopback file whose data operations ask the rules
// first. It offers no passthrough, so reads and writes reach it.
type file struct {
	*fs.LoopbackFile
	fs  *server
	ino *fs.Inode
}

func (f *file) rel() string { return f.ino.Path(nil) }

var _ = (fs.FilePassthroughFder)((*file)(nil))

func (f *file) PassthroughFd() (int, bool) { return -1, false }

var _ = (fs.FileReader)((*file)(nil))

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := f.fs.fault(ctx, OpRead, f.rel()); e != 0 {
		return nil, e
	}
	return f.LoopbackFile.Read(ctx, buf, off)
}

var _ = (fs.FileWriter)((*file)(nil))

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := f.fs.fault(ctx, OpWrite, f.rel()); e != 0 {
		return 0, e
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

var _ = (fs.FileFlusher)((*file)(nil))

func (f *file) Flush(ctx context.Context) syscall.Errno {
	if e := f.fs.fault(ctx, OpFlush, f.rel()); e != 0 {
		return e
	}
	return f.LoopbackFile.Flush(ctx)
}

var _ = (fs.FileFsyncer)((*file)(nil))

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if e := f.fs.fault(ctx, OpFsync, f.rel()); e != 0 {
		return e
	}
	return f.LoopbackFile.Fsync(ctx, flags)
}

var _ = (fs.FileGetattrer)((*file)(nil))

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if e := f.fs.fault(ctx, OpGetattr, f.rel()); e != 0 {
		return e
	}
	return f.LoopbackFile.Getattr(ctx, out)
}

var _ = (fs.FileSetattrer)((*file)(nil))

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := f.fs.fault(ctx, OpSetattr, f.rel()); e != 0 {
		return e
	}
	return f.LoopbackFile.Setattr(ctx, in, out)
}

var _ = (fs.FileWritever)((*file)(nil))

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if e := f.fs.fault(ctx, OpWrite, f.rel()); e != 0 {
		return 0, e
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}
