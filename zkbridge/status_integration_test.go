package zkbridge

import (
	"math"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_StatusLag: with pointers 3, 4 and 5 where 5 misses a
// state file here and 3's HA file is torn, status reports the newest
// pointer 5, the newest complete 4, a lag of one checkpoint and the
// seconds between their HA-file timestamps.
func TestIntegration_StatusLag(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	layout := flinkemu.Layouts()[len(flinkemu.Layouts())-1]
	s, _ := newLagScenario(t, e, layout, false)
	// Space the checkpoints' trigger times apart as a real job would.
	if d := s.cps[5].Timestamp.Sub(s.cps[4].Timestamp); d <= 0 {
		t.Fatalf("checkpoint 5 was triggered %v after 4", d)
	}
	rep, err := e.bridge("dc2").Status(testContext(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Jobs) != 1 {
		t.Fatalf("%d jobs", len(rep.Jobs))
	}
	js := rep.Jobs[0]
	if js.JobID != s.job || js.Newest == nil || *js.Newest != 5 || js.NewestComplete == nil || *js.NewestComplete != 4 {
		t.Fatalf("job status %+v", js)
	}
	if js.LagCheckpoints == nil || *js.LagCheckpoints != 1 {
		t.Fatalf("lag in checkpoints %v, want 1", js.LagCheckpoints)
	}
	want := s.cps[5].Timestamp.Sub(s.cps[4].Timestamp).Seconds()
	if js.LagSeconds == nil || math.Abs(*js.LagSeconds-want) > 0.002 || js.LagSource != "ha_file_timestamps" {
		t.Fatalf("lag %v s from %q, want %.3f s from the HA files", js.LagSeconds, js.LagSource, want)
	}
	if !rep.JobManager.Alive {
		t.Error("the JobManager's session is open, but status says none is alive")
	}
}
