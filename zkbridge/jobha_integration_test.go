package zkbridge

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// jobHAFiles finds a job's job graph HA file and blob in the emulator's
// storage.
func jobHAFiles(t *testing.T, e *env, job string) (graph, blob, results string) {
	t.Helper()
	graphs, _ := filepath.Glob(filepath.Join(e.storage, "ha", "*", "submitted*"))
	blobs, _ := filepath.Glob(filepath.Join(e.storage, "ha", "*", "blob", "job_"+job, "blob_p-*"))
	if len(graphs) != 1 || len(blobs) != 1 {
		t.Fatalf("job graph HA files %v, blobs %v", graphs, blobs)
	}
	cluster := filepath.Dir(graphs[0])
	return graphs[0], blobs[0], filepath.Join(filepath.Dir(cluster), "job-result-store", filepath.Base(cluster))
}

// TestIntegration_TakeoverRefusesIncompleteJobHA: a job whose job graph
// (execution plan) HA file, blob or job result entry is missing or torn
// on this site is refused with the reason, nothing changed in ZooKeeper,
// the site not activated; whole again, the same takeover goes through.
func TestIntegration_TakeoverRefusesIncompleteJobHA(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	type breakFn func(t *testing.T, graph, blob, results, job string) (undo func())
	cases := []struct {
		name   string
		break_ breakFn
		want   RefusalReason
	}{
		{"graph not replicated", func(t *testing.T, graph, _, _, _ string) func() { return hideFile(t, graph) }, RefusedJobGraph},
		{"graph torn", func(t *testing.T, graph, _, _, _ string) func() { return tearFile(t, graph) }, RefusedJobGraph},
		{"graph zeroed at its size", func(t *testing.T, graph, _, _, _ string) func() {
			data, _ := os.ReadFile(graph)
			os.WriteFile(graph, make([]byte, len(data)), 0o644)
			return func() { os.WriteFile(graph, data, 0o644) }
		}, RefusedJobGraph},
		{"blob dir not replicated", func(t *testing.T, _, blob, _, _ string) func() { return hideFile(t, filepath.Dir(blob)) }, RefusedBlobs},
		{"blob wrong content", func(t *testing.T, _, blob, _, _ string) func() {
			data, _ := os.ReadFile(blob)
			os.WriteFile(blob, bytes.Repeat([]byte{'x'}, len(data)), 0o644)
			return func() { os.WriteFile(blob, data, 0o644) }
		}, RefusedBlobs},
		{"dirty job result torn", func(t *testing.T, _, _, results, job string) func() {
			p := filepath.Join(results, job+"_DIRTY.json")
			os.MkdirAll(results, 0o755)
			os.WriteFile(p, []byte(`{"result":{"id":"`+job+`","application-st`), 0o644)
			return func() { os.Remove(p) }
		}, RefusedJobResult},
	}
	for _, layout := range []flinkemu.Layout{flinkemu.Flink1_13, flinkemu.Flink1_17, flinkemu.Flink2} {
		for _, tc := range cases {
			t.Run(layout.String()+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, c)
				jm, _ := e.startJM(layout, false)
				job := flinkemu.NewJobID()
				if err := jm.SubmitJob(job); err != nil {
					t.Fatal(err)
				}
				for range 3 {
					if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
						t.Fatal(err)
					}
				}
				jm.Close()
				graph, blob, results := jobHAFiles(t, e, job)
				undo := tc.break_(t, graph, blob, results, job)
				b := e.bridge("dc2")
				ctx := testContext(t, time.Minute)

				st, err := b.Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Jobs) != 1 || !st.Jobs[0].Takeover.Refused || st.Jobs[0].Takeover.Reason != tc.want || st.Jobs[0].HA == nil {
					t.Fatalf("status of the job: %+v, want a refusal %s", st.Jobs[0], tc.want)
				}
				before := e.flinkTree(b.Conn())
				rep, err := b.Takeover(ctx, TakeoverOptions{})
				if err != nil {
					t.Fatal(err)
				}
				jt := jobReport(t, rep, job)
				if !rep.Refused() || rep.Activated || jt.Refusal != tc.want || jt.Status != StatusRefused || len(jt.Retracted) != 0 || jt.HA == nil {
					raw, _ := json.MarshalIndent(rep, "", " ")
					t.Fatalf("report %s: want job refused with %s, site not active", raw, tc.want)
				}
				requireSameTree(t, "a refused takeover", before, e.flinkTree(b.Conn()))

				undo()
				rep, err = b.Takeover(ctx, TakeoverOptions{})
				if err != nil || rep.Refused() || !rep.Activated {
					t.Fatalf("whole again: %+v, %v", rep, err)
				}
			})
		}
	}
}

