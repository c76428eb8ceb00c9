package metrics

import (
	"strings"
	"testing"
)

// TestFailoverProblems: a leading JobManager of this site while another
// site is active fails health with takeover manual (issue 16 item 4),
// not with auto (the mount holds it); a refused automatic takeover
// fails it always.
func TestFailoverProblems(t *testing.T) {
	standby := []string{"session 0x1 at http://10.2.0.1:8081"}
	if p := failoverProblems(Failover{Takeover: "manual", StandbyJobManagers: standby}); len(p) != 1 || !strings.Contains(p[0], "no JobManager may run on a standby site") {
		t.Errorf("manual: %v", p)
	}
	if p := failoverProblems(Failover{Takeover: "auto", StandbyJobManagers: standby}); len(p) != 0 {
		t.Errorf("auto: %v", p)
	}
	if p := failoverProblems(Failover{Takeover: "auto", Refused: "job x: no pointer complete"}); len(p) != 1 || !strings.Contains(p[0], "refused") {
		t.Errorf("refused: %v", p)
	}
	if p := failoverProblems(Failover{Takeover: "manual"}); len(p) != 0 {
		t.Errorf("nothing wrong: %v", p)
	}
}
