//go:build linux

package realflink

// Benchmarks with real Flink: what ckptfs costs Flink, measured as ratios
// against the same scenario without ckptfs, within one run.
//
// Each benchmark runs its whole real-Flink scenario ONCE per invocation,
// whatever b.N is (a scenario takes minutes; b.N says nothing about it),
// and reports what it measured with b.ReportMetric; ns/op is suppressed.
// Run them with -benchtime=1x (any other count only runs the scenario
// again), as make bench-flink does:
//
//	CKPTFS_REQUIRE_ZK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_FLINK=1 \
//	  go test -v -run '^$' -bench 'Checkpoint|Restore|Recovery' -benchtime=1x -timeout 120m ./integration/realflink/
//
// The machine they run on is shared and noisy, so every benchmark
// alternates its two cases (mount, plain, plain, mount, ...: an ABBA order
// cancels a linear drift) and reports medians, the best runs, and the raw
// medians behind every ratio.
//
// Settings:
//
//	CKPTFS_BENCH_FLINK=<version>  the release (one marked test in flink/versions.tsv;
//	                              default: the newest 1.20.x)
//	CKPTFS_BENCH_RUNS=<n>         runs per case (default 2)
//	CKPTFS_BENCH_KEEP=<dir>       keep every run's logs (ckptfs, Flink) in dir
//
// They need root, FUSE, ZooKeeper, a JDK and the distribution, and skip
// loudly without them (fail with CKPTFS_REQUIRE_*=1), and do not run in
// -short mode.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

const (
	benchFlinkEnv = "CKPTFS_BENCH_FLINK"
	benchRunsEnv  = "CKPTFS_BENCH_RUNS"
	benchKeepEnv  = "CKPTFS_BENCH_KEEP"

	// The job's state: benchKeys keys of benchPayload random bytes each
	// (RocksDB cannot compress them), about 200 MB, and benchRate
	// updates/s, each rewriting one key's whole value (and consecutive
	// records update distinct keys): about 50 MB of changed state per
	// benchInterval, plus what RocksDB's compactions rewrote. At 400/s
	// the checkpoints of this 2-core machine, shared with other tests,
	// often took longer than the interval, which makes the next one
	// larger and slower still: what was measured was then that regime,
	// not ckptfs.
	benchKeys        = 2000
	benchPayload     = 100_000
	benchRate        = 200
	benchParallelism = 2
	benchInterval    = 2500 * time.Millisecond
	benchRetained    = 3

	// benchIncrementals incremental checkpoints are measured per run,
	// after benchWarmup more once every key has its state; then benchFulls
	// full checkpoints are triggered through the REST API.
	benchIncrementals = 8
	benchWarmup       = 1
	benchFulls        = 3

	// What the checkpoints must write for the benchmark to measure what
	// it claims to (MB = 10^6 bytes).
	benchMB      = 1e6
	benchMinFull = 200 * benchMB
	benchMinIncr = 20 * benchMB

	benchPathRoot = "/flink"
	benchSession  = 4 * time.Second
	benchStep     = 5 * time.Minute
	benchAddr     = "127.0.0.1"
)

// benchDist picks the release, or skips loudly when what real Flink needs
// here is missing.
func benchDist(b *testing.B) Dist {
	b.Helper()
	if testing.Short() {
		b.Skip("realflink: the real-Flink benchmarks do not run in -short mode")
	}
	rs := TestReleases(b)
	want := os.Getenv(benchFlinkEnv)
	var (
		pick  Release
		found bool
	)
	patch := func(r Release) int {
		p := strings.SplitN(r.Version, ".", 3)
		n, _ := strconv.Atoi(p[len(p)-1])
		return n
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Version)
		if want != "" {
			if r.Version == want {
				pick, found = r, true
			}
			continue
		}
		if ma, mi := r.Minor(); ma == 1 && mi == 20 && (!found || patch(r) > patch(pick)) {
			pick, found = r, true
		}
	}
	if !found {
		b.Fatalf("%s=%q: no such release marked test in flink/versions.tsv (have %v)", benchFlinkEnv, want, names)
	}
	d := FindDist(b, pick)
	RequireRoot(b)
	mounttest.RequireFUSE(b)
	return d
}

// benchLoud makes a skipped benchmark say so on stderr too (go test does
// not always show a benchmark's skip reason).
func benchLoud(b *testing.B) {
	if b.Skipped() {
		fmt.Fprintf(os.Stderr, "WARNING: %s SKIPPED, nothing measured: it does not run with -short, and needs root, FUSE, ZooKeeper, a JDK and Flink (CKPTFS_REQUIRE_FLINK=1 CKPTFS_REQUIRE_FUSE=1 CKPTFS_REQUIRE_ZK=1 make a missing one fatal)\n", b.Name())
	}
}

func benchRuns(b *testing.B) int {
	b.Helper()
	s := os.Getenv(benchRunsEnv)
	if s == "" {
		return 2
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number of runs per case", benchRunsEnv, s)
	}
	return n
}

// benchOrder is the order of 2*runs runs of two cases, ABBA ABBA ...:
// true for case A.
func benchOrder(runs int) []bool {
	out := make([]bool, 2*runs)
	for i := range out {
		out[i] = i%4 == 0 || i%4 == 3
	}
	return out
}

// benchScope is one run's share of a benchmark: its own directory and
// cleanups, done when the run ends rather than when the benchmark does,
// so that sites, mounts, Flink processes and gigabytes of checkpoints do
// not pile up across runs.
type benchScope struct {
	testing.TB
	dir string

	mu       sync.Mutex
	cleanups []func() // GUARDED_BY(mu)
}

func newBenchScope(b *testing.B, name string) *benchScope {
	b.Helper()
	dir, err := os.MkdirTemp(b.TempDir(), name+"-")
	if err != nil {
		b.Fatal(err)
	}
	return &benchScope{TB: b, dir: dir}
}

func (s *benchScope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *benchScope) TempDir() string {
	d, err := os.MkdirTemp(s.dir, "tmp-")
	if err != nil {
		s.Fatal(err)
	}
	return d
}

// close runs the cleanups, newest first, and removes the directory.
func (s *benchScope) close() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	if keep := os.Getenv(benchKeepEnv); keep != "" {
		logs, _ := filepath.Glob(filepath.Join(s.dir, "*", "log"))
		for _, l := range logs {
			dst := filepath.Join(keep, filepath.Base(s.dir), filepath.Base(filepath.Dir(l)))
			if err := os.MkdirAll(dst, 0o755); err != nil {
				s.Logf("keeping logs: %v", err)
				continue
			}
			if out, err := exec.Command("cp", "-a", l+"/.", dst).CombinedOutput(); err != nil {
				s.Logf("keeping logs: %v: %s", err, out)
			}
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.Logf("removing %s: %v", s.dir, err)
	}
}

// benchConfig is a site's Flink for the benchmarks: the harness's
// configuration, with a longer checkpoint history in the REST API.
func benchConfig(tb testing.TB, d Dist, root, site, zkConnect, clusterID, flink string) ClusterConfig {
	tb.Helper()
	ports := freePorts(tb, benchAddr, 2)
	return ClusterConfig{
		Dist: d, Dir: filepath.Join(root, site), Addr: benchAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: zkConnect, PathRoot: benchPathRoot, ClusterID: clusterID, SessionTimeout: benchSession,
		CheckpointsDir: filepath.Join(flink, "checkpoints"), HADir: filepath.Join(flink, "ha"),
		Interval: benchInterval, Retained: benchRetained,
		Extra: map[string]string{"web.checkpoints.history": "100"},
	}
}

func benchJobArgs(report string) []string {
	return []string{"--report", report, "--rate", strconv.Itoa(benchRate), "--keys", strconv.Itoa(benchKeys),
		"--payload", strconv.Itoa(benchPayload), "--parallelism", strconv.Itoa(benchParallelism), "--name", "ckptfs-bench"}
}

