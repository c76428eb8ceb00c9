package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// benchTree writes a job directory with 10,500 files in shared/ and two
// checkpoints: chk-1 references files 0..9999, chk-2 files 500..10499, so
// they share 95% of their files (RocksDB incremental style).
func benchTree(b *testing.B) (root string, paths []string) {
	root = b.TempDir()
	shared := filepath.Join(root, "job", "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 10500 {
		p := filepath.Join(shared, fmt.Sprintf("%08x-1111-2222-3333-444444444444", i))
		if err := os.WriteFile(p, make([]byte, i%7), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	for id, first := range map[int64]int{1: 0, 2: 500} {
		var handles []*metadata.StreamHandle
		for i := first; i < first+10000; i++ {
			handles = append(handles, &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + paths[i], Size: int64(i % 7)})
		}
		writeMetadataPerSubtask(b, filepath.Join(root, "job", fmt.Sprintf("chk-%d", id)), id, handles)
	}
	return root, paths
}

// writeMetadataPerSubtask puts 100 shared files into each subtask's
// incremental handle.
func writeMetadataPerSubtask(b *testing.B, dir string, id int64, handles []*metadata.StreamHandle) {
	m := &metadata.Metadata{Version: 3, CheckpointID: id, ChannelLayout: metadata.ChannelLayout112}
	op := metadata.Operator{IDLower: 1, IDUpper: 2, Parallelism: 100, MaxParallelism: 128}
	for s := 0; s*100 < len(handles); s++ {
		k := &metadata.KeyedHandle{Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: id, BackendID: "b", KeyGroupCount: 1, StateHandleID: "x"}
		for i, h := range handles[s*100 : min(len(handles), s*100+100)] {
			k.Shared = append(k.Shared, metadata.NamedHandle{LocalName: fmt.Sprintf("%06d.sst", i), Handle: h})
		}
		op.Subtasks = append(op.Subtasks, metadata.Subtask{Index: int32(s), ManagedKeyed: k})
	}
	m.Operators = []metadata.Operator{op}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, MetadataFile))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := metadata.Encode(f, m); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVerify10kFiles measures, in each iteration and under the same
// cache conditions: a bare stat of the 10,000 files chk-1 references; a
// cold verification of chk-1 (empty verdict cache); and the verification of
// chk-2 after chk-1 was verified (95% of its files shared). It reports
// cold/stat and reverify/cold. "warm" leaves the kernel's caches warm (the
// cheapest stat there is: the bound is the parse); "dropcaches" drops the
// page, dentry and inode caches before each measurement, as a replica sees
// freshly replicated files (needs root).
func BenchmarkVerify10kFiles(b *testing.B) {
	b.Run("warm", func(b *testing.B) { benchVerify(b, func() {}) })
	b.Run("dropcaches", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("dropping the kernel caches needs root")
		}
		benchVerify(b, func() {
			syscall.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func benchVerify(b *testing.B, dropCaches func()) {
	root, paths := benchTree(b)
	chk1 := filepath.Join(root, "job", "chk-1")
	chk2 := filepath.Join(root, "job", "chk-2")
	res, err := NewResolver(nil, []string{root})
	if err != nil {
		b.Fatal(err)
	}
	newV := func() *Verifier {
		v, err := NewVerifier(Config{Resolver: res, MaxAge: time.Minute, Workers: 4})
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	var stat, cold, reverify time.Duration
	for b.Loop() {
		b.StopTimer()
		dropCaches()
		b.StartTimer()
		start := time.Now()
		for _, p := range paths[:10000] {
			if _, err := os.Stat(p); err != nil {
				b.Fatal(err)
			}
		}
		stat += time.Since(start)

		b.StopTimer()
		dropCaches()
		b.StartTimer()
		v := newV()
		start = time.Now()
		if got := v.VerifyDir(context.Background(), chk1); !got.Complete {
			b.Fatal(got.Problems)
		}
		cold += time.Since(start)

		b.StopTimer()
		dropCaches()
		b.StartTimer()
		start = time.Now()
		if got := v.VerifyDir(context.Background(), chk2); !got.Complete {
			b.Fatal(got.Problems)
		}
		reverify += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(stat.Nanoseconds())/n, "stat-ns")
	b.ReportMetric(float64(cold.Nanoseconds())/n, "cold-ns")
	b.ReportMetric(float64(reverify.Nanoseconds())/n, "reverify-ns")
	b.ReportMetric(float64(cold)/float64(stat), "cold/stat")
	b.ReportMetric(float64(reverify)/float64(cold), "reverify/cold")
}
