//go:build linux

package realflink

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestChaosFlink (make chaos-flink) runs the real-Flink failover many
// times, randomized from one series seed across the releases that run
// here (use test or runs in flink/versions.tsv), the replication kind and
// the moment of loss, which falls anywhere in the checkpoint cycle:
// between checkpoints, while one is written, while its HA file is. It
// prints a table; a failed run is an invariant violation, replayed alone
// with its own seed (CKPTFS_REALFLINK_SEED and the release it names).
func TestChaosFlink(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("CKPTFS_CHAOS_FLINK_RUNS"))
	if runs <= 0 {
		t.Skip("set CKPTFS_CHAOS_FLINK_RUNS (make chaos-flink RUNS=N)")
	}
	series, _ := strconv.ParseUint(os.Getenv("CKPTFS_CHAOS_FLINK_SEED"), 10, 64)
	if series == 0 {
		series = uint64(time.Now().UnixNano() % 1_000_000)
	}
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	var dists []Dist
	for _, r := range all {
		if r.Use == "test" || r.Use == "runs" {
			dists = append(dists, FindDist(t, r))
		}
	}
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	rng := rand.New(rand.NewPCG(series, 0xc4a05))
	// CKPTFS_CHAOS_FLINK_REPLAY=<release>:<seed> replays one run.
	var replay struct {
		release string
		seed    uint64
	}
	if rp := os.Getenv("CKPTFS_CHAOS_FLINK_REPLAY"); rp != "" {
		rel, seed, _ := strings.Cut(rp, ":")
		n, err := strconv.ParseUint(seed, 10, 64)
		if err != nil {
			t.Fatalf("CKPTFS_CHAOS_FLINK_REPLAY=%q: want <release>:<seed>", rp)
		}
		replay.release, replay.seed = rel, n
	}
	type row struct {
		r   *run
		out outcome
		ok  bool
	}
	var rows []row
	for i := range runs {
		d := dists[rng.IntN(len(dists))]
		seed := rng.Uint64() % 1_000_000
		if replay.release != "" {
			if i > 0 {
				break
			}
			seed = replay.seed
			if d = findDist(dists, replay.release); d.Home == "" {
				t.Fatalf("release %s does not run here", replay.release)
			}
		}
		var (
			r   *run
			out outcome
		)
		ok := t.Run(fmt.Sprintf("%03d-%s-%d", i, d.Version, seed), func(t *testing.T) {
			t.Setenv(seedEnvVar, strconv.FormatUint(seed, 10))
			r = newRun(t, d, true)
			out = runFailover(t, c, r)
		})
		rows = append(rows, row{r, out, ok})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos-flink: %d runs, series seed %d\n", len(rows), series)
	fmt.Fprintf(&b, "%-4s %-7s %-8s %-10s %-6s %-7s %-8s %-8s %-9s %-10s %s\n",
		"run", "flink", "seed", "repl", "loss", "ahead", "optimal", "restored", "takeover", "loss→run", "result")
	violations, harness := 0, 0
	var total time.Duration
	restores := 0
	for i, x := range rows {
		res := "ok"
		switch {
		case !x.ok && x.out.Lost:
			res = "VIOLATION"
			violations++
		case !x.ok:
			res = "failed before the loss"
			harness++
		}
		if x.out.LossToRunning > 0 {
			total += x.out.LossToRunning
			restores++
		}
		fmt.Fprintf(&b, "%-4d %-7s %-8d %-10s %-6v %-7v %-8d %-8d %-9v %-10v %s\n", i, x.r.dist.Version, x.r.seed, x.r.kind,
			x.r.lossDelay.Round(10*time.Millisecond), x.out.Ahead, x.out.Optimal, x.out.Restored,
			x.out.Takeover.Round(10*time.Millisecond), x.out.LossToRunning.Round(100*time.Millisecond), res)
	}
	ahead := 0
	for _, x := range rows {
		if x.out.Ahead {
			ahead++
		}
	}
	fmt.Fprintf(&b, "invariant violations: %d of %d runs (and %d runs failed before the loss); ZooKeeper ahead of DC2 at the loss: %d runs", violations, len(rows), harness, ahead)
	if restores > 0 {
		fmt.Fprintf(&b, "; mean loss to RUNNING on DC2: %v", (total / time.Duration(restores)).Round(100*time.Millisecond))
	}
	fmt.Println(b.String())
}

func findDist(dists []Dist, version string) Dist {
	for _, d := range dists {
		if d.Version == version {
			return d
		}
	}
	return Dist{}
}