func benchJobStatus(ctx context.Context, r *REST, job string) string {
	jobs, err := r.Jobs(ctx)
	if err != nil {
		return ""
	}
	for _, j := range jobs {
		if j.ID == job {
			return j.Status
		}
	}
	return ""
}

// benchReportKeys is how many keys the job's report says have state.
func benchReportKeys(path string) int {
	rep, err := ReadReport(path)
	if err != nil {
		return 0
	}
	seen := map[int64]bool{}
	for _, k := range rep.Keys {
		seen[k.Key] = true
	}
	return len(seen)
}

// benchTriggerFull triggers a full checkpoint (Flink 1.19+: POST
// /jobs/<id>/checkpoints) and returns its id once it completed.
func benchTriggerFull(ctx context.Context, tb testing.TB, r *REST, job string, procs ...*Process) int64 {
	tb.Helper()
	var trig struct {
		RequestID string `json:"request-id"`
	}
	if err := r.do(ctx, http.MethodPost, "/jobs/"+job+"/checkpoints", strings.NewReader(`{"checkpointType":"FULL"}`), "application/json", &trig); err != nil {
		tb.Fatalf("trigger a full checkpoint: %v", err)
	}
	var id int64
	waitUntil(tb, benchStep, "the full checkpoint "+trig.RequestID, func() bool {
		var st struct {
			Status struct {
				ID string `json:"id"`
			} `json:"status"`
			Operation *struct {
				CheckpointID int64           `json:"checkpointId"`
				Failure      json.RawMessage `json:"failureCause"`
			} `json:"operation"`
		}
		if err := r.Get(ctx, "/jobs/"+job+"/checkpoints/"+trig.RequestID, &st); err != nil || st.Status.ID != "COMPLETED" || st.Operation == nil {
			return false
		}
		if f := st.Operation.Failure; len(f) > 0 && string(f) != "null" {
			tb.Fatalf("the full checkpoint failed: %.500s", f)
		}
		id = st.Operation.CheckpointID
		return true
	}, procs...)
	return id
}

// benchHistory returns the completed checkpoints in the REST history.
func benchHistory(ctx context.Context, r *REST, job string) map[int64]CompletedCheckpoint {
	out := map[int64]CompletedCheckpoint{}
	cp, err := r.Checkpoints(ctx, job)
	if err != nil {
		return out
	}
	for _, h := range cp.History {
		if h.Status == "COMPLETED" {
			out[h.ID] = h
		}
	}
	return out
}

// benchLogFailed logs the checkpoints of the job that failed, and why.
func benchLogFailed(ctx context.Context, tb testing.TB, r *REST, job, what string) {
	tb.Helper()
	type failed struct {
		ID      int64  `json:"id"`
		Status  string `json:"status"`
		Trigger int64  `json:"trigger_timestamp"`
		Failure string `json:"failure_message"`
	}
	var cp struct {
		Counts struct {
			Failed int `json:"failed"`
		} `json:"counts"`
		Latest struct {
			Failed *failed `json:"failed"`
		} `json:"latest"`
		History []struct {
			ID      int64  `json:"id"`
			Status  string `json:"status"`
			Trigger int64  `json:"trigger_timestamp"`
			Failure string `json:"failure_message"`
		} `json:"history"`
	}
	if err := r.Get(ctx, "/jobs/"+job+"/checkpoints", &cp); err != nil || cp.Counts.Failed == 0 {
		return
	}
	var why []string
	for _, h := range cp.History {
		if h.Status == "FAILED" {
			why = append(why, fmt.Sprintf("%d (triggered %s): %s", h.ID, time.UnixMilli(h.Trigger).Format("15:04:05.000"), firstLine(h.Failure)))
		}
	}
	if f := cp.Latest.Failed; f != nil && len(why) == 0 {
		why = append(why, fmt.Sprintf("the latest, %d (triggered %s): %s", f.ID, time.UnixMilli(f.Trigger).Format("15:04:05.000"), firstLine(f.Failure)))
	}
	tb.Logf("%s: %d checkpoints failed: %s", what, cp.Counts.Failed, strings.Join(why, "; "))
}

// benchCPU is the CPU time a process used (user+system), from
// /proc/<pid>/stat.
func benchCPU(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return "?"
	}
	// Fields 14 and 15 of stat(5): utime and stime, in clock ticks
	// (USER_HZ, 100 on Linux).
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return fmt.Sprintf("%.1fs", (u+st)/100)
}

// benchMountStats summarizes a mount's /metrics: opens by data path, what
// it read to take checksums, and the time the daemon spent answering FUSE
// requests, by operation.
func benchMountStats(url string) string {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	type op struct{ sum, count float64 }
	ops := map[string]*op{}
	var opens, sums []string
	for _, l := range strings.Split(string(data), "\n") {
		name, val, ok := strings.Cut(l, " ")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		label := func() string {
			_, rest, _ := strings.Cut(name, `"`)
			lv, _, _ := strings.Cut(rest, `"`)
			return lv
		}
		switch {
		case strings.HasPrefix(name, "ckptfs_fuse_opens_total{"):
			opens = append(opens, fmt.Sprintf("%s %.0f", label(), v))
		case strings.HasPrefix(name, "ckptfs_checksummed_bytes_total{"):
			sums = append(sums, fmt.Sprintf("%s %.1f MB", label(), v/benchMB))
		case strings.HasPrefix(name, "ckptfs_fuse_request_duration_seconds_sum{"):
			if ops[label()] == nil {
				ops[label()] = &op{}
			}
			ops[label()].sum = v
		case strings.HasPrefix(name, "ckptfs_fuse_request_duration_seconds_count{"):
			if ops[label()] == nil {
				ops[label()] = &op{}
			}
			ops[label()].count = v
		}
	}
	var names []string
	for n := range ops {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(ops[b].sum, ops[a].sum) })
	var parts []string
	for _, n := range names[:min(len(names), 8)] {
		parts = append(parts, fmt.Sprintf("%s %.0f in %.3fs", n, ops[n].count, ops[n].sum))
	}
	return fmt.Sprintf("opens: %s; checksummed: %s; FUSE requests (daemon time): %s", strings.Join(opens, ", "), strings.Join(sums, ", "), strings.Join(parts, ", "))
}

// ----- statistics

func benchMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func benchMin(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

func benchRatio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func benchFmt(xs []float64, unit string) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.FormatFloat(x, 'f', 0, 64))
	}
	return "[" + strings.Join(parts, " ") + "] " + unit
}

// ===== 1. Checkpoint duration

// ckptRun is what one run of the checkpoint benchmark measured.
type ckptRun struct {
	mount bool
	// incr and full are Flink's end-to-end durations (ms) of the measured
	// incremental and full checkpoints, sizes their checkpointed sizes.
	incr, full         []float64
	incrSize, fullSize []float64
}

