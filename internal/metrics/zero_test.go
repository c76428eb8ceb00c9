package metrics

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// mountCounters are the counters only a mount exports (ChecksummedBytes
// has one value from the mount, one from the catalog).
var mountCounters = []string{HiddenCheckpointAccesses, FUSEReadOnlyRefusals, DeadlineRefusals,
	WritesAfterFence, GuardedDeletions, FUSEOpens, ChecksummedBytes}

// checkBornAtZero checks a scrape of a daemon that has seen nothing yet:
// every counter of its sources (all but skip) is exported, with every
// value of Family.Values and no other, and every series is 0. A counter
// whose label values come from the daemon's state (job_id) may have no
// series yet.
func checkBornAtZero(t *testing.T, s scraped, skip ...string) {
	t.Helper()
	for _, f := range Families {
		if f.Type != "counter" || f.Textfile || slices.Contains(skip, f.Name) {
			continue
		}
		fam := s[f.Name]
		if fam == nil {
			if len(f.Labels) == 0 || len(f.Values) > 0 {
				t.Errorf("%s is not exported before its first event", f.Name)
			}
			continue
		}
		var values []string
		for _, m := range fam.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s{%s} is born at %v, want 0", f.Name, labelsOf(m), v)
			}
			if len(f.Labels) > 0 {
				values = append(values, labelValue(m, f.Labels[0]))
			}
		}
		if len(f.Values) > 0 && !sameSet(values, f.Values) {
			t.Errorf("%s is exported with %s=%q, want %q (Family.Values)", f.Name, f.Labels[0], values, f.Values)
		}
	}
}

// checkNewSeriesAtZero checks that every counter series in after that
// was not in before is 0: a label set that appears with the daemon's
// state is born at 0, before its first event.
func checkNewSeriesAtZero(t *testing.T, before, after scraped) {
	t.Helper()
	for _, f := range Families {
		if f.Type != "counter" || after[f.Name] == nil {
			continue
		}
		for _, m := range after[f.Name].GetMetric() {
			if _, old := before.find(f.Name, labelsOf(m)); !old && m.GetCounter().GetValue() != 0 {
				t.Errorf("%s{%s} appeared at %v, want 0", f.Name, labelsOf(m), m.GetCounter().GetValue())
			}
		}
	}
}

// TestCountersBornAtZero: the catalog's counters and the ZooKeeper
// side's, before the daemon connected (no publisher, no sweeper yet).
func TestCountersBornAtZero(t *testing.T) {
	backing := t.TempDir()
	if err := os.MkdirAll(filepath.Join(backing, "checkpoints", testJob, "chk-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	zkm := &ZooKeeper{Failover: func() Failover { return Failover{} }}
	zkm.Lag = NewLagTracker(zkm.Status, time.Minute)
	src := Sources{Site: "dc2", Version: "test", Catalog: mounttest.Catalog(t, backing), ZooKeeper: zkm}
	checkBornAtZero(t, scrape(t, src), mountCounters...)
}

// TestIntegration_MountCountersBornAtZero: every counter of a daemon
// with a replica mount, and the hidden accesses of every job the catalog
// finds, are 0 before the first event; the first access counts 1.
func TestIntegration_MountCountersBornAtZero(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "orig", "checkpoints", testJob)
	if err := os.MkdirAll(filepath.Join(job, "chk-1"), 0o755); err != nil { // no _metadata: incomplete
		t.Fatal(err)
	}
	cat := mounttest.Catalog(t, filepath.Join(dir, "orig"))
	m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: fusefs.ModeReplica, Visibility: cat})
	zkm := &ZooKeeper{Failover: func() Failover { return Failover{} }}
	zkm.Lag = NewLagTracker(zkm.Status, time.Minute)
	src := Sources{Site: "dc2", Version: "test", Catalog: cat, Mount: m.Server, ZooKeeper: zkm}
	fresh := scrape(t, src)
	checkBornAtZero(t, fresh)

	cat.Refresh(context.Background())
	known := scrape(t, src)
	checkNewSeriesAtZero(t, fresh, known)
	if v := known.value(t, HiddenCheckpointAccesses, "job_id="+testJob); v != 0 {
		t.Errorf("hidden accesses of a job the catalog found = %v, want 0", v)
	}
	if _, err := os.Stat(filepath.Join(m.Mnt, "checkpoints", testJob, "chk-1")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat of an incomplete checkpoint: %v", err)
	}
	accessed := scrape(t, src)
	checkNewSeriesAtZero(t, known, accessed)
	if v := accessed.value(t, HiddenCheckpointAccesses, "job_id="+testJob); v != 1 {
		t.Errorf("hidden accesses after the first = %v, want 1", v)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// labelsOf is m's labels as scraped.find takes them.
func labelsOf(m *dto.Metric) string {
	var kv []string
	for _, l := range m.GetLabel() {
		kv = append(kv, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(kv, ",")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestTakeoverRollbackExported: the rollback windows of the daemon's
// last automatic takeover are a gauge a job, absent before one.
func TestTakeoverRollbackExported(t *testing.T) {
	f := Failover{}
	zkm := &ZooKeeper{Failover: func() Failover { return f }}
	zkm.Lag = NewLagTracker(zkm.Status, time.Minute)
	src := Sources{Site: "dc2", Version: "test", Catalog: mounttest.Catalog(t, t.TempDir()), ZooKeeper: zkm}
	if s := scrape(t, src); len(s[TakeoverRollback].GetMetric()) != 0 {
		t.Errorf("before a takeover: %s", s.series(TakeoverRollback))
	}
	f.Rollbacks = map[string]int64{"a": 3, "b": 0}
	s := scrape(t, src)
	if a, b := s.value(t, TakeoverRollback, "job_id=a"), s.value(t, TakeoverRollback, "job_id=b"); a != 3 || b != 0 {
		t.Errorf("windows a=%v b=%v, want 3 and 0", a, b)
	}
}
