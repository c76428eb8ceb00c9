package manifest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A steady pass costs what changed (design §3.6): a directory's stamp says
// whether the names in it may have changed since it was last listed, and a
// directory that did not change is not listed again.

// dirStamp is what a directory's stat says of the names in it: creating,
// removing or renaming one changes its mtime and ctime.
type dirStamp struct {
	ino          uint64
	size         int64
	nlink        uint32
	mtime, ctime int64
}

func stampOf(st *unix.Statx_t) dirStamp {
	return dirStamp{
		ino: st.Ino, size: int64(st.Size), nlink: st.Nlink,
		mtime: st.Mtime.Sec*1e9 + int64(st.Mtime.Nsec),
		ctime: st.Ctime.Sec*1e9 + int64(st.Ctime.Nsec),
	}
}

// A directory whose stamp changed is listed again at the first
// observation a settle after, since a second change in the clock tick of
// the first leaves the stamp as it was. The settle is longer than the
// tick of the file system's clock for the directory's times: a stamp
// with a part of a second comes from a clock finer than a second (a
// jiffy, 1 to 10 ms, on Linux file systems and the NFS servers on them;
// 10 ms on exFAT), one of whole seconds from a clock that may tick by
// the second (some NFS servers, FAT's 2 s).
const (
	settle     = 2 * time.Second
	settleFine = 100 * time.Millisecond
)

// settleFor is the settle of a directory whose stamp is s.
func settleFor(s dirStamp) time.Duration {
	if s.mtime%1e9 != 0 || s.ctime%1e9 != 0 {
		return settleFine
	}
	return settle
}

// dirWatch notices changes to the names in one directory of a backing
// file system. One goroutine at a time uses it.
type dirWatch struct {
	path string // local, absolute, inside a root of res
	fd   int    // open on the directory; -1: not open
	// stamp is the stamp of the last observation; settleAt, when not 0,
	// when (unix nanoseconds) the directory must be listed again.
	stamp    dirStamp
	settleAt int64
}

func newDirWatch(path string) *dirWatch { return &dirWatch{path: path, fd: -1} }

// observe stats the directory (asking an NFS server rather than the
// client's attribute cache) and reports whether it must be listed: it is
// new, its stamp changed, or it settled since it changed. A directory
// that is gone is an ENOENT error.
func (w *dirWatch) observe(res *Resolver, now int64) (list bool, err error) {
	if w.fd < 0 {
		fd, err := openBeneathFd(res, w.path)
		if err != nil {
			return false, err
		}
		w.fd, list = fd, true
	}
	var st unix.Statx_t
	if err := unix.Statx(w.fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st); err != nil {
		w.close()
		if errors.Is(err, unix.ESTALE) {
			err = unix.ENOENT
		}
		return false, &os.PathError{Op: "statx", Path: w.path, Err: err}
	}
	if st.Nlink == 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		w.close()
		return false, &os.PathError{Op: "statx", Path: w.path, Err: unix.ENOENT}
	}
	s := stampOf(&st)
	if !list && s != w.stamp && !w.atPath(res) {
		// Renamed away (a rename changes its ctime), or replaced: what
		// lies at the path now is another directory.
		w.close()
		return false, &os.PathError{Op: "statx", Path: w.path, Err: unix.ENOENT}
	}
	switch {
	case list || s != w.stamp:
		w.stamp, w.settleAt, list = s, now+settleFor(s).Nanoseconds(), true
	case w.settleAt != 0 && now >= w.settleAt:
		w.settleAt, list = 0, true
	}
	return list, nil
}

// atPath reports whether the directory open is still the one at its path.
func (w *dirWatch) atPath(res *Resolver) bool {
	fd, err := openBeneathFd(res, w.path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var a, b unix.Stat_t
	return unix.Fstat(fd, &a) == nil && unix.Fstat(w.fd, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev
}

// forget makes the next observation list the directory.
func (w *dirWatch) forget() { w.close() }

// dirent is one entry of a directory listing.
type dirent struct {
	name     string
	ino      uint64
	dir, reg bool // a directory, a regular file
}

// list reads the directory's entries. A bound keeps a hostile directory
// of millions of names from taking the daemon's memory.
func (w *dirWatch) list() ([]dirent, error) {
	fd, err := unix.Openat(w.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: w.path, Err: err}
	}
	defer unix.Close(fd)
	var out []dirent
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: w.path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino, off, reclen, type, name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, &os.PathError{Op: "getdents", Path: w.path, Err: unix.EIO}
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			d := dirent{name: string(name), ino: binary.NativeEndian.Uint64(b[0:8]), dir: b[18] == unix.DT_DIR, reg: b[18] == unix.DT_REG}
			if b[18] == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, d.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
					d.dir, d.reg = st.Mode&unix.S_IFMT == unix.S_IFDIR, st.Mode&unix.S_IFMT == unix.S_IFREG
				}
			}
			if d.name != "." && d.name != ".." {
				out = append(out, d)
			}
			b = b[reclen:]
		}
		if len(out) > maxListing {
			return nil, &os.PathError{Op: "getdents", Path: w.path, Err: fmt.Errorf("more than %d entries", maxListing)}
		}
	}
}

// maxListing bounds a directory listing: 8 jobs' worth of RocksDB
// incremental checkpoints of 100,000 files each in one shared/.
const maxListing = 1 << 20

func (w *dirWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}
