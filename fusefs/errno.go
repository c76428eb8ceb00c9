package fusefs

import (
	"context"
	"errors"
	iofs "io/fs"
	"syscall"

	"github.com/ckptfs/ckptfs/manifest"
)

// errnoFor is the one place where an error becomes the errno the kernel
// sees (docs/design.md §4.6). A node method answers with a syscall.Errno,
// which go-fuse (v2.12.1, fs/bridge.go) hands to the kernel unchanged; a
// Go error must be turned into one first, and go-fuse's own way, fs.ToErrno
// (fuse.ToStatus), does not fit: it finds a syscall.Errno through
// wrapping (errors.As), but knows os.ErrNotExist, ErrExist, ErrPermission
// and ErrInvalid only unwrapped and manifest's errors not at all, answers
// success for an error that wraps Errno(0), and turns anything else into
// ENOTSUP with a line on the standard library's log rather than ours.
// errnoFor puts policy first: an ended context is EINTR, ErrHidden and
// ErrIncomplete ENOENT, even beside an errno; then a non-zero errno
// anywhere in the chain is itself and a wrapped iofs.ErrNotExist is
// ENOENT. Anything else, a zero errno included, is logged and becomes
// EIO. A refused mutation never passes here: its EROFS comes from
// refuseReadOnly.
func (fsys *fileSystem) errnoFor(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, manifest.ErrHidden), errors.Is(err, manifest.ErrIncomplete):
		return syscall.ENOENT
	case errors.Is(err, manifest.ErrProtected):
		return syscall.EPERM
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		return errno
	}
	if errors.Is(err, iofs.ErrNotExist) {
		return syscall.ENOENT
	}
	fsys.log.Error("unexpected error, answering EIO", "err", err)
	return syscall.EIO
}