// BenchmarkCheckpointDuration is the job checkpointing through a site's
// primary ckptfs mount (which seals every checkpoint) against the same
// job writing the backing directory directly (bind-mounted at the same
// path): Flink's own end-to-end checkpoint durations, from its REST API.
// State is about 200 MB of incompressible bytes; incremental checkpoints
// (RocksDB) each write at least 20 MB, full ones (triggered through the
// REST API once the state is complete) at least 200 MB, or the benchmark
// fails. Run with -benchtime=1x.
//
// Metrics: full-ratio (median full checkpoint, mount/direct),
// incr-ratio-position (the incremental checkpoints compared position by
// position in the run, which is position in RocksDB's compaction cycle:
// the median of the per-position ratios of medians, mount/direct; the
// headline for incremental checkpoints), incr-total-ratio (median total
// incremental time per run, mount/direct), incr-ratio-median (median of
// all incremental checkpoints pooled, mount/direct),
// incr-ratio-best (fastest incremental run of each, mount/direct),
// incr-ms-per-MB-ratio and full-ms-per-MB-ratio (median duration per MB
// written, mount/direct), incr-small-ratio and incr-large-ratio (the
// medians of the ordinary incremental checkpoints and of those a RocksDB
// compaction made at least twice the median size, mount/direct: the
// median over both mixes the two), and the raw medians in ms and sizes
// in MB.
func BenchmarkCheckpointDuration(b *testing.B) {
	defer benchLoud(b)
	d := benchDist(b)
	runs := benchRuns(b)
	c := zktest.StartCluster(b, 1, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	jar := JobJar(b, d)
	b.Logf("Flink %s; %d runs per case; %d keys x %d bytes at %d updates/s, checkpoint interval %v",
		d.Version, runs, benchKeys, benchPayload, benchRate, benchInterval)

	// The first run of a series is slower whatever its case (the JVMs'
	// class data, the distribution and the RocksDB library not yet in the
	// page cache): twice as slow in some series, so it is run once
	// before them and not counted.
	if _, why := benchCheckpointRun(b, c, d, jar, false, -1); why != "" {
		b.Logf("the warm-up run was disturbed: %s", why)
	}
	var results []ckptRun
	for i, mount := range benchOrder(runs) {
		var r ckptRun
		for attempt := 1; ; attempt++ {
			var why string
			if r, why = benchCheckpointRun(b, c, d, jar, mount, i); why == "" {
				break
			}
			if attempt == benchAttempts {
				b.Fatalf("run %d (%s) was disturbed %d times, the last: %s", i, benchCase(mount, "mount", "direct"), attempt, why)
			}
			b.Logf("run %d (%s) DISTURBED, not counted, running it again: %s", i, benchCase(mount, "mount", "direct"), why)
		}
		b.Logf("run %d (%s): incremental %s, sizes %s; full %s, sizes %s", i, benchCase(mount, "mount", "direct"),
			benchFmt(r.incr, "ms"), benchFmt(benchScale(r.incrSize, 1/benchMB), "MB"), benchFmt(r.full, "ms"), benchFmt(benchScale(r.fullSize, 1/benchMB), "MB"))
		results = append(results, r)
	}

	var incr, full, incrSize, fullSize [2][]float64 // [0] mount, [1] direct
	var bestIncr [2][]float64                       // per-run medians
	var perMB, fullPerMB [2][]float64               // ms per MB written
	for _, r := range results {
		k := 1
		if r.mount {
			k = 0
		}
		incr[k] = append(incr[k], r.incr...)
		full[k] = append(full[k], r.full...)
		incrSize[k] = append(incrSize[k], r.incrSize...)
		fullSize[k] = append(fullSize[k], r.fullSize...)
		bestIncr[k] = append(bestIncr[k], benchMedian(r.incr))
		for i, ms := range r.incr {
			perMB[k] = append(perMB[k], ms/(r.incrSize[i]/benchMB))
		}
		for i, ms := range r.full {
			fullPerMB[k] = append(fullPerMB[k], ms/(r.fullSize[i]/benchMB))
		}
	}
	m := func(x [2][]float64, k int) float64 { return benchMedian(x[k]) }
	// RocksDB's compactions make every few incremental checkpoints much
	// larger than the others (here 50 MB, and 250 MB every fourth): a
	// median over both mixes them, so the two classes are compared on
	// their own too. Large is at least twice the median size.
	var all []float64
	for k := range 2 {
		all = append(all, incrSize[k]...)
	}
	large := 2 * benchMedian(all)
	var small, big [2][]float64
	for k := range 2 {
		for i, ms := range incr[k] {
			if incrSize[k][i] >= large {
				big[k] = append(big[k], ms)
			} else {
				small[k] = append(small[k], ms)
			}
		}
	}
	// RocksDB's compactions follow the checkpoint count, and every run
	// measures the same checkpoints after the state is complete: the p-th
	// measured checkpoint of every run is at the same point of the cycle.
	// So like is compared with like position by position (the median of
	// each position's mount/direct ratio of medians), and by the total
	// time per run; the pooled median above can fall on either side of
	// the bimodal sizes and swing with it.
	var posRatios []float64
	for p := range benchIncrementals {
		var at [2][]float64
		for _, r := range results {
			if p < len(r.incr) {
				at[benchCaseIndex(r.mount)] = append(at[benchCaseIndex(r.mount)], r.incr[p])
			}
		}
		posRatios = append(posRatios, benchRatio(benchMedian(at[0]), benchMedian(at[1])))
	}
	posRatio := benchMedian(posRatios)
	var total [2][]float64
	for _, r := range results {
		var sum float64
		for _, ms := range r.incr {
			sum += ms
		}
		total[benchCaseIndex(r.mount)] = append(total[benchCaseIndex(r.mount)], sum)
	}
	totalRatio := benchRatio(m(total, 0), m(total, 1))
	incrRatio := benchRatio(m(incr, 0), m(incr, 1))
	fullRatio := benchRatio(m(full, 0), m(full, 1))
	bestRatio := benchRatio(benchMin(bestIncr[0]), benchMin(bestIncr[1]))
	bestFull := benchRatio(benchMin(full[0]), benchMin(full[1]))

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(fullRatio, "full-ratio")
	b.ReportMetric(bestFull, "full-ratio-best")
	b.ReportMetric(posRatio, "incr-ratio-position")
	b.ReportMetric(totalRatio, "incr-total-ratio")
	b.ReportMetric(incrRatio, "incr-ratio-median")
	b.ReportMetric(bestRatio, "incr-ratio-best")
	b.ReportMetric(benchRatio(m(perMB, 0), m(perMB, 1)), "incr-ms-per-MB-ratio")
	b.ReportMetric(benchRatio(m(small, 0), m(small, 1)), "incr-small-ratio")
	b.ReportMetric(benchRatio(m(big, 0), m(big, 1)), "incr-large-ratio")
	b.ReportMetric(benchRatio(m(fullPerMB, 0), m(fullPerMB, 1)), "full-ms-per-MB-ratio")
	b.ReportMetric(m(full, 0), "full-mount-ms")
	b.ReportMetric(m(full, 1), "full-direct-ms")
	b.ReportMetric(m(incr, 0), "incr-mount-ms")
	b.ReportMetric(m(incr, 1), "incr-direct-ms")
	b.ReportMetric(m(fullSize, 0)/benchMB, "full-mount-MB")
	b.ReportMetric(m(fullSize, 1)/benchMB, "full-direct-MB")
	b.ReportMetric(m(incrSize, 0)/benchMB, "incr-mount-MB")
	b.ReportMetric(m(incrSize, 1)/benchMB, "incr-direct-MB")
	b.Logf("incremental: mount %s, direct %s", benchFmt(incr[0], "ms"), benchFmt(incr[1], "ms"))
	b.Logf("incremental below %.0f MB: mount median %.0f ms of %d, direct %.0f ms of %d; larger: mount %.0f ms of %d, direct %.0f ms of %d",
		large/benchMB, m(small, 0), len(small[0]), m(small, 1), len(small[1]), m(big, 0), len(big[0]), m(big, 1), len(big[1]))
	b.Logf("full:        mount %s, direct %s", benchFmt(full[0], "ms"), benchFmt(full[1], "ms"))
	b.Logf("incremental by position, mount/direct: %.3f", posRatios)
	b.Logf("RESULT: incr-ratio-position %.3f, incr-total-ratio %.3f (pooled median %.3f: mount %.0f ms / direct %.0f ms), full-ratio %.3f (mount %.0f ms / direct %.0f ms); target <= 1.05",
		posRatio, totalRatio, incrRatio, m(incr, 0), m(incr, 1), fullRatio, m(full, 0), m(full, 1))
	if b.N > 1 {
		b.Logf("b.N = %d: the scenario ran once; run with -benchtime=1x", b.N)
	}
}

func benchScale(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// benchCaseIndex is where a case's figures go: [0] mount, [1] direct.
func benchCaseIndex(mount bool) int {
	if mount {
		return 0
	}
	return 1
}

func benchCase(a bool, ifA, ifB string) string {
	if a {
		return ifA
	}
	return ifB
}

// benchCheckpointRun runs the job on one site until it has measured its
// checkpoints, and stops everything it started.
func benchCheckpointRun(b *testing.B, c *zktest.Cluster, d Dist, jar string, mount bool, n int) (ckptRun, string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*benchStep)
	defer cancel()
	// Start with nothing of the previous run still to write back.
	syscall.Sync()
	sc := newBenchScope(b, fmt.Sprintf("ckpt-%d-%s", n, benchCase(mount, "mount", "direct")))
	defer sc.close()
	root := sc.dir
	flink := filepath.Join(root, "flink")
	backing := filepath.Join(root, "dc1", "nas")
	if err := os.MkdirAll(backing, 0o755); err != nil {
		b.Fatal(err)
	}
	clusterID := fmt.Sprintf("/bench-ckpt-%d-%d", os.Getpid(), n)
	site := NewSite(sc, "dc1", filepath.Join(root, "dc1", "log"))
	var procs []*Process
	metricsAddr := fmt.Sprintf("%s:%d", benchAddr, freePorts(sc, benchAddr, 1)[0])
	if mount {
		// The primary mount as deployed: with ZooKeeper (markers), info
		// logging (the harness's default is debug).
		p, err := site.StartMount("ckptfs", binary, "primary", backing, flink,
			"--zk", c.ConnectString(), "--cluster-id", clusterID, "--path-root", benchPathRoot,
			"--map", "file:"+flink+"="+backing, "--log-level", "info", "--metrics-addr", metricsAddr)
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	} else if err := site.Bind(backing, flink); err != nil {
		b.Fatal(err)
	}
	fl, jm, tm := startCluster(b, site, benchConfig(sc, d, root, "dc1", c.ConnectString(), clusterID, flink))
	procs = append(procs, jm, tm)
	waitUntil(sc, benchStep, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1
	}, procs...)
	report := filepath.Join(root, "report.txt")
	job, err := fl.REST.Submit(ctx, jar, benchJobArgs(report))
	if err != nil {
		b.Fatalf("submit: %v", err)
	}
	waitUntil(sc, benchStep, "the job to run", func() bool { return benchJobStatus(ctx, fl.REST, job) == "RUNNING" }, procs...)
	waitUntil(sc, benchStep, "every key to have its state", func() bool { return benchReportKeys(report) >= benchKeys }, procs...)
	filled := time.Now().UnixMilli()

	// The incremental checkpoints triggered once every key had its state,
	// but the first benchWarmup.
	seen := map[int64]CompletedCheckpoint{}
	waitUntil(sc, benchStep, fmt.Sprintf("%d incremental checkpoints", benchWarmup+benchIncrementals), func() bool {
		for id, h := range benchHistory(ctx, fl.REST, job) {
			if h.TriggerMillis > filled {
				seen[id] = h
			}
		}
		return len(seen) >= benchWarmup+benchIncrementals
	}, procs...)
	ids := slices.Sorted(maps.Keys(seen))
	out := ckptRun{mount: mount}
	for _, id := range ids[benchWarmup : benchWarmup+benchIncrementals] {
		h := seen[id]
		out.incr = append(out.incr, float64(h.EndToEnd))
		out.incrSize = append(out.incrSize, float64(h.CheckpointedSize))
		if float64(h.CheckpointedSize) < benchMinIncr {
			b.Errorf("%s: incremental checkpoint %d wrote %.1f MB, want at least %.0f MB: the benchmark would not measure writing checkpoints",
				benchCase(mount, "mount", "direct"), id, float64(h.CheckpointedSize)/benchMB, benchMinIncr/benchMB)
		}
	}
	for range benchFulls {
		// Triggered in a quiet moment, as a periodic checkpoint would be:
		// half a second after the last one completed.
		waitUntil(sc, benchStep, "a quiet moment", func() bool {
			cp, err := fl.REST.Checkpoints(ctx, job)
			if err != nil || cp.Latest.Completed == nil {
				return false
			}
			var counts struct {
				Counts struct {
					InProgress int `json:"in_progress"`
				} `json:"counts"`
			}
			if fl.REST.Get(ctx, "/jobs/"+job+"/checkpoints", &counts) != nil || counts.Counts.InProgress > 0 {
				return false
			}
			done := cp.Latest.Completed.TriggerMillis + cp.Latest.Completed.EndToEnd
			return time.Now().UnixMilli() >= done+500
		}, procs...)
		id := benchTriggerFull(ctx, sc, fl.REST, job, procs...)
		var h CompletedCheckpoint
		waitUntil(sc, benchStep, fmt.Sprintf("full checkpoint %d in the history", id), func() bool {
			var ok bool
			h, ok = benchHistory(ctx, fl.REST, job)[id]
			return ok
		}, procs...)
		out.full = append(out.full, float64(h.EndToEnd))
		out.fullSize = append(out.fullSize, float64(h.CheckpointedSize))
		if float64(h.CheckpointedSize) < benchMinFull {
			b.Errorf("%s: full checkpoint %d wrote %.1f MB, want at least %.0f MB", benchCase(mount, "mount", "direct"), id, float64(h.CheckpointedSize)/benchMB, benchMinFull/benchMB)
		}
	}
	benchLogFailed(ctx, b, fl.REST, job, benchCase(mount, "mount", "direct"))
	if mount {
		if n := procs[0].Count(`"level":"ERROR"`); n > 0 {
			b.Logf("the mount logged %d errors:\n%s", n, procs[0].Tail(10))
		}
		b.Logf("the mount's daemon: CPU %s; %s", benchCPU(procs[0].PID()), benchMountStats("http://"+metricsAddr+"/metrics"))
	}
	b.Logf("%s: the TaskManager used %s of CPU, the JobManager %s", benchCase(mount, "mount", "direct"), benchCPU(tm.PID()), benchCPU(jm.PID()))
	return out, benchDisturbed(ctx, fl.REST, job, jm, tm)
}

