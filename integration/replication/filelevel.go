package replication

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// FileLevel simulates file-level replication (rsync --delete): each pass
// compares the source with the destination by type, size, mtime and mode,
// and performs in one seeded random order the copies of new or changed
// files (each written to ".<name>.<6 random alphanumerics>" in the target
// directory, then renamed into place), the creation of directories and
// symbolic links, and the deletion of destination files the source no
// longer has. Directories the source no longer has are removed last. A
// stopped or killed pass leaves any subset of this done, and possibly a
// temporary file; the next complete pass deletes it as extraneous.
type FileLevel struct {
	core
}

// NewFileLevel returns a FileLevel simulator.
func NewFileLevel(o Options) (*FileLevel, error) {
	f := &FileLevel{}
	if err := f.init(o); err != nil {
		return nil, err
	}
	return f, nil
}

// Pass implements Replicator: one rsync run.
func (f *FileLevel) Pass(ctx context.Context) error {
	if !f.enter() {
		return f.gate.err()
	}
	defer f.wg.Done()
	ctx, done := f.passCtx(ctx)
	defer done()
	return f.finish(f.pass(ctx))
}

// Run implements Replicator.
func (f *FileLevel) Run(ctx context.Context, interval time.Duration) error {
	return f.runLoop(ctx, interval, f.Pass)
}

type flOp struct {
	rel    string
	delete bool
}

func (f *FileLevel) pass(ctx context.Context) error {
	src, names, err := scan(ctx, f.src, false)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(f.dst); errors.Is(err, os.ErrNotExist) {
		if err := f.mkdir(f.dst, 0o755); err != nil {
			return err
		}
	}
	dst, dnames, err := scan(ctx, f.dst, false)
	if err != nil {
		return err
	}
	var ops []flOp
	for _, rel := range names {
		if d, ok := dst[rel]; !ok || !src[rel].same(d) {
			ops = append(ops, flOp{rel: rel})
		}
	}
	var rmdirs []string
	for _, rel := range dnames {
		if _, ok := src[rel]; ok {
			continue
		}
		if dst[rel].isDir() {
			rmdirs = append(rmdirs, rel)
		} else {
			ops = append(ops, flOp{rel: rel, delete: true})
		}
	}
	f.shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		abs := filepath.Join(f.dst, filepath.FromSlash(op.rel))
		if op.delete {
			if err := f.remove(abs); err != nil {
				if !errors.Is(err, ErrStopped) && isVanished(err) {
					continue // its directory went first
				}
				return err
			}
			f.deletions.Add(1)
			continue
		}
		err := f.apply(ctx, op.rel, src[op.rel], abs)
		if errors.Is(err, errSkip) {
			f.skipped.Add(1)
			continue
		}
		if err != nil {
			return err
		}
	}
	// Deepest first, so that each is empty of directories by its turn.
	sort.Slice(rmdirs, func(i, j int) bool { return rmdirs[i] > rmdirs[j] })
	for _, rel := range rmdirs {
		if err := f.removeTree(ctx, filepath.Join(f.dst, filepath.FromSlash(rel))); err != nil {
			return err
		}
		f.deletions.Add(1)
	}
	f.passes.Add(1)
	return nil
}

// apply brings destination entry abs up to date with source entry e.
func (f *FileLevel) apply(ctx context.Context, rel string, e entry, abs string) error {
	if err := f.mkdirAll(ctx, f.dst, parentOf(rel)); err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch {
	case e.isDir():
		if exists && fi.IsDir() {
			return nil
		}
		if exists {
			if err := f.remove(abs); err != nil {
				return err
			}
		}
		return f.mkdir(abs, e.mode.Perm())
	case e.isLink():
		tmp := f.tempName(abs)
		if err := f.symlink(e.target, tmp); err != nil {
			return err
		}
		return f.install(ctx, tmp, abs, exists && fi.IsDir())
	default:
		tmp := f.tempName(abs)
		if err := f.copyFile(ctx, rel, tmp, false); err != nil {
			if errors.Is(err, errSkip) {
				// rsync removes its temporary file when the source
				// changed under it and retries on the next run.
				if rerr := f.remove(tmp); rerr != nil {
					return rerr
				}
			}
			return err
		}
		return f.install(ctx, tmp, abs, exists && fi.IsDir())
	}
}

// install renames tmp to abs, first removing a directory in the way.
func (f *FileLevel) install(ctx context.Context, tmp, abs string, dirInWay bool) error {
	if dirInWay {
		if err := f.removeTree(ctx, abs); err != nil {
			return err
		}
	}
	if err := f.gate.do(Op{Kind: OpRename, Path: f.opPath(tmp), Target: f.opPath(abs)}, func() error {
		return os.Rename(tmp, abs)
	}); err != nil {
		return err
	}
	f.files.Add(1)
	return nil
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// tempName returns the temporary name rsync would use for abs.
func (f *FileLevel) tempName(abs string) string {
	var b strings.Builder
	b.WriteByte('.')
	b.WriteString(filepath.Base(abs))
	b.WriteByte('.')
	for range 6 {
		b.WriteByte(alnum[f.intn(len(alnum))])
	}
	return filepath.Join(filepath.Dir(abs), b.String())
}

// IsTempName reports whether base (a file name without directory) has the
// shape of a FileLevel temporary file: ".<name>.<6 alphanumerics>".
func IsTempName(base string) bool {
	if len(base) < 1+1+1+6 || base[0] != '.' || base[len(base)-7] != '.' {
		return false
	}
	for _, c := range base[len(base)-6:] {
		if !strings.ContainsRune(alnum, c) {
			return false
		}
	}
	return true
}
