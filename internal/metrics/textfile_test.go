package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func readTextfile(t *testing.T, path string) scraped {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("node_exporter could not read %s: %v", path, err)
	}
	return scraped(fams)
}

// TestRecordTakeoverAccumulates: counters add up across runs, so that a
// second identical run is seen by increase(); the last run's time and
// exit code are replaced.
func TestRecordTakeoverAccumulates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckptfs.prom")
	t1 := time.Unix(1700000000, 0)
	if err := RecordTakeover(path, "dc2", map[string]uint64{ActionRun: 1, ActionRetract: 2, ActionRefuseJob: 1}, nil, 4, t1); err != nil {
		t.Fatal(err)
	}
	if err := RecordTakeover(path, "dc2", map[string]uint64{ActionRun: 1, ActionRetract: 2, ActionActivate: 1}, nil, 0, t1.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s := readTextfile(t, path)
	for action, want := range map[string]float64{ActionRun: 2, ActionRetract: 4, ActionRefuseJob: 1, ActionActivate: 1} {
		if got := s.value(t, TakeoverActions, "site=dc2,action="+action); got != want {
			t.Errorf("%s = %v, want %v", action, got, want)
		}
	}
	if got := s.value(t, TakeoverLastExitCode, "site=dc2"); got != 0 {
		t.Errorf("last exit code = %v, want 0", got)
	}
	if got := s.value(t, TakeoverLastRun, "site=dc2"); got != float64(t1.Add(time.Minute).Unix()) {
		t.Errorf("last run = %v", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
	if len(leftovers) != 1 {
		t.Errorf("files beside the textfile: %v", leftovers)
	}
}

// TestRecordTakeoverRefusesGarbage: a file that is not in the text
// format is an error, and is left alone.
func TestRecordTakeoverRefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.prom")
	os.WriteFile(garbage, []byte("this is { not metrics\n"), 0o644)
	if err := RecordTakeover(garbage, "dc2", map[string]uint64{ActionRun: 1}, nil, 0, time.Now()); err == nil {
		t.Error("a garbage textfile was accepted")
	}
	if data, _ := os.ReadFile(garbage); !strings.HasPrefix(string(data), "this is") {
		t.Errorf("the garbage file was replaced: %q", data)
	}
	huge := filepath.Join(dir, "huge.prom")
	os.WriteFile(huge, make([]byte, maxTextfileSize+1), 0o644)
	if err := RecordTakeover(huge, "dc2", map[string]uint64{ActionRun: 1}, nil, 0, time.Now()); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a huge textfile: %v", err)
	}
}

// TestRecordTakeoverWritesEveryAction: every run writes every action, 0
// for those that never happened, so a refusal's series exists before the
// refusal; an action this version does not know, left by another, stays.
func TestRecordTakeoverWritesEveryAction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckptfs.prom")
	if err := RecordTakeover(path, "dc2", map[string]uint64{ActionRun: 1, ActionActivate: 1}, nil, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	s := readTextfile(t, path)
	actions := family(TakeoverActions).Values
	for _, a := range actions {
		want := 0.0
		if a == ActionRun || a == ActionActivate {
			want = 1
		}
		if got := s.value(t, TakeoverActions, "site=dc2,action="+a); got != want {
			t.Errorf("%s = %v, want %v", a, got, want)
		}
	}
	if n := len(s[TakeoverActions].GetMetric()); n != len(actions) {
		t.Errorf("%d action series, want %d: %s", n, len(actions), s.series(TakeoverActions))
	}

	old := "# TYPE ckptfs_takeover_actions_total counter\nckptfs_takeover_actions_total{action=\"gone\",site=\"dc2\"} 3\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RecordTakeover(path, "dc2", map[string]uint64{ActionRun: 1}, nil, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	s = readTextfile(t, path)
	if got := s.value(t, TakeoverActions, "site=dc2,action=gone"); got != 3 {
		t.Errorf("an unknown action = %v, want 3 kept", got)
	}
	if got := s.value(t, TakeoverActions, "site=dc2,action="+ActionRefuseJob); got != 0 {
		t.Errorf("refuse_job = %v, want 0", got)
	}
}

// TestRecordTakeoverRollbacks: the rollback windows of a takeover that
// activated replace the file's; a run without them keeps them.
func TestRecordTakeoverRollbacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckptfs.prom")
	now := time.Unix(1700000000, 0)
	record := func(rollbacks map[string]int64) scraped {
		t.Helper()
		if err := RecordTakeover(path, "dc2", map[string]uint64{ActionRun: 1}, rollbacks, 0, now); err != nil {
			t.Fatal(err)
		}
		return readTextfile(t, path)
	}
	s := record(map[string]int64{"a": 2, "b": 0})
	if a, b := s.value(t, TakeoverRollback, "site=dc2,job_id=a"), s.value(t, TakeoverRollback, "site=dc2,job_id=b"); a != 2 || b != 0 {
		t.Errorf("windows a=%v b=%v, want 2 and 0", a, b)
	}
	if s = record(nil); s.value(t, TakeoverRollback, "site=dc2,job_id=a") != 2 {
		t.Error("a run without windows dropped the last takeover's")
	}
	s = record(map[string]int64{"c": 1})
	if _, ok := s.find(TakeoverRollback, "job_id=a"); ok || s.value(t, TakeoverRollback, "site=dc2,job_id=c") != 1 {
		t.Errorf("the next takeover's windows did not replace the last's: %s", s.series(TakeoverRollback))
	}
}
