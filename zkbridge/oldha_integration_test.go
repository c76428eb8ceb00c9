package zkbridge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_DiscoveryOldHAServices: Flink 1.15-1.17 with
// high-availability.use-old-ha-services shows 1.14's leader election
// (a latch per component, jobs/<job>/leader) but 1.15's pointers, with a
// persistent locks child: the locks child decides, not the leader layout,
// with the JobManager alive and gone, with and without pointers; and a
// takeover retracts by 1.15's rule (with the locks child).
func TestIntegration_DiscoveryOldHAServices(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for name, pointers := range map[string]int{"no pointers": 0, "three pointers": 3} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(flinkemu.Flink1_17, false, func(cfg *flinkemu.Config) { cfg.OldHAServices = true })
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			for range pointers {
				if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
					t.Fatal(err)
				}
			}
			b := e.bridge("dc2")
			ctx := testContext(t, time.Minute)
			check := func(when string) {
				t.Helper()
				l, err := b.Discover(ctx)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				ev := strings.Join(l.Evidence, "\n")
				if slices.Contains(l.Candidates, Gen1_14) || len(l.Candidates) == 0 || l.JobsLockStyle != LockChild {
					t.Fatalf("%s: candidates %v, lock style %v, want 1.15+ with locks children; evidence:\n%s", when, l.Candidates, l.JobsLockStyle, ev)
				}
				if len(l.Jobs) != 1 || l.Jobs[0].LockStyle != LockChild {
					t.Fatalf("%s: jobs %+v", when, l.Jobs)
				}
			}
			check("JobManager alive")
			jm.Close()
			check("JobManager gone")
			if pointers == 0 {
				return
			}
			// The newest pointer is not complete here: retracted with its
			// locks child, by 1.15's rule.
			cps := jm.Checkpoints(job)
			hideFile(t, cps[len(cps)-1].StateFiles[0])
			rep, err := b.Takeover(ctx, TakeoverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			jt := jobReport(t, rep, job)
			if !rep.Activated || len(jt.Retracted) != 1 || jt.Retracted[0] != cps[len(cps)-1].ID {
				t.Fatalf("takeover: %+v, job %+v", rep, jt)
			}
			if ok, _, _ := b.Conn().Exists(cps[len(cps)-1].Znode); ok {
				t.Fatal("the retracted pointer is still there")
			}
		})
	}
}
