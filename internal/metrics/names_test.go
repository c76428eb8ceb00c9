package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestFamiliesFollowConventions: the ckptfs_ prefix, _total on exactly
// the counters, base units, no job label (Prometheus's own), no
// duplicates.
func TestFamiliesFollowConventions(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Families {
		if seen[f.Name] {
			t.Errorf("%s twice", f.Name)
		}
		seen[f.Name] = true
		if !model.IsValidLegacyMetricName(f.Name) || !strings.HasPrefix(f.Name, "ckptfs_") {
			t.Errorf("%s: not a ckptfs_ metric name", f.Name)
		}
		if (f.Type == "counter") != strings.HasSuffix(f.Name, "_total") {
			t.Errorf("%s (%s): _total is for counters, and counters only", f.Name, f.Type)
		}
		switch f.Type {
		case "gauge", "counter", "histogram":
		default:
			t.Errorf("%s: type %q", f.Name, f.Type)
		}
		for _, bad := range []string{"_ms", "_milliseconds", "_minutes", "_bytes_total_total"} {
			if strings.Contains(f.Name, bad) {
				t.Errorf("%s: not in base units", f.Name)
			}
		}
		for _, l := range f.Labels {
			if l == "job" || l == "instance" || l == labelSite {
				t.Errorf("%s: label %q is Prometheus's or added to every series", f.Name, l)
			}
		}
		if f.Help == "" {
			t.Errorf("%s: no help", f.Name)
		}
	}
}

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
