package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestDecideTakeover holds DecideTakeover against a table of rules
// written apart from it, as TestDecide does: every combination of its
// inputs matches exactly one rule. "*" matches anything.
func TestDecideTakeover(t *testing.T) {
	type rule struct {
		mode, session, active, lease, leading, refused string
		want                                           string // "run", or "wait" and a word of the reason
	}
	rules := []rule{
		{"manual", "*", "*", "*", "*", "*", "wait manual"},
		{"auto", "off", "*", "*", "*", "*", "wait session"},
		{"auto", "lost", "*", "*", "*", "*", "wait session"},
		{"auto", "up", "none", "*", "*", "*", "wait first"},
		{"auto", "up", "this", "*", "*", "*", "wait active"},
		{"auto", "up", "other", "*", "*", "yes", "wait refused"},
		{"auto", "up", "other", "fresh", "*", "no", "wait fresh"},
		{"auto", "up", "other", "absent", "yes", "no", "wait leads"},
		{"auto", "up", "other", "absent", "no", "no", "run"},
		{"auto", "up", "other", "expired", "yes", "no", "wait leads"},
		{"auto", "up", "other", "expired", "no", "no", "run"},
	}
	modes := map[string]TakeoverMode{"manual": TakeoverManual, "auto": TakeoverAuto}
	sessions := map[string]Session{"off": SessionOff, "up": SessionUp, "lost": SessionLost}
	actives := map[string]string{"none": "", "this": "dc2", "other": "dc1"}
	leases := map[string]zkbridge.LeaseState{"absent": zkbridge.LeaseAbsent, "fresh": zkbridge.LeaseFresh, "expired": zkbridge.LeaseExpired}
	yesNo := map[string]bool{"yes": true, "no": false}
	matches := func(pattern, v string) bool { return pattern == "*" || pattern == v }
	n := 0
	for mode := range modes {
		for session := range sessions {
			for active := range actives {
				for lease := range leases {
					for leading := range yesNo {
						for refused := range yesNo {
							n++
							in := fmt.Sprintf("mode=%s session=%s active=%s lease=%s leading=%s refused=%s", mode, session, active, lease, leading, refused)
							var hit []rule
							for _, r := range rules {
								if matches(r.mode, mode) && matches(r.session, session) && matches(r.active, active) && matches(r.lease, lease) && matches(r.leading, leading) && matches(r.refused, refused) {
									hit = append(hit, r)
								}
							}
							if len(hit) != 1 {
								t.Errorf("%s: %d rules match, want 1: %v", in, len(hit), hit)
								continue
							}
							got := DecideTakeover(TakeoverObservation{
								Site: "dc2", Mode: modes[mode], Session: sessions[session], ActiveSite: actives[active], Epoch: 7,
								Lease: leases[lease], Leading: yesNo[leading], Refused: yesNo[refused],
							})
							want, word, _ := strings.Cut(hit[0].want, " ")
							if got.Run != (want == "run") {
								t.Errorf("%s: run %v, want %s", in, got.Run, hit[0].want)
							}
							if got.Reason == "" || !strings.Contains(got.Reason, word) {
								t.Errorf("%s: reason %q, want one saying %q", in, got.Reason, word)
							}
						}
					}
				}
			}
		}
	}
	if n != 2*3*3*3*2*2 {
		t.Fatalf("%d combinations, want %d", n, 2*3*3*3*2*2)
	}
}
