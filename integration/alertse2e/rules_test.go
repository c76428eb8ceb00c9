package alertse2e

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestScaledRulesChangeOnlyFor: the copy the second Prometheus loads
// differs from the repository's rules in its for: lines alone, each
// duration divided by forFactor. Runs without Prometheus (make unit).
func TestScaledRulesChangeOnlyFor(t *testing.T) {
	data, err := os.ReadFile(rulesFile(t))
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := scaleFor(data, forFactor)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := parseRules(data)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := parseRules(scaled)
	if err != nil {
		t.Fatalf("the scaled copy: %v", err)
	}
	if len(cp.Groups) != len(orig.Groups) {
		t.Fatalf("the copy has %d groups, the rules %d", len(cp.Groups), len(orig.Groups))
	}
	withFor := 0
	for gi, g := range orig.Groups {
		if len(cp.Groups[gi].Rules) != len(g.Rules) || cp.Groups[gi].Name != g.Name {
			t.Fatalf("group %s differs in the copy", g.Name)
		}
		for ri, r := range g.Rules {
			s := cp.Groups[gi].Rules[ri]
			if r.For == "" {
				if s.For != "" {
					t.Errorf("%s: for: %q in the copy, none in the rules", r.Alert, s.For)
				}
			} else {
				withFor++
				d, err1 := model.ParseDuration(r.For)
				got, err2 := model.ParseDuration(s.For)
				if err1 != nil || err2 != nil || time.Duration(got) != time.Duration(d)/forFactor {
					t.Errorf("%s: for: %q in the copy, want %q divided by %d", r.Alert, s.For, r.For, forFactor)
				}
			}
			r.For, s.For = "", ""
			if !reflect.DeepEqual(r, s) {
				t.Errorf("%s differs in the copy beyond its for:\n%+v\n%+v", r.Alert, r, s)
			}
		}
	}
	if withFor == 0 {
		t.Error("no rule has a for:")
	}
	// Line by line, only for: lines differ.
	a, b := strings.Split(string(data), "\n"), strings.Split(string(scaled), "\n")
	if len(a) != len(b) {
		t.Fatalf("the copy has %d lines, the rules %d", len(b), len(a))
	}
	changed := 0
	for i := range a {
		if a[i] != b[i] {
			changed++
			if !forLine.MatchString(a[i]) || !forLine.MatchString(b[i]) {
				t.Errorf("line %d changed and is no for: line: %q -> %q", i+1, a[i], b[i])
			}
		}
	}
	if changed != withFor {
		t.Errorf("%d lines changed, %d rules have a for:", changed, withFor)
	}
	t.Logf("%d rules with for:, each divided by %d in the copy", withFor, forFactor)
}
