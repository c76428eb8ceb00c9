package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The mount negotiates FUSE_HANDLE_KILLPRIV_V2. Without it the kernel
// asks for security.capability (a GETXATTR round trip) before every
// WRITE, which halves the throughput of Flink's 4 KiB writes. With it
// the kernel checks once per inode and still removes file capabilities
// itself, but leaves dropping setuid, and setgid with group execute, to
// the daemon when a caller without CAP_FSETID writes or truncates.
//
// SETATTR says exactly when (FATTR_KILL_SUIDGID). go-fuse does not pass
// WRITE's flags on, so writes approximate CAP_FSETID by uid 0. Handles
// learn at open whether the file has such bits, so the common case costs
// one atomic load per write.

// setIDBits are the bits a write by an unprivileged caller drops.
func setIDBits(mode uint32) uint32 {
	bits := mode & syscall.S_ISUID
	if mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		bits |= syscall.S_ISGID
	}
	return bits
}

// fdOf is the descriptor of a loopback file; it stays valid until the
// handle is released.
func fdOf(lf *fs.LoopbackFile) int {
	fd, _ := lf.PassthroughFd()
	return fd
}

// learnSetID records whether writes through h may have to drop bits.
func (h *handle) learnSetID(ctx context.Context) {
	var attr fuse.AttrOut
	if errno := h.lf.Getattr(ctx, &attr); errno == 0 {
		h.setID.Store(setIDBits(attr.Mode) != 0)
	}
}

// dropSetID runs before data lands through h.
func (h *handle) dropSetID(ctx context.Context) {
	if !h.setID.Load() || privileged(ctx) {
		return
	}
	fd := fdOf(h.lf)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err == nil {
		if bits := setIDBits(st.Mode); bits != 0 {
			if err := unix.Fchmod(fd, st.Mode&07777&^bits); err != nil {
				h.node.fsys.log.Warn("dropping setuid/setgid on write", "err", err)
			}
		}
	}
	h.setID.Store(false)
}

// privileged approximates CAP_FSETID of the caller.
func privileged(ctx context.Context) bool {
	c, ok := fuse.FromContext(ctx)
	return ok && c.Uid == 0
}

// dropSetIDAfterSetattr follows a SETATTR (through h, or by path when h
// is nil): a truncate the kernel flagged drops setuid/setgid, and a
// chmod changes what later writes must drop.
func (n *node) dropSetIDAfterSetattr(in *fuse.SetAttrIn, h *handle) {
	if in.Valid&(fuse.FATTR_KILL_SUIDGID|fuse.FATTR_MODE) == 0 {
		return
	}
	var st unix.Stat_t
	var chmod func(uint32) error
	if h != nil {
		fd := fdOf(h.lf)
		if unix.Fstat(fd, &st) != nil {
			return
		}
		chmod = func(m uint32) error { return unix.Fchmod(fd, m) }
	} else {
		d, name, errno := n.at()
		if errno != 0 {
			return
		}
		defer unix.Close(d)
		if unix.Fstatat(d, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return
		}
		chmod = func(m uint32) error { return chmodAt(d, name, m) }
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if bits := setIDBits(st.Mode); bits != 0 && in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		if err := chmod(st.Mode & 07777 &^ bits); err != nil {
			n.fsys.log.Warn("dropping setuid/setgid on truncate", "err", err)
		}
		st.Mode &^= bits
	}
	for _, w := range n.otherWriters(nil) {
		w.setID.Store(setIDBits(st.Mode) != 0)
	}
}
