package fusefs

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// TestNoLoopbackMethodPromoted: every method of go-fuse's loopback node
// (beyond fs.Inode's) is overridden by node. A promoted one would reach
// the backing by path and follow symbolic links.
func TestNoLoopbackMethodPromoted(t *testing.T) {
	loopback, inode, ours := reflect.TypeOf(&fs.LoopbackNode{}), reflect.TypeOf(&fs.Inode{}), reflect.TypeOf(&node{})
	for i := range loopback.NumMethod() {
		name := loopback.Method(i).Name
		if _, ok := inode.MethodByName(name); ok {
			continue
		}
		m, _ := ours.MethodByName(name)
		f := runtime.FuncForPC(m.Func.Pointer())
		// A promoted method is a compiler-generated wrapper.
		if file, _ := f.FileLine(f.Entry()); filepath.Base(filepath.Dir(file)) != "fusefs" {
			t.Errorf("node.%s is go-fuse's loopback method (%s), which works by path", name, file)
		}
	}
}

// TestOpenDirRefusesLinks: a directory is opened beneath the root and
// through no link, with openat2 and without it (before Linux 5.6).
func TestOpenDirRefusesLinks(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"lnk": "a", "a/rel": "b", "a/abs": filepath.Join(root, "outside")} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fallback := range []bool{false, true} {
		fsys := &fileSystem{backing: root, rootIsLink: new(atomic.Bool), log: slog.New(slog.DiscardHandler), now: time.Now}
		fsys.noOpenat2.Store(fallback)
		for _, tc := range []struct {
			rel  string
			want []syscall.Errno // nil: opens
		}{
			{"", nil},
			{"a", nil},
			{"a/b", nil},
			{"lnk", []syscall.Errno{syscall.ELOOP, syscall.ENOTDIR}},
			{"lnk/b", []syscall.Errno{syscall.ELOOP, syscall.ENOTDIR}},
			{"a/rel", []syscall.Errno{syscall.ELOOP, syscall.ENOTDIR}},
			{"a/abs", []syscall.Errno{syscall.ELOOP, syscall.ENOTDIR}},
			{"a/f", []syscall.Errno{syscall.ENOTDIR}},
			{"a/../..", []syscall.Errno{syscall.EXDEV}},
		} {
			fd, err := fsys.openDir(tc.rel, unix.O_PATH)
			if err == nil {
				unix.Close(fd)
			}
			var errno syscall.Errno
			errors.As(err, &errno)
			if tc.want == nil && err != nil || tc.want != nil && !slices.Contains(tc.want, errno) {
				t.Errorf("openat2 missing %v: openDir(%q): %v, want %v", fallback, tc.rel, err, tc.want)
			}
		}
	}
}
