package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/fusefs"
)

// TestDecide holds Decide against a table of rules written apart from it.
// Every combination of its inputs must match exactly one rule, so the
// table covers all of them and says nothing twice. "*" matches anything.
func TestDecide(t *testing.T) {
	type rule struct {
		mode, session, active, lease, replaced, lapsed string
		want                                           string // the mode, then a word of the reason
	}
	rules := []rule{
		// A replaced backing: a primary is fenced, nothing is promoted.
		{"primary", "*", "*", "*", "yes", "*", "fenced replaced"},
		{"replica", "*", "*", "*", "yes", "*", "replica"},
		{"fenced", "*", "*", "*", "yes", "*", "fenced"},
		// A lapsed liveness lease fences a primary, whatever ZooKeeper says.
		{"primary", "*", "*", "*", "no", "yes", "fenced lapsed"},
		// Without ZooKeeper the configured mode holds.
		{"primary", "off", "*", "*", "no", "no", "="},
		{"replica", "off", "*", "*", "no", "*", "="},
		{"fenced", "off", "*", "*", "no", "*", "="},
		// No session: only a primary with a lease fences itself.
		{"primary", "lost", "*", "yes", "no", "no", "fenced lease"},
		{"primary", "lost", "*", "no", "no", "no", "primary"},
		{"replica", "lost", "*", "*", "no", "*", "replica"},
		{"fenced", "lost", "*", "*", "no", "*", "fenced"},
		// No site ever took over: the configured mode holds, and a
		// primary fenced by its lease is primary again (unless its
		// liveness lease lapsed).
		{"primary", "up", "none", "*", "no", "no", "="},
		{"replica", "up", "none", "*", "no", "*", "="},
		{"fenced", "up", "none", "*", "no", "no", "primary session"},
		{"fenced", "up", "none", "*", "no", "yes", "fenced"},
		// This site is active: promote whatever is not primary, unless
		// its lease lapsed.
		{"primary", "up", "this", "*", "no", "no", "primary"},
		{"replica", "up", "this", "*", "no", "no", "primary active"},
		{"fenced", "up", "this", "*", "no", "no", "primary active"},
		{"replica", "up", "this", "*", "no", "yes", "replica"},
		{"fenced", "up", "this", "*", "no", "yes", "fenced"},
		// Another site is active: a primary is fenced.
		{"primary", "up", "other", "*", "no", "no", "fenced dc1"},
		{"replica", "up", "other", "*", "no", "*", "replica"},
		{"fenced", "up", "other", "*", "no", "*", "fenced"},
	}
	modes := map[string]fusefs.Mode{"replica": fusefs.ModeReplica, "primary": fusefs.ModePrimary, "fenced": fusefs.ModeFenced}
	sessions := map[string]Session{"off": SessionOff, "up": SessionUp, "lost": SessionLost}
	actives := map[string]string{"none": "", "this": "dc2", "other": "dc1"}
	yesNo := map[string]bool{"yes": true, "no": false}
	matches := func(pattern, v string) bool { return pattern == "*" || pattern == v }
	n := 0
	for mode := range modes {
		for session := range sessions {
			for active := range actives {
				for lease := range yesNo {
					for replaced := range yesNo {
						for lapsed := range yesNo {
							n++
							in := fmt.Sprintf("mode=%s session=%s active=%s lease=%s replaced=%s lapsed=%s", mode, session, active, lease, replaced, lapsed)
							var hit []rule
							for _, r := range rules {
								if matches(r.mode, mode) && matches(r.session, session) && matches(r.active, active) && matches(r.lease, lease) && matches(r.replaced, replaced) && matches(r.lapsed, lapsed) {
									hit = append(hit, r)
								}
							}
							if len(hit) != 1 {
								t.Errorf("%s: %d rules match, want 1: %v", in, len(hit), hit)
								continue
							}
							got := Decide(Observation{
								Site: "dc2", Mode: modes[mode], Session: sessions[session], ActiveSite: actives[active], Epoch: 7,
								Lease: yesNo[lease], BackingReplaced: yesNo[replaced], LeaseLapsed: yesNo[lapsed],
							})
							wantMode, word, _ := strings.Cut(hit[0].want, " ")
							if wantMode == "=" {
								wantMode = mode
							}
							if got.Mode != modes[wantMode] {
								t.Errorf("%s: mode %v, want %s", in, got.Mode, wantMode)
							}
							switch {
							case wantMode == mode && got.Reason != "":
								t.Errorf("%s: no change, but reason %q", in, got.Reason)
							case wantMode != mode && (got.Reason == "" || !strings.Contains(got.Reason, word)):
								t.Errorf("%s: reason %q, want one saying %q", in, got.Reason, word)
							}
						}
					}
				}
			}
		}
	}
	if n != 3*3*3*2*2*2 {
		t.Fatalf("%d combinations, want %d", n, 3*3*3*2*2*2)
	}
}
