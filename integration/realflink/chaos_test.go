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

// TestChaosFlink (make chaos-flink) runs the real-Flink failover many
// times, randomized from one series seed across the releases that run
// here (use test or runs in flink/versions.tsv), the replication kind and
// the moment of loss, which falls anywhere in the checkpoint cycle:
// between checkpoints, while one is written, while its HA file is; one
// run in four is the baseline (DC2 without ckptfs: Flink must loop on the
// checkpoint whenever ZooKeeper pointed past DC2, and restore the newest
// otherwise); one run with ckptfs in four loses DC1 before the job graph
// or the job's blob directory reached DC2 (the takeover must refuse the
// job with job_graph_incomplete or blobs_incomplete, then, once it
// arrives, pass, and Flink restore). It prints a table; a failed run is an invariant violation,
// replayed alone with its own seed (CKPTFS_CHAOS_FLINK_REPLAY).
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
	// CKPTFS_CHAOS_FLINK_VERSIONS="1.20.5 2.3.0" limits the releases.
	only := strings.Fields(os.Getenv("CKPTFS_CHAOS_FLINK_VERSIONS"))
	var dists []Dist
	for _, r := range all {
		if r.Use != "fails" && (len(only) == 0 || slices.Contains(only, r.Version)) {
			dists = append(dists, FindDist(t, r))
		}
	}
	// CKPTFS_CHAOS_FLINK_MODE=hotstandby runs every run as
	// TestIntegration_HotStandby does: Flink on both sites, takeover
	// auto, nothing run after the loss (no baseline runs).
	hot := os.Getenv("CKPTFS_CHAOS_FLINK_MODE") == "hotstandby"
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	rng := rand.New(rand.NewPCG(series, 0xc4a05))
	// CKPTFS_CHAOS_FLINK_REPLAY=<release>:<seed>[:plain] replays one run
	// (plain: the baseline).
	var replay struct {
		release string
		seed    uint64
		plain   bool
	}
	if rp := os.Getenv("CKPTFS_CHAOS_FLINK_REPLAY"); rp != "" {
		parts := strings.Split(rp, ":")
		var err error
		if len(parts) >= 2 {
			replay.release = parts[0]
			replay.seed, err = strconv.ParseUint(parts[1], 10, 64)
		}
		if len(parts) < 2 || len(parts) > 3 || err != nil || (len(parts) == 3 && parts[2] != "plain") {
			t.Fatalf("CKPTFS_CHAOS_FLINK_REPLAY=%q: want <release>:<seed>[:plain]", rp)
		}
		replay.plain = len(parts) == 3
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
		withCkptfs := rng.IntN(4) != 0 || hot
		if replay.release != "" {
			if i > 0 {
				break
			}
			seed, withCkptfs = replay.seed, !replay.plain
			if d = findDist(dists, replay.release); d.Home == "" {
				t.Fatalf("release %s does not run here", replay.release)
			}
		}
		var r *run
		name := fmt.Sprintf("%03d-%s-%d", i, d.Version, seed)
		if !withCkptfs {
			name += "-plain"
		}
		if hot {
			name += "-hotstandby"
		}
		ok := t.Run(name, func(t *testing.T) {
			t.Setenv(seedEnvVar, strconv.FormatUint(seed, 10))
			r = newRun(t, d, withCkptfs)
			if hot {
				// Both orders: a lease longer than Flink's session (DC2's
				// JobManager leads first and the mount holds its reads) and
				// a shorter one (the takeover is ready as it is elected).
				if seed%2 == 1 {
					r.lease = rtoLease
				}
				runHotStandby(t, c, r, standbyAuto)
			} else {
				runFailover(t, c, r)
			}
		})
		rows = append(rows, row{r, r.out, ok})
	}
	var b strings.Builder
	mode := ""
	if hot {
		mode = ", hot standby (takeover auto)"
	}
	fmt.Fprintf(&b, "\nchaos-flink: %d runs, series seed %d%s\n", len(rows), series, mode)
	fmt.Fprintf(&b, "%-4s %-13s %-8s %-10s %-8s %-28s %-7s %-8s %-8s %-9s %-10s %-14s %s\n",
		"run", "flink", "seed", "repl", "dc2", "loss", "ahead", "optimal", "restored", "takeover", "loss→run", "result", "caught on DC1")
	violations, harness := 0, 0
	var total time.Duration
	restores, plain, looped, skipped := 0, 0, 0, 0
	for i, x := range rows {
		res, dc2, takeover := "ok", "ckptfs", x.out.Takeover.Round(10*time.Millisecond).String()
		if hot {
			dc2 = "lease " + x.r.leaseOr(standbyLease).String()
		}
		if !x.r.ckptfs {
			dc2, takeover = "plain", "-"
			plain++
			switch {
			case x.out.Failures > 0:
				res = fmt.Sprintf("ok: looped %d×", x.out.Failures)
				looped++
			case x.out.Ahead && x.out.Restored >= 0:
				// ZooKeeper's newest HA files missing on DC2: a release
				// that skips them restored the newest complete one.
				res = "ok: skipped HA"
				skipped++
			}
		}
		switch {
		case !x.ok && x.out.Lost:
			res = "VIOLATION"
			violations++
		case !x.ok:
			res = "failed before the loss"
			harness++
		case x.out.Refused:
			res = "ok: refused (none complete)"
		}
		if x.r.ckptfs && x.out.LossToRunning > 0 {
			total += x.out.LossToRunning
			restores++
		}
		flink := x.r.dist.Version
		if x.r.backend != "" {
			flink += "/" + map[string]string{"filesystem": "heap", "rocksdb": "rdb", "rocksdb-incremental": "rdb-i"}[x.r.backend]
		}
		fmt.Fprintf(&b, "%-4d %-13s %-8d %-10s %-8s %-28s %-7v %-8d %-8d %-9s %-10v %-14s %s\n", i, flink, x.r.seed, x.r.kind, dc2,
			lossColumn(x.r), x.out.Ahead, x.out.Optimal, x.out.Restored,
			takeover, x.out.LossToRunning.Round(100*time.Millisecond), res, x.out.Hit)
	}
	ahead, inFlight, orphanHA := 0, 0, 0
	byMoment, held := map[string]int{}, map[string]int{}
	for _, x := range rows {
		byMoment[x.r.moment]++
		if x.r.heldBack != "" {
			held[x.r.heldBack]++
		}
		if x.out.Ahead {
			ahead++
		}
		if strings.Contains(x.out.Hit, "without _metadata") || strings.Contains(x.out.Hit, "without an HA file") {
			inFlight++
		}
		if strings.Contains(x.out.Hit, "HA file without pointer") {
			orphanHA++
		}
	}
	fmt.Fprintf(&b, "moments of loss:")
	for _, m := range moments {
		fmt.Fprintf(&b, " %s %d", m.name, byMoment[m.name])
	}
	for _, h := range heldBackParts {
		fmt.Fprintf(&b, "; job's %s not on DC2 %d", h, held[h])
	}
	fmt.Fprintf(&b, "; caught on DC1: a checkpoint being written in %d runs, an HA file without its pointer in %d\n", inFlight, orphanHA)
	fmt.Fprintf(&b, "invariant violations: %d of %d runs (and %d runs failed before the loss); ZooKeeper ahead of DC2 at the loss: %d runs", violations, len(rows), harness, ahead)
	fmt.Fprintf(&b, "; baseline (no ckptfs on DC2): %d runs, %d of them looping on one checkpoint, %d restoring a complete one after skipping unreadable HA files (before 1.12.5)", plain, looped, skipped)
	if restores > 0 {
		fmt.Fprintf(&b, "; mean loss to RUNNING on DC2 with ckptfs: %v", (total / time.Duration(restores)).Round(100*time.Millisecond))
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

// lossColumn is the table's moment of loss, with what of the job's HA
// state was held back from DC2.
func lossColumn(r *run) string {
	s := fmt.Sprintf("%s+%v", r.moment, r.lossDelay.Round(time.Millisecond))
	if r.heldBack != "" {
		s += "+no-" + r.heldBack
	}
	return s
}
