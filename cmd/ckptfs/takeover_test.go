package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

func TestTakeoverHelpDocumentsExitCodes(t *testing.T) {
	for cmd, want := range map[string][]string{
		"takeover":       {"4  some job was refused", "5  a Flink JobManager stayed alive", "--dry-run", "--activate-anyway", "--accept-state-loss", "checkpoints_lost", "--wait"},
		"restore-pruned": {"4  this site is not the active one", "5  a Flink JobManager is alive", "--unverified"},
		"status":         {"3  usage, ZooKeeper or I/O error", "--map", "--cluster-id", "--path-root"},
	} {
		out, _, code := ckptfs(t, cmd, "--help")
		for _, w := range want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%s --help (exit %d) lacks %q:\n%s", cmd, code, w, out)
			}
		}
	}
	if _, stderr, code := ckptfs(t, "takeover", "--site", "dc2"); code != 3 || !strings.Contains(stderr, "--zk") {
		t.Errorf("takeover without --zk: exit %d, %q", code, stderr)
	}
	if _, stderr, code := ckptfs(t, "takeover", "--zk", "127.0.0.1:1"); code != 3 || !strings.Contains(stderr, "--site") {
		t.Errorf("takeover without --site: exit %d, %q", code, stderr)
	}
}

// TestIntegration_TakeoverCLI runs the built binary against real
// ZooKeeper: exit 5 while a JobManager lives; once it is gone, exit 4 for
// a job none of whose pointers is complete here, with Flink's namespace
// untouched and the hint naming the newest checkpoint complete at L1.
func TestIntegration_TakeoverCLI(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	storage := t.TempDir()
	cfg := flinkemu.DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.Storage = storage
	cfg.KeepSubsumedData = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	// The replica holds chk-1 whole; the retained 2, 3 and 4 miss a file.
	for _, cp := range jm.Checkpoints(job) {
		if err := os.Remove(cp.StateFiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--zk", c.ConnectString(), "--site", "dc2", "--map", cfg.Mapping()}
	textfile := filepath.Join(t.TempDir(), "ckptfs.prom")
	recorded := append([]string{"--metrics-textfile", textfile}, common...)

	out, stderr, code := ckptfs(t, append([]string{"takeover", "--wait", "300ms"}, recorded...)...)
	if code != 5 || !strings.Contains(stderr, "JobManager") {
		t.Fatalf("takeover with a live JobManager: exit %d\n%s%s", code, out, stderr)
	}

	jm.Close()
	conn := zktest.Connect(t, c.Servers())
	before, err := flinkemu.Dump(conn.Conn, "/flink")
	if err != nil {
		t.Fatal(err)
	}

	out, stderr, code = ckptfs(t, append([]string{"status", "-o", "json"}, common...)...)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	// Closing the client at exit loses nothing: no warning about it.
	if strings.Contains(stderr, "session lost") {
		t.Errorf("status at exit: %s", stderr)
	}
	var status struct {
		JobManager struct{ Alive bool } `json:"jobmanager"`
		Jobs       []struct {
			JobID          string `json:"job_id"`
			Newest         *int64 `json:"newest"`
			NewestComplete *int64 `json:"newest_complete"`
			Pointers       []struct {
				ID       int64 `json:"id"`
				Complete bool  `json:"complete"`
			} `json:"pointers"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	if status.JobManager.Alive || len(status.Jobs) != 1 || status.Jobs[0].Newest == nil || *status.Jobs[0].Newest != 4 ||
		status.Jobs[0].NewestComplete != nil || len(status.Jobs[0].Pointers) != 3 {
		t.Errorf("status: %s", out)
	}

	out, stderr, code = ckptfs(t, append([]string{"takeover", "-o", "json"}, recorded...)...)
	if code != 4 {
		t.Fatalf("takeover: exit %d, want 4\n%s%s", code, out, stderr)
	}
	if strings.Contains(stderr, "session lost") {
		t.Errorf("takeover at exit: %s", stderr)
	}
	var rep struct {
		Site  string `json:"site"`
		Epoch int64  `json:"epoch"`
		Jobs  []struct {
			JobID       string  `json:"job_id"`
			Status      string  `json:"status"`
			Kept        []int64 `json:"kept"`
			Retracted   []int64 `json:"retracted"`
			RestoreHint struct {
				CheckpointID int64  `json:"checkpoint_id"`
				Path         string `json:"path"`
				FlinkRun     string `json:"flink_run"`
				Config       string `json:"config"`
			} `json:"restore_hint"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("takeover JSON: %v\n%s", err, out)
	}
	wantPath := "file:/flink/checkpoints/" + job + "/chk-1"
	if rep.Site != "dc2" || len(rep.Jobs) != 1 {
		t.Fatalf("report: %s", out)
	}
	j := rep.Jobs[0]
	if j.JobID != job || j.Status != "refused" || len(j.Retracted) != 0 || len(j.Kept) != 3 ||
		j.RestoreHint.CheckpointID != 1 || j.RestoreHint.Path != wantPath ||
		j.RestoreHint.FlinkRun != "flink run -s "+wantPath || j.RestoreHint.Config != "execution.savepoint.path: "+wantPath {
		t.Errorf("job report: %+v, want refused with a hint at %s", j, wantPath)
	}

	out, _, code = ckptfs(t, append([]string{"takeover"}, common...)...)
	if code != 4 || !strings.Contains(out, "REFUSED") || !strings.Contains(out, "flink run -s "+wantPath) || !strings.Contains(out, "not activated") {
		t.Errorf("text output (exit %d):\n%s", code, out)
	}

	after, err := flinkemu.Dump(conn.Conn, "/flink")
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("a refused takeover changed Flink's znodes:\n%s", strings.Join(d, "\n"))
	}
	// Of ckptfs's own znodes only the empty skeleton exists.
	own, err := flinkemu.Dump(conn.Conn, "/ckptfs")
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range own {
		switch p {
		case "/ckptfs", "/ckptfs/default", "/ckptfs/default/pruned", "/ckptfs/default/takeover":
			if len(n.Children) > 0 && p != "/ckptfs" && p != "/ckptfs/default" {
				t.Errorf("%s has children %v", p, n.Children)
			}
		case "/ckptfs/default/epoch":
			if string(n.Data) != "0" {
				t.Errorf("epoch %q", n.Data)
			}
		case "/ckptfs/default/lease":
			// Created by the takeover to observe it, owned by nobody.
			if !strings.Contains(string(n.Data), `"site":""`) {
				t.Errorf("lease %s", n.Data)
			}
		default:
			t.Errorf("unexpected znode %s", p)
		}
	}

	// Dry run: the same decision, exit 4, nothing written.
	ownBefore := own
	out, _, code = ckptfs(t, append([]string{"takeover", "--dry-run", "-o", "json"}, recorded...)...)
	if code != 4 || !strings.Contains(out, `"dry_run": true`) {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	own, _ = flinkemu.Dump(conn.Conn, "/ckptfs")
	if d := ownBefore.Diff(own); len(d) > 0 {
		t.Errorf("dry run wrote: %v", d)
	}

	// Restore-pruned refuses: the takeover activated no site.
	out, stderr, code = ckptfs(t, append([]string{"restore-pruned"}, recorded...)...)
	if code != 4 || !strings.Contains(stderr, "no site is active yet") {
		t.Errorf("restore-pruned on a site that is not active: exit %d\n%s%s", code, out, stderr)
	}

	// What node_exporter would read: the runs that wrote (not the dry
	// run), and the last one's exit status.
	f, err := os.Open(textfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range fams["ckptfs_takeover_actions_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "action" {
				got[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"run": 3, "refuse_alive": 1, "refuse_job": 1, "error": 0, "retract": 0, "restore": 0}
	for a, n := range want {
		if got[a] != n {
			t.Errorf("textfile: %s = %v, want %v (all: %v)", a, got[a], n, got)
		}
	}
	if code := fams["ckptfs_takeover_last_exit_code"].GetMetric(); len(code) != 1 || code[0].GetGauge().GetValue() != 4 {
		t.Errorf("last exit code: %v", code)
	}
}
