package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/logkeys"
)

// metricsAddr waits for the daemon's "serving metrics" line (it logs
// JSON) and returns its address.
func (d *mountProc) metricsAddr(t *testing.T) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-d.logs:
			if !ok {
				t.Fatal("the daemon exited before serving metrics")
			}
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "serving metrics" {
				continue
			}
			if rec.Addr == "" {
				t.Fatalf("no addr in %q", line)
			}
			return rec.Addr
		case <-timeout:
			t.Fatal("the daemon did not log serving metrics")
		}
	}
}

// scrapeDaemon reads a daemon's /metrics with Prometheus's text parser.
func scrapeDaemon(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// seriesValue returns the value of the series of name with label
// key=value (or the only series when key is empty).
func seriesValue(fams map[string]*dto.MetricFamily, name, key, value string) (float64, bool) {
	for _, m := range fams[name].GetMetric() {
		match := key == ""
		for _, l := range m.GetLabel() {
			if l.GetName() == key && l.GetValue() == value {
				match = true
			}
		}
		if !match {
			continue
		}
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

// waitMetric polls the daemon until the series has the value.
func waitMetric(t *testing.T, addr, name, key, value string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, ok := seriesValue(scrapeDaemon(t, addr), name, key, value)
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{%s=%q} = %v (present %v), want %v", name, key, value, got, ok, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// health runs ckptfs health and returns its output, exit code and
// duration.
func health(t *testing.T, args ...string) (string, int, time.Duration) {
	t.Helper()
	start := time.Now()
	out, stderr, code := ckptfs(t, append([]string{"health"}, args...)...)
	return out + stderr, code, time.Since(start)
}

// waitHealth runs ckptfs health until its exit code is want.
func waitHealth(t *testing.T, want int, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code, _ := health(t, args...)
		if code == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("health %v: exit %d, want %d\n%s", args, code, want, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIntegration_MetricsAndHealth runs the daemon over checkpoints an
// emulated Flink JobManager writes, against a real ZooKeeper, and checks
// what /metrics and ckptfs health say: while the replica lags, when the
// ZooKeeper session is lost, when the daemon hangs and when it is gone.
func TestIntegration_MetricsAndHealth(t *testing.T) {
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	top := t.TempDir()
	storage, mnt := filepath.Join(top, "storage"), filepath.Join(top, "mnt")
	os.MkdirAll(storage, 0o755)
	os.MkdirAll(mnt, 0o755)
	fcfg := flinkemu.DefaultConfig()
	fcfg.Servers, fcfg.Storage, fcfg.KeepSubsumedData = c.Servers(), storage, true
	jm, err := flinkemu.Start(ctx, fcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	checkpoint := func(i int) *flinkemu.Checkpoint {
		cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	checkpoint(1)
	checkpoint(2)

	proxy := zktest.NewProxy(t, c.Servers()[0])
	d := startMount(t, "--log-format", "json", "--mode", "replica", "--site", "dc2", "--zk", proxy.Addr(), "--map", fcfg.Mapping(),
		"--poll", "200ms", "--lag-interval", "200ms", "--metrics-addr", "127.0.0.1:0", storage, mnt)
	addr := d.metricsAddr(t)
	url := "http://" + addr

	waitMetric(t, addr, "ckptfs_checkpoint_lag_checkpoints", "job_id", job, 0)
	fams := scrapeDaemon(t, addr)
	for _, c := range []struct {
		name, key, value string
		want             float64
	}{
		{"ckptfs_mount_mode", "mode", "replica", 1},
		{"ckptfs_zookeeper_session_state", "state", "connected", 1},
		{"ckptfs_site_newest_complete_checkpoint_id", "job_id", job, 2},
		{"ckptfs_flink_pointer_checkpoint_id", "job_id", job, 2},
		{"ckptfs_build_info", "site", "dc2", 1},
	} {
		if got, ok := seriesValue(fams, c.name, c.key, c.value); !ok || got != c.want {
			t.Errorf("%s{%s=%q} = %v (present %v), want %v", c.name, c.key, c.value, got, ok, c.want)
		}
	}
	if out, code, _ := health(t, "--metrics-url", url, "--max-lag", "0"); code != 0 || !strings.HasPrefix(out, "ok:") || !strings.Contains(out, "mount "+mnt+" answers") {
		t.Errorf("health of a replica that keeps up: exit %d\n%s", code, out)
	}

	// DC1 goes on; the replica does not get checkpoints 3 and 4 whole.
	for i := 3; i <= 4; i++ {
		if err := os.Remove(checkpoint(i).StateFiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	waitMetric(t, addr, "ckptfs_checkpoint_lag_checkpoints", "job_id", job, 2)
	waitMetric(t, addr, "ckptfs_checkpoint_lag_seconds", "job_id", job, 120)
	waitMetric(t, addr, "ckptfs_incomplete_checkpoints", "job_id", job, 2)
	// Flink asks for checkpoint 4 on this site: refused, and counted.
	if _, err := os.Stat(filepath.Join(mnt, "checkpoints", job, "chk-4", "_metadata")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat of an incomplete checkpoint: %v", err)
	}
	waitMetric(t, addr, "ckptfs_hidden_checkpoint_accesses_total", "job_id", job, 1)
	if out, code, _ := health(t, "--metrics-url", url, "--max-lag", "1"); code != 1 || !strings.Contains(out, "job "+job+": ZooKeeper is 2 checkpoints ahead of this site (max 1)") {
		t.Errorf("health with the lag above --max-lag: exit %d\n%s", code, out)
	}
	if out, code, _ := health(t, "--metrics-url", url, "--max-lag-time", "90s"); code != 1 || !strings.Contains(out, "120 seconds ahead") {
		t.Errorf("health with the lag above --max-lag-time: exit %d\n%s", code, out)
	}
	if out, code, _ := health(t, "--metrics-url", url, "--max-lag", "2", "--max-lag-time", "2m"); code != 0 {
		t.Errorf("health with the lag at the limits: exit %d\n%s", code, out)
	}

	// The daemon loses ZooKeeper.
	proxy.Block()
	proxy.DropConns()
	out := waitHealth(t, 1, "--metrics-url", url)
	if !strings.Contains(out, "ZooKeeper session") {
		t.Errorf("health without a session:\n%s", out)
	}
	proxy.Unblock()
	waitHealth(t, 0, "--metrics-url", url)

	// The daemon hangs: health gives up after --timeout.
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, code, took := health(t, "--metrics-url", url, "--mountpoint", mnt, "--timeout", "1s")
	d.cmd.Process.Signal(syscall.SIGCONT)
	if code != 1 || !strings.Contains(out, "statfs did not answer within 1s") || !strings.Contains(out, "did not answer within 1s") || took > 15*time.Second {
		t.Errorf("health of a hung daemon: exit %d after %v\n%s", code, took, out)
	}

	// The daemon is gone: the mount answers ENOTCONN.
	d.cmd.Process.Kill()
	d.cmd.Wait()
	out, code, _ = health(t, "--metrics-url", url, "--mountpoint", mnt)
	if code != 1 || !strings.Contains(out, "the daemon is gone (ENOTCONN)") || !strings.Contains(out, "daemon: ") {
		t.Errorf("health of a dead daemon: exit %d\n%s", code, out)
	}
	checkJSONLog(t, d.allLines())
}

// checkJSONLog checks every line the daemon logged with --log-format
// json: one JSON object, each key once, every key from the vocabulary,
// site on every line of a component, job and checkpoint ids where a
// checkpoint is named.
func checkJSONLog(t *testing.T, lines []string) {
	t.Helper()
	sawIncomplete := false
	for _, line := range lines {
		keys, rec, err := jsonKeys(line)
		if err != nil {
			t.Errorf("not one JSON object: %v: %s", err, line)
			continue
		}
		for _, k := range keys {
			if _, ok := logkeys.Keys[k]; !ok && !slices.Contains(logkeys.Reserved, k) {
				t.Errorf("log key %q is not in the vocabulary: %s", k, line)
			}
		}
		if rec["component"] != nil && rec["site"] != "dc2" {
			t.Errorf("no site: %s", line)
		}
		if rec["msg"] == "Flink asked for incomplete chk-N" {
			sawIncomplete = true
			if rec["job"] == nil || rec["checkpoint"] != float64(4) {
				t.Errorf("an incomplete checkpoint without its job and id: %s", line)
			}
		}
	}
	if !sawIncomplete {
		t.Errorf("no line about Flink asking for an incomplete checkpoint in %d lines", len(lines))
	}
}

// jsonKeys returns the keys of a JSON object in order, failing on a key
// given twice.
func jsonKeys(line string) ([]string, map[string]any, error) {
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k := tok.(string)
		if seen[k] {
			return nil, nil, fmt.Errorf("key %q twice", k)
		}
		seen[k] = true
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, nil, err
		}
	}
	return keys, rec, nil
}

func TestHealthUsageAndPlainDirectory(t *testing.T) {
	if _, _, code := ckptfs(t, "health"); code != 3 {
		t.Errorf("health without a check: exit %d, want 3", code)
	}
	if _, _, code := ckptfs(t, "health", "--max-lag", "3", "--mountpoint", "/"); code != 3 {
		t.Errorf("--max-lag without --metrics-url: exit %d, want 3", code)
	}
	dir := t.TempDir()
	if out, code, _ := health(t, "--mountpoint", dir); code != 1 || !strings.Contains(out, "not mounted") {
		t.Errorf("health of a plain directory: exit %d\n%s", code, out)
	}
	// A URL that cannot be the daemon's is a usage error, as config check says.
	if out, code, _ := health(t, "--metrics-url", "ftp://x"); code != 3 || !strings.Contains(out, "want http://HOST:PORT") {
		t.Errorf("health with a bad URL: exit %d\n%s", code, out)
	}
}
