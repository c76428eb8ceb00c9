package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// genTree (re)writes files names with generation gen.
func genTree(t *testing.T, root string, names []string, gen int) {
	t.Helper()
	for _, n := range names {
		writeFile(t, root, n, genContent(n, gen), gen)
	}
}

func genNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("d%d/f%02d", i%3, i))
	}
	return out
}

// readAt reads every regular file below the directory fd dfd (relative to
// it, never through a path from the root) and returns rel -> content.
func readAt(dfd int, prefix string, out map[string][]byte) error {
	dup, err := unix.Dup(dfd)
	if err != nil {
		return err
	}
	df := os.NewFile(uintptr(dup), prefix)
	defer df.Close()
	ents, err := df.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := unix.Openat(dfd, e.Name(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if e.IsDir() {
			err = readAt(fd, prefix+e.Name()+"/", out)
			unix.Close(fd)
			if err != nil {
				return err
			}
			continue
		}
		ff := os.NewFile(uintptr(fd), e.Name())
		b, err := io.ReadAll(ff)
		ff.Close()
		if err != nil {
			return err
		}
		out[prefix+e.Name()] = b
	}
	return nil
}

// readSnapshot reads the tree the destination names at the instant of the
// open, through a directory descriptor.
func readSnapshot(dst string) (map[string][]byte, error) {
	fd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	out := map[string][]byte{}
	return out, readAt(fd, "", out)
}

// gensOf returns the sorted distinct generations in a read tree.
func gensOf(tree map[string][]byte) []int {
	seen := map[int]bool{}
	for _, b := range tree {
		seen[parseGen(b)] = true
	}
	var out []int
	for g := range seen {
		out = append(out, g)
	}
	sort.Ints(out)
	return out
}

// TestSnapshotAtomicUnderConcurrentReader: a reader that opens the replica
// and reads it through that descriptor, while passes of bumped generations
// run, only ever sees complete trees of one generation, and generations
// never go backwards.
func TestSnapshotAtomicUnderConcurrentReader(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
	names := genNames(24)
	genTree(t, src, names, 1)
	s, err := NewSnapshot(SnapshotOptions{Options: Options{Source: src, Dest: dst, Rand: seeded(1), ChunkSize: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}

	var done atomic.Bool
	var wg sync.WaitGroup
	var reads, vanished int
	distinct := map[int]bool{}
	var readerErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := 0
		for !done.Load() {
			tree, err := readSnapshot(dst)
			if errors.Is(err, unix.ENOENT) {
				// The tree this reader held was retired by the pass
				// after next: entries missing, never mixed.
				vanished++
				continue
			}
			if err != nil {
				readerErr = err
				return
			}
			reads++
			if len(tree) != len(names) {
				readerErr = fmt.Errorf("read %d files, want %d", len(tree), len(names))
				return
			}
			g := gensOf(tree)
			if len(g) != 1 || g[0] < 1 {
				readerErr = fmt.Errorf("one listing holds generations %v", g)
				return
			}
			if g[0] < last {
				readerErr = fmt.Errorf("generation went back from %d to %d", last, g[0])
				return
			}
			last = g[0]
			distinct[g[0]] = true
		}
	}()
	const gens = 40
	for gen := 2; gen <= gens; gen++ {
		genTree(t, src, names, gen)
		if err := s.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if readerErr != nil {
		t.Fatal(readerErr)
	}
	if reads == 0 || len(distinct) < 2 {
		t.Fatalf("the reader completed %d reads over %d generations: it never watched a swap", reads, len(distinct))
	}
	t.Logf("%d reads, %d retired under the reader, %d distinct generations seen", reads, vanished, len(distinct))
	assertSameTree(t, src, dst)
}

// TestSnapshotPinnedReaderAndKilledPass checks the guarantee step by step:
// during a pass the replica is the previous snapshot; a descriptor opened
// before the swap keeps reading the previous snapshot after it; a pass
// killed halfway leaves the previous snapshot intact.
func TestSnapshotPinnedReaderAndKilledPass(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
	names := genNames(9)
	genTree(t, src, names, 1)

	var (
		mu       sync.Mutex
		pinned   = -1
		during   []int
		hookErrs []error
		killAt   = -1 // kill at this OpWrite count, -1: never
		writes   int
	)
	errKill := errors.New("killed by test")
	hook := func(op Op) error {
		mu.Lock()
		defer mu.Unlock()
		if op.Kind == OpWrite {
			writes++
			if writes == killAt {
				return errKill
			}
			// What a reader sees in the middle of building.
			if tree, err := readSnapshot(dst); err == nil {
				during = append(during, gensOf(tree)...)
			} else if !errors.Is(err, unix.ENOENT) {
				hookErrs = append(hookErrs, err)
			}
		}
		if op.Kind == OpExchange && pinned < 0 {
			fd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				hookErrs = append(hookErrs, err)
				return nil
			}
			pinned = fd
		}
		return nil
	}
	s, err := NewSnapshot(SnapshotOptions{Options: Options{Source: src, Dest: dst, Rand: seeded(2), ChunkSize: 16, Hook: hook}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	during = nil
	mu.Unlock()

	genTree(t, src, names, 2)
	if err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(hookErrs) > 0 {
		t.Fatal(hookErrs)
	}
	for _, g := range during {
		if g != 1 {
			t.Fatalf("during the pass to generation 2 a reader saw generation %d", g)
		}
	}
	if pinned < 0 {
		t.Fatal("no exchange was performed")
	}
	mu.Unlock()
	old := map[string][]byte{}
	err = readAt(pinned, "", old)
	unix.Close(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if g := gensOf(old); len(old) != len(names) || len(g) != 1 || g[0] != 1 {
		t.Fatalf("descriptor opened before the swap reads %d files of generations %v, want %d of [1]", len(old), g, len(names))
	}
	assertSameTree(t, src, dst)

	// Kill the next pass in the middle of its copy.
	before := describe(t, dst)
	genTree(t, src, names, 3)
	mu.Lock()
	writes, killAt = 0, 7
	mu.Unlock()
	err = s.Pass(ctx)
	if !errors.Is(err, ErrStopped) || !errors.Is(err, errKill) {
		t.Fatalf("killed pass returned %v", err)
	}
	after := describe(t, dst)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatal("a killed pass changed the replica")
	}
	if err := s.Pass(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("pass after a kill returned %v", err)
	}
	if _, err := os.Stat(s.staging); err != nil {
		t.Fatalf("the killed pass's staging tree should be left behind: %v", err)
	}
}

// TestSnapshotFreezeCopiesOnlyTheDelta: with Freeze, the writers stand
// still only while the pass copies what changed since its unfrozen copy,
// and the snapshot is still the tree as it was at the freeze (here the
// writes that happen between the unfrozen copy and the freeze: a new
// file, a file rewritten, a file and a directory removed).
func TestSnapshotFreezeCopiesOnlyTheDelta(t *testing.T) {
	root := t.TempDir()
	src, dst := filepath.Join(root, "src"), filepath.Join(root, "dst")
	big := strings.Repeat("x", 64<<10)
	for i := range 8 {
		writeFile(t, src, fmt.Sprintf("chk/f%d", i), big, i)
	}
	writeFile(t, src, "ha/old", "old", 1)
	writeFile(t, src, "gone/file", "gone", 1)
	var s *Snapshot
	var atFreeze, delta int64
	freeze := func() func() {
		atFreeze = s.Stats().BytesCopied
		writeFile(t, src, "ha/new", "new pointer", 20)
		writeFile(t, src, "ha/old", "rewritten", 21)
		if err := os.RemoveAll(filepath.Join(src, "gone")); err != nil {
			t.Fatal(err)
		}
		delta = int64(len("new pointer") + len("rewritten"))
		return func() {}
	}
	var err error
	s, err = NewSnapshot(SnapshotOptions{Options: Options{Source: src, Dest: dst, Rand: seeded(3)}, Freeze: freeze})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Pass(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, src, dst)
	if frozen := s.Stats().BytesCopied - atFreeze; frozen != delta {
		t.Errorf("copied %d bytes with the writers frozen, want only the %d that changed", frozen, delta)
	}
}
