//go:build linux

package realflink

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestChaosEO (make chaos-eo) runs the failover with the job's
// exactly-once sinks (TestIntegration_ExactlyOnceFailover) many times,
// randomized from one series seed over the releases that have a Kafka
// connector here (flink/jars.tsv), the replication kind and the moment of
// loss; MODE is DC1's replication mode (async, sync or strict; unset:
// sync and async in turn). Half the async runs cut the replication
// before DC1's last two checkpoints. Every run must account for each
// record: in sync and strict mode none twice, none lost; in async mode
// exactly DC1's records of the rollback window ckptfs reported twice. It
// prints a table; a failed run is replayed alone with its seed
// (CKPTFS_CHAOS_EO_REPLAY=<release>:<seed>:<mode>[:ahead]).
func TestChaosEO(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("CKPTFS_CHAOS_EO_RUNS"))
	if runs <= 0 {
		t.Skip("set CKPTFS_CHAOS_EO_RUNS (make chaos-eo RUNS=N)")
	}
	series, _ := strconv.ParseUint(os.Getenv("CKPTFS_CHAOS_EO_SEED"), 10, 64)
	if series == 0 {
		series = uint64(time.Now().UnixNano() % 1_000_000)
	}
	mode := os.Getenv("CKPTFS_CHAOS_EO_MODE")
	if !slices.Contains([]string{"", "async", "sync", "strict"}, mode) {
		t.Fatalf("CKPTFS_CHAOS_EO_MODE=%q: want async, sync or strict", mode)
	}
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	var dists []Dist
	for _, r := range all {
		if rows, _ := readTable("jars.tsv", 3); slices.ContainsFunc(rows, func(c []string) bool { return c[0] == "connectors-"+r.Version }) {
			dists = append(dists, FindDist(t, r))
		}
	}
	type replayRun struct {
		release, mode string
		seed          uint64
		ahead         bool
	}
	var replay *replayRun
	if rp := os.Getenv("CKPTFS_CHAOS_EO_REPLAY"); rp != "" {
		p := strings.Split(rp, ":")
		var err error
		replay = &replayRun{}
		if len(p) >= 3 {
			replay.release, replay.mode = p[0], p[2]
			replay.seed, err = strconv.ParseUint(p[1], 10, 64)
		}
		if len(p) < 3 || len(p) > 4 || err != nil || (len(p) == 4 && p[3] != "ahead") {
			t.Fatalf("CKPTFS_CHAOS_EO_REPLAY=%q: want <release>:<seed>:<mode>[:ahead]", rp)
		}
		replay.ahead = len(p) == 4
		runs = 1
	}
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	rng := rand.New(rand.NewPCG(series, 0xe0))
	type row struct {
		r  *run
		ok bool
	}
	var rows []row
	for i := range runs {
		d := dists[rng.IntN(len(dists))]
		seed := rng.Uint64() % 1_000_000
		m := mode
		if m == "" {
			m = []string{"sync", "async"}[i%2]
		}
		ahead := m == "async" && rng.IntN(2) == 0
		if replay != nil {
			if d = findDist(dists, replay.release); d.Home == "" {
				t.Fatalf("release %s has no Kafka connector here", replay.release)
			}
			seed, m, ahead = replay.seed, replay.mode, replay.ahead
		}
		var r *run
		name := fmt.Sprintf("%03d-%s-%d-%s", i, d.Version, seed, m)
		if ahead {
			name += "-ahead"
		}
		ok := t.Run(name, func(t *testing.T) {
			t.Setenv(seedEnvVar, strconv.FormatUint(seed, 10))
			r = newRun(t, d, true)
			r.sinks, r.mode, r.ahead, r.heldBack = true, m, ahead, ""
			runFailover(t, c, r)
		})
		rows = append(rows, row{r, ok})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos-eo: %d runs, series seed %d\n", len(rows), series)
	fmt.Fprintf(&b, "%-4s %-7s %-7s %-10s %-6s %-24s %-9s %-8s %-6s %-13s %-13s %-15s %s\n",
		"run", "flink", "seed", "repl", "mode", "loss", "completed", "restored", "window", "kafka dup/gap", "files dup/gap", "ckpt ms med/max", "result")
	violations := map[string]int{}
	for i, x := range rows {
		out := x.r.out
		res := "ok"
		switch {
		case !x.ok && out.Lost:
			res = "VIOLATION"
			violations[x.r.mode]++
		case !x.ok:
			res = "failed before the loss"
		}
		loss := fmt.Sprintf("%s+%v", x.r.moment, x.r.lossDelay.Round(time.Millisecond))
		if x.r.ahead {
			loss = "replication cut, +2"
		}
		sink := func(name string) string {
			s, ok := out.Sinks[name]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%d/%d", s.Duplicates, s.Gaps)
		}
		window := "-"
		if out.Sinks != nil {
			window = strconv.FormatInt(out.Completed-out.Restored, 10)
		}
		ms := "-"
		if len(out.CheckpointMillis) > 0 {
			sorted := slices.Sorted(slices.Values(out.CheckpointMillis))
			ms = fmt.Sprintf("%d/%d", sorted[len(sorted)/2], sorted[len(sorted)-1])
		}
		fmt.Fprintf(&b, "%-4d %-7s %-7d %-10s %-6s %-24s %-9d %-8d %-6s %-13s %-13s %-15s %s\n", i, x.r.dist.Version, x.r.seed, x.r.kind, x.r.mode,
			loss, out.Completed, out.Restored, window, sink("kafka"), sink("files"), ms, res)
	}
	fmt.Fprintf(&b, "violations: sync %d, strict %d, async %d of %d runs\n", violations["sync"], violations["strict"], violations["async"], len(rows))
	fmt.Println(b.String())
}
