package scenario

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Chaos runs are long: make chaos sets these.
const (
	chaosRunsEnv = "CKPTFS_CHAOS_RUNS"
	chaosSeedEnv = "CKPTFS_CHAOS_SEED"
)

// TestChaos runs the failover scenario CKPTFS_CHAOS_RUNS times, cycling
// through the replication families with seeds CKPTFS_CHAOS_SEED,
// CKPTFS_CHAOS_SEED+1, ..., and prints per family: runs, invariant
// violations, baseline failures (runs where ZooKeeper was ahead of DC2 and
// Flink without ckptfs looped on a missing or torn file), refusals (DC2
// held no complete pointer: takeover exits 4 and changes nothing) and the
// median time from DC1's loss to the restore verified through DC2's mount
// (over the runs that restored). A failing run names its seed;
// CKPTFS_SCENARIO_SEED replays it in
// TestIntegration_Failover/<kind>.
func TestChaos(t *testing.T) {
	runs, err := strconv.Atoi(os.Getenv(chaosRunsEnv))
	if err != nil || runs <= 0 {
		t.Skipf("chaos runs are long: set %s (make chaos does)", chaosRunsEnv)
	}
	base := uint64(time.Now().UnixNano() % 1_000_000)
	if s := os.Getenv(chaosSeedEnv); s != "" {
		if base, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", chaosSeedEnv, s, err)
		}
	}
	t.Logf("chaos: %d runs from seed %d (replay all: %s=%d %s=%d)", runs, base, chaosRunsEnv, runs, chaosSeedEnv, base)
	type row struct {
		runs, violations, aheads, refused int
		times                             []time.Duration
		failed                            []uint64
	}
	table := map[string]*row{}
	c := startEnsemble(t)
	for i := 0; i < runs; i++ {
		kind, seed := kinds[i%len(kinds)], base+uint64(i)
		if table[kind] == nil {
			table[kind] = &row{}
		}
		r := table[kind]
		var out outcome
		ok := t.Run(fmt.Sprintf("%s/seed-%d", kind, seed), func(t *testing.T) {
			out = runScenario(t, c, newRun(kind, seed))
		})
		r.runs++
		if !ok {
			r.violations++
			r.failed = append(r.failed, seed)
			continue
		}
		if out.Ahead {
			r.aheads++
		}
		if out.Refused {
			r.refused++
			continue
		}
		r.times = append(r.times, out.LossToRestore)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-10s %6s %11s %18s %8s %22s\n", "kind", "runs", "violations", "baseline failures", "refused", "median loss->restored")
	for _, kind := range kinds {
		r := table[kind]
		if r == nil {
			continue
		}
		median := time.Duration(0)
		if len(r.times) > 0 {
			slices.Sort(r.times)
			median = r.times[len(r.times)/2]
		}
		fmt.Fprintf(&b, "%-10s %6d %11d %18d %8d %22v\n", kind, r.runs, r.violations, r.aheads, r.refused, median.Round(time.Millisecond))
		if len(r.failed) > 0 {
			fmt.Fprintf(&b, "  failing seeds: %v (replay one: %s=<seed> go test -run 'TestIntegration_Failover/%s' ./integration/scenario/)\n", r.failed, seedEnvVar, kind)
		}
	}
	t.Log(b.String())
}
