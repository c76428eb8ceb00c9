package replication

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fileLevelSetup makes a source and a replica holding generation 1 of old
// and keep, then moves the source on: keep bumped to generation 2, old
// deleted, fresh added at generation 2.
func fileLevelSetup(t *testing.T) (src, dst string, keep, old, fresh []string) {
	t.Helper()
	dir := t.TempDir()
	src, dst = filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
	for i := range 12 {
		keep = append(keep, fmt.Sprintf("job/k%d/f%02d", i%2, i))
		old = append(old, fmt.Sprintf("job/o/old%02d", i))
		fresh = append(fresh, fmt.Sprintf("job/n/new%02d", i))
	}
	genTree(t, src, keep, 1)
	genTree(t, src, old, 1)
	f, err := NewFileLevel(Options{Source: src, Dest: dst, Rand: seeded(99)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Pass(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	assertSameTree(t, src, dst)
	genTree(t, src, keep, 2)
	genTree(t, src, fresh, 2)
	if err := os.RemoveAll(filepath.Join(src, "job/o")); err != nil {
		t.Fatal(err)
	}
	return src, dst, keep, old, fresh
}

// opLog records operations from a hook.
type opLog struct {
	mu  sync.Mutex
	ops []Op
}

func (l *opLog) add(op Op) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

func (l *opLog) list() []Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

// TestFileLevelKilledMidPass: killing rsync after some operations leaves a
// consistent but partial replica: every file whole and of generation 1 or
// 2, some changes and deletions done and some not, at most the one
// temporary file being written, named as rsync names it.
func TestFileLevelKilledMidPass(t *testing.T) {
	ctx := testCtx(t)
	src, dst, keep, old, fresh := fileLevelSetup(t)
	errKill := errors.New("kill -9")
	installed := 0
	var inFlight string // temporary file written when killed
	hook := func(op Op) error {
		switch op.Kind {
		case OpRename, OpRemove:
			installed++
		case OpWrite:
			if installed >= 14 {
				inFlight = op.Path
				return errKill
			}
		}
		return nil
	}
	f, err := NewFileLevel(Options{Source: src, Dest: dst, Rand: seeded(5), ChunkSize: 20, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := f.Pass(ctx); !errors.Is(err, ErrStopped) || !errors.Is(err, errKill) {
		t.Fatalf("killed pass returned %v", err)
	}

	got := describe(t, dst)
	count := func(names []string, gen int) (n int) {
		for _, rel := range names {
			b, err := os.ReadFile(filepath.Join(dst, rel))
			switch {
			case errors.Is(err, os.ErrNotExist):
				if gen == 0 {
					n++
				}
			case err != nil:
				t.Fatal(err)
			case string(b) == genContent(rel, gen):
				n++
			case string(b) != genContent(rel, 1) && string(b) != genContent(rel, 2):
				t.Fatalf("%s is torn: %q", rel, b)
			}
		}
		return n
	}
	keep1, keep2 := count(keep, 1), count(keep, 2)
	old1, old0 := count(old, 1), count(old, 0)
	fresh2, fresh0 := count(fresh, 2), count(fresh, 0)
	t.Logf("changed %d/%d, deleted %d/%d, added %d/%d", keep2, len(keep), old0, len(old), fresh2, len(fresh))
	if keep1+keep2 != len(keep) || old1+old0 != len(old) || fresh2+fresh0 != len(fresh) {
		t.Fatalf("inconsistent replica: %v", got)
	}
	if keep1 == 0 || keep2 == 0 || old1 == 0 || old0 == 0 || fresh0 == 0 || fresh2 == 0 {
		t.Fatal("a pass killed halfway should leave every kind of change partially done")
	}

	tmps := tempFiles(t, dst)
	want := strings.TrimPrefix(inFlight, path.Base(dst)+"/")
	if len(tmps) != 1 || tmps[0] != want {
		t.Fatalf("temporary files %v, want exactly the one being written, %q", tmps, want)
	}
	base := path.Base(want)
	name := base[1 : len(base)-7]
	if _, err := os.Stat(filepath.Join(src, path.Dir(want), name)); err != nil {
		t.Fatalf("temporary file %s is not named after a source file: %v", want, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, want)); err != nil || fi.Size() >= int64(len(genContent(name, 2))) {
		t.Fatalf("temporary file should be partial: %v %v", fi, err)
	}

	// Running rsync again finishes the job and removes the leftover.
	f2, err := NewFileLevel(Options{Source: src, Dest: dst, Rand: seeded(6)})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Stop()
	if err := f2.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, src, dst)
}

// TestFileLevelOrderBySeed: the same seed gives the same operations in the
// same order (temporary names included); another seed another order.
func TestFileLevelOrderBySeed(t *testing.T) {
	run := func(seed uint64) []string {
		src, dst, _, _, _ := fileLevelSetup(t)
		var log opLog
		f, err := NewFileLevel(Options{Source: src, Dest: dst, Rand: seeded(seed), Hook: func(op Op) error { log.add(op); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		if err := f.Pass(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		assertSameTree(t, src, dst)
		var out []string
		for _, op := range log.list() {
			if op.Kind == OpRename || op.Kind == OpRemove || op.Kind == OpCreate {
				out = append(out, op.String())
			}
		}
		return out
	}
	a, a2, b := run(1), run(1), run(2)
	if !slices.Equal(a, a2) {
		t.Fatalf("same seed, different operations:\n%v\n%v", a, a2)
	}
	if slices.Equal(a, b) {
		t.Fatal("seeds 1 and 2 gave the same order")
	}
	if len(a) < 36 {
		t.Fatalf("only %d operations: %v", len(a), a)
	}
}
