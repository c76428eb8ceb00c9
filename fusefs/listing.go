package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// listing is an open directory whose entries were filtered through the
// policy when it was opened (and again on rewind). It reads the backing
// directory itself, in large getdents(2) calls, and keeps it open for
// rewinding and fsyncdir.
type listing struct {
	fsys *fileSystem
	dir  string
	fd   int // the backing directory

	mu sync.Mutex
	// entries is the filtered snapshot; next indexes the entry to return,
	// and cur holds the one returned last (go-fuse copies it). An entry's
	// offset is its index + 1. GUARDED_BY(mu)
	entries []fuse.DirEntry
	next    int
	cur     fuse.DirEntry
}

// checkInterruptEvery bounds the work done between interrupt checks while
// a large directory is read.
const checkInterruptEvery = 1024

// getdentsBuffer is the size of one getdents(2) read: about 2,000 short
// names, where go-fuse's loopback reads 4 KiB at a time.
const getdentsBuffer = 64 << 10

var getdentsBuffers = sync.Pool{New: func() any { b := make([]byte, getdentsBuffer); return &b }}

// openListing opens the backing directory dir (relative to the mount
// root) and reads it.
func openListing(ctx context.Context, fsys *fileSystem, dir string) (*listing, syscall.Errno) {
	fd, err := fsys.openDir(dir, unix.O_RDONLY)
	if err != nil {
		return nil, fsys.errnoFor(err)
	}
	l := &listing{fsys: fsys, dir: dir, fd: fd}
	if errno := l.load(ctx); errno != 0 {
		unix.Close(fd)
		return nil, errno
	}
	return l, 0
}

// load reads the backing directory from the start.
func (l *listing) load(ctx context.Context) syscall.Errno {
	if _, err := unix.Seek(l.fd, 0, unix.SEEK_SET); err != nil {
		return fs.ToErrno(err)
	}
	bufp := getdentsBuffers.Get().(*[]byte)
	defer getdentsBuffers.Put(bufp)
	buf := *bufp
	var entries []fuse.DirEntry
	for i := 0; ; i++ {
		if i%checkInterruptEvery == checkInterruptEvery-1 && ctx.Err() != nil {
			return syscall.EINTR
		}
		n, err := unix.Getdents(l.fd, buf)
		if err != nil {
			return fs.ToErrno(err)
		}
		if n <= 0 {
			break
		}
		for off := 0; off < n; {
			var e fuse.DirEntry
			off += e.Parse(buf[off:n])
			if e.Name == "." || e.Name == ".." || l.fsys.listed(l.dir, e.Name) {
				e.Off = 0
				entries = append(entries, e)
			}
		}
	}
	l.mu.Lock()
	l.entries, l.next = entries, 0
	l.mu.Unlock()
	return 0
}

var _ = (fs.FileReaddirenter)((*listing)(nil))

func (l *listing) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next >= len(l.entries) {
		return nil, 0
	}
	l.cur = l.entries[l.next]
	l.next++
	l.cur.Off = uint64(l.next)
	return &l.cur, 0
}

var _ = (fs.FileSeekdirer)((*listing)(nil))

// Seekdir to 0 (rewinddir) lists the directory again, as POSIX wants.
func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		return l.load(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if off > uint64(len(l.entries)) {
		return syscall.EINVAL
	}
	l.next = int(off)
	return 0
}

var _ = (fs.FileFsyncdirer)((*listing)(nil))

func (l *listing) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return fs.ToErrno(unix.Fsync(l.fd))
}

var _ = (fs.FileReleasedirer)((*listing)(nil))

func (l *listing) Releasedir(ctx context.Context, flags uint32) {
	unix.Close(l.fd)
}

// stream returns the snapshot as a DirStream (for Readdir).
func (l *listing) stream() fs.DirStream {
	l.mu.Lock()
	entries := l.entries
	l.mu.Unlock()
	unix.Close(l.fd)
	return fs.NewListDirStream(entries)
}
