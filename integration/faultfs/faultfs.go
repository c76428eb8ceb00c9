package faultfs

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// numOps is how many operations there are (bits of OpAll).
const numOps = 15

var opNames = [numOps]string{"lookup", "getattr", "readdir", "open", "create", "read", "write", "flush", "fsync", "mkdir", "unlink", "rename", "setattr", "statfs", "xattr"}

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

// Counts are the requests a faultfs served, by operation (every request,
// whether a rule acted on it or not).
type Counts map[Op]uint64

// Total is the sum of the counts of the operations in ops.
func (c Counts) Total(ops Op) uint64 {
	var n uint64
	for op, v := range c {
		if op&ops != 0 {
			n += v
		}
	}
	return n
}

// Sub is c minus an earlier snapshot.
func (c Counts) Sub(earlier Counts) Counts {
	out := make(Counts, len(c))
	for op, v := range c {
		out[op] = v - earlier[op]
	}
	return out
}

func (c Counts) String() string {
	var parts []string
	for i, n := range opNames {
		if v := c[Op(1)<<i]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

func (f *server) counts() Counts {
	c := make(Counts, len(opNames))
	for i := range f.ops {
		c[Op(1)<<i] = f.ops[i].Load()
	}
	return c
}

// server is the faultfs file system: the rules and what they hold.
type server struct {
	mu      sync.Mutex
	rules   []*rule       // GUARDED_BY(mu)
	next    int           // GUARDED_BY(mu); id of the next rule
	release chan struct{} // GUARDED_BY(mu); closed to end every hang

	hung atomic.Int64
	hits atomic.Uint64
	// ops counts every request by operation (index: bit of its Op),
	// whether a rule acted on it or not.
	ops [numOps]atomic.Uint64
}

type rule struct {
	Rule
	id int
}

func newServer() *server { return &server{release: make(chan struct{})} }

// mount serves lower at mountPoint.
func (f *server) mount(lower, mountPoint string, o Options) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(lower)
	if err != nil {
		return nil, err
	}
	lr := root.(*fs.LoopbackNode)
	top := &node{LoopbackNode: lr, fs: f}
	lr.RootData.RootNode = top
	var zero time.Duration
	attrs := zero
	if o.LookupAttrs {
		attrs = time.Millisecond
	}
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        true,
			FsName:            "faultfs",
			Name:              "faultfs",
			DirectMount:       true,
			DirectMountStrict: true,
			// Many requests wait at once when a test hangs some.
			MaxBackground: 64,
			// A listing is opendir and plain READDIRs. With READDIRPLUS
			// go-fuse looks up every entry, so a delay a lookup would
			// charge a round trip per name listed; an NFS READDIRPLUS
			// returns hundreds of names with their attributes in one.
			DisableReadDirPlus: true,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &attrs,
		NegativeTimeout: &zero,
	}
	opts.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	return fs.Mount(mountPoint, top, opts)
}

func (f *server) add(r Rule) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.rules = append(f.rules, &rule{Rule: r, id: f.next})
	return f.next
}

func (f *server) remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.rules {
		if x.id == id {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
			return
		}
	}
}

func (f *server) releaseAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.release)
	f.release = make(chan struct{})
}

func (f *server) clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
	f.releaseAll()
}

// fault applies the first rule that matches op on rel.
func (f *server) fault(ctx context.Context, op Op, rel string) syscall.Errno {
	f.ops[bits.TrailingZeros32(uint32(op))].Add(1)
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
	f.hits.Add(1)
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-release:
		}
	}
	if r.Hang {
		f.hung.Add(1)
		defer f.hung.Add(-1)
		if killed := hang(ctx, release); killed {
			return syscall.EINTR
		}
	}
	return r.Err
}

// hang waits until release is closed, as a hard NFS mount waits for its
// server: signals do not end the wait (the FUSE INTERRUPT they send is
// ignored), but SIGKILL does, as NFS's killable waits end (Linux 2.6.25
// and later). Without that a process with a request hung here could
// never exit, which no real NAS client does to it. It says whether the
// caller was killed.
func hang(ctx context.Context, release <-chan struct{}) (killed bool) {
	select {
	case <-release:
		return false
	case <-ctx.Done(): // INTERRUPT: a signal reached the caller
	}
	caller, ok := ctx.(*fuse.Context)
	if !ok {
		<-release
		return false
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if dying(caller.Pid) {
			return true
		}
		select {
		case <-release:
			return false
		case <-tick.C:
		}
	}
}

// dying reports whether thread tid has SIGKILL pending (killed, or its
// process exiting), or is gone.
func dying(tid uint32) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return true
	}
	const sigkill = 1 << (9 - 1)
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}
