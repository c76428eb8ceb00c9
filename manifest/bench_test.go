package manifest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// benchTree writes a job directory with 10,500 files in shared/ and three
// checkpoints of 100 subtasks with 100 shared files each, as RocksDB
// incremental checkpoints are: chk-1 references files 0..9999; in chk-2
// each subtask keeps 95 of its files and adds 5 new ones (every subtask
// uploads the SST files it wrote since), so they share 95% of their files;
// chk-3 references the files of chk-2 in a random order.
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
	handle := func(i int) *metadata.StreamHandle {
		return &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + paths[i], Size: int64(i % 7)}
	}
	var first, next []*metadata.StreamHandle
	for s := range 100 {
		for i := range 100 {
			first = append(first, handle(s*100+i))
		}
		for i := 5; i < 100; i++ {
			next = append(next, handle(s*100+i))
		}
		for i := range 5 {
			next = append(next, handle(10000+s*5+i))
		}
	}
	shuffled := slices.Clone(next)
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for id, handles := range map[int64][]*metadata.StreamHandle{1: first, 2: next, 3: shuffled} {
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
// conditions: a bare stat of the 10,000 files chk-1 references (os.Stat,
// one after another); a cold verification of chk-1 (a new Verifier, so
// nothing cached); and, with the same Verifier, the verification of a new
// checkpoint that shares 95% of its files with chk-1: its _metadata is new
// and parsed completely, the shared files were found complete within
// MaxAge, and its 500 new files are stat'ed. It reports cold/stat and
// reverify/cold, and the bytes each verification allocates.
//
// Verifications run as a mount runs them: Workers (4) goroutines stat the
// files on GOMAXPROCS cores, new files while the parse goes on. Each phase starts from a collected heap, so the collector's
// work for one phase's garbage is not timed in the next (a mount is idle
// between verifications); what a phase allocates is reported instead.
// Ratios are given of the means and of the best runs: on a shared machine
// the fastest run of a phase is the least disturbed one.
//
// "warm" leaves the kernel's caches warm: the cheapest stat there is, so
// the bound is the parse. "warm-shuffled" re-verifies chk-3, chk-2's files
// in a random order: a new checkpoint whose shared files do not come in
// the order of the previous one. "dropcaches" drops the page, dentry and
// inode caches before each phase, as a replica sees freshly replicated
// files (needs root). The re-verification runs under the pprof label
// phase=reverify.
func BenchmarkVerify10kFiles(b *testing.B) {
	b.Run("warm", func(b *testing.B) { benchVerify(b, func() {}, "chk-2") })
	b.Run("warm-shuffled", func(b *testing.B) { benchVerify(b, func() {}, "chk-3") })
	b.Run("dropcaches", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("dropping the kernel caches needs root")
		}
		benchVerify(b, func() {
			syscall.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
				b.Fatal(err)
			}
		}, "chk-2")
	})
}

// benchVerify verifies chk-1 cold, then next.
func benchVerify(b *testing.B, dropCaches func(), next string) {
	root, paths := benchTree(b)
	res, err := NewResolver(nil, []string{root})
	if err != nil {
		b.Fatal(err)
	}
	benchVerifyDirs(b, dropCaches, res, filepath.Join(root, "job", "chk-1"), filepath.Join(root, "job", next), paths[:10000])
}

// benchVerifyDirs measures a bare stat of paths (the files chk1
// references), a cold verification of chk1 and the re-verification of
// chk2 with the same Verifier, as BenchmarkVerify10kFiles describes.
func benchVerifyDirs(b *testing.B, dropCaches func(), res *Resolver, chk1, chk2 string, paths []string) {
	newV := func() *Verifier {
		v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: time.Minute, Workers: 4})
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	var ms runtime.MemStats
	allocated := func() uint64 {
		runtime.ReadMemStats(&ms)
		return ms.TotalAlloc
	}
	// settle starts a phase from a collected heap and the caches dropped
	// or not, and returns the bytes allocated so far.
	settle := func() uint64 {
		b.StopTimer()
		runtime.GC()
		dropCaches()
		a := allocated()
		b.StartTimer()
		return a
	}
	var stat, cold, reverify time.Duration
	bestStat, bestCold, bestReverify := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	var coldBytes, reverifyBytes uint64
	var coldFiles, reverifyFiles int
	for b.Loop() {
		settle()
		start := time.Now()
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		stat += d
		bestStat = min(bestStat, d)

		a := settle()
		v := newV()
		start = time.Now()
		if got := v.VerifyDir(context.Background(), chk1); !got.Complete {
			b.Fatal(got.Problems)
		} else {
			coldFiles = got.Files
		}
		d = time.Since(start)
		cold += d
		bestCold = min(bestCold, d)

		a2 := settle()
		coldBytes += a2 - a
		start = time.Now()
		pprof.Do(context.Background(), pprof.Labels("phase", "reverify"), func(ctx context.Context) {
			if got := v.VerifyDir(ctx, chk2); !got.Complete {
				b.Fatal(got.Problems)
			} else {
				reverifyFiles = got.Files
			}
		})
		d = time.Since(start)
		reverify += d
		bestReverify = min(bestReverify, d)
		b.StopTimer()
		reverifyBytes += allocated() - a2
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(stat.Nanoseconds())/n, "stat-ns")
	b.ReportMetric(float64(cold.Nanoseconds())/n, "cold-ns")
	b.ReportMetric(float64(reverify.Nanoseconds())/n, "reverify-ns")
	b.ReportMetric(float64(coldBytes)/n, "cold-B")
	b.ReportMetric(float64(reverifyBytes)/n, "reverify-B")
	b.ReportMetric(float64(cold)/float64(stat), "cold/stat")
	b.ReportMetric(float64(reverify)/float64(cold), "reverify/cold")
	b.ReportMetric(float64(bestCold)/float64(bestStat), "best-cold/stat")
	b.ReportMetric(float64(bestReverify)/float64(bestCold), "best-reverify/cold")
	b.ReportMetric(float64(coldFiles)*n/cold.Seconds(), "cold-files/s")
	b.ReportMetric(float64(reverifyFiles)*n/reverify.Seconds(), "reverify-files/s")
}
