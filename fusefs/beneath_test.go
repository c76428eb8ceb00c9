package fusefs_test

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// The daemon runs as root. Another host that can write the NAS may swap
// a directory of the backing for a symbolic link to anywhere (issue 29):
// the daemon must then refuse every operation below it, and never
// create, change, remove, chown or read anything outside the backing.

// The same names exist in the backing's d and in the directory outside;
// what outside holds is marked "out", so a leak shows in what an
// operation returns.
const (
	insideData  = "in"
	outsideData = "outside secret"
)

// swapped is a mount whose directory d another NAS client
// replaced by a symbolic link to a directory outside the backing, after
// the kernel looked d up. Kernel caching is long, so the kernel keeps
// sending requests for the d it knows.
type swapped struct {
	m       *mounttest.Mount
	outside string
	dfd     int // d through the mount, opened before the swap
	logs    *records
}

// swapDir builds the trees, looks d up through the mount (and, with
// cached, the names in it), then swaps d for a link to outside.
func swapDir(t *testing.T, mode fusefs.Mode, cached bool) *swapped {
	t.Helper()
	dir := t.TempDir()
	logs := &records{next: mounttest.Logger(t).Handler()}
	m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: mode, Sealer: &mounttest.Sealer{}, Configure: func(c *fusefs.Config) {
		c.EntryTimeout, c.AttrTimeout = time.Hour, time.Hour
		c.Logger = slog.New(logs)
	}})
	s := &swapped{m: m, outside: filepath.Join(dir, "outside"), logs: logs}
	populate(t, m.OrigPath("d"), insideData, "in")
	populate(t, s.outside, outsideData, "out")
	if err := os.WriteFile(filepath.Join(s.outside, "only-outside"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m.WriteOrig("top", []byte("top"))
	// nobody may create in d (and only there).
	if err := os.Chmod(m.OrigPath("d"), 0o777); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(m.Path("d"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.dfd = fd
	t.Cleanup(func() { unix.Close(fd) }) // before the unmount
	if cached {
		for _, name := range []string{"f", "e", "l"} {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another NAS client swaps d for a link.
	if err := os.Rename(m.OrigPath("d"), m.OrigPath("d.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.outside, m.OrigPath("d")); err != nil {
		t.Fatal(err)
	}
	return s
}

// populate makes dir with a file f holding data and an xattr, an empty
// directory e and a symbolic link l.
func populate(t *testing.T, dir, data, mark string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user.k", []byte(mark), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(f, "user."+mark+"side", []byte(mark), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mark+"-target", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
}

// tree describes everything under root, one line per entry: type and
// mode, owner, links, size, times, content or target, and xattrs. ctime
// changes with any change of an inode, data, owner, links or xattrs.
func tree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s mode=%o uid=%d gid=%d nlink=%d size=%d mtime=%d.%d ctime=%d.%d", p,
			st.Mode, st.Uid, st.Gid, st.Nlink, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " data=%q", data)
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " target=%q", target)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			buf := make([]byte, 4096)
			n, _ := unix.Llistxattr(p, buf)
			for _, name := range strings.Split(string(buf[:max(n, 0)]), "\x00") {
				if name == "" {
					continue
				}
				v := make([]byte, 256)
				vn, _ := unix.Lgetxattr(p, name, v)
				fmt.Fprintf(&b, " %s=%q", name, v[:max(vn, 0)])
			}
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// inodes lists the inode of every entry under root.
func inodes(t *testing.T, root string) map[[2]uint64]string {
	t.Helper()
	out := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		out[[2]uint64{st.Dev, st.Ino}] = p
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changes lists the lines only in before (-) and only in after (+).
func changes(before, after string) string {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	var out []string
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// asUser runs fn on a thread whose file system identity is uid (the
// caller FUSE sees, without root's capabilities).
func asUser(uid int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with the goroutine, its
		// identity with it.
		runtime.LockOSThread()
		if err := unix.Setfsgid(uid); err != nil {
			errc <- err
			return
		}
		if err := unix.Setfsuid(uid); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// inD is a path of name in d through the mount, for calls that have no
// *at form: /proc/self/fd leads the caller to the d it opened.
func (s *swapped) inD(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(s.dfd) + "/" + name
}

func readAt(dfd int, name string, flags int) (string, error) {
	fd, err := unix.Openat(dfd, name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 256)
	n, err := unix.Read(fd, buf)
	return string(buf[:max(n, 0)]), err
}

func writeAt(dfd int, name string, flags int) error {
	fd, err := unix.Openat(dfd, name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte("pwned"))
	return errors.Join(err, unix.Close(fd))
}

// sized names what a stat of f found.
func sized(size int64) string {
	switch size {
	case int64(len(outsideData)):
		return "size of the outside f"
	case int64(len(insideData)):
		return "size of the inside f"
	}
	return fmt.Sprintf("size %d", size)
}

// escapeOp is one operation through the swapped d.
type escapeOp struct {
	name string
	// existing: it acts on a name d holds, so it runs twice: with the
	// name looked up before the swap and after.
	existing bool
	// self: it acts on d itself, whose backing name is the link now:
	// acting on the link itself is fine, following it is not.
	self bool
	// read: it changes nothing, so it runs on a replica too.
	read bool
	// do returns what the operation showed (read data, names, a target).
	do func(s *swapped) (string, error)
}

var escapeOps = []escapeOp{
	{name: "create", do: func(s *swapped) (string, error) {
		return "", asUser(nobody, func() error {
			fd, err := unix.Openat(s.dfd, "x", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}},
	{name: "mkdir", do: func(s *swapped) (string, error) {
		return "", asUser(nobody, func() error { return unix.Mkdirat(s.dfd, "newdir", 0o755) })
	}},
	{name: "mknod", do: func(s *swapped) (string, error) {
		return "", unix.Mknodat(s.dfd, "fifo", unix.S_IFIFO|0o644, 0)
	}},
	{name: "symlink", do: func(s *swapped) (string, error) {
		return "", unix.Symlinkat("anywhere", s.dfd, "s")
	}},
	{name: "O_TMPFILE", do: func(s *swapped) (string, error) {
		fd, err := unix.Openat(s.dfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			unix.Close(fd)
		}
		return "", err
	}},
	{name: "link into d", do: func(s *swapped) (string, error) {
		return "", unix.Linkat(unix.AT_FDCWD, s.m.Path("top"), s.dfd, "planted", 0)
	}},
	{name: "link out of d", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Linkat(s.dfd, "f", unix.AT_FDCWD, s.m.Path("stolen"), 0)
	}},
	{name: "unlink", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Unlinkat(s.dfd, "f", 0)
	}},
	{name: "rmdir", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Unlinkat(s.dfd, "e", unix.AT_REMOVEDIR)
	}},
	{name: "rename within d", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Renameat(s.dfd, "f", s.dfd, "g")
	}},
	{name: "rename out of d", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Renameat(s.dfd, "f", unix.AT_FDCWD, s.m.Path("stolen"))
	}},
	{name: "rename into d", do: func(s *swapped) (string, error) {
		return "", unix.Renameat(unix.AT_FDCWD, s.m.Path("top"), s.dfd, "planted")
	}},
	{name: "rename exchange", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Renameat2(s.dfd, "f", unix.AT_FDCWD, s.m.Path("top"), unix.RENAME_EXCHANGE)
	}},
	{name: "chmod", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Fchmodat(s.dfd, "f", 0o600, 0)
	}},
	{name: "chown", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Fchownat(s.dfd, "f", nobody, nobody, unix.AT_SYMLINK_NOFOLLOW)
	}},
	{name: "truncate", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Truncate(s.inD("f"), 0)
	}},
	{name: "utimes", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.UtimesNanoAt(s.dfd, "f", []unix.Timespec{{Sec: 1}, {Sec: 2}}, unix.AT_SYMLINK_NOFOLLOW)
	}},
	{name: "stat", read: true, existing: true, do: func(s *swapped) (string, error) {
		var st unix.Statx_t
		err := unix.Statx(s.dfd, "f", unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st)
		return sized(int64(st.Size)), err
	}},
	{name: "statx btime", read: true, existing: true, do: func(s *swapped) (string, error) {
		var st unix.Statx_t
		err := unix.Statx(s.dfd, "f", unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &st)
		return sized(int64(st.Size)), err
	}},
	{name: "open read", read: true, existing: true, do: func(s *swapped) (string, error) {
		return readAt(s.dfd, "f", unix.O_RDONLY)
	}},
	{name: "open read-write", existing: true, do: func(s *swapped) (string, error) {
		return readAt(s.dfd, "f", unix.O_RDWR)
	}},
	{name: "open write", existing: true, do: func(s *swapped) (string, error) {
		return "", writeAt(s.dfd, "f", unix.O_WRONLY)
	}},
	{name: "open truncate", existing: true, do: func(s *swapped) (string, error) {
		return "", writeAt(s.dfd, "f", unix.O_WRONLY|unix.O_TRUNC)
	}},
	{name: "readlink", read: true, existing: true, do: func(s *swapped) (string, error) {
		buf := make([]byte, 256)
		n, err := unix.Readlinkat(s.dfd, "l", buf)
		return string(buf[:max(n, 0)]), err
	}},
	{name: "getxattr", read: true, existing: true, do: func(s *swapped) (string, error) {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(s.inD("f"), "user.k", buf)
		return string(buf[:max(n, 0)]), err
	}},
	{name: "listxattr", read: true, existing: true, do: func(s *swapped) (string, error) {
		buf := make([]byte, 256)
		n, err := unix.Llistxattr(s.inD("f"), buf)
		return string(buf[:max(n, 0)]), err
	}},
	{name: "setxattr", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Lsetxattr(s.inD("f"), "user.k", []byte("pwned"), 0)
	}},
	{name: "removexattr", existing: true, do: func(s *swapped) (string, error) {
		return "", unix.Lremovexattr(s.inD("f"), "user.k")
	}},
	{name: "listing", read: true, do: func(s *swapped) (string, error) {
		fd, err := unix.Openat(s.dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", err
		}
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		n, err := unix.Getdents(fd, buf)
		_, _, names := unix.ParseDirent(buf[:max(n, 0)], -1, nil)
		return strings.Join(names, " "), err
	}},
	{name: "chmod of d itself", self: true, do: func(s *swapped) (string, error) {
		return "", unix.Fchmod(s.dfd, 0o700)
	}},
	{name: "chown of d itself", self: true, do: func(s *swapped) (string, error) {
		return "", unix.Fchown(s.dfd, nobody, nobody)
	}},
	{name: "utimes of d itself", self: true, do: func(s *swapped) (string, error) {
		return "", unix.UtimesNanoAt(s.dfd, "", []unix.Timespec{{Sec: 1}, {Sec: 2}}, unix.AT_EMPTY_PATH)
	}},
	{name: "stat of d itself", read: true, self: true, do: func(s *swapped) (string, error) {
		var st unix.Statx_t
		err := unix.Statx(s.dfd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st)
		return fmt.Sprintf("uid %d", st.Uid), err
	}},
}