// ===== 2. and 3. Restore duration and the recovery's breakdown

// benchLost is DC1 after its loss: its NAS, frozen (nothing writes it any
// more), and ZooKeeper's state at that point, saved so that every DC2 run
// starts from exactly the same place and restores the same checkpoint.
type benchLost struct {
	root      string // the DC1 run's directory
	flink     string // Flink's storage path in both sites
	clusterID string
	job       string
	nas       string // DC1's NAS
	report    string // DC1's job report (host path)
	newest    int64  // ZooKeeper's newest pointer
	pointers  []int64
	stateSize int64 // of checkpoint sizeOf: the newest, or the one before if DC1's statistics lag
	sizeOf    int64
	// sessionWait: from DC1's loss until the ephemeral nodes of DC1's
	// JobManager were gone.
	sessionWait time.Duration
	zk          *zk.Conn // to the survivors
	saved       map[string][]benchZKNode
}

func (l *benchLost) uri() string { return "file:" + l.flink }

// ckptfsRoot is ckptfs's ZooKeeper tree for the cluster.
func (l *benchLost) ckptfsRoot() string { return "/ckptfs/" + strings.Trim(l.clusterID, "/") }

func (l *benchLost) flinkRoot() string { return benchPathRoot + l.clusterID }

// restoreRun is what one failover to DC2 measured.
type restoreRun struct {
	mount      bool
	checkpoint int64
	stateSize  int64
	// sessionWait: DC1's (see benchLost); takeover: `ckptfs takeover`'s
	// run (mount only), waited: what it said it waited.
	sessionWait, takeover, waited time.Duration
	// From the JobManager's start on DC2: start, to the first keyed
	// subtask INITIALIZING; restore, the longest INITIALIZING of a keyed
	// subtask; toRunning, to every subtask RUNNING.
	start, restore, toRunning time.Duration
	// download: the longest copy of a keyed subtask's state files from
	// the checkpoint to its local RocksDB directory (the part of the
	// restore that reads through the mount), from the TaskManager's log;
	// 0 if it does not say.
	download time.Duration
}

