package faultfs

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Op is a set of operations a rule applies to.
type Op uint32

const (
	// OpLookup: resolving a name (every path walk, open, stat by path).
	OpLookup Op = 1 << iota
	// OpGetattr: stat of a known inode, by path or descriptor.
	OpGetattr
	// OpReaddir: opening a directory to list it.
	OpReaddir
	// OpOpen: opening a file (OpCreate for O_CREAT of a new one).
	OpOpen
	OpCreate
	OpRead
	OpWrite
	// OpFlush: close(2); OpFsync: fsync(2) and fdatasync(2).
	OpFlush
	OpFsync
	// OpMkdir, OpUnlink (and rmdir), OpRename, OpSetattr (truncate,
	// chmod, utimes), OpStatfs, OpXattr (every extended attribute call).
	OpMkdir
	OpUnlink
	OpRename
	OpSetattr
	OpStatfs
	OpXattr

	// OpAll is every operation; OpStat is what a stat(2) by path can
	// ask; OpMutate is every change.
	OpAll    Op = 1<<iota - 1
	OpStat      = OpLookup | OpGetattr
	OpMutate    = OpCreate | OpWrite | OpFlush | OpFsync | OpMkdir | OpUnlink | OpRename | OpSetattr
)

var opNames = []string{"lookup", "getattr", "readdir", "open", "create", "read", "write", "flush", "fsync", "mkdir", "unlink", "rename", "setattr", "statfs", "xattr"}

func (o Op) String() string {
	var names []string
	for i, n := range opNames {
		if o&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, "|")
}

// Rule is one fault. It applies to the operations in Ops on Path (relative
// to the mount, "" for every path) and everything below it; with Name,
// only to entries whose last path element matches that path.Match
// pattern. Its action: wait Delay, then hang if Hang, then answer Err
// (0: do the operation).
type Rule struct {
	Ops   Op
	Path  string
	Name  string
	Delay time.Duration
	Hang  bool
	Err   syscall.Errno
}

func (r *Rule) String() string {
	var act []string
	if r.Delay > 0 {
		act = append(act, "delay "+r.Delay.String())
	}
	if r.Hang {
		act = append(act, "hang")
	}
	if r.Err != 0 {
		act = append(act, r.Err.Error())
	}
	return fmt.Sprintf("%s %q %q: %s", r.Ops, r.Path, r.Name, strings.Join(act, ", "))
}

func (r *Rule) matches(op Op, rel string) bool {
	if r.Ops&op == 0 {
		return false
	}
	if r.Path != "" && rel != r.Path && !strings.HasPrefix(rel, r.Path+"/") {
		return false
	}
	if r.Name != "" {
		ok, _ := path.Match(r.Name, path.Base(rel))
		return ok
	}
	return true
}

// FS is a mounted faultfs.
type FS struct {
	// Lower is the directory served, MountPoint where.
	Lower, MountPoint string

	srv *fuse.Server

	mu      sync.Mutex
	rules   []*rule       // GUARDED_BY(mu)
	release chan struct{} // GUARDED_BY(mu); closed to end every hang

	hung atomic.Int64
	hits atomic.Uint64
}

type rule struct {
	Rule
	hits atomic.Uint64
}

// Mount serves lower at mountPoint until the test ends. It needs root and
// /dev/fuse; the caller checks (mounttest.RequireFUSE).
func Mount(t testing.TB, lower, mountPoint string) *FS {
	t.Helper()
	f := &FS{Lower: lower, MountPoint: mountPoint, release: make(chan struct{})}
	root, err := fs.NewLoopbackRoot(lower)
	if err != nil {
		t.Fatal(err)
	}
	lr := root.(*fs.LoopbackNode)
	top := &node{LoopbackNode: lr, fs: f}
	lr.RootData.RootNode = top
	var zero time.Duration
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        true,
			FsName:            "faultfs",
			Name:              "faultfs",
			DirectMount:       true,
			DirectMountStrict: true,
			// Many requests wait at once when a test hangs some.
			MaxBackground: 64,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	}
	opts.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	srv, err := fs.Mount(mountPoint, top, opts)
	if err != nil {
		t.Fatalf("faultfs: mount %s: %v", mountPoint, err)
	}
	f.srv = srv
	t.Cleanup(f.Unmount)
	return f
}

// Add installs r (rules apply in the order added; the first that matches
// acts) and returns a function that removes it.
func (f *FS) Add(r Rule) (remove func()) {
	nr := &rule{Rule: r}
	f.mu.Lock()
	f.rules = append(f.rules, nr)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == nr {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// Release ends every hang now; rules stay (a hang rule hangs the next
// matching request again).
func (f *FS) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.release)
	f.release = make(chan struct{})
}

// Clear removes every rule and ends every hang: the NAS is well again.
func (f *FS) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
	f.Release()
}

// Hung is how many requests wait on a hang now.
func (f *FS) Hung() int64 { return f.hung.Load() }

// Hits is how many requests a rule acted on so far.
func (f *FS) Hits() uint64 { return f.hits.Load() }

// Unmount clears the rules and unmounts (lazily if busy).
func (f *FS) Unmount() {
	f.Clear()
	if f.srv == nil {
		return
	}
	for i := 0; i < 50; i++ {
		if f.srv.Unmount() == nil {
			f.srv.Wait()
			f.srv = nil
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Unmount(f.MountPoint, syscall.MNT_DETACH)
	f.srv.Wait()
	f.srv = nil
}

// fault applies the first rule that matches op on rel.
func (f *FS) fault(op Op, rel string) syscall.Errno {
	f.mu.Lock()
	var r *rule
	for _, x := range f.rules {
		if x.matches(op, rel) {
			r = x
			break
		}
	}
	release := f.release
	f.mu.Unlock()
	if r == nil {
		return 0
	}
	r.hits.Add(1)
	f.hits.Add(1)
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-release:
		}
	}
	if r.Hang {
		f.hung.Add(1)
		<-release
		f.hung.Add(-1)
	}
	return r.Err
}
