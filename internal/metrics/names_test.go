package metrics

import (
	"strings"
	"testing"

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
