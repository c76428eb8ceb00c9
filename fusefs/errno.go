package fusefs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/ckptfs/ckptfs/manifest"
)

// errnoFor is the one place where an error becomes the errno the kernel
// sees. It looks through wrapping (fs.ToErrno does not: a wrapped error
// would become ENOSYS there, and the kernel stops sending some opcodes
// after one ENOSYS). Unknown errors are logged and become EIO.
func (fsys *fileSystem) errnoFor(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, manifest.ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, manifest.ErrHidden), errors.Is(err, manifest.ErrIncomplete):
		return syscall.ENOENT
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	if errors.Is(err, fs.ErrNotExist) {
		return syscall.ENOENT
	}
	fsys.log.Error("unexpected error, answering EIO", "err", err)
	return syscall.EIO
}
