package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// The file-system side of a RocksDB incremental checkpoint of Flink's,
// as BenchmarkCheckpointWrites replays it: replayWriters subtasks each
// upload replaySSTs new SST files to shared/ and one small private file
// to chk-N/, in replayChunk writes (Flink's upload buffer), each file
// synced and closed; then the JobManager writes _metadata as
// ._metadata.inprogress.<uuid> and renames it. A checkpoint references
// the SST files of the last replayWindow checkpoints (RocksDB's
// compactions replace older ones); replayRetained checkpoints are kept,
// and an SST file is deleted once no kept checkpoint references it.
const (
	replayWriters  = 2
	replaySSTs     = 3
	replaySSTBytes = 8 << 20 // mean; sizes vary by ±50%
	replayPrivate  = 16 << 10
	replayChunk    = 16 << 10
	replayRetained = 3
	replayWindow   = 3
	// Checkpoints of a block, the first of which is not timed (it meets
	// the previous block's deletions), and blocks per case, alternated
	// ABBA.
	replayBlock  = 6
	replayBlocks = 6
	// replayPause is the time between two checkpoints of a block: the
	// rest of a checkpoint interval, when the mount seals what it got.
	replayPause = 700 * time.Millisecond
)

// replayUpload is one file a writer uploads.
type replayUpload struct {
	rel  string
	size int
}

// replayJob writes checkpoints of one job directory: through a mount
// (dir is under the mount point) or directly (dir is on the backing file
// system). Paths in _metadata are under uriRoot, as Flink writes them.
type replayJob struct {
	dir, uriRoot string
	rng          *rand.Rand
	next         int64
	// ssts: the SST files (relative to dir) each checkpoint introduced,
	// newest last, as long as a kept checkpoint references them.
	ssts [][]string
	buf  []byte
}

func newReplayJob(dir, uriRoot string, seed uint64) *replayJob {
	j := &replayJob{dir: dir, uriRoot: uriRoot, rng: rand.New(rand.NewPCG(seed, 1)), next: 1, buf: make([]byte, replayChunk)}
	for i := range j.buf {
		j.buf[i] = byte(j.rng.Uint32())
	}
	return j
}

