package replication

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// errNoExchange: the filesystem cannot exchange two entries atomically.
var errNoExchange = errors.New("replication: atomic exchange not supported")

// SnapshotOptions configure a Snapshot simulator.
type SnapshotOptions struct {
	Options
	// Freeze, if set, is called at the start of the copy of each pass and
	// the function it returns once the copy is done. It lets a test hold
	// the writers of the source so that the copy is a true point-in-time
	// image, as a filesystem snapshot is. Without it the copy of a source
	// that changes during the pass is only as consistent as the source.
	Freeze func() (release func())
}

// Snapshot simulates snapshot replication (NetApp SnapMirror): each pass
// copies the source into a staging directory beside the destination,
// ".<dest name>.snapshot-staging", and then exchanges it with the
// destination in one renameat2(RENAME_EXCHANGE).
//
// Guarantee: the destination directory entry always names one complete
// snapshot. A reader that opens the destination directory once and reads
// everything relative to that descriptor (openat) sees one snapshot only;
// the tree it holds is kept (at the staging name) until the start of the
// next pass, after which the reader may find entries missing, never
// entries of another snapshot. A reader resolving full paths again and
// again can straddle a swap, as on any filesystem. A pass stopped or
// killed before the exchange leaves the previous snapshot untouched; on a
// filesystem without RENAME_EXCHANGE the swap is three renames and a kill
// between them can leave the destination missing (never mixed).
type Snapshot struct {
	core
	freeze  func() func()
	staging string
}

// NewSnapshot returns a Snapshot simulator.
func NewSnapshot(o SnapshotOptions) (*Snapshot, error) {
	s := &Snapshot{freeze: o.Freeze}
	if err := s.init(o.Options); err != nil {
		return nil, err
	}
	s.staging = filepath.Join(s.parent, "."+filepath.Base(s.dst)+".snapshot-staging")
	return s, nil
}

// Pass implements Replicator: one snapshot transfer.
func (s *Snapshot) Pass(ctx context.Context) error {
	if !s.enter() {
		return s.gate.err()
	}
	defer s.wg.Done()
	ctx, done := s.passCtx(ctx)
	defer done()
	return s.finish(s.pass(ctx))
}

// Run implements Replicator.
func (s *Snapshot) Run(ctx context.Context, interval time.Duration) error {
	return s.runLoop(ctx, interval, s.Pass)
}

func (s *Snapshot) pass(ctx context.Context) error {
	// The staging name holds either a pass that was stopped halfway or
	// the snapshot before the current one.
	if err := s.removeTree(ctx, s.staging); err != nil {
		return err
	}
	if err := s.build(ctx); err != nil {
		return err
	}
	if err := s.swap(); err != nil {
		return err
	}
	s.passes.Add(1)
	return nil
}

func (s *Snapshot) build(ctx context.Context) error {
	// A real snapshot is instant. With Freeze the tree is first copied
	// with the writers running, then, frozen, brought up to date: only
	// what changed since is copied while they stand still. (A freeze as
	// long as a whole copy, on a loaded machine, outlasted Flink's
	// ZooKeeper session timeout: DC1's JobManager lost its leadership to
	// a standby of DC2 before any loss.)
	if s.freeze != nil {
		if err := s.copyTree(ctx, false); err != nil {
			return err
		}
		release := s.freeze()
		defer release()
		return s.copyTree(ctx, true)
	}
	return s.copyTree(ctx, false)
}

// copyTree copies the source into the staging directory; update keeps
// what the staging directory already holds up to date and removes what
// the source no longer has.
func (s *Snapshot) copyTree(ctx context.Context, update bool) error {
	rfi, err := os.Stat(s.src)
	if err != nil {
		return err
	}
	if err := s.mkdir(s.staging, rfi.Mode().Perm()); err != nil {
		return err
	}
	src, names, err := scan(ctx, s.src, false)
	if err != nil {
		return err
	}
	have := map[string]entry{}
	var haveNames []string
	if update {
		if have, haveNames, err = scan(ctx, s.staging, false); err != nil {
			return err
		}
	}
	for _, rel := range names {
		e := src[rel]
		abs := filepath.Join(s.staging, filepath.FromSlash(rel))
		if d, ok := have[rel]; ok {
			if e.same(d) {
				continue
			}
			if err := s.removeTree(ctx, abs); err != nil {
				return err
			}
		}
		var err error
		switch {
		case e.isDir():
			err = s.mkdir(abs, e.mode.Perm())
		case e.isLink():
			if err = s.symlink(e.target, abs); err == nil {
				s.files.Add(1)
			}
		default:
			if err = s.copyFile(ctx, rel, abs, false); err == nil {
				s.files.Add(1)
			}
		}
		if errors.Is(err, errSkip) {
			// Vanished or changed during the copy: not in this
			// snapshot (a real snapshot would have the old or the
			// new version; the next pass has the new one).
			s.skipped.Add(1)
			if rerr := s.removeTree(ctx, abs); rerr != nil {
				return rerr
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	// Gone from the source: deepest first.
	for i := len(haveNames) - 1; i >= 0; i-- {
		if _, ok := src[haveNames[i]]; !ok {
			if err := s.removeTree(ctx, filepath.Join(s.staging, filepath.FromSlash(haveNames[i]))); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Snapshot) swap() error {
	_, err := os.Lstat(s.dst)
	if errors.Is(err, fs.ErrNotExist) {
		return s.gate.do(Op{Kind: OpRename, Path: s.opPath(s.staging), Target: s.opPath(s.dst)}, func() error {
			return os.Rename(s.staging, s.dst)
		})
	}
	if err != nil {
		return err
	}
	err = s.gate.do(Op{Kind: OpExchange, Path: s.opPath(s.staging), Target: s.opPath(s.dst)}, func() error {
		return exchange(s.staging, s.dst)
	})
	if !errors.Is(err, errNoExchange) {
		return err
	}
	old := filepath.Join(s.parent, "."+filepath.Base(s.dst)+".snapshot-old")
	for _, r := range [][2]string{{s.dst, old}, {s.staging, s.dst}, {old, s.staging}} {
		if err := s.gate.do(Op{Kind: OpRename, Path: s.opPath(r[0]), Target: s.opPath(r[1])}, func() error {
			return os.Rename(r[0], r[1])
		}); err != nil {
			return err
		}
	}
	return nil
}
