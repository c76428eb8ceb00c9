//go:build linux

package realflink

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// rtoCaseEnv selects TestIntegration_HotStandbyRTOCase's case (auto or
// flink-ha); without it the test skips. BenchmarkHotStandbyRTO sets it.
const rtoCaseEnv = "CKPTFS_RTO_CASE"

// TestIntegration_HotStandbyRTOCase is one run of BenchmarkHotStandbyRTO,
// in a process of its own (runHotStandby needs a *testing.T). It prints
// one line "RTO case=... loss_to_running=... takeover=... restored=...".
func TestIntegration_HotStandbyRTOCase(t *testing.T) {
	mode := standbyMode(os.Getenv(rtoCaseEnv))
	if mode == "" {
		t.Skip("a case of BenchmarkHotStandbyRTO (" + rtoCaseEnv + ")")
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
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	r := newRun(t, d, true)
	r.lease = rtoLease
	out := runHotStandby(t, c, r, mode)
	for _, l := range strings.Split(strings.Trim(out.Breakdown, "\n"), "\n") {
		if l != "" {
			fmt.Printf("RTO-STEP %s\n", l)
		}
	}
	fmt.Printf("RTO case=%s loss_to_running=%s takeover=%s restored=%d optimal=%d\n", mode, out.LossToRunning, out.Takeover, out.Restored, out.Optimal)
}

// BenchmarkHotStandbyRTO is the recovery time objective of hot standby
// with automatic takeover (issue 17): from DC1's loss to the job RUNNING
// on DC2, against the same loss with Flink's own HA within one site (DC2's
// Flink on DC1's own NAS: no replica, no ckptfs), both with JobManagers
// and TaskManagers standing by on DC2 and the same seeds, in ABBA order
// (CKPTFS_BENCH_RUNS runs per case, default 2; CKPTFS_BENCH_FLINK picks
// the release, default the newest 1.20). Flink's session timeout is 4 s
// and ckptfs's lease 3 s (rtoLease). It reports both medians, their
// ratio (target at most 1.2) and the takeover's share.
func BenchmarkHotStandbyRTO(b *testing.B) {
	defer benchLoud(b)
	d := benchDist(b)
	runs := benchRuns(b)
	var rto = map[standbyMode][]float64{}
	var takeovers []float64
	for i, auto := range benchOrder(runs) {
		mode := standbyFlinkHA
		if auto {
			mode = standbyAuto
		}
		seed := 500000 + i/2
		cmd := exec.Command(os.Args[0], "-test.run", "^TestIntegration_HotStandbyRTOCase$", "-test.v", "-test.timeout", "15m")
		cmd.Env = append(os.Environ(), rtoCaseEnv+"="+string(mode), benchFlinkEnv+"="+d.Version, fmt.Sprintf("%s=%d", seedEnvVar, seed))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		outb, err := cmd.Output()
		var line string
		sc := bufio.NewScanner(bytes.NewReader(outb))
		var steps []string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "RTO ") {
				line = sc.Text()
			}
			if s, ok := strings.CutPrefix(sc.Text(), "RTO-STEP "); ok {
				steps = append(steps, s)
			}
		}
		if err != nil || line == "" {
			b.Fatalf("run %d (%s, seed %d): %v\n%s", i, mode, seed, err, lastLines(string(outb), 40))
		}
		loss, takeover := fieldDuration(line, "loss_to_running="), fieldDuration(line, "takeover=")
		b.Logf("run %d: %s, seed %d: loss -> RUNNING %v (takeover %v)", i, mode, seed, loss.Round(time.Millisecond), takeover.Round(time.Millisecond))
		for _, s := range steps {
			b.Logf("  %s", s)
		}
		rto[mode] = append(rto[mode], loss.Seconds())
		if mode == standbyAuto {
			takeovers = append(takeovers, takeover.Seconds())
		}
	}
	a, f := benchMedian(rto[standbyAuto]), benchMedian(rto[standbyFlinkHA])
	b.ReportMetric(a, "s-rto-ckptfs")
	b.ReportMetric(f, "s-rto-flink-ha")
	b.ReportMetric(benchRatio(a, f), "rto-ratio")
	b.ReportMetric(benchMedian(takeovers), "s-to-takeover")
	b.Logf("hot standby RTO, Flink %s: ckptfs (takeover auto, lease %v) %s; Flink's own HA in one site %s; ratio %.2f (target <= 1.2); "+
		"DC2's automatic takeover done %s after the loss; Flink session timeout %v (target <= %v)",
		d.Version, rtoLease, benchFmt(rto[standbyAuto], "s"), benchFmt(rto[standbyFlinkHA], "s"), benchRatio(a, f),
		benchFmt(takeovers, "s"), flinkSession, flinkSession+5*time.Second)
}

func fieldDuration(line, key string) time.Duration {
	i := strings.Index(line, key)
	if i < 0 {
		return 0
	}
	v := strings.Fields(line[i+len(key):])[0]
	d, _ := time.ParseDuration(v)
	return d
}

func lastLines(s string, n int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
