package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrAlreadyMounted: the mount point is served by a live FUSE file
// system already.
var ErrAlreadyMounted = errors.New("mount point is already a live FUSE mount")

// errNoAnswer: statfs of the mount point did not return in time.
var errNoAnswer = errors.New("no answer")

// fusectlDir is where the kernel's FUSE control file system lists
// connections (fusectl).
const fusectlDir = "/sys/fs/fuse/connections"

// recoverMountPoint makes dir usable as a mount point. A FUSE mount
// whose daemon died answers ENOTCONN to everything; it is detached
// (MNT_DETACH, as `umount -l`) so the new mount can take its place. A
// ckptfs mount whose daemon is alive but does not answer (stopped,
// deadlocked) within probeTimeout has its connection aborted first,
// which turns it into a dead one. A FUSE mount that answers is left
// alone. A missing mount point is created.
func recoverMountPoint(dir string, probeTimeout time.Duration, log *slog.Logger) error {
	err := probeMount(dir, probeTimeout)
	if errors.Is(err, errNoAnswer) {
		if err = abortHungMount(dir, probeTimeout, log); err != nil {
			return err
		}
		if err = probeMount(dir, probeTimeout); errors.Is(err, errNoAnswer) {
			return fmt.Errorf("mount point after aborting its FUSE connection: %w", err)
		}
	}
	if isDeadMount(err) {
		log.Warn("mount point belongs to a dead FUSE daemon; detaching it", "err", err)
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("detach dead mount %s: %w", dir, err)
		}
	}
	var st syscall.Stat_t
	err = syscall.Stat(dir, &st)
	if errors.Is(err, syscall.ENOENT) {
		// As systemd and mount(8) helpers do for a mount's Where=.
		if err = os.MkdirAll(dir, 0o755); err == nil {
			log.Info("created the mount point", "dir", dir)
			err = syscall.Stat(dir, &st)
		}
	}
	if err != nil {
		return fmt.Errorf("mount point: %w", &os.PathError{Op: "stat", Path: dir, Err: err})
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	mounts, err := mountsAt(real)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.fstype, "fuse") {
			return fmt.Errorf("%s (%s): %w", dir, m.fstype, ErrAlreadyMounted)
		}
	}
	return nil
}

// warnNonEmpty logs a warning when dir holds anything: the mount hides
// it, from Flink too. Files written there before the mount (a Flink
// started before it) are neither on the backing file system nor
// replicated. It is a warning, not a refusal (libfuse 3 dropped
// nonempty): a leftover must not keep the mount from coming up, and
// what it hides stays intact beneath. The listing waits at most timeout.
func warnNonEmpty(dir string, timeout time.Duration, log *slog.Logger) {
	const most = 1000
	type listing struct {
		names []string
		err   error
	}
	done := make(chan listing, 1)
	go func() {
		f, err := os.Open(dir)
		if err != nil {
			done <- listing{err: err}
			return
		}
		defer f.Close()
		names, err := f.Readdirnames(most + 1)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		done <- listing{names, err}
	}()
	var l listing
	select {
	case l = <-done:
	case <-time.After(timeout):
		l.err = fmt.Errorf("no answer within %v", timeout)
	}
	if l.err != nil {
		log.Warn("listing the mount point before mounting", "err", l.err)
		return
	}
	if len(l.names) == 0 {
		return
	}
	count := strconv.Itoa(len(l.names))
	if len(l.names) > most {
		count = "more than " + strconv.Itoa(most)
	}
	sort.Strings(l.names)
	log.Warn("the mount point is not empty: the mount hides what it holds, from Flink too (anything written there before the mount is not on the backing file system)",
		"entries", count, "names", l.names[:min(len(l.names), 5)])
}

// probeMount asks the file system at dir for something the kernel never
// caches (statfs; a stat of a dead FUSE mount point can still succeed
// from cached attributes), and gives up after timeout. A request to a
// daemon that does not answer stays blocked in the kernel until the
// connection is aborted; the goroutine waiting for it ends then.
func probeMount(dir string, timeout time.Duration) error {
	answer := make(chan error, 1)
	go func() {
		var sfs syscall.Statfs_t
		answer <- syscall.Statfs(dir, &sfs)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-answer:
		return err
	case <-t.C:
		return fmt.Errorf("statfs %s: %w within %v", dir, errNoAnswer, timeout)
	}
}

// abortHungMount aborts the FUSE connection of the ckptfs mount at dir,
// which did not answer within probeTimeout. Any other file system there
// is not ours to abort.
func abortHungMount(dir string, probeTimeout time.Duration, log *slog.Logger) error {
	// Resolve the parent only: a stat of dir itself would hang too.
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	mounts, err := mountsAt(filepath.Join(parent, filepath.Base(dir)))
	if err != nil {
		return err
	}
	if len(mounts) == 0 {
		return fmt.Errorf("mount point %s does not answer statfs within %v, and nothing is mounted there", dir, probeTimeout)
	}
	top := mounts[len(mounts)-1]
	if top.fstype != "fuse."+Name {
		return fmt.Errorf("%s (%s) does not answer statfs within %v; not a ckptfs mount, so not aborting it: %w",
			dir, top.fstype, probeTimeout, ErrAlreadyMounted)
	}
	log.Warn("mount point belongs to a ckptfs daemon that does not answer; aborting its FUSE connection",
		"timeout", probeTimeout, "connection", top.dev)
	return abortConnection(top.dev)
}

// abortConnection writes to the connection's abort file in fusectl,
// mounting fusectl first if nobody did.
func abortConnection(dev uint64) error {
	conn := filepath.Join(fusectlDir, strconv.FormatUint(dev, 10))
	if _, err := os.Stat(conn); errors.Is(err, os.ErrNotExist) {
		if err := syscall.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("mount fusectl on %s: %w", fusectlDir, err)
		}
	}
	if err := os.WriteFile(filepath.Join(conn, "abort"), []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", dev, err)
	}
	return nil
}

// isDeadMount reports whether a stat error means the FUSE connection
// behind the path is gone.
func isDeadMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// IsMounted reports whether a ckptfs file system is mounted at dir, from
// /proc/self/mountinfo: it never touches the mount, so a hung daemon
// cannot hang it.
func IsMounted(dir string) (bool, error) {
	ms, err := mountsAt(dir)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.fstype == "fuse."+Name {
			return true, nil
		}
	}
	return false, nil
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	fstype string
	// dev is the file system's device number as the kernel encodes it
	// (major<<20 | minor); fusectl names connections by it.
	dev uint64
}

// mountsAt lists the file systems mounted exactly at dir, bottom first,
// from /proc/self/mountinfo (proc(5)), which never touches them.
func mountsAt(dir string) ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m, point, ok := parseMountinfo(sc.Text()); ok && point == dir {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMountinfo reads the mount point, device and type of one line.
func parseMountinfo(line string) (mountEntry, string, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	fields, postFields := strings.Fields(pre), strings.Fields(post)
	if !ok || len(fields) < 5 || len(postFields) < 1 {
		return mountEntry{}, "", false
	}
	majStr, minStr, ok := strings.Cut(fields[2], ":")
	major, err1 := strconv.ParseUint(majStr, 10, 32)
	minor, err2 := strconv.ParseUint(minStr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return mountEntry{}, "", false
	}
	return mountEntry{fstype: postFields[0], dev: major<<20 | minor}, unescapeMountinfo(fields[4]), true
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
