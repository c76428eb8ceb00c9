package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrAlreadyMounted: the mount point is served by a live FUSE file
// system already.
var ErrAlreadyMounted = errors.New("mount point is already a live FUSE mount")

// recoverMountPoint makes dir usable as a mount point. A FUSE mount
// whose daemon died answers ENOTCONN to everything; it is detached
// (MNT_DETACH, as `umount -l`) so the new mount can take its place. A
// live FUSE mount is left alone.
func recoverMountPoint(dir string, log *slog.Logger) error {
	if err := probeMount(dir); isDeadMount(err) {
		log.Warn("mount point belongs to a dead FUSE daemon; detaching it", "err", err)
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("detach dead mount %s: %w", dir, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return fmt.Errorf("mount point: %w", &os.PathError{Op: "stat", Path: dir, Err: err})
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	types, err := mountTypesAt(real)
	if err != nil {
		return err
	}
	for _, t := range types {
		if strings.HasPrefix(t, "fuse") {
			return fmt.Errorf("%s (%s): %w", dir, t, ErrAlreadyMounted)
		}
	}
	return nil
}

// probeMount asks the file system at dir for something the kernel never
// caches (statfs): a stat of a dead FUSE mount point can still succeed
// from cached attributes.
func probeMount(dir string) error {
	var sfs syscall.Statfs_t
	return syscall.Statfs(dir, &sfs)
}

// isDeadMount reports whether a stat error means the FUSE connection
// behind the path is gone.
func isDeadMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// mountTypesAt lists the file system types mounted exactly at dir, from
// /proc/self/mountinfo (proc(5)).
func mountTypesAt(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var types []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 1 {
			continue
		}
		if unescapeMountinfo(fields[4]) == dir {
			types = append(types, postFields[0])
		}
	}
	return types, sc.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) the
// kernel writes in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
