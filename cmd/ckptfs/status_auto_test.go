package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestStatusTextAutoTakeover: `ckptfs status` prints the automatic
// takeover's journal: who ran it, what it waits for, each step with its
// time after the start and outcome, the refused jobs with reasons.
func TestStatusTextAutoTakeover(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := &zkbridge.StatusReport{Site: "dc2", Layout: &zkbridge.Layout{}, JobManager: &zkbridge.Liveness{}, ActiveSite: "dc1", Epoch: 1,
		AutoTakeover: &zkbridge.AutoTakeover{Site: "dc2", Host: "h2", PID: 42, Started: start, State: zkbridge.AutoRunning,
			WaitingFor: "Flink's JobManager session(s) [0x1] (jm-dc1:6123) to end",
			Steps: []zkbridge.AutoStep{
				{At: start, What: "site dc1's lease expired", Outcome: "started"},
				{At: start.Add(250 * time.Millisecond), What: "job a1: none complete", Outcome: "refused"},
			},
			Refused: []zkbridge.JobRefusal{{JobID: "a1", Reason: zkbridge.RefusedNoCompletePointer, Detail: "none complete"}},
		}}
	var b strings.Builder
	writeStatusText(&b, rep)
	out := b.String()
	for _, want := range []string{
		"automatic takeover by site dc2 (daemon dc2, h2 pid 42), started 2026-01-02T03:04:05Z: running",
		"waiting for: Flink's JobManager session(s) [0x1] (jm-dc1:6123) to end",
		"+0s  started   site dc1's lease expired",
		"+250ms  refused   job a1: none complete",
		"refused job a1 (no_complete_pointer): none complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}
}