// refused are the answers to a refused resolution.
var refused = []syscall.Errno{syscall.ELOOP, syscall.EXDEV, syscall.ENOTDIR}

// TestIntegration_NeverLeavesBacking runs every operation through a
// directory swapped for a link outside the backing: each must fail, and
// nothing outside may be created, changed, removed or shown. Those that
// change nothing run on a replica too.
func TestIntegration_NeverLeavesBacking(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModePrimary, fusefs.ModeReplica} {
		t.Run(mode.String(), func(t *testing.T) { neverLeavesBacking(t, mode) })
	}
}

func neverLeavesBacking(t *testing.T, mode fusefs.Mode) {
	for _, op := range escapeOps {
		if mode != fusefs.ModePrimary && !op.read {
			continue
		}
		variants := []bool{false}
		if op.existing {
			variants = []bool{false, true}
		}
		for _, cached := range variants {
			name := op.name
			if op.existing {
				name += map[bool]string{false: " looked up after the swap", true: " looked up before"}[cached]
			}
			t.Run(name, func(t *testing.T) {
				s := swapDir(t, mode, cached)
				before := tree(t, s.outside)
				outsideInodes := inodes(t, s.outside)
				got, err := op.do(s)
				if after := tree(t, s.outside); after != before {
					t.Errorf("%s (err %v) changed what is outside the backing:\n%s", op.name, err, changes(before, after))
				}
				for ino, p := range inodes(t, s.m.Orig) {
					if o, ok := outsideInodes[ino]; ok {
						t.Errorf("%s (err %v): %s outside the backing is now also %s inside it", op.name, err, o, p)
					}
				}
				if strings.Contains(got, "out") {
					t.Errorf("%s (err %v) showed what is outside the backing: %q", op.name, err, got)
				}
				if op.self {
					return // acting on the link itself may succeed
				}
				var errno syscall.Errno
				if !errors.As(err, &errno) || !slices.Contains(refused, errno) {
					t.Errorf("%s: got %v (showing %q), want one of %v", op.name, err, got, refused)
				}
			})
		}
	}
}

