package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// catalogTree writes jobs job directories of three retained RocksDB
// incremental checkpoints of files references each (100 subtasks), chk-2
// and chk-3 keeping 95% of the files of the one before, and returns the
// distinct files and references.
func catalogTree(b *testing.B, root string, jobs, files int) (distinct, refs int) {
	for j := range jobs {
		dir := filepath.Join(root, fmt.Sprintf("job-%03d", j))
		shared := filepath.Join(dir, "shared")
		if err := os.MkdirAll(shared, 0o755); err != nil {
			b.Fatal(err)
		}
		perSubtask := files / 100
		fresh := perSubtask / 20
		n := files + 2*100*fresh
		handles := make([]*metadata.StreamHandle, n)
		for i := range n {
			p := filepath.Join(shared, fmt.Sprintf("%08x-1111-2222-3333-444444444444", i))
			if err := os.WriteFile(p, make([]byte, i%7), 0o644); err != nil {
				b.Fatal(err)
			}
			handles[i] = &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + p, Size: int64(i % 7)}
		}
		distinct += n
		// Subtask s of checkpoint c keeps all but fresh of its files of
		// c-1 and adds fresh new ones.
		for c := range 3 {
			var list []*metadata.StreamHandle
			for s := range 100 {
				for i := range perSubtask {
					k := s*perSubtask + i
					if i < c*fresh {
						k = files + (c-1)*100*fresh + s*fresh + i%fresh
					}
					list = append(list, handles[k])
				}
			}
			refs += len(list)
			writeMetadataPerSubtask(b, filepath.Join(dir, fmt.Sprintf("chk-%d", c+1)), int64(c+1), list)
		}
	}
	return distinct, refs
}

// BenchmarkCatalogScale measures, on a local file system, a catalog over
// 50 job directories of three retained checkpoints of 2,000 files each:
// the first pass, a steady pass with nothing changed (the third), the heap the
// catalog keeps per file and per reference, and the audit's share.
func BenchmarkCatalogScale(b *testing.B) {
	root := b.TempDir()
	distinct, refs := catalogTree(b, root, 50, 2000)
	res, err := NewResolver(nil, []string{root})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: 2 * time.Minute, Workers: 32})
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultCatalogConfig()
		cfg.Backing, cfg.Verifier = root, v
		c, err := NewCatalog(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		c.Refresh(context.Background())
		first := time.Since(start)
		// The second pass lists each directory that now holds trusted
		// files once; the third is steady.
		c.Refresh(context.Background())
		start = time.Now()
		c.Refresh(context.Background())
		steady := time.Since(start)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		complete := 0
		for _, j := range c.Jobs() {
			for _, chk := range j.Checkpoints {
				if chk.Complete {
					complete++
				}
			}
		}
		if complete != 150 {
			b.Fatalf("%d complete checkpoints, want 150", complete)
		}
		heap := float64(after.HeapInuse) - float64(before.HeapInuse)
		b.ReportMetric(first.Seconds(), "first-pass-s")
		b.ReportMetric(steady.Seconds(), "steady-pass-s")
		b.ReportMetric(first.Seconds()/steady.Seconds(), "first/steady")
		b.ReportMetric(heap/float64(distinct), "heap-B/file")
		b.ReportMetric(heap/float64(refs), "heap-B/ref")
		runtime.KeepAlive(c)
		b.StartTimer()
	}
}
