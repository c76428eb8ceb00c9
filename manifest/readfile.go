package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Every file this package reads of a backing file system (the NAS, or
// its replica) is opened as a regularFile: _metadata, changelog files,
// HA files, job graphs, job result entries, blobs, sealed manifests and
// the files hashed for them. What lies at a path there is outside input:
// a FIFO, whose open and reads wait for a writer forever; a device, or a
// symbolic link to one (/dev/zero has no end); a sparse file of a TiB; a
// file still being written. So a file is opened beneath its root without
// following a symbolic link and without waiting (openAt), refused unless
// fstat finds a regular file, and read for exactly the size fstat found,
// at most a bound its reader states. A file whose size or times change
// meanwhile is not complete yet.

// errNotRegular: a file to read is a FIFO, a device, a directory or a
// socket.
var errNotRegular = errors.New("not a regular file")

// errChanged: a file changed while it was read (it is still being
// written or replaced): not complete yet.
var errChanged = errors.New("changed while read")

// tooLargeError: a file is larger than the bound of what reads it.
type tooLargeError struct{ size, bound int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("%d bytes, larger than its bound of %d: not read", e.size, e.bound)
}

// testHookOpened, when set by a test, runs once a regularFile is open.
var testHookOpened atomic.Pointer[func(*regularFile)]

// regularFile is a regular file of a backing file system open for
// reading, and what fstat said of it then.
type regularFile struct {
	*os.File
	st unix.Stat_t
}

// openRegular opens the local path, which lies in one of res's roots.
func openRegular(res *Resolver, path string) (*regularFile, error) {
	root, rel, err := res.split(path)
	if err != nil {
		return nil, err
	}
	return openRegularAt(root, rel)
}

// openRegularAt opens rel beneath the directory root.
func openRegularAt(root, rel string) (*regularFile, error) {
	fd, path, err := openAt(root, rel)
	if err != nil {
		return nil, err
	}
	f := &regularFile{}
	if err := unix.Fstat(fd, &f.st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if f.st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	// O_NONBLOCK only kept open from waiting for a FIFO's writer. Reads of
	// a regular file ignore it (but under a mandatory lock, before Linux
	// 5.15), and os.File would try to poll a descriptor that has it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	f.File = os.NewFile(uintptr(fd), path)
	if hook := testHookOpened.Load(); hook != nil {
		(*hook)(f)
	}
	return f, nil
}

// size is the file's size when it was opened.
func (f *regularFile) size() int64 { return f.st.Size }

// readAll reads the whole file, exactly the size it had when opened,
// when that is at most bound bytes.
func (f *regularFile) readAll(ctx context.Context, bound int64) ([]byte, error) {
	if f.st.Size > bound {
		return nil, &os.PathError{Op: "read", Path: f.Name(), Err: &tooLargeError{f.st.Size, bound}}
	}
	data := make([]byte, f.st.Size)
	if _, err := io.ReadFull(ctxReader{ctx, f.File}, data); err != nil {
		return nil, f.readError(err)
	}
	if err := f.atEnd(); err != nil {
		return nil, err
	}
	return data, nil
}

// copyTo writes the file to w as it streams by: exactly the size it had
// when opened, stopping when ctx ends.
func (f *regularFile) copyTo(ctx context.Context, w io.Writer) (int64, error) {
	n, err := io.CopyN(w, ctxReader{ctx, f.File}, f.st.Size)
	if err != nil {
		return n, f.readError(err)
	}
	return n, f.atEnd()
}

// readError is the error of a read that failed: a file that ended early
// shrank.
func (f *regularFile) readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &os.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w: shorter than its %d bytes", errChanged, f.st.Size)}
	}
	return err
}

// atEnd checks, once the file's size is read, that it has no more bytes
// and that its version is the one opened.
func (f *regularFile) atEnd() error {
	var b [1]byte
	switch n, err := f.Read(b[:]); {
	case n > 0:
		return &os.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w: longer than its %d bytes", errChanged, f.st.Size)}
	case err != nil && err != io.EOF:
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	if VersionOf(&st) != VersionOf(&f.st) {
		return &os.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w: modified meanwhile", errChanged)}
	}
	return nil
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// openAt opens rel beneath root, read-only, without following a symbolic
// link out of root (openat2 RESOLVE_BENEATH; on kernels before 5.6 the
// lexical check of Resolver.split is what remains) or at rel's last
// component (O_NOFOLLOW), and without waiting for a FIFO's writer
// (O_NONBLOCK). It returns the descriptor and the path it opened.
func openAt(root, rel string) (int, string, error) {
	if rel == "" {
		rel = "."
	}
	path := filepath.Join(root, rel)
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, path, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootFd)
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(rootFd, rel, &how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Openat(rootFd, rel, flags, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		err = fmt.Errorf("a symbolic link, not followed (%w)", err)
	}
	if err != nil {
		return -1, path, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, path, nil
}
