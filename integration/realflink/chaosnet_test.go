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
)

// TestChaosNet (make chaos-net) runs the partition scenario many times,
// randomized from one series seed: the kind of fault that cuts DC1 off
// (a partition both ways, one way, a flapping link, packet loss turning
// into a partition), whether DC1 is first cut from DC2 alone, the moment
// of the cut, the replication kind and the Flink release (those that run
// here). Every run also brings DC1 back and turns the replication back
// to the old direction. It prints a table like make chaos, with the
// writes DC1 made after its fence that DC2 saw (must be 0); a failed run
// is an invariant violation, replayed alone with
// CKPTFS_CHAOS_NET_REPLAY=<release>:<seed>:<fault>[:dc2only][:auto]
// (auto: both daemons run takeover auto, one run in three).
func TestChaosNet(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("CKPTFS_CHAOS_NET_RUNS"))
	if runs <= 0 {
		t.Skip("set CKPTFS_CHAOS_NET_RUNS (make chaos-net RUNS=N)")
	}
	series, _ := strconv.ParseUint(os.Getenv("CKPTFS_CHAOS_NET_SEED"), 10, 64)
	if series == 0 {
		series = uint64(time.Now().UnixNano() % 1_000_000)
	}
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	var dists []Dist
	for _, r := range all {
		if r.Use == "test" {
			dists = append(dists, FindDist(t, r))
		}
	}
	mounttest.RequireFUSE(t)
	rng := rand.New(rand.NewPCG(series, 0x0e7c4a05))
	replay := os.Getenv("CKPTFS_CHAOS_NET_REPLAY")
	type row struct {
		d   Dist
		r   *run
		pr  partitionRun
		out netOutcome
		ok  bool
	}
	var rows []row
	for i := range runs {
		d := dists[rng.IntN(len(dists))]
		seed := rng.Uint64() % 1_000_000
		pr := partitionRun{
			fault:   faults[rng.IntN(len(faults))],
			dc2Only: rng.IntN(4) == 0,
			moment:  time.Duration(rng.Int64N(int64(3 * interval))),
			auto:    rng.IntN(3) == 0,
		}
		if replay != "" {
			if i > 0 {
				break
			}
			parts := strings.Split(replay, ":")
			if len(parts) < 3 || len(parts) > 5 {
				t.Fatalf("CKPTFS_CHAOS_NET_REPLAY=%q: want <release>:<seed>:<fault>[:dc2only][:auto]", replay)
			}
			if d = findDist(dists, parts[0]); d.Home == "" {
				t.Fatalf("release %s does not run here", parts[0])
			}
			if seed, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
				t.Fatal(err)
			}
			pr.fault, pr.dc2Only, pr.auto = fault(parts[2]), slices.Contains(parts[3:], "dc2only"), slices.Contains(parts[3:], "auto")
		}
		var x row
		name := fmt.Sprintf("%03d-%s-%d-%s", i, d.Version, seed, pr.fault)
		if pr.dc2Only {
			name += "-dc2only"
		}
		if pr.auto {
			name += "-auto"
		}
		x.ok = t.Run(name, func(t *testing.T) {
			t.Setenv(seedEnvVar, strconv.FormatUint(seed, 10))
			x.r = newRun(t, d, true)
			runPartitionInto(t, x.r, pr, &x.out)
		})
		x.d, x.pr = d, pr
		rows = append(rows, x)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos-net: %d runs, series seed %d\n", len(rows), series)
	fmt.Fprintf(&b, "%-4s %-6s %-7s %-10s %-10s %-7s %-6s %-7s %-10s %-9s %-9s %-8s %-8s %-6s %-6s %-6s %-6s %-4s %-14s %s\n",
		"run", "flink", "seed", "repl", "fault", "dc2only", "auto", "leader", "cut→fence", "fence<act", "takeover", "optimal", "restored",
		"w/fnc", "onDC2", "p/fnc", "swept", "rst", "result", "old direction: DC2's health")
	violations, harness, writes, seenDC2 := 0, 0, 0, 0
	for i, x := range rows {
		res := "ok"
		switch {
		case !x.ok && x.out.Lost:
			res = "VIOLATION"
			violations++
		case !x.ok:
			res = "failed before"
			harness++
		case x.out.Refused:
			res = "ok: refused"
		}
		writes += x.out.WritesAfterFence
		seenDC2 += x.out.WritesAfterFenceDC2
		leader := "dc2/3"
		if x.out.LeaderInDC1 {
			leader = "dc1"
		}
		seed, kind := uint64(0), "-"
		if x.r != nil {
			seed, kind = x.r.seed, x.r.kind
		}
		fmt.Fprintf(&b, "%-4d %-6s %-7d %-10s %-10s %-7v %-6v %-7s %-10v %-9v %-9v %-8d %-8d %-6d %-6d %-6d %-6d %-4d %-14s %s\n",
			i, x.d.Version, seed, kind, x.pr.fault, x.pr.dc2Only, x.pr.auto, leader, x.out.CutToFence.Round(10*time.Millisecond),
			x.out.FenceBeforeTakeover, x.out.Takeover.Round(100*time.Millisecond), x.out.Optimal, x.out.Restored,
			x.out.WritesAfterFence, x.out.WritesAfterFenceDC2, x.out.PointersAfterFence, x.out.StraysSwept, x.out.Restarts, res, x.out.OldDirectionAlarm)
	}
	fmt.Fprintf(&b, "invariant violations: %d of %d runs (%d failed before DC1 was cut off); writes after the fence: %d on DC1's NAS, %d seen on DC2\n",
		violations, len(rows), harness, writes, seenDC2)
	fmt.Println(b.String())
}
