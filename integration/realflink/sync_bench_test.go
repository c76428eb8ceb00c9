//go:build linux

package realflink

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

const (
	// syncCaseEnv selects TestIntegration_SyncCheckpointCase's mode
	// (async, sync or strict); without it the test skips.
	// BenchmarkSyncCheckpoint sets it.
	syncCaseEnv = "CKPTFS_SYNC_CASE"
	// syncWindow is how long a case measures, from its first checkpoint.
	syncWindow = 45 * time.Second
	// syncRate is the job's rate in the benchmark (records per second).
	syncRate = 5000
)

// TestIntegration_SyncCheckpointCase is one run of
// BenchmarkSyncCheckpoint, in a process of its own: the job with its
// exactly-once sinks on DC1 in the case's replication mode, DC2's
// replica mount acknowledging, file-level replication, for syncWindow.
// It prints one line "SYNC case=... ckpt_ms=... repl_ms=... ...":
// the end-to-end durations of the checkpoints Flink completed, and, for
// each, the time from its pointer in ZooKeeper to DC2 holding it
// complete (0 in sync mode, where the pointer follows DC2's hold).
func TestIntegration_SyncCheckpointCase(t *testing.T) {
	mode := os.Getenv(syncCaseEnv)
	if mode == "" {
		t.Skip("a case of BenchmarkSyncCheckpoint (" + syncCaseEnv + ")")
	}
	var d Dist
	want := os.Getenv(benchFlinkEnv)
	for _, r := range TestReleases(t) {
		if want == "" || r.Version == want {
			d = FindDist(t, r)
		}
	}
	if d.Home == "" {
		t.Fatalf("%s=%q: no such release marked test", benchFlinkEnv, want)
	}
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 3, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	r := newRun(t, d, true)
	r.sinks, r.mode, r.kind = true, mode, "filelevel"
	w := newWorld(t, c, r)
	ctx, cancel := context.WithTimeout(context.Background(), 4*stepTimeout)
	defer cancel()
	fl1 := w.cluster(t, c, w.dc1)
	jm1, tm1 := w.startFlink(t, fl1, "dc1")
	args := w.jobArgs()
	args[slices.Index(args, "--rate")+1] = strconv.Itoa(syncRate)
	var err error
	if w.job, err = fl1.REST.Submit(ctx, EOJobJar(t, d), args); err != nil {
		t.Fatal(err)
	}
	waitJob(ctx, t, fl1, w.job, "RUNNING")
	repl, every := w.replicator(t, jm1, tm1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go repl.Run(rctx, every)

	zc := zktest.Connect(t, c.Servers())
	v2 := newVerifier(t, w.uri(), w.backing["dc2"])
	first := w.waitComplete(ctx, t, zc.Conn, v2)
	start := time.Now()
	replMs := map[int64]int64{}
	// Flink's history holds the last checkpoints only (10 by default).
	hist := map[int64]CompletedCheckpoint{}
	var counts Checkpoints
	var fetched time.Time
	fetch := func() {
		cp, err := fl1.REST.Checkpoints(ctx, w.job)
		if err != nil {
			return
		}
		counts, fetched = *cp, time.Now()
		for _, h := range cp.History {
			if h.Status == "COMPLETED" && h.ID > first {
				hist[h.ID] = h
			}
		}
	}
	for time.Since(start) < syncWindow {
		if time.Since(fetched) > time.Second {
			fetch()
		}
		ids, _ := w.pointerIDs(zc.Conn)
		for _, id := range ids {
			if _, done := replMs[id]; done || id <= first {
				continue
			}
			_, st, err := zc.Conn.Get(fmt.Sprintf("%s/%019d", w.pointerDir(), id))
			if err != nil {
				continue
			}
			if pv, err := w.verifyPointer(ctx, zc.Conn, v2, id); err == nil && pv.L2Complete() {
				replMs[id] = max(0, time.Now().UnixMilli()-st.Ctime)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	fetch()
	if len(hist) == 0 {
		t.Fatalf("no checkpoint completed in %v", syncWindow)
	}
	var ckpt, rms []int64
	for _, id := range slices.Sorted(maps.Keys(hist)) {
		ckpt = append(ckpt, hist[id].EndToEnd)
		if ms, ok := replMs[id]; ok {
			rms = append(rms, ms)
		}
	}
	// Throughput: records the job took in its checkpoints of the window.
	rep := w.report("dc1")
	var lo, hi int64 = -1, -1
	var loAt, hiAt int64
	for _, h := range hist {
		if _, ok := rep.MaxSeen[h.ID]; !ok {
			continue
		}
		if lo < 0 || h.ID < lo {
			lo, loAt = h.ID, h.TriggerMillis
		}
		if h.ID > hi {
			hi, hiAt = h.ID, h.TriggerMillis
		}
	}
	rate := 0.0
	if hi > lo && hiAt > loAt {
		next := func(id int64) int64 { n, _ := rep.NextRecord(id); return n }
		rate = float64(next(hi)-next(lo)) / (float64(hiAt-loAt) / 1000)
	}
	fmt.Printf("SYNC case=%s ckpt_ms=%s repl_ms=%s completed=%d failed=%d in_window=%d records_per_s=%.0f\n", mode,
		joinInts(ckpt), joinInts(rms), counts.Counts.Completed, counts.Counts.Failed, len(hist), rate)
	stop()
	tm1.Kill()
}

func joinInts(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

func splitInts(s string) []float64 {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.ParseFloat(f, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// BenchmarkSyncCheckpoint is what RPO 0 costs (issue 33): the job with
// its exactly-once sinks (a transactional KafkaSink to a real broker, a
// FileSink) on real Flink, DC1's mount in sync mode against async mode,
// in ABBA order (CKPTFS_BENCH_RUNS runs per case, default 2;
// CKPTFS_BENCH_FLINK picks the release, default the newest 1.20), with
// file-level replication every 300 ms and a checkpoint every 400 ms. It
// reports the checkpoints' end-to-end durations in each mode, the
// replication's own latency for one checkpoint (async: its pointer to DC2
// holding it), the floor (async's duration plus that latency: what a
// checkpoint that waits for DC2 cannot beat), their ratios, the
// checkpoint cycle in each mode (where a held close shows), checkpoints
// failed, and the job's throughput in each mode.
func BenchmarkSyncCheckpoint(b *testing.B) {
	defer benchLoud(b)
	d := benchDist(b)
	runs := benchRuns(b)
	ckpt := map[string][]float64{}
	var repl []float64
	rate := map[string][]float64{}
	failed := map[string]int{}
	// Flink's end-to-end duration ends with the tasks' acknowledgements,
	// before the coordinator writes _metadata and the HA file: a held
	// close lengthens the cycle (checkpoints completed in the window, at
	// most one in flight), not that duration.
	cycle := map[string][]float64{}
	for i, a := range benchOrder(runs) {
		mode := "sync"
		if a {
			mode = "async"
		}
		seed := 600000 + i/2
		cmd := exec.Command(os.Args[0], "-test.run", "^TestIntegration_SyncCheckpointCase$", "-test.v", "-test.timeout", "15m")
		cmd.Env = append(os.Environ(), syncCaseEnv+"="+mode, benchFlinkEnv+"="+d.Version, fmt.Sprintf("%s=%d", seedEnvVar, seed))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		outb, err := cmd.Output()
		var line string
		sc := bufio.NewScanner(bytes.NewReader(outb))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "SYNC ") {
				line = sc.Text()
			}
		}
		if err != nil || line == "" {
			b.Fatalf("run %d (%s, seed %d): %v\n%s", i, mode, seed, err, lastLines(string(outb), 40))
		}
		b.Logf("run %d: %s", i, line)
		field := func(k string) string {
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, k+"="); ok {
					return v
				}
			}
			return ""
		}
		ckpt[mode] = append(ckpt[mode], splitInts(field("ckpt_ms"))...)
		if mode == "async" {
			repl = append(repl, splitInts(field("repl_ms"))...)
		}
		if n, _ := strconv.Atoi(field("in_window")); n > 0 {
			cycle[mode] = append(cycle[mode], float64(syncWindow.Milliseconds())/float64(n))
		}
		n, _ := strconv.Atoi(field("failed"))
		failed[mode] += n
		if r, err := strconv.ParseFloat(field("records_per_s"), 64); err == nil && r > 0 {
			rate[mode] = append(rate[mode], r)
		}
	}
	as, sy, rl := benchMedian(ckpt["async"]), benchMedian(ckpt["sync"]), benchMedian(repl)
	floor := as + rl
	b.ReportMetric(as, "ms-ckpt-async")
	b.ReportMetric(sy, "ms-ckpt-sync")
	b.ReportMetric(rl, "ms-replication")
	b.ReportMetric(benchRatio(sy, as), "sync/async")
	b.ReportMetric(benchRatio(sy, floor), "sync/floor")
	b.ReportMetric(benchRatio(benchMedian(rate["sync"]), benchMedian(rate["async"])), "throughput-sync/async")
	b.ReportMetric(benchRatio(benchMedian(cycle["sync"]), benchMedian(cycle["async"])), "cycle-sync/async")
	b.Logf("checkpoint cycle (the window over the checkpoints completed in it): async %s, sync %s",
		benchFmt(cycle["async"], "ms"), benchFmt(cycle["sync"], "ms"))
	b.Logf("checkpoint end to end, Flink %s, exactly-once sinks: async %s, sync %s; the replication's latency for one checkpoint %s; "+
		"floor (async + replication) %.0f ms; sync/async %.2f, sync/floor %.2f; failed checkpoints async %d, sync %d; records/s async %s, sync %s",
		d.Version, benchFmt(ckpt["async"], "ms"), benchFmt(ckpt["sync"], "ms"), benchFmt(repl, "ms"), floor,
		benchRatio(sy, as), benchRatio(sy, floor), failed["async"], failed["sync"], benchFmt(rate["async"], "/s"), benchFmt(rate["sync"], "/s"))
}
