package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestDecide holds Decide against a table of rules written apart from it.
// Every combination of its inputs must match exactly one rule, so the
// table covers all of them and says nothing twice. "*" matches anything.
func TestDecide(t *testing.T) {
	type rule struct {
		mode, configured, session, deadline, replaced string
		want                                          string // the mode, then a word of the reason
	}
	rules := []rule{
		// A replaced backing: a primary is fenced, nothing is promoted.
		{"primary", "*", "*", "*", "yes", "fenced replaced"},
		{"replica", "*", "*", "*", "yes", "="},
		{"fenced", "*", "*", "*", "yes", "="},
		// Without ZooKeeper the configured mode holds.
		{"*", "*", "off", "*", "no", "="},
		// With ZooKeeper only a deadline ahead makes a mount primary,
		// whatever was configured and whether or not this pass read
		// ZooKeeper.
		{"primary", "*", "up", "ahead", "no", "="},
		{"primary", "*", "lost", "ahead", "no", "="},
		{"replica", "*", "up", "ahead", "no", "primary lease"},
		{"replica", "*", "lost", "ahead", "no", "primary lease"},
		{"fenced", "*", "up", "ahead", "no", "primary lease"},
		{"fenced", "*", "lost", "ahead", "no", "primary lease"},
		// A deadline passed, or none: a primary is fenced.
		{"primary", "*", "up", "passed", "no", "fenced deadline"},
		{"primary", "*", "lost", "passed", "no", "fenced deadline"},
		{"primary", "*", "up", "none", "no", "fenced not hold"},
		{"primary", "*", "lost", "none", "no", "fenced not hold"},
		{"replica", "*", "up", "passed", "no", "="},
		{"replica", "*", "lost", "passed", "no", "="},
		{"replica", "*", "up", "none", "no", "="},
		{"replica", "*", "lost", "none", "no", "="},
		{"fenced", "*", "up", "passed", "no", "="},
		{"fenced", "*", "lost", "passed", "no", "="},
		{"fenced", "*", "up", "none", "no", "="},
		{"fenced", "*", "lost", "none", "no", "="},
	}
	now := time.Unix(1000, 0)
	modes := map[string]fusefs.Mode{"replica": fusefs.ModeReplica, "primary": fusefs.ModePrimary, "fenced": fusefs.ModeFenced}
	configured := map[string]fusefs.Mode{"replica": fusefs.ModeReplica, "primary": fusefs.ModePrimary}
	sessions := map[string]Session{"off": SessionOff, "up": SessionUp, "lost": SessionLost}
	deadlines := map[string]time.Time{"ahead": now.Add(time.Second), "passed": now, "none": {}}
	yesNo := map[string]bool{"yes": true, "no": false}
	matches := func(pattern, v string) bool { return pattern == "*" || pattern == v }
	n := 0
	for mode := range modes {
		for conf := range configured {
			for session := range sessions {
				for deadline := range deadlines {
					for replaced := range yesNo {
						n++
						in := fmt.Sprintf("mode=%s configured=%s session=%s deadline=%s replaced=%s", mode, conf, session, deadline, replaced)
						var hit []rule
						for _, r := range rules {
							if matches(r.mode, mode) && matches(r.configured, conf) && matches(r.session, session) && matches(r.deadline, deadline) && matches(r.replaced, replaced) {
								hit = append(hit, r)
							}
						}
						if len(hit) != 1 {
							t.Errorf("%s: %d rules match, want 1: %v", in, len(hit), hit)
							continue
						}
						got := Decide(Observation{
							Site: "dc2", Configured: configured[conf], Mode: modes[mode], Now: now, Session: sessions[session],
							State: zkbridge.MakeState(7, "dc1", &zkbridge.LeaseRecord{Site: "dc1", Epoch: 7}), Deadline: deadlines[deadline],
							BackingReplaced: yesNo[replaced],
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
	if n != 3*2*3*3*2 {
		t.Fatalf("%d combinations, want %d", n, 3*2*3*3*2)
	}
}

// TestDecideRenewAndActivate holds the holder's and the self-activation's
// rules against the states of design §5.14, including an operator's
// hand: a missing active-site with an epoch above 0 activates nothing.
func TestDecideRenewAndActivate(t *testing.T) {
	lease := func(site string, epoch int64) *zkbridge.LeaseRecord {
		return &zkbridge.LeaseRecord{Site: site, Epoch: epoch}
	}
	for _, tc := range []struct {
		name       string
		configured fusefs.Mode
		session    Session
		busy       bool
		st         zkbridge.State
		renew      bool
		activate   zkbridge.SelfActivation
	}{
		{"holds", fusefs.ModeReplica, SessionUp, false, zkbridge.MakeState(3, "dc2", lease("dc2", 3)), true, ""},
		{"holds, no session", fusefs.ModeReplica, SessionLost, false, zkbridge.MakeState(3, "dc2", lease("dc2", 3)), false, ""},
		{"another site holds", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(3, "dc1", lease("dc1", 3)), false, ""},
		{"named active, the lease another's", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(3, "dc2", lease("dc1", 3)), false, ""},
		{"the lease granted at an older epoch", fusefs.ModeReplica, SessionUp, false, zkbridge.MakeState(4, "dc2", lease("dc2", 3)), false, ""},
		{"named active, no lease (upgrade)", fusefs.ModeReplica, SessionUp, false, zkbridge.MakeState(3, "dc2", nil), false, zkbridge.Adopt},
		{"named active, the lease nobody's", fusefs.ModeReplica, SessionUp, false, zkbridge.MakeState(3, "dc2", lease("", 3)), false, zkbridge.Adopt},
		{"named active, no lease, busy", fusefs.ModeReplica, SessionUp, true, zkbridge.MakeState(3, "dc2", nil), false, ""},
		{"named active, no lease, no session", fusefs.ModeReplica, SessionLost, false, zkbridge.MakeState(3, "dc2", nil), false, ""},
		{"primary, nothing ever", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(-1, "", nil), false, zkbridge.Bootstrap},
		{"primary, epoch 0", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(0, "", nil), false, zkbridge.Bootstrap},
		{"replica, nothing ever", fusefs.ModeReplica, SessionUp, false, zkbridge.MakeState(-1, "", nil), false, ""},
		{"primary, active-site deleted at epoch 5", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(5, "", nil), false, ""},
		{"primary, active-site deleted, the lease another's", fusefs.ModePrimary, SessionUp, false, zkbridge.MakeState(0, "", lease("dc1", 0)), false, ""},
	} {
		o := Observation{Site: "dc2", Configured: tc.configured, Session: tc.session, Busy: tc.busy, State: tc.st, RenewalDue: true}
		if got := DecideRenew(o); got != tc.renew {
			t.Errorf("%s: renew %v, want %v", tc.name, got, tc.renew)
		}
		if !tc.renew {
			if DecideRenew(Observation{Site: "dc2", Session: tc.session, State: tc.st}) {
				t.Errorf("%s: renews although no renewal is due", tc.name)
			}
		}
		why, ok := DecideActivate(o)
		if ok != (tc.activate != "") || why != tc.activate {
			t.Errorf("%s: activate %q %v, want %q", tc.name, why, ok, tc.activate)
		}
	}
}

// TestSpawnBacksOff: an activation or takeover that keeps failing (an
// error that stays, such as another Flink cluster under the path root)
// is started again after a pause that doubles, not at every pass: make
// jepsen saw 27,410 failed automatic takeovers in 30 s, each kicking the
// next pass. One that ends well starts the next at once.
func TestSpawnBacksOff(t *testing.T) {
	l := &loop{rule: zkbridge.LeaseRule{Duration: 4 * time.Second}, group: &errgroup.Group{}, kicks: make(chan struct{}, 1), runs: map[string]uint64{}}
	for n, want := range map[int]time.Duration{1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 4: 2 * time.Second, 5: 2 * time.Second, 60: 2 * time.Second} {
		if got := l.retryAfter(n); got != want {
			t.Errorf("retryAfter(%d) = %v, want %v", n, got, want)
		}
	}
	var runs atomic.Int32
	ctx := context.Background()
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		l.spawn(ctx, func(context.Context) bool { runs.Add(1); return false })
		time.Sleep(time.Millisecond) // a pass, kicked by the last end
	}
	l.group.Wait()
	// At 0, 0.25 s and 0.75 s: three in the second.
	if n := runs.Load(); n < 2 || n > 4 {
		t.Errorf("a failing takeover started %d times in a second of passes, want 3", n)
	}
	l.mu.Lock()
	l.retryAt = time.Time{}
	l.mu.Unlock()
	l.spawn(ctx, func(context.Context) bool { return true })
	l.group.Wait()
	started := false
	l.spawn(ctx, func(context.Context) bool { started = true; return true })
	l.group.Wait()
	if !started {
		t.Error("after one that ended well, the next did not start at once")
	}
}
