package zkbridge

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_AutoTakeoverJournal: an automatic takeover keeps its
// journal in ZooKeeper and Status shows it: while it waits, what it
// waits for; at the end every step with its time and outcome, the
// refused job with its reason, and which daemon ran it. A manual
// takeover writes none.
func TestIntegration_AutoTakeoverJournal(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	jm, _ := e.startJM(flinkemu.Flink1_17, false, func(cfg *flinkemu.Config) { cfg.KeepSubsumedData = true })
	good, bad := flinkemu.NewJobID(), flinkemu.NewJobID()
	for _, job := range []string{good, bad} {
		if err := jm.SubmitJob(job); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, cp := range jm.Checkpoints(bad) {
		hideFile(t, cp.StateFiles[0])
	}
	// good's newest is not here: it restores the one before.
	goods := jm.Checkpoints(good)
	hideFile(t, goods[len(goods)-1].StateFiles[0])
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)

	// A manual takeover that refuses at once writes no journal.
	if _, err := b.Takeover(ctx, TakeoverOptions{}); err == nil {
		t.Fatal("a takeover with a JobManager alive and no wait succeeded")
	}
	if st, err := b.Status(ctx); err != nil || st.AutoTakeover != nil {
		t.Fatalf("after a manual takeover: journal %+v, %v; want none", st.AutoTakeover, err)
	}

	type result struct {
		rep *TakeoverReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := b.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second, Journal: "site dc1's lease expired"})
		done <- result{rep, err}
	}()
	var st *StatusReport
	waitFor(t, 20*time.Second, "status to say what the takeover waits for", func() (bool, error) {
		var err error
		st, err = b.Status(ctx)
		return err == nil && st.AutoTakeover != nil && strings.Contains(st.AutoTakeover.WaitingFor, "JobManager session"), err
	})
	if a := st.AutoTakeover; a.State != AutoRunning || a.Site != "dc2" || a.PID == 0 {
		t.Errorf("while waiting: %+v", a)
	}
	jm.Close()
	var r result
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the takeover did not end")
	}
	if r.err != nil || !r.rep.Refused() || r.rep.Activated {
		t.Fatalf("takeover: %+v %v; want the bad job refused, not activated", r.rep, r.err)
	}
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := st.AutoTakeover
	if a == nil || a.State != AutoRefused || a.WaitingFor != "" {
		t.Fatalf("journal after the refusal: %+v", a)
	}
	var what []string
	for i, s := range a.Steps {
		what = append(what, s.Outcome+": "+s.What)
		if s.At.Before(a.Started) || (i > 0 && s.At.Before(a.Steps[i-1].At)) {
			t.Errorf("step %d at %v: before the start or the step before", i, s.At)
		}
	}
	t.Logf("journal: %s", strings.Join(what, " | "))
	want := []string{"started: site dc1's lease expired", "ok: takeover lock acquired", "ok: no JobManager", "ok: no other site's daemon claims the lease", "ok: job " + good, "refused: job " + bad, "refused: site dc2 not activated"}
	if len(what) != len(want) {
		t.Fatalf("%d steps, want %d", len(what), len(want))
	}
	if strings.HasPrefix(what[4], want[5]) { // the jobs in either order
		what[4], what[5] = what[5], what[4]
	}
	for i := range want {
		if !strings.HasPrefix(what[i], want[i]) {
			t.Errorf("step %d %q, want %q...", i, what[i], want[i])
		}
	}
	if len(a.Refused) != 1 || a.Refused[0].JobID != bad || a.Refused[0].Reason == "" || a.Refused[0].Detail == "" {
		t.Errorf("refused jobs %+v, want %s with its reason", a.Refused, bad)
	}
	newest := goods[len(goods)-1].ID
	if a.RolledBack != 1 || len(a.Rollbacks) != 1 || a.Rollbacks[0].JobID != good || a.Rollbacks[0].Completed != newest ||
		a.Rollbacks[0].Restored != newest-1 || a.Rollbacks[0].Checkpoints != 1 || a.Rollbacks[0].ExactlyOnce != "" {
		t.Errorf("rollback windows %d %+v, want %s's from %d to %d, without words", a.RolledBack, a.Rollbacks, good, newest, newest-1)
	}
	// Under ckptfs's ACL, as every node it creates.
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acl, _, err := b.zk.getACL(ctx, paths.autoTakeover())
	if err != nil || !slices.Equal(acl, b.zk.acls.forPath(paths.autoTakeover())) {
		t.Errorf("journal ACL %v %v, want %v", acl, err, b.zk.acls.forPath(paths.autoTakeover()))
	}
}
