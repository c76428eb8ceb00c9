package fusefs

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Every backing operation stays beneath the backing root and follows no
// symbolic link below it (issue 29): the daemon runs as root, and any
// host that writes the NAS can swap a directory for a link to anywhere.
// An operation opens the root, resolves its directory from there with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and acts on the final
// name with the *at calls, which do not follow it either.
//
// The root itself is opened by its configured path for every operation,
// not held: a replica follows a backing directory replaced as a whole
// (snapshot replication exchanges it, a NAS is remounted), as
// daemon/pin.go expects, and that pin fences a primary whose backing was
// replaced. Links in the configured path are followed as configured, but
// its last component must not be a link unless it was one at mount.
//
// A final name that is a link is shown as a link: the kernel follows it
// for the caller, in the caller's name space and with the caller's rights.
//
// chmod (before Linux 6.6), truncate and the xattr calls have no form
// that takes a directory descriptor and leaves the name unfollowed. They
// name the object through /proc/self/fd, the magic link of a descriptor
// the daemon resolved itself: xattrs with the l*xattr calls on
// <directory>/<name>; chmod and truncate on an O_PATH|O_NOFOLLOW
// descriptor of the name, refused (ELOOP) if it is a link.

// openRoot opens the backing root for one operation.
func (fsys *fileSystem) openRoot() (int, error) {
	flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !fsys.rootIsLink.Load() {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(fsys.backing, flags, 0)
	if err != nil {
		fsys.refused("", err)
	}
	return fd, err
}

// openDir opens the directory rel (relative to the backing root, "" for
// the root) with flags, beneath the root and through no link.
func (fsys *fileSystem) openDir(rel string, flags int) (int, error) {
	root, err := fsys.openRoot()
	if err != nil || rel == "" && flags == unix.O_PATH {
		return root, err
	}
	defer unix.Close(root)
	if rel == "" {
		rel = "."
	}
	var fd int
	if fsys.noOpenat2.Load() {
		fd, err = openByComponents(root, rel, flags|unix.O_DIRECTORY)
	} else {
		fd, err = unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_DIRECTORY | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == unix.ENOSYS { // before Linux 5.6, or a seccomp filter
			fsys.noOpenat2.Store(true)
			fd, err = openByComponents(root, rel, flags|unix.O_DIRECTORY)
		}
	}
	if err != nil {
		fsys.refused(rel, err)
	}
	return fd, err
}

// refused logs, once per directory and interval, a link (or a file)
// where a directory was expected.
func (fsys *fileSystem) refused(rel string, err error) {
	switch err {
	case unix.ELOOP, unix.ENOTDIR, unix.EXDEV:
		if ok, suppressed := fsys.refusedLog.allow(rel, fsys.now()); ok {
			attrs := []any{"dir", rel, "err", err}
			if suppressed > 0 {
				attrs = append(attrs, "suppressed", suppressed)
			}
			fsys.log.Warn("the backing holds a symbolic link or a file where a directory was expected: not followed", attrs...)
		}
	}
}

// openByComponents is openDir without openat2: one openat(O_NOFOLLOW) per
// component.
func openByComponents(root int, rel string, flags int) (int, error) {
	dir := root
	segs := strings.Split(rel, "/")
	for i, seg := range segs {
		if seg == ".." {
			return -1, unix.EXDEV
		}
		f := unix.O_PATH | unix.O_DIRECTORY
		if i == len(segs)-1 {
			f = flags
		}
		fd, err := unix.Openat(dir, seg, f|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	return dir, nil
}

// resolve opens the backing directory rel for operations on the names in
// it; the caller closes it.
func (fsys *fileSystem) resolve(rel string) (int, syscall.Errno) {
	fd, err := fsys.openDir(rel, unix.O_PATH)
	if err != nil {
		return -1, fsys.errnoFor(err)
	}
	return fd, 0
}

// dirFd is n as a directory, for operations on its children.
func (n *node) dirFd() (int, syscall.Errno) {
	rel, ok := n.rel()
	if !ok {
		return -1, syscall.ENOENT
	}
	return n.fsys.resolve(rel)
}

// at is n's directory and n's name in it ("." for the root), for
// operations on n itself.
func (n *node) at() (int, string, syscall.Errno) {
	if n.IsRoot() {
		d, errno := n.fsys.resolve("")
		return d, ".", errno
	}
	name, parent := n.Parent()
	if parent == nil {
		return -1, "", syscall.ENOENT
	}
	rel, ok := relPath(parent)
	if !ok {
		return -1, "", syscall.ENOENT
	}
	d, errno := n.fsys.resolve(rel)
	return d, name, errno
}

// procPath names the object behind a descriptor of the daemon's.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// statxSyncType is AT_STATX_SYNC_TYPE.
const statxSyncType = 0x6000

// entry is a backing name as the mount sees it.
type entry struct {
	attr fuse.Attr
	dev  uint64
	gen  uint64 // the birth time, which go-fuse's loopback takes as the generation
}

// lstatAt stats name in dirfd ("" with AT_EMPTY_PATH: dirfd itself)
// without following it.
func lstatAt(dirfd int, name string, flags int) (entry, error) {
	var x unix.Statx_t
	err := unix.Statx(dirfd, name, flags|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x)
	if err == unix.ENOSYS { // before Linux 4.11, or a seccomp filter
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, flags|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return entry{}, err
		}
		return entry{dev: uint64(st.Dev), gen: 1, attr: fuse.Attr{
			Ino: uint64(st.Ino), Size: uint64(st.Size), Blocks: uint64(st.Blocks),
			Atime: uint64(st.Atim.Sec), Mtime: uint64(st.Mtim.Sec), Ctime: uint64(st.Ctim.Sec),
			Atimensec: uint32(st.Atim.Nsec), Mtimensec: uint32(st.Mtim.Nsec), Ctimensec: uint32(st.Ctim.Nsec),
			Mode: uint32(st.Mode), Nlink: uint32(st.Nlink), Owner: fuse.Owner{Uid: st.Uid, Gid: st.Gid},
			Rdev: uint32(st.Rdev), Blksize: uint32(st.Blksize),
		}}, nil
	}
	if err != nil {
		return entry{}, err
	}
	e := entry{dev: unix.Mkdev(x.Dev_major, x.Dev_minor), gen: 1, attr: fuse.Attr{
		Ino: x.Ino, Size: x.Size, Blocks: x.Blocks,
		Atime: uint64(x.Atime.Sec), Mtime: uint64(x.Mtime.Sec), Ctime: uint64(x.Ctime.Sec),
		Atimensec: x.Atime.Nsec, Mtimensec: x.Mtime.Nsec, Ctimensec: x.Ctime.Nsec,
		Mode: uint32(x.Mode), Nlink: x.Nlink, Owner: fuse.Owner{Uid: x.Uid, Gid: x.Gid},
		Rdev: uint32(unix.Mkdev(x.Rdev_major, x.Rdev_minor)), Blksize: x.Blksize,
	}}
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		e.gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return e, nil
}

// child makes the inode for a backing entry of n, numbered as go-fuse's
// loopback numbers it.
func (n *node) child(ctx context.Context, e entry, out *fuse.EntryOut) *fs.Inode {
	out.Attr = e.attr
	swapped := e.dev<<32 | e.dev>>32
	rootDev := n.RootData.Dev<<32 | n.RootData.Dev>>32
	attr := fs.StableAttr{Mode: e.attr.Mode, Gen: e.gen, Ino: swapped ^ rootDev ^ e.attr.Ino}
	return n.NewInode(ctx, &fs.LoopbackNode{RootData: n.RootData}, attr)
}

// daemonIsRoot: the daemon gives what it creates to the caller.
var daemonIsRoot = os.Geteuid() == 0

// caller is the uid and gid to give what the daemon creates for the
// caller of ctx; ok is false when the daemon is not root.
func caller(ctx context.Context) (uid, gid int, ok bool) {
	c, found := fuse.FromContext(ctx)
	if !daemonIsRoot || !found {
		return 0, 0, false
	}
	return int(c.Uid), int(c.Gid), true
}

// made finishes an entry just made in d as name: its owner is the
// caller, and its inode is n's new child. If it cannot be stat'ed it is
// removed again (removeFlags for unlinkat), as go-fuse's loopback does.
func (n *node) made(ctx context.Context, d int, name string, removeFlags int, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if uid, gid, ok := caller(ctx); ok {
		unix.Fchownat(d, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	e, err := lstatAt(d, name, 0)
	if err != nil {
		unix.Unlinkat(d, name, removeFlags)
		return nil, n.fsys.errnoFor(err)
	}
	return n.child(ctx, e, out), 0
}

// The backing operations, with the signatures of go-fuse's loopback
// methods they replace.

func (n *node) lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	e, err := lstatAt(d, name, 0)
	if err != nil {
		return nil, n.fsys.errnoFor(err)
	}
	return n.child(ctx, e, out), 0
}

// lstatChild looks name up in n's directory on the backing file system.
func (n *node) lstatChild(name string) error {
	d, errno := n.dirFd()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	_, err := lstatAt(d, name, 0)
	return err
}

func (n *node) open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d, name, errno := n.at()
	if errno != 0 {
		return nil, 0, errno
	}
	defer unix.Close(d)
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	fd, err := unix.Openat(d, name, int(flags)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, n.fsys.errnoFor(err)
	}
	return fs.NewLoopbackFile(fd), 0, 0
}

func (n *node) create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer unix.Close(d)
	flags &^= syscall.O_APPEND
	fd, err := unix.Openat(d, name, int(flags)|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, nil, 0, n.fsys.errnoFor(err)
	}
	if uid, gid, ok := caller(ctx); ok {
		unix.Fchown(fd, uid, gid)
	}
	e, err := lstatAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		unix.Close(fd)
		return nil, nil, 0, n.fsys.errnoFor(err)
	}
	return n.child(ctx, e, out), fs.NewLoopbackFile(fd), 0, 0
}