// writeFile writes a file as Flink's upload does: created write-only,
// written in chunks, synced, closed.
func (j *replayJob) writeFile(rel string, size int) error {
	f, err := os.OpenFile(filepath.Join(j.dir, rel), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for left := size; left > 0; left -= replayChunk {
		if _, err := f.Write(j.buf[:min(left, replayChunk)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkpoint writes the next checkpoint and returns how long Flink would
// have waited for it (the uploads and _metadata), then deletes what its
// retention subsumes (off the clock: Flink discards asynchronously).
func (j *replayJob) checkpoint(tb testing.TB) time.Duration {
	id := j.next
	j.next++
	chk := fmt.Sprintf("chk-%d", id)
	var uploads [replayWriters][]replayUpload
	var ssts []string
	for w := range replayWriters {
		for s := range replaySSTs {
			rel := fmt.Sprintf("shared/%d-%d-%d.sst", id, w, s)
			size := replaySSTBytes/2 + j.rng.IntN(replaySSTBytes)
			uploads[w] = append(uploads[w], replayUpload{rel, size})
			ssts = append(ssts, rel)
		}
		uploads[w] = append(uploads[w], replayUpload{fmt.Sprintf("%s/private-%d", chk, w), replayPrivate})
	}
	start := time.Now()
	if err := os.Mkdir(filepath.Join(j.dir, chk), 0o755); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, replayWriters)
	for w := range replayWriters {
		wg.Go(func() {
			for _, u := range uploads[w] {
				if err := j.writeFile(u.rel, u.size); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	j.ssts = append(j.ssts, ssts)
	meta := j.metadata(id, uploads)
	tmp := filepath.Join(j.dir, chk, fmt.Sprintf("._metadata.inprogress.%016x", j.rng.Uint64()))
	if err := os.WriteFile(tmp, meta, 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(j.dir, chk, "_metadata")); err != nil {
		tb.Fatal(err)
	}
	took := time.Since(start)
	if id > replayRetained {
		if err := os.RemoveAll(filepath.Join(j.dir, fmt.Sprintf("chk-%d", id-replayRetained))); err != nil {
			tb.Fatal(err)
		}
	}
	if len(j.ssts) >= replayRetained+replayWindow {
		for _, rel := range j.ssts[0] {
			if err := os.Remove(filepath.Join(j.dir, rel)); err != nil {
				tb.Fatal(err)
			}
		}
		j.ssts = j.ssts[1:]
	}
	return took
}

// metadata is chk-id's _metadata: one incremental RocksDB handle per
// writer, naming the SST files of the last replayWindow checkpoints
// (absolute URIs) and its private file (relative).
func (j *replayJob) metadata(id int64, uploads [replayWriters][]replayUpload) []byte {
	op := metadata.Operator{IDLower: 7, IDUpper: 9, Parallelism: replayWriters, MaxParallelism: 128}
	var shared []metadata.NamedHandle
	for _, ssts := range j.ssts[max(0, len(j.ssts)-replayWindow):] {
		for _, rel := range ssts {
			shared = append(shared, metadata.NamedHandle{LocalName: filepath.Base(rel), Handle: &metadata.StreamHandle{
				Tag: metadata.TagFileStream, Path: j.uriRoot + "/" + rel, Size: j.size(rel)}})
		}
	}
	for w := range replayWriters {
		priv := uploads[w][len(uploads[w])-1]
		op.Subtasks = append(op.Subtasks, metadata.Subtask{Index: int32(w), ManagedKeyed: &metadata.KeyedHandle{
			Tag: metadata.TagIncrementalKeyGroupsV2, KeyGroupStart: int32(w * 64), KeyGroupCount: 64,
			CheckpointID: id, BackendID: fmt.Sprintf("backend-%d", w), CheckpointedSize: int64(replaySSTs * replaySSTBytes),
			Meta:   &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: filepath.Base(priv.rel), Size: int64(priv.size)},
			Shared: shared, StateHandleID: fmt.Sprintf("handle-%d-%d", id, w)}})
	}
	m := &metadata.Metadata{Version: 3, CheckpointID: id, Operators: []metadata.Operator{op}, ChannelLayout: metadata.ChannelLayout112}
	var b bytes.Buffer
	if err := metadata.Encode(&b, m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func (j *replayJob) size(rel string) int64 {
	fi, err := os.Stat(filepath.Join(j.dir, rel))
	if err != nil {
		return -1
	}
	return fi.Size()
}

// BenchmarkCheckpointWrites is what a primary mount adds to the time
// Flink takes to write a checkpoint, measured on Flink's file-system
// pattern alone: the real-Flink benchmark (integration/realflink,
// BenchmarkCheckpointDuration) measures the whole checkpoint, whose
// run-to-run spread on a shared machine is wider than the ratio it
// looks for; here the same pattern is replayed by a Go writer through
// `ckptfs mount --mode primary` (the daemon as deployed: passthrough,
// the read-back of every written file, sealing, its catalog) and
// directly on the same backing file system, in alternating blocks
// (ABBA), many times. The pattern: each checkpoint uploads 6 files of
// 4–12 MiB (48 MiB in all) from two writers in 16 KiB writes, each
// synced, plus two small private files, then _metadata by rename; three
// checkpoints retained. Run with -benchtime=1x; a run takes about two
// minutes.
//
// Metrics: ratio (median checkpoint, mount/direct), ratio-p90, the
// medians in ms, and ratio-lo/ratio-hi, the 5th and 95th percentiles of
// the ratio over 2000 resamplings of the checkpoints of each case.
func BenchmarkCheckpointWrites(b *testing.B) {
	mounttest.RequireFUSE(b)
	top := b.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	for _, d := range []string{mnt, filepath.Join(backing, "m", "shared"), filepath.Join(backing, "d", "shared")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	startMount(b, "--mode", "primary", "--log-level", "info", "--map", "file:"+mnt+"="+backing, backing, mnt)
	jobs := [2]*replayJob{
		newReplayJob(filepath.Join(mnt, "m"), "file:"+mnt+"/m", 1),
		newReplayJob(filepath.Join(backing, "d"), "file:"+mnt+"/d", 2),
	}
	var times [2][]float64 // [0] mount, [1] direct
	for i := range 2 * replayBlocks {
		k := 0
		if i%4 == 1 || i%4 == 2 {
			k = 1
		}
		syscall.Sync()
		for c := range replayBlock {
			took := jobs[k].checkpoint(b)
			if c > 0 {
				times[k] = append(times[k], float64(took)/float64(time.Millisecond))
			}
			time.Sleep(replayPause)
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	p90 := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)*9/10] }
	ratio := med(times[0]) / med(times[1])
	rng := rand.New(rand.NewPCG(3, 4))
	var boot []float64
	for range 2000 {
		var r [2][]float64
		for k := range 2 {
			for range times[k] {
				r[k] = append(r[k], times[k][rng.IntN(len(times[k]))])
			}
		}
		boot = append(boot, med(r[0])/med(r[1]))
	}
	slices.Sort(boot)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(p90(times[0])/p90(times[1]), "ratio-p90")
	b.ReportMetric(boot[len(boot)/20], "ratio-lo")
	b.ReportMetric(boot[len(boot)*19/20], "ratio-hi")
	b.ReportMetric(med(times[0]), "mount-ms")
	b.ReportMetric(med(times[1]), "direct-ms")
	f := func(xs []float64) string {
		var s []string
		for _, x := range xs {
			s = append(s, fmt.Sprintf("%.0f", x))
		}
		return strings.Join(s, " ")
	}
	b.Logf("mount [%s] ms", f(times[0]))
	b.Logf("direct [%s] ms", f(times[1]))
	b.Logf("RESULT: median checkpoint mount/direct %.3f (90%% interval %.3f–%.3f), mount %.0f ms, direct %.0f ms",
		ratio, boot[len(boot)/20], boot[len(boot)*19/20], med(times[0]), med(times[1]))
}
