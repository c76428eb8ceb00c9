package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// listing is an open directory whose entries were filtered through the
// policy when it was opened (and again on rewind). It keeps the loopback
// stream open for fsyncdir.
type listing struct {
	fsys *fileSystem
	dir  string
	src  fs.DirStream

	mu sync.Mutex
	// entries is the filtered snapshot; next indexes the entry to return.
	// An entry's offset is its index + 1. GUARDED_BY(mu)
	entries []fuse.DirEntry
	next    int
}

// checkInterruptEvery bounds the work done between interrupt checks while
// a large directory is read.
const checkInterruptEvery = 1024

// load reads the backing directory from the start.
func (l *listing) load(ctx context.Context) syscall.Errno {
	var entries []fuse.DirEntry
	for i := 0; l.src.HasNext(); i++ {
		if i%checkInterruptEvery == checkInterruptEvery-1 && ctx.Err() != nil {
			return syscall.EINTR
		}
		e, errno := l.src.Next()
		if errno != 0 {
			return errno
		}
		if e.Name == "." || e.Name == ".." || l.fsys.listed(l.dir, e.Name) {
			e.Off = 0
			entries = append(entries, e)
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
	e := l.entries[l.next]
	l.next++
	e.Off = uint64(l.next)
	return &e, 0
}

var _ = (fs.FileSeekdirer)((*listing)(nil))

// Seekdir to 0 (rewinddir) lists the directory again, as POSIX wants.
func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		sk, ok := l.src.(fs.FileSeekdirer)
		if !ok {
			return syscall.ENOTSUP
		}
		if errno := sk.Seekdir(ctx, 0); errno != 0 {
			return errno
		}
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
	if f, ok := l.src.(fs.FileFsyncdirer); ok {
		return f.Fsyncdir(ctx, flags)
	}
	return syscall.ENOTSUP
}

var _ = (fs.FileReleasedirer)((*listing)(nil))

func (l *listing) Releasedir(ctx context.Context, flags uint32) {
	l.src.Close()
}

// stream returns the snapshot as a DirStream (for Readdir).
func (l *listing) stream() fs.DirStream {
	l.mu.Lock()
	entries := l.entries
	l.mu.Unlock()
	l.src.Close()
	return fs.NewListDirStream(entries)
}
