//go:build linux

package realflink

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// freePorts returns n TCP ports free on addr right now and never handed
// out before in this process, to ZooKeeper servers either: a site's
// servers bind in its own network namespace, where a probe here does
// not see them.
func freePorts(tb testing.TB, addr string, n int) []int {
	tb.Helper()
	ps, err := zktest.FreePorts(addr, n)
	if err != nil {
		tb.Fatal(err)
	}
	return ps
}

// startCluster writes a cluster's configuration in site and starts its
// JobManager and TaskManager.
func startCluster(tb testing.TB, site *Site, cfg ClusterConfig) (fl *Cluster, jm, tm *Process) {
	tb.Helper()
	fl, err := NewCluster(site, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if jm, err = fl.StartJobManager("jobmanager"); err != nil {
		tb.Fatal(err)
	}
	if tm, err = fl.StartTaskManager("taskmanager"); err != nil {
		tb.Fatal(err)
	}
	return fl, jm, tm
}

// jobArgs are the sequence job's arguments in the tests' shape: its
// report file, and for the job of Flink 1.4-1.13 (job/src-1.4) the
// checkpoint interval, which 1.4 has no setting for.
func jobArgs(d Dist, report string) []string {
	args := []string{"--report", report, "--rate", strconv.Itoa(rate),
		"--keys", strconv.Itoa(keys), "--payload", strconv.Itoa(payload), "--parallelism", strconv.Itoa(parallelism)}
	if !d.AtLeast(1, 14) {
		args = append(args, "--interval", strconv.FormatInt(interval.Milliseconds(), 10))
	}
	return args
}

// waitUntil polls ok until it holds, failing after timeout or as soon as
// one of procs ends (with its output's and its Flink log's tail).
func waitUntil(tb testing.TB, timeout time.Duration, what string, ok func() bool, procs ...*Process) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		for _, p := range procs {
			select {
			case <-p.Exited():
				tb.Fatalf("%s exited while waiting for %s: %v\n%s\n%s", p.Name, what, p.Err(), p.Tail(20), logTail(p.FlinkLog, 30))
			default:
			}
		}
		if time.Now().After(deadline) {
			var tails []string
			for _, p := range procs {
				tails = append(tails, fmt.Sprintf("%s:\n%s\n%s", p.Name, p.Tail(20), logTail(p.FlinkLog, 30)))
			}
			tb.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, strings.Join(tails, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail is the last n lines of the file at path ("" for no file).
func logTail(path string, n int) string {
	if path == "" {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(data), n)
}

// firstLine is the first non-blank line of s, trimmed.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}