// refusedLog is what the mount logs, once per directory and interval,
// when the backing holds a link where it expects a directory.
const refusedLog = "the backing holds a symbolic link or a file where a directory was expected: not followed"

// TestIntegration_RefusedResolutionLogsOnce: several refused operations
// in the same directory log one line, naming it.
func TestIntegration_RefusedResolutionLogsOnce(t *testing.T) {
	s := swapDir(t, fusefs.ModePrimary, true)
	for _, op := range escapeOps {
		if op.name == "stat" || op.name == "readlink" || op.name == "getxattr" {
			if _, err := op.do(s); err == nil {
				t.Errorf("%s succeeded", op.name)
			}
		}
	}
	got := s.logs.find(refusedLog)
	if len(got) != 1 || got[0]["dir"] != "d" {
		t.Errorf("logged %v, want one line for dir d", got)
	}
}

// TestIntegration_SymlinksStaySymlinks: a symbolic link as the last
// component is shown as a link, which the kernel follows for the caller:
// listed, read with readlink, and read through, relative or chained.
func TestIntegration_SymlinksStaySymlinks(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModePrimary, fusefs.ModeReplica} {
		t.Run(mode.String(), func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: mode})
			m.WriteOrig("b/target", []byte("data"))
			m.MkdirOrig("a")
			if err := os.Symlink("../b/target", m.OrigPath("a/link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a/link", m.OrigPath("chain")); err != nil {
				t.Fatal(err)
			}
			if got := readDir(t, m.Path("a")); !slices.Equal(got, []string{"link"}) {
				t.Errorf("a lists %v", got)
			}
			if got := ls(t, m.Path("a"), false); !slices.Equal(got, []string{"link"}) {
				t.Errorf("ls a lists %v", got)
			}
			for _, p := range []string{"a/link", "chain"} {
				fi, err := os.Lstat(m.Path(p))
				if err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("lstat %s: %v, %v", p, fi, err)
				}
				if data, err := os.ReadFile(m.Path(p)); err != nil || string(data) != "data" {
					t.Errorf("read through %s: %q, %v", p, data, err)
				}
			}
			if target, err := os.Readlink(m.Path("a/link")); err != nil || target != "../b/target" {
				t.Errorf("readlink a/link: %q, %v", target, err)
			}
			if mode == fusefs.ModePrimary {
				if err := os.Symlink("../b/target", m.Path("a/made")); err != nil {
					t.Fatal(err)
				}
				if target, err := os.Readlink(m.OrigPath("a/made")); err != nil || target != "../b/target" {
					t.Errorf("symlink made through the mount: %q, %v", target, err)
				}
				if data, err := os.ReadFile(m.Path("a/made")); err != nil || string(data) != "data" {
					t.Errorf("read through a/made: %q, %v", data, err)
				}
			}
		})
	}
}

