package replication

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPerObjectIndependentOutOfOrderTorn: files are replicated one by one
// in an order unrelated to the source's, a file can be seen half written,
// and changes and deletions converge.
func TestPerObjectIndependentOutOfOrderTorn(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
	var names []string
	for i := range 16 {
		names = append(names, fmt.Sprintf("chk-%02d/state", i))
	}
	genTree(t, src, names, 1)
	size := int64(len(genContent(names[0], 1)))

	var (
		mu       sync.Mutex
		finished []string // files in the order their copy completed
		torn     []string // files seen shorter than the source while copied
		present  []int    // files present in the replica at each completion
	)
	hook := func(op Op) error {
		rel := strings.TrimPrefix(op.Path, "nas2/")
		switch op.Kind {
		case OpWrite:
			if fi, err := os.Stat(filepath.Join(dst, rel)); err == nil && fi.Size() > 0 && fi.Size() < size {
				mu.Lock()
				torn = append(torn, rel)
				mu.Unlock()
			}
		case OpMeta:
			n := 0
			for _, name := range names {
				if _, err := os.Stat(filepath.Join(dst, name)); err == nil {
					n++
				}
			}
			mu.Lock()
			finished = append(finished, rel)
			present = append(present, n)
			mu.Unlock()
		}
		return nil
	}
	p, err := NewPerObject(PerObjectOptions{
		Options:  Options{Source: src, Dest: dst, Rand: seeded(3), ChunkSize: 8, Hook: hook},
		MaxDelay: 40 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, src, dst)
	mu.Lock()
	if len(finished) != len(names) {
		t.Fatalf("%d copies completed, want %d", len(finished), len(names))
	}
	if sort.StringsAreSorted(finished) {
		t.Fatalf("copies completed in source order %v: not independent", finished)
	}
	if len(torn) == 0 {
		t.Fatal("no partially written file was ever visible")
	}
	if present[0] >= len(names) {
		t.Fatalf("all files were present when the first copy completed: %v", present)
	}
	t.Logf("completion order %v", finished)
	finished, torn = nil, nil
	mu.Unlock()

	// Change half, delete a quarter, converge again.
	for i, n := range names {
		switch i % 4 {
		case 0:
			if err := os.RemoveAll(filepath.Join(src, path.Dir(n))); err != nil {
				t.Fatal(err)
			}
		case 1, 2:
			writeFile(t, src, n, genContent(n, 2), 2)
		}
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, src, dst)
	if st := p.Stats(); st.Deletions < int64(len(names)/4) || p.Pending() != 0 {
		t.Fatalf("stats %+v, pending %d", st, p.Pending())
	}
}

// TestPerObjectByteBudgetTearsFile: a kill after a byte budget leaves
// exactly that many bytes in the replica, some file torn.
func TestPerObjectByteBudgetTearsFile(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
	names := []string{"a", "b", "c", "d"}
	genTree(t, src, names, 1)
	size := int64(len(genContent("a", 1)))
	const budget = 100
	p, err := NewPerObject(PerObjectOptions{
		Options:  Options{Source: src, Dest: dst, Rand: seeded(4), ChunkSize: 16, ByteBudget: budget},
		MaxDelay: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Sync(ctx)
	if !errors.Is(err, ErrStopped) || !errors.Is(err, ErrBudget) {
		t.Fatalf("Sync returned %v, want a budget kill", err)
	}
	p.Stop()
	var total int64
	torn := 0
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dst, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if fi.Size() < size {
			torn++
		}
	}
	if total != budget || p.Stats().BytesCopied != budget {
		t.Fatalf("replica holds %d bytes, %d counted, want %d", total, p.Stats().BytesCopied, budget)
	}
	if torn == 0 {
		t.Fatal("no torn file")
	}
	if err := p.Pass(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Pass after kill returned %v", err)
	}
}

// TestStopIsFinal: Stop called at an arbitrary instant while Run is busy
// returns promptly, Run returns, and no operation happens afterwards.
func TestStopIsFinal(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
			var names []string
			for i := range 40 {
				names = append(names, fmt.Sprintf("d%d/f%02d", i%4, i))
			}
			gen := 1
			genTree(t, src, names, gen)

			var (
				mu        sync.Mutex
				ops       int
				afterStop []Op
				stopped   bool
			)
			busy := make(chan struct{})
			hook := func(op Op) error {
				mu.Lock()
				defer mu.Unlock()
				if stopped {
					afterStop = append(afterStop, op)
				}
				ops++
				if ops == 150 {
					close(busy)
				}
				return nil
			}
			r := k.make(t, Options{Source: src, Dest: dst, Rand: seeded(8), ChunkSize: 8, Hook: hook})
			runErr := make(chan error, 1)
			go func() { runErr <- r.Run(ctx, time.Millisecond) }()
			// Keep the source moving so that there is always work.
			for done := false; !done; {
				select {
				case <-busy:
					done = true
				case <-ctx.Done():
					t.Fatal("the replicator never got busy")
				default:
					gen++
					genTree(t, src, names[:4], gen)
				}
			}
			start := time.Now()
			r.Stop()
			took := time.Since(start)
			mu.Lock()
			stopped = true
			mu.Unlock()
			snap := describe(t, dst)
			select {
			case err := <-runErr:
				if err != nil {
					t.Fatalf("Run after Stop returned %v", err)
				}
			case <-ctx.Done():
				t.Fatal("Run did not return after Stop")
			}
			if took > 2*time.Second {
				t.Fatalf("Stop took %v", took)
			}
			genTree(t, src, names, gen+1)
			if err := r.Pass(ctx); !isStopped(err) {
				t.Fatalf("Pass after Stop returned %v", err)
			}
			if err := r.Run(ctx, time.Millisecond); !isStopped(err) {
				t.Fatalf("Run after Stop returned %v", err)
			}
			r.Stop() // idempotent
			mu.Lock()
			if len(afterStop) > 0 {
				t.Fatalf("operations after Stop returned: %v", afterStop)
			}
			mu.Unlock()
			if !slices.Equal(mapKeys(snap), mapKeys(describe(t, dst))) || fmt.Sprint(snap) != fmt.Sprint(describe(t, dst)) {
				t.Fatal("replica changed after Stop returned")
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