func (n *node) tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer unix.Close(d)
	flags &^= syscall.O_APPEND
	fd, err := unix.Openat(d, ".", int(flags)|unix.O_TMPFILE|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, nil, 0, n.fsys.errnoFor(err)
	}
	e, err := lstatAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		unix.Close(fd)
		return nil, nil, 0, n.fsys.errnoFor(err)
	}
	return n.child(ctx, e, out), fs.NewLoopbackFile(fd), 0, 0
}

func (n *node) mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	if err := unix.Mkdirat(d, name, mode); err != nil {
		return nil, n.fsys.errnoFor(err)
	}
	return n.made(ctx, d, name, unix.AT_REMOVEDIR, out)
}

func (n *node) mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	if err := unix.Mknodat(d, name, mode, int(rdev)); err != nil {
		return nil, n.fsys.errnoFor(err)
	}
	return n.made(ctx, d, name, 0, out)
}

func (n *node) symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	if err := unix.Symlinkat(target, d, name); err != nil {
		return nil, n.fsys.errnoFor(err)
	}
	return n.made(ctx, d, name, 0, out)
}

func (n *node) link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok || t.fsys != n.fsys {
		return nil, syscall.EXDEV
	}
	// A file in no directory (O_TMPFILE) has no name to link from.
	if _, parent := t.Parent(); parent == nil {
		return nil, syscall.EXDEV
	}
	td, tname, errno := t.at()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(td)
	d, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	if err := unix.Linkat(td, tname, d, name, 0); err != nil {
		return nil, n.fsys.errnoFor(err)
	}
	e, err := lstatAt(d, name, 0)
	if err != nil {
		unix.Unlinkat(d, name, 0)
		return nil, n.fsys.errnoFor(err)
	}
	return n.child(ctx, e, out), 0
}

