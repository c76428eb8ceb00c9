package fusefs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Server is one mounted ckptfs.
type Server struct {
	fsys       *fileSystem
	root       *node
	fuse       *fuse.Server
	mountPoint string
	// conn is the FUSE connection's number in fusectl; 0 if unknown.
	conn uint64

	// transition serializes SetMode calls.
	transition sync.Mutex
	// waited is closed when go-fuse's WaitMount returned (see waitMount).
	waited <-chan struct{}
}

// Mount validates cfg, recovers a mount point left behind by a daemon
// that died (ENOTCONN), mounts and returns once the kernel serves the
// mount.
func Mount(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ckptfs config: %w", err)
	}
	log := cfg.Logger.With("component", "fusefs", "mountpoint", cfg.MountPoint)
	backing := filepath.Clean(cfg.Backing)
	mountPoint := filepath.Clean(cfg.MountPoint)

	// A NAS that hangs at start must not hang the start (issue 18): the
	// stat is waited for ProbeTimeout, then the mount comes up without
	// the backing's device number (it only offsets inode numbers) and
	// its requests wait on the NAS as they would later. The stat also
	// learns whether the configured path names a link: only then may
	// its last component be one (beneath.go).
	type statResult struct {
		st  syscall.Stat_t
		err error
	}
	var st syscall.Stat_t
	rootIsLink := new(atomic.Bool)
	stated := make(chan statResult, 1)
	go func() {
		var r statResult
		if r.err = syscall.Lstat(backing, &r.st); r.err == nil && r.st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			rootIsLink.Store(true)
			r.err = syscall.Stat(backing, &r.st)
		}
		stated <- r
	}()
	select {
	case r := <-stated:
		if r.err != nil {
			return nil, fmt.Errorf("backing directory: %w", &os.PathError{Op: "stat", Path: backing, Err: r.err})
		}
		st = r.st
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return nil, fmt.Errorf("backing %s is not a directory", backing)
		}
	case <-time.After(cfg.ProbeTimeout):
		log.Warn("the backing directory does not answer its stat: mounting it unchecked", "backing", backing, "waited", cfg.ProbeTimeout.String())
	}
	if err := recoverMountPoint(mountPoint, cfg.ProbeTimeout, log); err != nil {
		return nil, err
	}
	warnNonEmpty(mountPoint, cfg.ProbeTimeout, log)

	fsys := &fileSystem{
		vis:           cfg.Visibility,
		gate:          cfg.Gate,
		closeGate:     cfg.CloseGate,
		log:           log,
		now:           cfg.Now,
		backing:       backing,
		rootIsLink:    rootIsLink,
		deadlineFence: cfg.DeadlineFence,
		fenceTimeout:  cfg.FenceTimeout,
		guard:         cfg.DeleteGuard,
		guardGrace:    cfg.DeleteGrace,
		guardHold:     cfg.DeleteHold,
		mode:          cfg.Mode,
	}
	fsys.modeNow.Store(int32(cfg.Mode))
	root := &node{
		LoopbackNode: &fs.LoopbackNode{RootData: &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}},
		fsys:         fsys,
	}
	root.RootData.RootNode = root

	opts := mountOptions(cfg)
	raw := &timedFS{RawFileSystem: fs.NewNodeFS(root, opts), lat: &fsys.latency}
	srv, err := fuse.NewServer(raw, mountPoint, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountPoint, err)
	}
	if cfg.Sealer != nil {
		fsys.reports = newReporter(cfg.Sealer, log, &fsys.stats)
	}
	go srv.Serve()
	waited, err := waitMount(srv, mountPoint, cfg.ProbeTimeout, log)
	if err != nil {
		err = errors.Join(fmt.Errorf("mount %s: %w", mountPoint, err), srv.Unmount())
		if fsys.reports != nil {
			fsys.reports.close()
		}
		return nil, err
	}
	// Passthrough needs the kernel's consent and CAP_SYS_ADMIN to register
	// backing files.
	if cfg.Passthrough && os.Geteuid() == 0 && srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0 {
		fsys.passthrough.Store(true)
	}
	log.Info("mounted", "backing", backing, "mode", cfg.Mode.String(), "passthrough", fsys.passthrough.Load())
	var conn uint64
	if ms, err := mountsAt(mountPoint); err == nil && len(ms) > 0 {
		conn = ms[len(ms)-1].dev
	}
	return &Server{fsys: fsys, root: root, fuse: srv, mountPoint: mountPoint, conn: conn, waited: waited}, nil
}