// TestIntegration_TakeoverCheckpointsLost: a job Flink would start (its
// job graph is there) with no checkpoint pointer, while this site's
// marker names a complete checkpoint of it, is refused as
// checkpoints_lost; --accept-state-loss lets it through.
func TestIntegration_TakeoverCheckpointsLost(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range []flinkemu.Layout{flinkemu.Flink1_13, flinkemu.Flink1_17, flinkemu.Flink2} {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(layout, false)
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			var last *flinkemu.Checkpoint
			for range 3 {
				cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				if err != nil {
					t.Fatal(err)
				}
				last = cp
			}
			jm.Close()
			b := e.bridge("dc2")
			ctx := testContext(t, time.Minute)
			l, err := b.Discover(ctx)
			if err != nil || len(l.Jobs) != 1 {
				t.Fatalf("%+v %v", l, err)
			}
			// Flink's clean-up (or a pointer never replicated) left none.
			conn := b.Conn()
			names, _, err := conn.Children(l.Jobs[0].PointerDir)
			if err != nil || len(names) == 0 {
				t.Fatalf("pointers %v, %v", names, err)
			}
			for _, n := range names {
				deleteTree(t, conn, l.Jobs[0].PointerDir+"/"+n)
			}
			// Without a marker, nothing shows the job had state: ok.
			rep, err := b.Takeover(ctx, TakeoverOptions{DryRun: true})
			if err != nil || rep.Refused() {
				t.Fatalf("no evidence: %+v, %v", rep, err)
			}
			m := Marker{JobID: job, CheckpointID: last.ID, Level: 2, Path: "file:/flink/checkpoints/" + job + "/chk-3", Site: "dc2"}
			data, _ := json.Marshal(m)
			base := e.ckptfs + "/default/sites/dc2/jobs"
			for _, p := range []string{e.ckptfs, e.ckptfs + "/default", e.ckptfs + "/default/sites", e.ckptfs + "/default/sites/dc2", base} {
				conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			}
			if _, err := conn.Create(base+"/"+job, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			before := e.flinkTree(conn)
			rep, err = b.Takeover(ctx, TakeoverOptions{})
			if err != nil {
				t.Fatal(err)
			}
			jt := jobReport(t, rep, job)
			if jt.Refusal != RefusedCheckpointsLost || rep.Activated || !strings.Contains(jt.Reason, "accept-state-loss") {
				t.Fatalf("job %+v activated %v: want checkpoints_lost", jt, rep.Activated)
			}
			if jt.RestoreHint == nil || jt.RestoreHint.CheckpointID != last.ID {
				t.Errorf("restore hint %+v, want checkpoint %d from the marker's directory", jt.RestoreHint, last.ID)
			}
			requireSameTree(t, "a refused takeover", before, e.flinkTree(conn))
			rep, err = b.Takeover(ctx, TakeoverOptions{AcceptStateLoss: true})
			if err != nil || rep.Refused() || !rep.Activated {
				t.Fatalf("accept state loss: %+v, %v", rep, err)
			}
		})
	}
}

func deleteTree(t *testing.T, conn *zk.Conn, p string) {
	t.Helper()
	kids, _, err := conn.Children(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		deleteTree(t, conn, p+"/"+k)
	}
	if err := conn.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
}

// TestIntegration_KeptBackups: a takeover backs up the pointers it keeps
// (marked kept); when Flink afterwards deletes the job's pointers, counter
// and job graph (a job that reached FAILED), status names the backups,
// restore-pruned names --recreate-job, and with it brings the pointers
// back byte for byte, with their locks child and a counter above them.
func TestIntegration_KeptBackups(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range []flinkemu.Layout{flinkemu.Flink1_13, flinkemu.Flink1_20} {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(layout, false)
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
					t.Fatal(err)
				}
			}
			cps := jm.Checkpoints(job)
			jm.Close()
			b := e.bridge("dc2")
			ctx := testContext(t, time.Minute)
			before := e.flinkTree(b.Conn()).WithoutEphemeral()
			rep, err := b.Takeover(ctx, TakeoverOptions{})
			if err != nil || !rep.Activated {
				t.Fatalf("takeover: %+v, %v", rep, err)
			}
			jt := jobReport(t, rep, job)
			if len(jt.BackedUp) != len(cps) || len(jt.Retracted) != 0 {
				t.Fatalf("job %+v: want every kept pointer backed up", jt)
			}
			requireSameTree(t, "backing up kept pointers", before, e.flinkTree(b.Conn()).WithoutEphemeral())

			// Flink's clean-up of a FAILED job, after the takeover.
			l, err := b.Discover(ctx)
			if err != nil {
				t.Fatal(err)
			}
			jl := l.Jobs[0]
			for _, p := range []string{jl.PointerDir, jl.CounterPath, jl.JobGraph} {
				deleteTree(t, b.Conn(), p)
			}
			st, err := b.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Jobs) == 1 && len(st.Jobs[0].KeptBackups) != len(cps) {
				t.Errorf("status: kept backups %v", st.Jobs[0].KeptBackups)
			}
			rr, err := b.RestorePruned(ctx, RestoreOptions{})
			if err != nil || len(rr.Jobs) != 1 || len(rr.Jobs[0].Restored) != 0 || !strings.Contains(rr.Jobs[0].Skipped[0].Reason, "--recreate-job") {
				t.Fatalf("restore without --recreate-job: %+v, %v", rr.Jobs, err)
			}
			rr, err = b.RestorePruned(ctx, RestoreOptions{RecreateJob: true})
			if err != nil || len(rr.Jobs[0].Restored) != len(cps) {
				t.Fatalf("restore --recreate-job: %+v, %v", rr.Jobs, err)
			}
			for _, cp := range cps {
				data, _, err := b.Conn().Get(cp.Znode)
				if err != nil || !bytes.Equal(data, cp.Data) {
					t.Errorf("pointer %d: %v", cp.ID, err)
				}
				if layout.LocksChild() {
					if ok, _, _ := b.Conn().Exists(cp.Znode + "/locks"); !ok {
						t.Errorf("pointer %d has no locks child", cp.ID)
					}
				}
			}
			cdata, _, err := b.Conn().Get(jl.CounterPath)
			if v, ok := decodeCounter(cdata); err != nil || !ok || v != cps[len(cps)-1].ID+1 {
				t.Errorf("counter %v %v, want %d", cdata, err, cps[len(cps)-1].ID+1)
			}
		})
	}
}
