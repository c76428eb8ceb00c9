package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStopped is returned (possibly wrapped together with the cause: a Hook
// error or ErrBudget) by every operation of a simulator that was stopped or
// killed.
var ErrStopped = errors.New("replication: stopped")

// ErrBudget is the cause of a kill by Options.ByteBudget.
var ErrBudget = errors.New("replication: byte budget exhausted")

// errSkip marks a source entry that vanished or changed while it was being
// copied; the pass goes on and a later pass retries it.
var errSkip = errors.New("replication: source entry changed, skipped")

// Replicator is what the three simulators have in common.
type Replicator interface {
	// Pass performs one full pass (PerObject: one scan that schedules
	// copies and deletions). It returns an error wrapping ErrStopped if the
	// simulator was stopped or killed before or during the pass.
	Pass(ctx context.Context) error
	// Run performs a pass every interval until ctx is done or the
	// simulator is stopped or killed. It returns nil after Stop or when
	// ctx is done, and the kill cause after a kill.
	Run(ctx context.Context, interval time.Duration) error
	// Stop stops the simulator. When it returns no further byte is written
	// to the destination and every goroutine of the simulator has
	// returned. It must not be called from a Hook.
	Stop()
	// Stats returns the counters so far.
	Stats() Stats
}

var (
	_ Replicator = (*Snapshot)(nil)
	_ Replicator = (*FileLevel)(nil)
	_ Replicator = (*PerObject)(nil)
)

// Stats counts what a simulator did.
type Stats struct {
	Passes      int64 // completed passes (PerObject: completed scans)
	FilesCopied int64 // files fully copied (symbolic links included)
	BytesCopied int64 // content bytes written, partial files included
	Deletions   int64 // destination entries deleted because the source lost them
	Skipped     int64 // copies abandoned because the source changed or vanished
}

// OpKind says what a destination operation does.
type OpKind int

// Destination operations, as reported to Options.Hook.
const (
	OpMkdir    OpKind = iota // create directory Path
	OpCreate                 // create or truncate file Path
	OpWrite                  // write Bytes bytes to file Path
	OpMeta                   // set mode and mtime of Path
	OpSymlink                // create symbolic link Path
	OpRename                 // rename Path to Target
	OpExchange               // atomically exchange Path and Target
	OpRemove                 // remove Path (one entry)
)

var opNames = [...]string{"mkdir", "create", "write", "meta", "symlink", "rename", "exchange", "remove"}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op is one destination operation. Paths are slash-separated and relative
// to the directory that holds the destination (so "dst/a/b" for file a/b of
// destination "…/dst"); this names temporary and staging entries too.
type Op struct {
	Kind   OpKind
	Path   string
	Target string // OpRename, OpExchange
	Bytes  int    // OpWrite
}

func (o Op) String() string {
	switch o.Kind {
	case OpRename, OpExchange:
		return fmt.Sprintf("%v %s %s", o.Kind, o.Path, o.Target)
	case OpWrite:
		return fmt.Sprintf("%v %s %d", o.Kind, o.Path, o.Bytes)
	}
	return fmt.Sprintf("%v %s", o.Kind, o.Path)
}

// Options are common to all simulators.
type Options struct {
	// Source is DC1's backing directory, Dest the replica directory.
	// Dest must not be inside Source nor Source inside Dest.
	Source, Dest string
	// Rand drives every random choice; nil means a fixed seed. The
	// simulator serializes its own use of it; do not share it.
	Rand *rand.Rand
	// ChunkSize is the size of a content write; 0 means 64 KiB.
	ChunkSize int
	// ByteBudget, if positive, kills the simulator once that many content
	// bytes have been written in total (the last write may be partial).
	ByteBudget int64
	// Hook, if set, is called before every destination operation, from
	// whatever goroutine performs it (concurrently for PerObject). A
	// non-nil result kills the simulator: that operation and every later
	// one is not performed. Hook must not call Stop.
	Hook func(Op) error
}

// core holds what every simulator shares: the gate, the random source, the
// lifecycle and the counters.
type core struct {
	src, dst string
	parent   string // directory holding dst; Op paths are relative to it
	chunk    int
	gate     gate

	rngMu sync.Mutex
	rng   *rand.Rand

	lifeMu  sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	stopCtx context.Context
	stop    context.CancelFunc

	passes, files, bytes, deletions, skipped atomic.Int64
}

func (c *core) init(o Options) error {
	if o.Source == "" || o.Dest == "" {
		return errors.New("replication: Source and Dest are required")
	}
	src, err := filepath.Abs(o.Source)
	if err != nil {
		return err
	}
	dst, err := filepath.Abs(o.Dest)
	if err != nil {
		return err
	}
	if within(src, dst) || within(dst, src) {
		return fmt.Errorf("replication: source %s and destination %s overlap", src, dst)
	}
	if o.ChunkSize < 0 {
		return errors.New("replication: negative ChunkSize")
	}
	c.src, c.dst, c.parent = src, dst, filepath.Dir(dst)
	c.chunk = o.ChunkSize
	if c.chunk == 0 {
		c.chunk = 64 << 10
	}
	c.rng = o.Rand
	if c.rng == nil {
		c.rng = rand.New(rand.NewPCG(1, 2))
	}
	c.gate.hook = o.Hook
	c.gate.budget = o.ByteBudget
	c.stopCtx, c.stop = context.WithCancel(context.Background())
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// enter registers a running pass or goroutine; false once stopped or
// killed.
func (c *core) enter() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopped || c.gate.closed.Load() {
		return false
	}
	c.wg.Add(1)
	return true
}

// Stop implements Replicator.
func (c *core) Stop() {
	c.lifeMu.Lock()
	c.stopped = true
	c.lifeMu.Unlock()
	c.gate.close(nil)
	c.stop()
	c.wg.Wait()
}

// Stats implements Replicator.
func (c *core) Stats() Stats {
	return Stats{
		Passes:      c.passes.Load(),
		FilesCopied: c.files.Load(),
		BytesCopied: c.bytes.Load(),
		Deletions:   c.deletions.Load(),
		Skipped:     c.skipped.Load(),
	}
}

// passCtx returns a context cancelled by ctx or by Stop.
func (c *core) passCtx(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	undo := context.AfterFunc(c.stopCtx, cancel)
	return ctx, func() { undo(); cancel() }
}

// runLoop is Run for every simulator.
func (c *core) runLoop(ctx context.Context, interval time.Duration, pass func(context.Context) error) error {
	if interval <= 0 {
		return errors.New("replication: Run needs a positive interval")
	}
	if !c.enter() {
		return c.gate.err()
	}
	defer c.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := pass(ctx)
		if errors.Is(err, ErrStopped) {
			if c.isStopped() {
				return nil
			}
			return err
		}
		// Other errors (destination I/O) are retried on the next pass,
		// as a replication tool would.
		select {
		case <-ctx.Done():
			return nil
		case <-c.stopCtx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *core) isStopped() bool {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	return c.stopped
}

func (c *core) intn(n int) int {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return c.rng.IntN(n)
}

func (c *core) shuffle(n int, swap func(i, j int)) {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	c.rng.Shuffle(n, swap)
}

func (c *core) int64n(n int64) int64 {
	c.rngMu.Lock()
	defer c.rngMu.Unlock()
	return c.rng.Int64N(n)
}

// opPath names abs (a path under c.parent) for Op.
func (c *core) opPath(abs string) string {
	r, err := filepath.Rel(c.parent, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(r)
}

// gate serializes destination writes against Stop and applies the hook and
// the byte budget. Writers hold the read lock while they write; close
// takes the write lock, so it returns once no write is in flight.
type gate struct {
	mu     sync.RWMutex
	closed atomic.Bool
	hook   func(Op) error
	budget int64

	smu   sync.Mutex
	used  int64
	cause error
}

// kill closes the gate with cause; writes already past their check finish.
func (g *gate) kill(cause error) {
	g.smu.Lock()
	if g.cause == nil && !g.closed.Load() {
		g.cause = cause
	}
	g.closed.Store(true)
	g.smu.Unlock()
}

// close closes the gate and waits for writes in flight.
func (g *gate) close(cause error) {
	g.kill(cause)
	g.mu.Lock()
	g.mu.Unlock() //nolint:staticcheck // barrier: waits for writers
}

func (g *gate) err() error {
	g.smu.Lock()
	defer g.smu.Unlock()
	if g.cause != nil {
		return fmt.Errorf("%w: %w", ErrStopped, g.cause)
	}
	return ErrStopped
}

// do performs fn as op unless the gate is closed or the hook refuses.
func (g *gate) do(op Op, fn func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed.Load() {
		return g.err()
	}
	if g.hook != nil {
		if err := g.hook(op); err != nil {
			g.kill(err)
			return g.err()
		}
	}
	return fn()
}

// write performs a content write of len(b) bytes through w, truncated to
// the remaining budget (which then kills the simulator).
func (g *gate) write(op Op, b []byte, w func([]byte) error) (int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed.Load() {
		return 0, g.err()
	}
	if g.hook != nil {
		if err := g.hook(op); err != nil {
			g.kill(err)
			return 0, g.err()
		}
	}
	n, exhausted := len(b), false
	if g.budget > 0 {
		g.smu.Lock()
		if left := g.budget - g.used; int64(n) >= left {
			n, exhausted = int(max(left, 0)), true
		}
		g.used += int64(n)
		g.smu.Unlock()
	}
	if n > 0 {
		if err := w(b[:n]); err != nil {
			return 0, err
		}
	}
	if exhausted {
		g.kill(ErrBudget)
		return n, g.err()
	}
	return n, nil
}

// entry is one scanned tree entry.
type entry struct {
	mode   fs.FileMode // type bits and permissions
	size   int64
	mtime  time.Time
	target string // symbolic links
}

func (e entry) isDir() bool     { return e.mode.IsDir() }
func (e entry) isRegular() bool { return e.mode.IsRegular() }
func (e entry) isLink() bool    { return e.mode&fs.ModeSymlink != 0 }

// same reports whether a destination entry d is up to date for source e.
func (e entry) same(d entry) bool {
	switch {
	case e.isDir():
		return d.isDir()
	case e.isLink():
		return d.isLink() && d.target == e.target
	case e.isRegular():
		return d.isRegular() && d.size == e.size && d.mtime.Equal(e.mtime) && d.mode.Perm() == e.mode.Perm()
	}
	return true // other types are not replicated
}

func entryOf(fi fs.FileInfo, abs string) (entry, error) {
	e := entry{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
	if e.isLink() {
		t, err := os.Readlink(abs)
		if err != nil {
			return e, err
		}
		e.target = t
	}
	return e, nil
}

// scan lists the tree under root without following symbolic links. Entries
// that vanish during the scan are left out; only sockets, devices and pipes
// are ignored otherwise. A missing root is an empty tree when missingOK.
func scan(ctx context.Context, root string, missingOK bool) (map[string]entry, []string, error) {
	out := map[string]entry{}
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == root {
			if err != nil {
				return err
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		e, err := entryOf(fi, p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !e.isDir() && !e.isRegular() && !e.isLink() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		out[rel] = e
		names = append(names, rel)
		return nil
	})
	if err != nil {
		if missingOK && errors.Is(err, fs.ErrNotExist) {
			return map[string]entry{}, nil, nil
		}
		return nil, nil, err
	}
	sort.Strings(names)
	return out, names, nil
}

// copyFile copies source file rel into the destination file dstAbs
// (created exclusively unless inPlace), then sets its mode and mtime. A
// source that vanishes, is no longer a regular file or changes during the
// copy gives errSkip; the partial destination file is left for the caller.
func (c *core) copyFile(ctx context.Context, rel, dstAbs string, inPlace bool) error {
	sf, err := openBeneath(c.src, rel)
	if err != nil {
		if isVanished(err) {
			return errSkip
		}
		return err
	}
	defer sf.Close()
	before, err := sf.Stat()
	if err != nil {
		return err
	}
	if !before.Mode().IsRegular() {
		return errSkip
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if inPlace {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	op := c.opPath(dstAbs)
	var df *os.File
	if err := c.gate.do(Op{Kind: OpCreate, Path: op}, func() error {
		var err error
		df, err = os.OpenFile(dstAbs, flags, 0o600)
		return err
	}); err != nil {
		return err
	}
	defer df.Close()
	buf := make([]byte, c.chunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := sf.Read(buf)
		if n > 0 {
			w, err := c.gate.write(Op{Kind: OpWrite, Path: op, Bytes: n}, buf[:n], func(b []byte) error {
				_, err := df.Write(b)
				return err
			})
			c.bytes.Add(int64(w))
			if err != nil {
				return err
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				break
			}
			if isVanished(rerr) {
				return errSkip
			}
			return rerr
		}
	}
	after, err := sf.Stat()
	if err != nil {
		return err
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return errSkip
	}
	return c.gate.do(Op{Kind: OpMeta, Path: op}, func() error {
		if err := df.Chmod(before.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(dstAbs, before.ModTime(), before.ModTime())
	})
}

func isVanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || isNotDirOrLoop(err)
}

// symlink creates dstAbs as a symbolic link to target.
func (c *core) symlink(target, dstAbs string) error {
	return c.gate.do(Op{Kind: OpSymlink, Path: c.opPath(dstAbs)}, func() error {
		return os.Symlink(target, dstAbs)
	})
}

// mkdir creates dstAbs with perm.
func (c *core) mkdir(dstAbs string, perm fs.FileMode) error {
	return c.gate.do(Op{Kind: OpMkdir, Path: c.opPath(dstAbs)}, func() error {
		err := os.Mkdir(dstAbs, perm)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := os.Lstat(dstAbs); serr == nil && fi.IsDir() {
				return nil
			}
		}
		return err
	})
}

// remove removes the single entry dstAbs (a directory must be empty).
func (c *core) remove(dstAbs string) error {
	return c.gate.do(Op{Kind: OpRemove, Path: c.opPath(dstAbs)}, func() error {
		err := os.Remove(dstAbs)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
}

// removeTree removes dstAbs and everything below it, one gated entry at a
// time, so that it can be stopped halfway.
func (c *core) removeTree(ctx context.Context, dstAbs string) error {
	fi, err := os.Lstat(dstAbs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if fi.IsDir() {
		ents, err := os.ReadDir(dstAbs)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := c.removeTree(ctx, filepath.Join(dstAbs, e.Name())); err != nil {
				return err
			}
		}
	}
	return c.remove(dstAbs)
}

// mkdirAll makes every directory of rel (slash-separated, relative to the
// destination root dstRoot) exist, replacing non-directories in the way.
// New directories take the mode of the source directory when it exists.
func (c *core) mkdirAll(ctx context.Context, dstRoot, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	cur := dstRoot
	srcCur := c.src
	for _, part := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, part)
		srcCur = filepath.Join(srcCur, part)
		fi, err := os.Lstat(cur)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := c.removeTree(ctx, cur); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		perm := fs.FileMode(0o755)
		if sfi, err := os.Lstat(srcCur); err == nil && sfi.IsDir() {
			perm = sfi.Mode().Perm()
		}
		if err := c.mkdir(cur, perm); err != nil {
			return err
		}
	}
	return nil
}

// parentOf returns the slash-separated parent of rel ("." at top level).
func parentOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// finish turns any error of a stopped or killed simulator into its gate
// error, so that callers can test errors.Is(err, ErrStopped).
func (c *core) finish(err error) error {
	if err != nil && (c.gate.closed.Load() || c.stopCtx.Err() != nil) {
		return c.gate.err()
	}
	return err
}
