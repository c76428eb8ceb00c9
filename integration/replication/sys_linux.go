package replication

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openBeneath opens root/rel for reading without following any symbolic
// link and without leaving root (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS;
// on kernels without openat2, O_NOFOLLOW on the last component).
func openBeneath(root, rel string) (*os.File, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Openat(rfd, rel, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// isNotDirOrLoop reports errors meaning that a path component is no longer
// what the scan saw (replaced by a file or a symbolic link).
func isNotDirOrLoop(err error) bool {
	return errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV)
}

// exchange atomically swaps the directory entries a and b. errNoExchange
// means the filesystem cannot do it.
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange
	}
	if err != nil {
		return &os.LinkError{Op: "renameat2 exchange", Old: a, New: b, Err: err}
	}
	return nil
}