func (n *node) unlink(ctx context.Context, name string) syscall.Errno {
	return n.removeAt(name, 0)
}

func (n *node) rmdir(ctx context.Context, name string) syscall.Errno {
	return n.removeAt(name, unix.AT_REMOVEDIR)
}

func (n *node) removeAt(name string, flags int) syscall.Errno {
	d, errno := n.dirFd()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	return n.fsys.errnoFor(unix.Unlinkat(d, name, flags))
}

func (n *node) rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || np.fsys != n.fsys {
		return syscall.EXDEV
	}
	d, errno := n.dirFd()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	nd, errno := np.dirFd()
	if errno != 0 {
		return errno
	}
	defer unix.Close(nd)
	return n.fsys.errnoFor(unix.Renameat2(d, name, nd, newName, uint(flags)))
}

// opendirHandle lists the backing directory dir as go-fuse's loopback
// does.
func (n *node) opendirHandle(dir string) (fs.FileHandle, uint32, syscall.Errno) {
	fd, err := n.fsys.openDir(dir, unix.O_RDONLY)
	if err != nil {
		return nil, 0, n.fsys.errnoFor(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	return ds, 0, errno
}

func (n *node) getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if fga, ok := f.(fs.FileGetattrer); ok {
		return fga.Getattr(ctx, out)
	}
	d, name, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	e, err := lstatAt(d, name, 0)
	if err != nil {
		return n.fsys.errnoFor(err)
	}
	out.Attr = e.attr
	return 0
}

// setattr applies SETATTR through the handle f if it can, else by name,
// in the order go-fuse's loopback does (truncate before times, so an
// explicit mtime stays).
func (n *node) setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if fsa, ok := f.(fs.FileSetattrer); ok {
		return fsa.Setattr(ctx, in, out)
	}
	d, name, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	err := func() error {
		if m, ok := in.GetMode(); ok {
			if err := chmodAt(d, name, m); err != nil {
				return err
			}
		}
		uid, uok := in.GetUID()
		gid, gok := in.GetGID()
		if uok || gok {
			u, g := -1, -1
			if uok {
				u = int(uid)
			}
			if gok {
				g = int(gid)
			}
			if err := unix.Fchownat(d, name, u, g, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		if sz, ok := in.GetSize(); ok {
			if err := onObject(d, name, func(p string) error { return unix.Truncate(p, int64(sz)) }); err != nil {
				return err
			}
		}
		mtime, mok := in.GetMTime()
		atime, aok := in.GetATime()
		if mok || aok {
			ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
			var err error
			if aok {
				if ts[0], err = unix.TimeToTimespec(atime); err != nil {
					return err
				}
			}
			if mok {
				if ts[1], err = unix.TimeToTimespec(mtime); err != nil {
					return err
				}
			}
			if err := unix.UtimesNanoAt(d, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		e, err := lstatAt(d, name, 0)
		if err == nil {
			out.Attr = e.attr
		}
		return err
	}()
	return n.fsys.errnoFor(err)
}

func (n *node) setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.xattrs(func(p string) error { return unix.Lsetxattr(p, attr, data, int(flags)) })
}

func (n *node) removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.xattrs(func(p string) error { return unix.Lremovexattr(p, attr) })
}

// chmodAt changes the mode of name in dirfd without following it:
// fchmodat2 (Linux 6.6) refuses a link with EOPNOTSUPP, which x/sys also
// answers without fchmodat2; onObject then tells the two apart.
func chmodAt(dirfd int, name string, mode uint32) error {
	err := unix.Fchmodat(dirfd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if err != unix.EOPNOTSUPP {
		return err
	}
	return onObject(dirfd, name, func(p string) error { return unix.Chmod(p, mode) })
}

// onObject runs fn on the /proc/self/fd path of an O_PATH descriptor of
// name in dirfd, which leads to that inode and nowhere else. A link is
// refused (ELOOP): fn would follow it.
func onObject(dirfd int, name string, fn func(string) error) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return fn(procPath(fd))
}

// xattrs runs fn on the path of n for the l*xattr calls: its name in its
// directory's descriptor, which those calls do not follow.
func (n *node) xattrs(fn func(p string) error) syscall.Errno {
	d, name, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	return n.fsys.errnoFor(fn(procPath(d) + "/" + name))
}

// The overrides with no policy: they only reach the backing.

var _ = (fs.NodeGetattrer)((*node)(nil))

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.getattr(ctx, f, out)
}

var _ = (fs.NodeStatxer)((*node)(nil))

func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if fsx, ok := f.(fs.FileStatxer); ok {
		return fsx.Statx(ctx, flags, mask, out)
	}
	d, name, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	var x unix.Statx_t
	if err := unix.Statx(d, name, int(flags)&statxSyncType|unix.AT_SYMLINK_NOFOLLOW, int(mask), &x); err != nil {
		return n.fsys.errnoFor(err)
	}
	out.FromStatx(&x)
	return 0
}

var _ = (fs.NodeReadlinker)((*node)(nil))

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	d, name, errno := n.at()
	if errno != 0 {
		return nil, errno
	}
	defer unix.Close(d)
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		sz, err := unix.Readlinkat(d, name, buf)
		if err != nil {
			return nil, n.fsys.errnoFor(err)
		}
		if sz < len(buf) {
			return buf[:sz], 0
		}
	}
}

var _ = (fs.NodeGetxattrer)((*node)(nil))

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var sz int
	errno := n.xattrs(func(p string) (err error) {
		sz, err = unix.Lgetxattr(p, attr, dest)
		return err
	})
	return uint32(max(sz, 0)), errno
}

var _ = (fs.NodeListxattrer)((*node)(nil))

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var sz int
	errno := n.xattrs(func(p string) (err error) {
		sz, err = unix.Llistxattr(p, dest)
		return err
	})
	return uint32(max(sz, 0)), errno
}

var _ = (fs.NodeStatfser)((*node)(nil))

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	d, name, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return n.fsys.errnoFor(err)
	}
	defer unix.Close(fd)
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &s); err != nil {
		return n.fsys.errnoFor(err)
	}
	out.FromStatfsT(&s)
	return 0
}