// mountOptions are the go-fuse options of a mount of cfg: kernel
// caching, permissions, capabilities and where go-fuse logs.
func mountOptions(cfg Config) *fs.Options {
	level := slog.LevelWarn
	if cfg.Debug {
		level = slog.LevelDebug
	}
	fuseLog := slog.NewLogLogger(cfg.Logger.With("component", "go-fuse", "mountpoint", cfg.MountPoint).Handler(), level)
	entry, attr, negative := cfg.EntryTimeout, cfg.AttrTimeout, cfg.NegativeTimeout
	fsName := cfg.FsName
	if fsName == "" {
		fsName = filepath.Clean(cfg.Backing)
	}
	mo := fuse.MountOptions{
		AllowOther:  cfg.AllowOther,
		FsName:      fsName,
		Name:        Name,
		MaxWrite:    cfg.MaxWrite,
		DirectMount: true,
		// As root, mount(2) directly and never fall back to fusermount
		// (whose absence would also hide the real unmount error).
		DirectMountStrict: os.Geteuid() == 0,
		Debug:             cfg.Debug,
		Logger:            fuseLog,
	}
	if cfg.DefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if !cfg.Passthrough {
		mo.DisabledCapabilities |= fuse.CAP_PASSTHROUGH
	}
	// The daemon drops setuid/setgid itself (privs.go), which spares a
	// GETXATTR round trip per WRITE.
	mo.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
	// READDIRPLUS looks up every entry (a backing lstat and an inode each).
	// With AUTO the kernel asks for it for the first batch of a listing,
	// and for a later batch only if entries were stat'ed since the one
	// before, so a plain listing (ls, os.ReadDir) is mostly READDIRs. The
	// price: reading a large directory and then stat'ing every entry (ls
	// -l, Java's listFiles and a stat each) costs a LOOKUP round trip per
	// entry unless it was looked up within EntryTimeout (8x a direct
	// listing for 10,000 entries), where READDIRPLUS every time costs every
	// plain listing about 10x, and that with stats about 3x. Lookup hides
	// the same names either way.
	mo.ExtraCapabilities |= fuse.CAP_READDIRPLUS_AUTO
	return &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		Logger:          fuseLog,
	}
}

// MountPoint is where the file system is mounted.
func (s *Server) MountPoint() string { return s.mountPoint }

