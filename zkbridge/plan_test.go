package zkbridge

import (
	"slices"
	"testing"
)

// p builds pointer facts: v visible, c L2-complete, h HA file readable.
func p(id int64, flags string) PointerFacts {
	f := PointerFacts{ID: id}
	for _, c := range flags {
		switch c {
		case 'v':
			f.Visible = true
		case 'c':
			f.L2Complete = true
		case 'h':
			f.HAFileReadable = true
		}
	}
	return f
}

func TestPlanJob(t *testing.T) {
	above, unreadable := ReasonAboveNewestComplete, ReasonHAFileUnreadable
	tests := []struct {
		name     string
		pointers []PointerFacts
		want     JobPlan
	}{{
		name: "no pointers: nothing to do, not refused",
		want: JobPlan{NewestComplete: -1},
	}, {
		name:     "newest complete: keep all",
		pointers: []PointerFacts{p(3, "vch"), p(4, "vch"), p(5, "vch")},
		want:     JobPlan{NewestComplete: 5, Keep: []int64{3, 4, 5}},
	}, {
		name:     "the seed problem: 14 missing, 13 and 12 complete",
		pointers: []PointerFacts{p(12, "vch"), p(13, "vch"), p(14, "vh")},
		want:     JobPlan{NewestComplete: 13, Keep: []int64{12, 13}, Retract: []Retraction{{14, above}}},
	}, {
		name:     "HA file of the newest missing too",
		pointers: []PointerFacts{p(12, "vch"), p(13, "vch"), p(14, "v")},
		want:     JobPlan{NewestComplete: 13, Keep: []int64{12, 13}, Retract: []Retraction{{14, above}}},
	}, {
		name:     "several above, retracted newest first",
		pointers: []PointerFacts{p(5, "vch"), p(6, "vh"), p(7, "v"), p(8, "vh")},
		want:     JobPlan{NewestComplete: 5, Keep: []int64{5}, Retract: []Retraction{{8, above}, {7, above}, {6, above}}},
	}, {
		name:     "older pointer with unreadable HA file is retracted",
		pointers: []PointerFacts{p(3, "v"), p(4, "vh"), p(5, "vch")},
		want:     JobPlan{NewestComplete: 5, Keep: []int64{4, 5}, Retract: []Retraction{{3, unreadable}}},
	}, {
		name:     "older pointer with readable HA file but missing state stays",
		pointers: []PointerFacts{p(4, "vh"), p(5, "vch")},
		want:     JobPlan{NewestComplete: 5, Keep: []int64{4, 5}},
	}, {
		name:     "mixed: above and unreadable below",
		pointers: []PointerFacts{p(2, "v"), p(3, "vch"), p(4, "vh"), p(5, "vch"), p(6, "v"), p(7, "vh")},
		want: JobPlan{NewestComplete: 5, Keep: []int64{3, 4, 5},
			Retract: []Retraction{{7, above}, {6, above}, {2, unreadable}}},
	}, {
		name:     "no complete pointer: refused, nothing retracted",
		pointers: []PointerFacts{p(7, "vh"), p(8, "v")},
		want:     JobPlan{NewestComplete: -1, Refused: true, Keep: []int64{7, 8}},
	}, {
		name:     "complete but unreadable HA is impossible, and never counts",
		pointers: []PointerFacts{p(7, "vc")},
		want:     JobPlan{NewestComplete: -1, Refused: true, Keep: []int64{7}},
	}, {
		name:     "invisible pointers (1.15+ without locks) are ignored",
		pointers: []PointerFacts{p(4, "vch"), p(5, "ch"), p(6, "h")},
		want:     JobPlan{NewestComplete: 4, Keep: []int64{4}, Ignored: []int64{5, 6}},
	}, {
		name:     "an invisible complete pointer does not save a job",
		pointers: []PointerFacts{p(5, "ch"), p(6, "vh")},
		want:     JobPlan{NewestComplete: -1, Refused: true, Keep: []int64{6}, Ignored: []int64{5}},
	}, {
		name:     "only invisible pointers: not refused, nothing to do",
		pointers: []PointerFacts{p(5, "h")},
		want:     JobPlan{NewestComplete: -1, Ignored: []int64{5}},
	}, {
		name:     "unsorted input",
		pointers: []PointerFacts{p(9, "v"), p(7, "vch"), p(8, "vh")},
		want:     JobPlan{NewestComplete: 7, Keep: []int64{7}, Retract: []Retraction{{9, above}, {8, above}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanJob(tc.pointers)
			if got.NewestComplete != tc.want.NewestComplete || got.Refused != tc.want.Refused ||
				!slices.Equal(got.Keep, tc.want.Keep) || !slices.Equal(got.Retract, tc.want.Retract) ||
				!slices.Equal(got.Ignored, tc.want.Ignored) {
				t.Errorf("PlanJob(%v)\n got %+v\nwant %+v", tc.pointers, got, tc.want)
			}
			checkPlanInvariants(t, tc.pointers, got)
		})
	}
}

// checkPlanInvariants states docs/design.md §6.2 and §6.3 for any plan:
// the newest complete pointer is never retracted, no visible pointer
// newer than it stays, and a job with visible pointers keeps at least one.
func checkPlanInvariants(t *testing.T, in []PointerFacts, plan JobPlan) {
	t.Helper()
	visible := 0
	for _, f := range in {
		if f.Visible {
			visible++
		}
	}
	if visible > 0 && len(plan.Keep) == 0 {
		t.Errorf("plan keeps no pointer of %d visible ones", visible)
	}
	for _, r := range plan.Retract {
		if r.ID == plan.NewestComplete {
			t.Errorf("plan retracts the newest complete pointer %d", r.ID)
		}
		if plan.Refused {
			t.Errorf("refused plan retracts %d", r.ID)
		}
	}
	for _, k := range plan.Keep {
		if !plan.Refused && k > plan.NewestComplete {
			t.Errorf("plan keeps %d above the newest complete %d", k, plan.NewestComplete)
		}
	}
	if len(plan.Keep)+len(plan.Retract) != visible {
		t.Errorf("keep %v + retract %v do not cover the %d visible pointers", plan.Keep, plan.Retract, visible)
	}
}

// TestPlanJobExhaustive checks the invariants on every combination of
// flags for up to four pointers.
func TestPlanJobExhaustive(t *testing.T) {
	flags := []string{"", "v", "vh", "vch", "h", "ch"}
	var rec func(n int, acc []PointerFacts)
	count := 0
	rec = func(n int, acc []PointerFacts) {
		if n == 0 {
			count++
			checkPlanInvariants(t, acc, PlanJob(acc))
			return
		}
		for _, f := range flags {
			rec(n-1, append(slices.Clone(acc), p(int64(10+len(acc)), f)))
		}
	}
	for n := 0; n <= 4; n++ {
		rec(n, nil)
	}
	if count < 1000 {
		t.Fatalf("only %d combinations", count)
	}
}