// TestIntegration_BackingRootReplaced: the backing root is resolved by
// its configured path for every operation. A replica follows a backing
// directory replaced as a whole (snapshot replication exchanges it), and
// a configured link that is pointed elsewhere; a link put in place of a
// backing directory that was not one is refused.
func TestIntegration_BackingRootReplaced(t *testing.T) {
	for _, configuredLink := range []bool{false, true} {
		t.Run(map[bool]string{false: "directory", true: "configured as a link"}[configuredLink], func(t *testing.T) {
			dir := t.TempDir()
			next, outside, link := filepath.Join(dir, "next"), filepath.Join(dir, "outside"), filepath.Join(dir, "link")
			for _, d := range []string{next, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(next, "in-next"), []byte("next"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "in-outside"), []byte("outside"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("orig", link); err != nil {
				t.Fatal(err)
			}
			m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: fusefs.ModeReplica, Configure: func(c *fusefs.Config) {
				if configuredLink {
					c.Backing = link
				}
			}})
			m.WriteOrig("in-orig", []byte("orig"))
			if data, err := os.ReadFile(m.Path("in-orig")); err != nil || string(data) != "orig" {
				t.Fatalf("read in-orig: %q, %v", data, err)
			}
			// Replaced as a whole: followed.
			if configuredLink {
				if err := os.Remove(link); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("next", link); err != nil {
					t.Fatal(err)
				}
			} else if err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, m.Orig, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(m.Path("in-next")); err != nil || string(data) != "next" {
				t.Errorf("after the backing was replaced, read in-next: %q, %v", data, err)
			}
			if got := readDir(t, m.Mnt); !slices.Equal(got, []string{"in-next"}) {
				t.Errorf("after the backing was replaced, the root lists %v", got)
			}
			// A link to outside put at the backing's own name.
			target := m.Orig
			if configuredLink {
				target = filepath.Join(dir, "next")
			}
			if err := os.Rename(target, target+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, target); err != nil {
				t.Fatal(err)
			}
			_, err := os.ReadFile(m.Path("in-outside"))
			if configuredLink {
				// The configured link leads to a link: a link of the
				// configured path, followed as configured.
				if err != nil {
					t.Errorf("read in-outside through the configured link: %v", err)
				}
				return
			}
			var errno syscall.Errno
			if !errors.As(err, &errno) || !slices.Contains(refused, errno) {
				t.Errorf("read in-outside through a link put in place of the backing: %v, want one of %v", err, refused)
			}
			if _, err := os.ReadDir(m.Mnt); err == nil {
				t.Errorf("the root lists through a link put in place of the backing")
			}
		})
	}
}
