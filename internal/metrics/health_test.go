package metrics

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

func TestLagProblems(t *testing.T) {
	now := time.Unix(1700000000, 0)
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	fresh := LagSnapshot{Updated: now.Add(-time.Second), Jobs: []JobLag{
		{JobID: "a", Pointer: i64(9), CompletePointer: i64(7), LagCheckpoints: i64(2), LagSeconds: f64(90)},
		{JobID: "b", Pointer: i64(4)},
		{JobID: "c"},
	}}
	cases := []struct {
		name string
		snap LagSnapshot
		th   Thresholds
		want []string
	}{
		{"no thresholds", fresh, NoThresholds, nil},
		{"within", LagSnapshot{Updated: fresh.Updated, Jobs: fresh.Jobs[:1]}, Thresholds{MaxLag: 2, MaxLagSeconds: 90}, nil},
		{"too many checkpoints and none complete", fresh, Thresholds{MaxLag: 1, MaxLagSeconds: -1},
			[]string{"job a: ZooKeeper is 2 checkpoints ahead", "job b: ZooKeeper points at checkpoint 4 and none"}},
		{"too many seconds", LagSnapshot{Updated: fresh.Updated, Jobs: fresh.Jobs[:1]}, Thresholds{MaxLag: -1, MaxLagSeconds: 60},
			[]string{"job a: ZooKeeper is 90 seconds ahead"}},
		{"never computed", LagSnapshot{LastError: "zk down"}, Thresholds{MaxLag: 3, MaxLagSeconds: -1},
			[]string{"lag unknown: never computed: zk down"}},
		{"stale", LagSnapshot{Updated: now.Add(-time.Hour), Jobs: fresh.Jobs[:1]}, Thresholds{MaxLag: 3, MaxLagSeconds: -1},
			[]string{"lag unknown: last computed 1h0m0s ago"}},
		// Another daemon of the site holds the duty and computes it.
		{"idle", LagSnapshot{Idle: true, Failures: 2}, Thresholds{MaxLag: 3, MaxLagSeconds: 60}, nil},
	}
	for _, c := range cases {
		got := lagProblems(c.snap, 10*time.Second, c.th, now)
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], c.want[i]) {
				t.Errorf("%s: %q, want it to start with %q", c.name, got[i], c.want[i])
			}
		}
	}
}

// TestHealthNoticesAStalledCatalog: a catalog whose passes stopped
// finishing (a hung backing file system) fails the health check, one
// that is merely between passes does not.
func TestHealthNoticesAStalledCatalog(t *testing.T) {
	cat := mounttest.Catalog(t, t.TempDir())
	cat.Refresh(context.Background())
	src := Sources{Catalog: cat, Poll: 2 * time.Second}
	last := cat.Stats().LastPass
	if h := CheckHealth(src, NoThresholds, last.Add(30*time.Second)); !h.OK || h.LastPass == nil {
		t.Errorf("30s after a pass: %+v", h)
	}
	h := CheckHealth(src, NoThresholds, last.Add(2*time.Minute))
	if h.OK || len(h.Problems) != 1 || !strings.HasPrefix(h.Problems[0], "verification stalled: the last pass ended 2m0s ago") {
		t.Errorf("2m after a pass: %+v", h)
	}
}

// TestLagIdleExportsNoLag: a daemon that stopped holding its site's duty
// (design §5.5.3) exports no lag series, so that no lag alert reads a
// figure that is not computed any more; its failures stay counted.
func TestLagIdleExportsNoLag(t *testing.T) {
	zero := int64(0)
	zkm := &ZooKeeper{}
	zkm.Lag = NewLagTracker(func(context.Context) (*zkbridge.StatusReport, error) {
		return &zkbridge.StatusReport{Jobs: []*zkbridge.JobStatus{{JobID: "j1", Newest: &zero, NewestComplete: &zero, LagCheckpoints: &zero}}}, nil
	}, time.Minute)
	src := Sources{Site: "dc2", Version: "test", ZooKeeper: zkm}
	if err := zkm.Lag.Update(context.Background()); err != nil {
		t.Fatal(err)
	}
	held := scrape(t, src)
	for _, name := range []string{LagLastUpdate, FlinkPointer, LagCheckpoints} {
		if _, ok := held.find(name, ""); !ok {
			t.Fatalf("holder: no %s", name)
		}
	}
	zkm.Lag.Idle()
	idle := scrape(t, src)
	for _, name := range []string{LagLastUpdate, FlinkPointer, FlinkCompletePointer, LagCheckpoints, LagSeconds} {
		if _, ok := idle.find(name, ""); ok {
			t.Errorf("idle: %s still exported: %s", name, idle.series(name))
		}
	}
	if _, ok := idle.find(LagUpdateFailures, ""); !ok {
		t.Errorf("idle: no %s", LagUpdateFailures)
	}
	if h := CheckHealth(src, Thresholds{MaxLag: 1, MaxLagSeconds: -1}, time.Now()); slices.ContainsFunc(h.Problems, func(p string) bool { return strings.Contains(p, "lag") }) {
		t.Errorf("idle: health problems %q", h.Problems)
	}
}