// BenchmarkRestoreDuration is a job's restore on DC2 through the replica
// mount, after `ckptfs takeover`, against the plain replica directory
// (no ckptfs on DC2). DC1 runs the job through its primary mount until a
// checkpoint of at least 200 MB of state completes; then DC1 is lost: its
// JobManager, TaskManager, ckptfs daemon and 2 of the 5 ZooKeeper servers
// are killed. ZooKeeper's state after the loss is saved. Every DC2 run
// (mount, plain, plain, mount, ...) puts that state back, copies DC1's
// NAS to a fresh DC2 NAS, drops the page cache, and starts a TaskManager
// and then a JobManager on DC2, which recover the job by themselves. So
// every run restores the same checkpoint from the disk. Flink's own
// timestamps (REST subtasktimes) give the restore proper: how long the
// keyed subtasks were INITIALIZING. Run with -benchtime=1x.
//
// Metrics: restore-ratio (median INITIALIZING time, mount/plain),
// download-ratio (the part of it that copies the state files from the
// checkpoint, from the TaskManager's log), start-to-running-ratio (median JobManager start to every subtask
// RUNNING, mount/plain), their best-run ratios, the raw medians in ms,
// and the mount runs' recovery breakdown (see BenchmarkRecoveryBreakdown).
func BenchmarkRestoreDuration(b *testing.B) {
	defer benchLoud(b)
	d := benchDist(b)
	runs := benchRuns(b)
	c := zktest.StartCluster(b, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	jar := JobJar(b, d)
	b.Logf("Flink %s; %d runs per case; state %d keys x %d bytes", d.Version, runs, benchKeys, benchPayload)
	sc := newBenchScope(b, "dc1")
	defer sc.close()
	lost := benchLoseDC1(b, sc, c, d, jar)
	b.Logf("DC1 lost with checkpoint %d (%.0f MB state) newest in ZooKeeper; its JobManager's session ended %v after the loss",
		lost.newest, float64(lost.stateSize)/benchMB, lost.sessionWait.Round(time.Millisecond))
	// As in BenchmarkCheckpointDuration, the first run of a series is
	// slower whatever its case; it is run once first and not counted.
	benchFailoverCounted(b, c, d, lost, false, -1)
	var all []restoreRun
	for i, mount := range benchOrder(runs) {
		r := benchFailoverCounted(b, c, d, lost, mount, i)
		b.Logf("run %d (%s): %s", i, benchCase(mount, "mount", "plain"), r)
		all = append(all, r)
	}
	var restore, toRunning, start, download [2][]float64
	var mounts []restoreRun
	for _, r := range all {
		k := 1
		if r.mount {
			k = 0
			mounts = append(mounts, r)
		}
		restore[k] = append(restore[k], benchMs(r.restore))
		toRunning[k] = append(toRunning[k], benchMs(r.toRunning))
		start[k] = append(start[k], benchMs(r.start))
		if r.download > 0 {
			download[k] = append(download[k], benchMs(r.download))
		}
	}
	m := func(x [2][]float64, k int) float64 { return benchMedian(x[k]) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(benchRatio(m(restore, 0), m(restore, 1)), "restore-ratio")
	b.ReportMetric(benchRatio(m(download, 0), m(download, 1)), "download-ratio")
	b.ReportMetric(m(download, 0), "download-mount-ms")
	b.ReportMetric(m(download, 1), "download-plain-ms")
	b.ReportMetric(benchRatio(benchMin(restore[0]), benchMin(restore[1])), "restore-ratio-best")
	b.ReportMetric(benchRatio(m(toRunning, 0), m(toRunning, 1)), "start-to-running-ratio")
	b.ReportMetric(benchRatio(benchMin(toRunning[0]), benchMin(toRunning[1])), "start-to-running-ratio-best")
	b.ReportMetric(m(restore, 0), "restore-mount-ms")
	b.ReportMetric(m(restore, 1), "restore-plain-ms")
	b.ReportMetric(m(toRunning, 0), "start-to-running-mount-ms")
	b.ReportMetric(m(toRunning, 1), "start-to-running-plain-ms")
	b.ReportMetric(m(start, 0), "start-mount-ms")
	b.ReportMetric(m(start, 1), "start-plain-ms")
	b.ReportMetric(float64(lost.stateSize)/benchMB, "state-MB")
	benchReportBreakdown(b, mounts)
	b.Logf("restore (INITIALIZING): mount %s, plain %s", benchFmt(restore[0], "ms"), benchFmt(restore[1], "ms"))
	b.Logf("state download (in INITIALIZING): mount %s, plain %s", benchFmt(download[0], "ms"), benchFmt(download[1], "ms"))
	b.Logf("JobManager start to INITIALIZING: mount %s, plain %s", benchFmt(start[0], "ms"), benchFmt(start[1], "ms"))
	b.Logf("JobManager start to RUNNING: mount %s, plain %s", benchFmt(toRunning[0], "ms"), benchFmt(toRunning[1], "ms"))
	b.Logf("RESULT: restore-ratio %.3f (mount %.0f ms / plain %.0f ms), start-to-running-ratio %.3f (mount %.0f ms / plain %.0f ms); target <= 1.05",
		benchRatio(m(restore, 0), m(restore, 1)), m(restore, 0), m(restore, 1),
		benchRatio(m(toRunning, 0), m(toRunning, 1)), m(toRunning, 0), m(toRunning, 1))
}

// BenchmarkRecoveryBreakdown is where the time goes in a failover to DC2
// with ckptfs, BenchmarkRestoreDuration's mount case with a DC1 of its
// own per run (CKPTFS_BENCH_RUNS runs, default 2), in seconds (medians):
//
//	session-wait-s   DC1's loss until its JobManager's ZooKeeper session
//	                 ended (its ephemeral nodes vanished)
//	takeover-s       `ckptfs takeover` on DC2, started after that
//	flink-start-s    DC2's JobManager start until the keyed subtasks are
//	                 INITIALIZING (recovered from ZooKeeper, deployed)
//	flink-restore-s  INITIALIZING until RUNNING (the state restored)
//	total-s          session wait + takeover + JobManager start to every
//	                 subtask RUNNING: the loss to the job RUNNING on DC2,
//	                 but for the copy of the NAS (a real replica holds it
//	                 before the loss) and DC2's TaskManager's start (a
//	                 standby TaskManager waits for a leader)
//
// Run with -benchtime=1x.
func BenchmarkRecoveryBreakdown(b *testing.B) {
	defer benchLoud(b)
	d := benchDist(b)
	runs := benchRuns(b)
	c := zktest.StartCluster(b, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	jar := JobJar(b, d)
	var mounts []restoreRun
	for i := range runs {
		func() {
			sc := newBenchScope(b, fmt.Sprintf("dc1-%d", i))
			defer sc.close()
			lost := benchLoseDC1(b, sc, c, d, jar)
			r := benchFailoverCounted(b, c, d, lost, true, i)
			b.Logf("run %d: %s", i, r)
			mounts = append(mounts, r)
		}()
	}
	b.ReportMetric(0, "ns/op")
	benchReportBreakdown(b, mounts)
}

func benchReportBreakdown(b *testing.B, rs []restoreRun) {
	if len(rs) == 0 {
		return
	}
	var sw, to, st, re, total []float64
	for _, r := range rs {
		sw = append(sw, r.sessionWait.Seconds())
		to = append(to, r.takeover.Seconds())
		st = append(st, r.start.Seconds())
		re = append(re, r.restore.Seconds())
		total = append(total, (r.sessionWait + r.takeover + r.toRunning).Seconds())
	}
	b.ReportMetric(benchMedian(sw), "session-wait-s")
	b.ReportMetric(benchMedian(to), "takeover-s")
	b.ReportMetric(benchMedian(st), "flink-start-s")
	b.ReportMetric(benchMedian(re), "flink-restore-s")
	b.ReportMetric(benchMedian(total), "total-s")
	b.Logf("breakdown (mount, seconds): session wait %v, takeover %v, Flink start %v, Flink restore %v, total %v",
		benchSecs(sw), benchSecs(to), benchSecs(st), benchSecs(re), benchSecs(total))
}

func benchSecs(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.FormatFloat(x, 'f', 2, 64))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func benchMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (r restoreRun) String() string {
	s := fmt.Sprintf("checkpoint %d (%.0f MB state): JobManager start to INITIALIZING %v, INITIALIZING %v (state download %v), to RUNNING %v; DC1's session wait %v",
		r.checkpoint, float64(r.stateSize)/benchMB, r.start.Round(time.Millisecond), r.restore.Round(time.Millisecond),
		r.download.Round(time.Millisecond), r.toRunning.Round(time.Millisecond), r.sessionWait.Round(time.Millisecond))
	if r.mount {
		s += fmt.Sprintf(", takeover %v (it waited %v)", r.takeover.Round(time.Millisecond), r.waited.Round(time.Millisecond))
	}
	return s
}

// benchJobDetails is GET /jobs/<id>, in the fields used here.
type benchJobDetails struct {
	State    string `json:"state"`
	Vertices []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"vertices"`
}

// benchSubtaskTimes is GET /jobs/<id>/vertices/<vid>/subtasktimes: when
// each subtask's current attempt entered each state (ms).
type benchSubtaskTimes struct {
	Subtasks []struct {
		Subtask    int              `json:"subtask"`
		Timestamps map[string]int64 `json:"timestamps"`
	} `json:"subtasks"`
}

// benchZKNode is a persistent znode, saved.
type benchZKNode struct {
	path string
	data []byte
}

// benchSaveZK returns the persistent znodes below root (root included),
// parents first; ephemeral nodes (and what is below them) are left out.
func benchSaveZK(conn *zk.Conn, root string) ([]benchZKNode, error) {
	var out []benchZKNode
	var walk func(p string) error
	walk = func(p string) error {
		data, st, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.EphemeralOwner != 0 {
			return nil
		}
		out = append(out, benchZKNode{path: p, data: data})
		kids, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		slices.Sort(kids)
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root)
}

// benchDeleteZK deletes root and everything below it.
func benchDeleteZK(conn *zk.Conn, root string) error {
	kids, _, err := conn.Children(root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := benchDeleteZK(conn, root+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(root, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", root, err)
	}
	return nil
}

// benchRestoreZK replaces what is below root with what benchSaveZK saved.
func benchRestoreZK(conn *zk.Conn, root string, nodes []benchZKNode) error {
	if err := benchDeleteZK(conn, root); err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := conn.Create(n.path, n.data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			return fmt.Errorf("create %s: %w", n.path, err)
		}
	}
	return nil
}

// benchEphemeral lists the ephemeral nodes below root (a Flink cluster's
// namespace): they are its JobManager's, and vanish with its session.
func benchEphemeral(conn *zk.Conn, root string) ([]string, error) {
	var out []string
	var walk func(p string) error
	walk = func(p string) error {
		kids, st, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		if st.EphemeralOwner != 0 {
			out = append(out, p)
		}
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(root)
}

// benchNoJobManager waits until no ephemeral node is left in the Flink
// cluster's namespace, and returns how long that took.
func benchNoJobManager(tb testing.TB, conn *zk.Conn, root string) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		eph, err := benchEphemeral(conn, root)
		if err == nil && len(eph) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > benchStep {
			tb.Fatalf("ephemeral nodes still in %s after %v: %v (%v)", root, benchStep, eph, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchDropCaches writes dirty pages back and empties the page cache, so
// that a restore reads its state from the disk; then it reads the JDK's
// and Flink's own files back in, so that the JVMs' start does not, which
// is the same in both cases and would only add noise.
func benchDropCaches(tb testing.TB, d Dist) {
	tb.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		tb.Fatalf("drop the page cache: %v", err)
	}
	dirs := []string{filepath.Join(d.Home, "lib"), filepath.Join(d.Home, "bin"), filepath.Join(d.Home, "plugins")}
	if java, err := filepath.EvalSymlinks(d.Java); err == nil {
		dirs = append(dirs, filepath.Dir(filepath.Dir(java)))
	}
	buf := make([]byte, 1<<20)
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			for {
				if _, err := f.Read(buf); err != nil {
					return nil
				}
			}
		})
	}
}

// benchResident is how many bytes of the files below dir are in the page
// cache (mincore(2)).
func benchResident(dir string) int64 {
	var total int64
	page := int64(os.Getpagesize())
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || fi.Size() == 0 {
			return nil
		}
		m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil
		}
		defer unix.Munmap(m)
		vec := make([]byte, (fi.Size()+page-1)/page)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			return nil
		}
		for _, v := range vec {
			if v&1 != 0 {
				total += page
			}
		}
		return nil
	})
	return total
}

// benchReadBytes is what /proc/<pid>/io says a process read from storage.
func benchReadBytes(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "read_bytes: "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return fmt.Sprintf("%.1f MB", n/benchMB)
		}
	}
	return "?"
}

// benchDownload reads from a TaskManager's log how long the longest
// download of a keyed subtask's RocksDB state took ("Start downloading
// remote state" to "Finished downloading remote state", per operator).
func benchDownload(log string) time.Duration {
	data, err := os.ReadFile(log)
	if err != nil {
		return 0
	}
	const (
		startMsg = "Start downloading remote state to local directory in operator "
		endMsg   = "Finished downloading remote state to local directory in operator "
	)
	starts := map[string]time.Time{}
	var longest time.Duration
	for _, l := range strings.Split(string(data), "\n") {
		at, err := time.Parse("15:04:05.000", strings.Replace(strings.SplitN(l, " ", 2)[0], ",", ".", 1))
		if err != nil {
			continue
		}
		for _, m := range []string{startMsg, endMsg} {
			_, rest, ok := strings.Cut(l, m)
			if !ok {
				continue
			}
			op, _, _ := strings.Cut(rest, " ")
			if m == startMsg {
				starts[op] = at
			} else if s, ok := starts[op]; ok {
				d := at.Sub(s)
				if d < 0 {
					d += 24 * time.Hour
				}
				longest = max(longest, d)
			}
		}
	}
	return longest
}

func benchCopy(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s/. %s: %w: %s", src, dst, err, out)
	}
	return nil
}

// benchLoseDC1 runs DC1 (through its primary mount) until a checkpoint
// holds at least 200 MB of state, loses it, and saves what DC2 runs start
// from. DC1's ZooKeeper servers stay down until sc ends.
func benchLoseDC1(b *testing.B, sc *benchScope, c *zktest.Cluster, d Dist, jar string) *benchLost {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*benchStep)
	defer cancel()
	sc.Cleanup(func() {
		for _, i := range []int{0, 1} {
			if !c.Running(i) {
				if err := c.Start(i); err != nil {
					b.Errorf("restart zk%d: %v", i, err)
				}
			}
		}
	})
	l := &benchLost{
		root: sc.dir, flink: filepath.Join(sc.dir, "flink"),
		clusterID: fmt.Sprintf("/bench-restore-%d-%s", os.Getpid(), filepath.Base(sc.dir)),
		nas:       filepath.Join(sc.dir, "dc1", "nas"),
	}
	local := filepath.Join(sc.dir, "dc1", "local")
	l.report = filepath.Join(local, "report.txt")
	if err := os.MkdirAll(l.nas, 0o755); err != nil {
		b.Fatal(err)
	}
	dc1 := NewSite(sc, "dc1", filepath.Join(sc.dir, "dc1", "log"))
	// The job's report lands on each site's machine's own disk.
	if err := dc1.Bind(local, filepath.Join(sc.dir, "local")); err != nil {
		b.Fatal(err)
	}
	mount1, err := dc1.StartMount("ckptfs", binary, "primary", l.nas, l.flink,
		"--zk", c.ConnectString(), "--cluster-id", l.clusterID, "--path-root", benchPathRoot,
		"--map", l.uri()+"="+l.nas, "--log-level", "info")
	if err != nil {
		b.Fatal(err)
	}
	fl1, err := NewCluster(dc1, benchConfig(sc, d, sc.dir, "dc1", c.ConnectString(), l.clusterID, l.flink))
	if err != nil {
		b.Fatal(err)
	}
	jm1, err := fl1.StartJobManager("jobmanager")
	if err != nil {
		b.Fatal(err)
	}
	tm1, err := fl1.StartTaskManager("taskmanager")
	if err != nil {
		b.Fatal(err)
	}
	procs := []*Process{mount1, jm1, tm1}
	waitUntil(sc, benchStep, "DC1's TaskManager to register", func() bool {
		o, err := fl1.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1
	}, procs...)
	if l.job, err = fl1.REST.Submit(ctx, jar, benchJobArgs(filepath.Join(sc.dir, "local", "report.txt"))); err != nil {
		b.Fatalf("submit: %v", err)
	}
	waitUntil(sc, benchStep, "the job to run on DC1", func() bool { return benchJobStatus(ctx, fl1.REST, l.job) == "RUNNING" }, procs...)
	waitUntil(sc, benchStep, "a checkpoint of at least 200 MB of state on DC1", func() bool {
		cp, err := fl1.REST.Checkpoints(ctx, l.job)
		return err == nil && cp.Latest.Completed != nil && float64(cp.Latest.Completed.StateSize) >= benchMinFull
	}, procs...)
	sizes := map[int64]int64{}
	for id, h := range benchHistory(ctx, fl1.REST, l.job) {
		sizes[id] = h.StateSize
	}

	// DC1 is lost.
	lost := time.Now()
	for _, p := range procs {
		p.Kill()
	}
	for _, i := range []int{0, 1} {
		if err := c.Kill(i); err != nil {
			b.Fatalf("kill zk%d: %v", i, err)
		}
	}
	if _, err := c.WaitLeader(benchStep); err != nil {
		b.Fatalf("no ZooKeeper leader among the survivors: %v", err)
	}
	zc := zktest.Connect(sc, c.Servers(2, 3, 4))
	l.zk = zc.Conn
	benchNoJobManager(sc, l.zk, l.flinkRoot())
	l.sessionWait = time.Since(lost)

	names, _, err := l.zk.Children(l.flinkRoot() + "/jobs/" + l.job + "/checkpoints")
	if err != nil {
		b.Fatalf("pointers: %v", err)
	}
	for _, n := range names {
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && len(n) == 19 {
			l.pointers = append(l.pointers, id)
		}
	}
	if len(l.pointers) == 0 {
		b.Fatalf("no checkpoint pointer in ZooKeeper")
	}
	slices.Sort(l.pointers)
	l.newest = l.pointers[len(l.pointers)-1]
	// The REST statistics were read just before the loss; a checkpoint
	// may have completed since: then the size is the newest one's before.
	l.stateSize = -1
	for id, size := range sizes {
		if id <= l.newest && (l.stateSize < 0 || id > l.sizeOf) {
			l.stateSize, l.sizeOf = size, id
		}
	}
	if l.sizeOf != l.newest {
		b.Logf("DC1's statistics lag its newest checkpoint %d: the state size given is checkpoint %d's", l.newest, l.sizeOf)
	}
	l.saved = map[string][]benchZKNode{}
	for _, root := range []string{l.flinkRoot(), l.ckptfsRoot()} {
		nodes, err := benchSaveZK(l.zk, root)
		if err != nil {
			b.Fatalf("save %s: %v", root, err)
		}
		l.saved[root] = nodes
	}
	return l
}

// benchFailover is one DC2 run after DC1's loss, with (mount) or without
// ckptfs on DC2; it stops everything it started.
func benchFailover(b *testing.B, c *zktest.Cluster, d Dist, l *benchLost, mount bool, n int) (restoreRun, string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*benchStep)
	defer cancel()
	sc := newBenchScope(b, fmt.Sprintf("dc2-%d-%s", n, benchCase(mount, "mount", "plain")))
	defer sc.close()
	out := restoreRun{mount: mount, sessionWait: l.sessionWait, stateSize: l.stateSize}

	// ZooKeeper as DC1's loss left it (an earlier DC2 run's JobManager
	// must be gone first: its nodes would come back otherwise).
	benchNoJobManager(sc, l.zk, l.flinkRoot())
	for root, nodes := range l.saved {
		if err := benchRestoreZK(l.zk, root, nodes); err != nil {
			b.Fatalf("restore ZooKeeper's %s: %v", root, err)
		}
	}
	nas := filepath.Join(sc.dir, "nas")
	if err := benchCopy(l.nas, nas); err != nil {
		b.Fatal(err)
	}
	dc2 := NewSite(sc, "dc2", filepath.Join(sc.dir, "dc2", "log"))
	local := filepath.Join(sc.dir, "local")
	if err := dc2.Bind(local, filepath.Join(l.root, "local")); err != nil {
		b.Fatal(err)
	}
	var mount2 *Process
	if mount {
		var err error
		if mount2, err = dc2.StartMount("ckptfs", binary, "replica", nas, l.flink,
			"--zk", c.ConnectString(), "--cluster-id", l.clusterID, "--path-root", benchPathRoot,
			"--map", l.uri()+"="+nas, "--log-level", "info"); err != nil {
			b.Fatal(err)
		}
		// What the replica mount shows it verified complete: as before a
		// real loss, it has verified DC1's checkpoints before Flink starts.
		for _, id := range l.pointers {
			meta := dc2.Path(filepath.Join(l.flink, "checkpoints", l.job, fmt.Sprintf("chk-%d", id), "_metadata"))
			waitUntil(sc, benchStep, fmt.Sprintf("checkpoint %d through DC2's replica mount", id), func() bool {
				_, err := os.Stat(meta)
				return err == nil
			}, mount2)
		}
	} else if err := dc2.Bind(nas, l.flink); err != nil {
		b.Fatal(err)
	}
	benchDropCaches(sc, d)

	if mount {
		start := time.Now()
		cmd := exec.Command(binary, "takeover", "--zk", c.ConnectString(2, 3, 4), "--site", "dc2",
			"--cluster-id", l.clusterID, "--path-root", benchPathRoot, "--map", l.uri()+"="+nas,
			"--checkpoints-dir", l.uri()+"/checkpoints", "--flink-session-timeout", benchSession.String(),
			"--wait", "60s", "-o", "json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		said, err := cmd.Output()
		out.takeover = time.Since(start)
		if err != nil {
			b.Fatalf("takeover: %v\n%s\n%s", err, said, stderr.String())
		}
		var rep struct {
			Waited string `json:"waited"`
			Jobs   []struct {
				Kept []int64 `json:"kept"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(said, &rep); err != nil {
			b.Fatalf("takeover's report: %v\n%s", err, said)
		}
		out.waited, _ = time.ParseDuration(rep.Waited)
		if len(rep.Jobs) != 1 || len(rep.Jobs[0].Kept) == 0 || rep.Jobs[0].Kept[len(rep.Jobs[0].Kept)-1] != l.newest {
			b.Fatalf("takeover did not keep ZooKeeper's newest pointer %d:\n%s", l.newest, said)
		}
	}

	// DC2's Flink: a standby TaskManager first, up and waiting for a
	// leader (so that its JVM's start does not compete with the
	// JobManager's, which only adds noise), then the JobManager, whose
	// start the figures count from.
	fl2, err := NewCluster(dc2, benchConfig(sc, d, sc.dir, "dc2", c.ConnectString(), l.clusterID, l.flink))
	if err != nil {
		b.Fatal(err)
	}
	tm2, err := fl2.StartTaskManager("taskmanager")
	if err != nil {
		b.Fatal(err)
	}
	const tmUp = "Starting TaskManager with ResourceID"
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if data, err := os.ReadFile(tm2.FlinkLog); err == nil && strings.Contains(string(data), tmUp) {
			break
		}
		if time.Now().After(deadline) {
			b.Logf("DC2's TaskManager did not log %q within a minute; starting the JobManager anyway", tmUp)
			break
		}
	}
	resident := benchResident(nas)
	jm2, err := fl2.StartJobManager("jobmanager")
	if err != nil {
		b.Fatal(err)
	}
	jmStart := time.Now().UnixMilli()
	b.Logf("%s: %.1f MB of DC2's NAS in the page cache when the JobManager started", benchCase(mount, "mount", "plain"), float64(resident)/benchMB)
	procs := []*Process{jm2, tm2}
	if mount2 != nil {
		procs = append(procs, mount2)
	}
	var det benchJobDetails
	waitUntil(sc, benchStep, "the job RUNNING on DC2, every subtask", func() bool {
		if err := fl2.REST.Get(ctx, "/jobs/"+l.job, &det); err != nil || det.State != "RUNNING" || len(det.Vertices) == 0 {
			return false
		}
		for _, v := range det.Vertices {
			if v.Status != "RUNNING" {
				return false
			}
		}
		return true
	}, procs...)
	b.Logf("%s: DC2's TaskManager read %s from the disk by then", benchCase(mount, "mount", "plain"), benchReadBytes(tm2.PID()))
	var (
		firstInit, lastRunning int64
		longest                time.Duration
	)
	for _, v := range det.Vertices {
		var st benchSubtaskTimes
		if err := fl2.REST.Get(ctx, "/jobs/"+l.job+"/vertices/"+v.ID+"/subtasktimes", &st); err != nil {
			b.Fatalf("subtasktimes of %s: %v", v.Name, err)
		}
		keyed := strings.Contains(v.Name, "state")
		for _, s := range st.Subtasks {
			init, running := s.Timestamps["INITIALIZING"], s.Timestamps["RUNNING"]
			if init == 0 || running == 0 {
				b.Fatalf("vertex %s subtask %d: no INITIALIZING or RUNNING timestamp: %v", v.Name, s.Subtask, s.Timestamps)
			}
			lastRunning = max(lastRunning, running)
			if keyed {
				if firstInit == 0 || init < firstInit {
					firstInit = init
				}
				longest = max(longest, time.Duration(running-init)*time.Millisecond)
			}
		}
	}
	if firstInit == 0 {
		b.Fatalf("no keyed vertex (named state) among %+v", det.Vertices)
	}
	out.download = benchDownload(tm2.FlinkLog)
	out.start = time.Duration(firstInit-jmStart) * time.Millisecond
	out.restore = longest
	out.toRunning = time.Duration(lastRunning-jmStart) * time.Millisecond

	cp, err := fl2.REST.Checkpoints(ctx, l.job)
	if err != nil || cp.Latest.Restored == nil {
		b.Fatalf("DC2's Flink restored no checkpoint: %v", err)
	}
	out.checkpoint = cp.Latest.Restored.ID
	if out.checkpoint != l.newest {
		b.Errorf("DC2's Flink restored checkpoint %d, ZooKeeper's newest is %d", out.checkpoint, l.newest)
	}
	if why := benchDisturbed(ctx, fl2.REST, l.job, jm2, tm2); why != "" {
		// Not ckptfs's doing (the same happens without it): the figures
		// would measure it, so the run does not count.
		return out, why
	}

	// What DC2 restored is exactly the checkpoint's state.
	rep1, err := ReadReport(l.report)
	if err != nil {
		b.Fatal(err)
	}
	next, ok := rep1.NextRecord(out.checkpoint)
	if !ok {
		b.Fatalf("DC1's job reported no snapshot of checkpoint %d", out.checkpoint)
	}
	var rep2 *Report
	waitUntil(sc, benchStep, "DC2's job to report every key", func() bool {
		return benchReportKeys(filepath.Join(local, "report.txt")) >= benchKeys
	}, procs...)
	if why := benchDisturbed(ctx, fl2.REST, l.job, jm2, tm2); why != "" {
		return out, why
	}
	if rep2, err = ReadReport(filepath.Join(local, "report.txt")); err != nil {
		b.Fatal(err)
	}
	if len(rep2.Restores) != benchParallelism {
		b.Errorf("DC2's job restored %d times (%v), want once per keyed subtask", len(rep2.Restores), rep2.Restores)
	}
	if err := rep2.CheckRestore(benchKeys, next); err != nil {
		b.Errorf("DC2's restored state: %v", err)
	}
	if mount2 != nil {
		if n := mount2.Count("Flink asked for incomplete"); n > 0 {
			b.Errorf("DC2's daemon logged %d times that Flink asked for an incomplete checkpoint", n)
		}
	}
	return out, ""
}

// benchDisturbed says why a run's figures do not count, or "": Flink lost
// its ZooKeeper connection (a ZooKeeper server of this loaded machine did
// not answer within the session timeout) and gave up leadership, or the
// job failed and restarted.
func benchDisturbed(ctx context.Context, r *REST, job string, procs ...*Process) string {
	for _, p := range procs {
		data, err := os.ReadFile(p.FlinkLog)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			for _, sign := range []string{"Connection to ZooKeeper suspended", "lost leadership", "revoked leadership"} {
				if strings.Contains(l, sign) {
					return fmt.Sprintf("%s: %s", p.Name, strings.TrimSpace(l))
				}
			}
		}
	}
	if ex, err := r.Exceptions(ctx, job); err == nil && len(ex) > 0 {
		return fmt.Sprintf("the job failed %d times, the newest: %s", len(ex), firstLine(ex[0].Stacktrace))
	}
	return ""
}

// benchFailoverCounted is benchFailover until a run is not disturbed.
func benchFailoverCounted(b *testing.B, c *zktest.Cluster, d Dist, l *benchLost, mount bool, n int) restoreRun {
	b.Helper()
	for attempt := 1; ; attempt++ {
		r, why := benchFailover(b, c, d, l, mount, n)
		if why == "" {
			return r
		}
		if attempt == benchAttempts {
			b.Fatalf("run %d (%s) was disturbed %d times, the last: %s", n, benchCase(mount, "mount", "plain"), attempt, why)
		}
		b.Logf("run %d (%s) DISTURBED, not counted, running it again: %s", n, benchCase(mount, "mount", "plain"), why)
	}
}

// benchAttempts is how often a run is tried when something other than
// ckptfs disturbed it (see benchDisturbed).
const benchAttempts = 3