// Unmount unmounts, waits until the serving goroutines have stopped and
// the Sealer got everything reported. It fails with EBUSY while files on
// the mount are open.
func (s *Server) Unmount() error {
	// go-fuse's WaitMount reads what its Unmount writes: let one left
	// waiting on the NAS at start finish first, if it does soon.
	if s.waited != nil {
		select {
		case <-s.waited:
		case <-time.After(orphanGrace):
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.fuse.Unmount() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(orphanGrace):
		s.abortOrphan()
		select {
		case err = <-done:
		case <-time.After(stuckGrace):
			// Requests still wait on the backing file system (a hung
			// NAS): the kernel has given up on them, the goroutines
			// serving them end when the NAS answers.
			s.fsys.log.Error("unmounted, but requests still wait on the backing file system; leaving them", "waited", orphanGrace+stuckGrace)
			return fmt.Errorf("unmount %s: %w", s.mountPoint, ErrRequestsStuck)
		}
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", s.mountPoint, err)
	}
	if s.fsys.reports != nil {
		s.fsys.reports.close()
	}
	s.fsys.log.Info("unmounted")
	return nil
}

// orphanGrace is how long Unmount waits for the kernel to end the
// connection once the mount is gone from this mount namespace;
// stuckGrace how long it then waits, once the connection is aborted, for
// the requests being served to end.
const (
	orphanGrace = 2 * time.Second
	stuckGrace  = 3 * time.Second
)

// invalidateWait bounds how long SetMode waits for the kernel to drop
// its cached names.
const invalidateWait = time.Second

// ErrRequestsStuck: Unmount unmounted, but requests being served still
// wait on the backing file system (a hung NAS), and it left them.
var ErrRequestsStuck = errors.New("requests still wait on the backing file system")

// abortOrphan ends the connection of a mount that is gone from this mount
// namespace but still open: a copy of it in another mount namespace (one
// made while it was mounted, with private propagation: a test's, or a
// service's with PrivateTmp=) keeps the file system alive, so the kernel
// never tells the serving goroutines that it ended, and the unmount would
// wait for them as long as that namespace lives. The copy loses its
// daemon either way once this process exits and closes /dev/fuse.
func (s *Server) abortOrphan() {
	if mounted, err := IsMounted(s.mountPoint); err != nil || mounted || s.conn == 0 {
		return // still mounted here: Unmount is retrying, not waiting
	}
	s.fsys.log.Warn("unmounted here, but the connection goes on (another mount namespace holds the mount, or requests wait on a hung backing file system); ending it",
		"connection", s.conn)
	if err := abortConnection(s.conn); err != nil {
		s.fsys.log.Error("ending the connection", "err", err)
	}
}

// SyncSealer returns once the Sealer got everything the mount reported
// before the call (a file closed before it, with its checksum read back).
func (s *Server) SyncSealer() {
	if s.fsys.reports != nil {
		s.fsys.reports.sync()
	}
}

// Wait blocks until the file system is unmounted (by Unmount or from
// outside) and the Sealer got everything reported.
func (s *Server) Wait() {
	s.fuse.Wait()
	if s.fsys.reports != nil {
		s.fsys.reports.close()
	}
}

// Mode is the current mode.
func (s *Server) Mode() Mode { return s.fsys.currentMode() }

// SetMode switches modes. From its call on, every change sees the new
// mode, including writes on handles opened earlier. Switching to a mode
// that does not write also waits, at most Config.FenceTimeout, until the
// changes admitted before have come back from the backing file system:
// when SetMode returns nil, nothing written through the mount can land
// any more. Otherwise the error wraps ErrFenceIncomplete; the mode has
// changed all the same. Switching into or out of replica mode drops the
// kernel's cached names, since what is visible changes. SetMode uses the
// mount, so it must not be called from inside a FUSE request of this
// mount.
func (s *Server) SetMode(m Mode) error {
	if !m.valid() {
		return fmt.Errorf("invalid mode %v", m)
	}
	s.transition.Lock()
	defer s.transition.Unlock()
	start := time.Now()
	old, epoch := s.fsys.setMode(m)
	if old != m {
		s.fsys.log.Info("mode changed", "from", old.String(), "to", m.String())
	}
	if old.filtered() != m.filtered() {
		// The kernel takes each directory's lock to invalidate, and a
		// lookup hung on the NAS holds it: wait a little, not for it.
		done := make(chan struct{})
		go func() { s.invalidateAll(); close(done) }()
		select {
		case <-done:
		case <-time.After(invalidateWait):
			s.fsys.log.Warn("dropping the kernel's cached names waits on a directory (a lookup hung on the backing file system); going on", "waited", invalidateWait)
		}
	}
	if !m.writable() {
		err := s.fsys.waitMutations(epoch)
		if err == nil && old.writable() {
			s.fsys.log.Info("fence complete: nothing written through the mount reaches the backing directory any more", "waited", time.Since(start).String())
		}
		return err
	}
	return nil
}

// Invalidate drops the kernel's cached entry (positive or negative) for
// name in dir (relative to the mount root, "" for the root), so the next
// access asks Visibility again. Call it when a verdict changes. It must
// not be called from inside a FUSE request of this mount.
func (s *Server) Invalidate(dir, name string) error {
	parent := s.root.EmbeddedInode()
	if dir = strings.Trim(dir, "/"); dir != "" {
		for _, seg := range strings.Split(dir, "/") {
			if parent = parent.GetChild(seg); parent == nil {
				return nil // the kernel knows nothing below an unknown directory
			}
		}
	}
	return notifyErr(parent.NotifyEntry(name))
}

// notifyErr ignores the answers that mean "nothing was cached".
func notifyErr(errno syscall.Errno) error {
	switch errno {
	case 0, syscall.ENOENT:
		return nil
	}
	return fmt.Errorf("invalidate: %w", errno)
}

// invalidateAll drops every name the kernel may have cached.
func (s *Server) invalidateAll() {
	todo := []*fs.Inode{s.root.EmbeddedInode()}
	for len(todo) > 0 {
		dir := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for name, ch := range dir.Children() {
			if err := notifyErr(dir.NotifyEntry(name)); err != nil {
				s.fsys.log.Warn("dropping cached entry", "name", name, "err", err)
			}
			if ch.IsDir() {
				todo = append(todo, ch)
			}
		}
	}
}

// SetWriteDeadline sets the moment from which the mount admits no change
// (with Config.DeadlineFence; design §5.14). The daemon moves it after
// every renewal of its site's lease; a zero time admits none.
func (s *Server) SetWriteDeadline(t time.Time) { s.fsys.setDeadline(t) }

// InFlight is the number of admitted changes that have not come back
// from the backing file system.
func (s *Server) InFlight() int { return s.fsys.inFlight() }

// Stats returns the mount's counters.
func (s *Server) Stats() Stats { return s.fsys.stats.snapshot() }

// Passthrough reports whether read-only opens are offered to the kernel
// as passthrough files.
func (s *Server) Passthrough() bool { return s.fsys.passthrough.Load() }

// waitMount is srv.WaitMount, which after the kernel's INIT opens a file
// on the new mount (go-fuse's poll hack): the kernel first asks for the
// root's attributes, which wait on the backing directory. On a NAS that
// hangs that would hang the start, so once the mount is in the mount
// table, Mount waits for it at most timeout and then goes on; the hack
// completes when the NAS answers.
func waitMount(srv *fuse.Server, mountPoint string, timeout time.Duration, log *slog.Logger) (<-chan struct{}, error) {
	waited := make(chan struct{})
	var err error
	go func() {
		err = srv.WaitMount()
		close(waited)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-waited:
			return waited, err
		case <-t.C:
			if ms, merr := mountsAt(mountPoint); merr == nil && len(ms) > 0 {
				log.Warn("the mount's first request waits on the backing directory: serving without waiting for it", "waited", timeout.String())
				return waited, nil
			}
			t.Reset(timeout)
		}
	}
}
