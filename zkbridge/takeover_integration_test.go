package zkbridge

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// lagScenario is one job whose replica lags: of the retained pointers 3,
// 4 and 5, checkpoint 5 misses a state file (newer than what the site
// holds) and checkpoint 3's HA file is torn (Flink 1.12.5+ would fail the
// whole recovery on it). A takeover must keep 4 and retract 5 and 3.
type lagScenario struct {
	jm   *flinkemu.JobManager
	job  string
	cps  map[int64]*flinkemu.Checkpoint
	undo []func() // make the replica complete again, per broken file
}

func newLagScenario(t *testing.T, e *env, layout flinkemu.Layout, viaProxies bool, modify ...func(*flinkemu.Config)) (*lagScenario, []*zktest.Proxy) {
	t.Helper()
	jm, proxies := e.startJM(layout, viaProxies, modify...)
	s := &lagScenario{jm: jm, job: flinkemu.NewJobID(), cps: map[int64]*flinkemu.Checkpoint{}}
	if err := jm.SubmitJob(s.job); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		cp, err := jm.CompleteCheckpoint(s.job, flinkemu.CheckpointSpec{})
		if err != nil {
			t.Fatal(err)
		}
		s.cps[cp.ID] = cp
	}
	s.undo = append(s.undo, hideFile(t, s.cps[5].StateFiles[1]), tearFile(t, s.cps[3].HAFile))
	return s, proxies
}

// hideFile moves a file away, as a replica that has not received it yet;
// the returned function brings it back.
func hideFile(t testing.TB, path string) func() {
	t.Helper()
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Rename(path+".away", path); err != nil {
			t.Fatal(err)
		}
	}
}

// tearFile truncates a file to half, as a replica caught mid-copy.
func tearFile(t testing.TB, path string) func() {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// flinkTree dumps Flink's namespace only.
func (e *env) flinkTree(conn *zk.Conn) flinkemu.Tree {
	e.t.Helper()
	tr, err := flinkemu.Dump(conn, e.root)
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

func requireSameTree(t *testing.T, what string, before, after flinkemu.Tree) {
	t.Helper()
	if d := before.Diff(after); len(d) > 0 {
		t.Fatalf("%s changed the tree:\n%s", what, strings.Join(d, "\n"))
	}
}

func jobReport(t *testing.T, rep *TakeoverReport, job string) *JobTakeover {
	t.Helper()
	for _, j := range rep.Jobs {
		if j.JobID == job {
			return j
		}
	}
	t.Fatalf("report has no job %s: %+v", job, rep.Jobs)
	return nil
}

func TestIntegration_Takeover(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range flinkemu.Layouts() {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			// One layout loses its JobManager by session expiry, the
			// others by a closed session.
			expire := layout == flinkemu.Flink1_17
			s, proxies := newLagScenario(t, e, layout, expire)
			b := e.bridge("dc2")
			ctx := testContext(t, 2*time.Minute)

			// While the JobManager lives, a takeover refuses after its wait
			// and leaves Flink's namespace alone.
			before := e.flinkTree(b.Conn())
			rep, err := b.Takeover(ctx, TakeoverOptions{Wait: 300 * time.Millisecond})
			if !errors.Is(err, ErrJobManagerAlive) || rep == nil || !rep.JobManager.Alive {
				t.Fatalf("takeover with a live JobManager: %v, %+v", err, rep)
			}
			requireSameTree(t, "a refused takeover", before, e.flinkTree(b.Conn()))

			// A takeover started while it lives proceeds once it is gone.
			type result struct {
				rep *TakeoverReport
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := b.Takeover(ctx, TakeoverOptions{Wait: time.Minute})
				done <- result{rep, err}
			}()
			waitFor(t, 10*time.Second, "the takeover to wait for the JobManager", func() (bool, error) {
				kids, _, err := b.Conn().Children(e.ckptfs + "/default/takeover")
				return len(kids) == 1, err
			})
			if expire {
				zktest.ExpireConnSession(t, s.jm.Conn(), proxies)
			} else {
				s.jm.Close()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(90 * time.Second):
				t.Fatal("takeover did not finish after the JobManager went")
			}
			if r.err != nil {
				t.Fatalf("takeover: %v", r.err)
			}
			rep = r.rep
			jt := jobReport(t, rep, s.job)
			if jt.Status != StatusOK || !slices.Equal(jt.Kept, []int64{4}) || !slices.Equal(jt.Retracted, []int64{5, 3}) {
				t.Fatalf("job: %+v; want ok, kept [4], retracted [5 3]", jt)
			}
			if jt.Retractions[0].Reason != ReasonAboveNewestComplete || jt.Retractions[1].Reason != ReasonHAFileUnreadable {
				t.Errorf("reasons %+v", jt.Retractions)
			}
			// Flink completed 5 on the old site and restores 4 here.
			if r := jt.Rollback; r == nil || r.Completed != 5 || r.Restored != 4 || r.Checkpoints != 1 || r.Seconds == nil || *r.Seconds < 0 || r.ExactlyOnce == "" {
				t.Errorf("rollback window %+v; want 5 completed, 4 restored, 1 checkpoint, its seconds", r)
			}
			if !rep.Activated || rep.Epoch != 1 || rep.ActiveSite != "dc2" {
				t.Errorf("activation: %+v", rep)
			}
			// Pointers and backups.
			for id, cp := range s.cps {
				ok, _, err := b.Conn().Exists(cp.Znode)
				if err != nil {
					t.Fatal(err)
				}
				if want := id == 4; ok != want {
					t.Errorf("pointer %d exists=%v, want %v", id, ok, want)
				}
			}
			for _, id := range []int64{3, 5} {
				data, _, err := b.Conn().Get(e.ckptfs + "/default/pruned/" + s.job + "/" + checkpointName(id))
				if err != nil {
					t.Fatalf("backup %d: %v", id, err)
				}
				bk, err := decodeBackup(data)
				if err != nil || !bytes.Equal(bk.Data, s.cps[id].Data) || bk.Znode != s.cps[id].Znode || bk.HadLocks != layout.LocksChild() {
					t.Errorf("backup %d = %+v, %v", id, bk, err)
				}
				// The locks child's bytes: Curator's default data, as the
				// JobManager wrote them (before.WithoutEphemeral below
				// holds them).
				if locks := before[s.cps[id].Znode+"/locks"]; !bytes.Equal(bk.LocksData, locks.Data) || layout.LocksChild() && len(bk.LocksData) == 0 {
					t.Errorf("backup %d keeps locks data %q, the locks child held %q", id, bk.LocksData, locks.Data)
				}
			}
			active, _, _ := b.Conn().Get(e.ckptfs + "/default/active-site")
			epoch, _, _ := b.Conn().Get(e.ckptfs + "/default/epoch")
			if string(active) != "dc2" || string(epoch) != "1" {
				t.Errorf("active-site %q epoch %q", active, epoch)
			}
			if site, ep, err := b.ActiveSite(ctx); err != nil || site != "dc2" || ep != 1 {
				t.Errorf("ActiveSite() = %q, %d, %v", site, ep, err)
			}

			// Running it again changes nothing.
			afterFirst := e.dump(b.Conn())
			rep, err = b.Takeover(ctx, TakeoverOptions{})
			if err != nil || !rep.AlreadyActive || rep.Epoch != 1 {
				t.Fatalf("second takeover: %v, %+v", err, rep)
			}
			if jt := jobReport(t, rep, s.job); len(jt.Retracted) != 0 || !slices.Equal(jt.AlreadyPruned, []int64{3, 5}) || !slices.Equal(jt.BackedUp, []int64{4}) {
				t.Errorf("second takeover job: %+v", jt)
			} else if r := jt.Rollback; r == nil || r.Completed != 5 || r.Restored != 4 || r.Checkpoints != 1 || r.Seconds != nil {
				t.Errorf("second takeover's rollback window %+v; want 5 (retracted earlier, its creation unknown) and 4", r)
			}
			requireSameTree(t, "a second takeover", afterFirst, e.dump(b.Conn()))

			// Restore: only what is complete here now, unless unverified;
			// the kept pointer 4 is still there and keeps its backup.
			rr, err := b.RestorePruned(ctx, RestoreOptions{})
			if err != nil || len(rr.Jobs) != 1 || len(rr.Jobs[0].Restored) != 0 || len(rr.Jobs[0].Skipped) != 3 {
				t.Fatalf("restore with the replica still behind: %+v, %v", rr, err)
			}
			s.undo[0]() // checkpoint 5 arrives
			rr, err = b.RestorePruned(ctx, RestoreOptions{})
			if err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{5}) {
				t.Fatalf("restore after 5 arrived: %+v, %v", rr, err)
			}
			rr, err = b.RestorePruned(ctx, RestoreOptions{Unverified: true})
			if err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{3}) {
				t.Fatalf("unverified restore: %+v, %v", rr, err)
			}
			// Flink's namespace is byte-identical to what the JobManager
			// left, locks child included.
			requireSameTree(t, "takeover and restore", before.WithoutEphemeral(), e.flinkTree(b.Conn()))
			if kids, _, _ := b.Conn().Children(e.ckptfs + "/default/pruned/" + s.job); !slices.Equal(kids, []string{checkpointName(4)}) {
				t.Errorf("backups left after restore: %v, want only the kept pointer 4's", kids)
			}
		})
	}
}

func TestIntegration_TakeoverDryRun(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)

	// With the JobManager alive a dry run reports the plan, exits "alive".
	before := e.dump(b.Conn())
	rep, err := b.Takeover(ctx, TakeoverOptions{DryRun: true})
	if !errors.Is(err, ErrJobManagerAlive) || rep == nil {
		t.Fatalf("dry run with a live JobManager: %v", err)
	}
	requireSameTree(t, "a dry run", before, e.dump(b.Conn()))

	s.jm.Close()
	before = e.dump(b.Conn())
	rep, err = b.Takeover(ctx, TakeoverOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	jt := jobReport(t, rep, s.job)
	if !rep.DryRun || rep.Activated || !slices.Equal(jt.Retracted, []int64{5, 3}) || !slices.Equal(jt.Kept, []int64{4}) {
		t.Fatalf("dry run report: %+v %+v", rep, jt)
	}
	requireSameTree(t, "a dry run", before, e.dump(b.Conn()))
	if !strings.Contains(rep.Decision, "would") {
		t.Errorf("decision %q", rep.Decision)
	}
}

// TestIntegration_TakeoverRefusedJob: a job with no L2-complete pointer
// is left alone, the others are taken over, the site is not activated
// unless asked.
func TestIntegration_TakeoverRefusedJob(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	jm, _ := e.startJM(flinkemu.Flink1_17, false, func(cfg *flinkemu.Config) { cfg.KeepSubsumedData = true })
	good, bad := flinkemu.NewJobID(), flinkemu.NewJobID()
	for _, job := range []string{good, bad} {
		if err := jm.SubmitJob(job); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The bad job's retained 2, 3, 4 all miss files; chk-1 is whole.
	for _, cp := range jm.Checkpoints(bad) {
		hideFile(t, cp.StateFiles[0])
	}
	jm.Close()
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	before := e.flinkTree(b.Conn())
	rep, err := b.Takeover(ctx, TakeoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Refused() || rep.Activated {
		t.Fatalf("report %+v: want refused, not activated", rep)
	}
	jb := jobReport(t, rep, bad)
	if jb.Status != StatusRefused || len(jb.Retracted) != 0 || !slices.Equal(jb.Kept, []int64{2, 3, 4}) {
		t.Errorf("bad job %+v", jb)
	}
	h := jb.RestoreHint
	wantPath := "file:/flink/checkpoints/" + bad + "/chk-1"
	if h == nil || h.CheckpointID != 1 || h.Path != wantPath || !strings.Contains(h.FlinkRun, "flink run -s "+wantPath) || !strings.Contains(h.Config, "execution.savepoint.path: "+wantPath) {
		t.Errorf("hint %+v, want chk-1 at %s", h, wantPath)
	}
	requireSameTree(t, "a refused takeover", before, e.flinkTree(b.Conn()))
	if active, _, err := b.Conn().Get(e.ckptfs + "/default/active-site"); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("active-site = %q, %v; want none", active, err)
	}

	rep, err = b.Takeover(ctx, TakeoverOptions{ActivateAnyway: true})
	if err != nil || !rep.Activated || rep.Epoch != 1 || !rep.Refused() {
		t.Fatalf("activate anyway: %+v, %v", rep, err)
	}
}

func TestIntegration_TakeoverStaleEpoch(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	b := e.bridge("dc2")
	other := zktest.Connect(t, e.servers)
	ctx := testContext(t, time.Minute)
	before := e.flinkTree(b.Conn())
	opts := TakeoverOptions{beforeRetraction: func(job string, id int64) {
		// Another site takes over between our reading the epoch and our
		// first retraction.
		if _, err := other.Set(e.ckptfs+"/default/epoch", []byte("7"), -1); err != nil {
			t.Error(err)
		}
	}}
	_, err := b.Takeover(ctx, opts)
	if !errors.Is(err, ErrEpochChanged) {
		t.Fatalf("takeover with a stale epoch: %v, want ErrEpochChanged", err)
	}
	requireSameTree(t, "a takeover with a stale epoch", before, e.flinkTree(b.Conn()))
	if kids, _, err := b.Conn().Children(e.ckptfs + "/default/pruned/" + s.job); err == nil && len(kids) > 0 {
		t.Errorf("backups written: %v", kids)
	}
}

func TestIntegration_TakeoverConcurrent(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	b1, b2 := e.bridge("dc2"), e.bridge("dc2")
	ctx := testContext(t, time.Minute)

	// b1 holds the lock and pauses before its first retraction until b2
	// is queued behind it.
	lockDir := e.ckptfs + "/default/takeover"
	type result struct {
		rep *TakeoverReport
		err error
	}
	r1, r2 := make(chan result, 1), make(chan result, 1)
	paused := make(chan struct{})
	resume := make(chan struct{})
	go func() {
		rep, err := b1.Takeover(ctx, TakeoverOptions{beforeRetraction: func(string, int64) {
			select {
			case <-paused:
			default:
				close(paused)
				<-resume
			}
		}})
		r1 <- result{rep, err}
	}()
	<-paused
	// A takeover that may not wait refuses at once.
	b3 := e.bridge("dc2", func(cfg *Config) { cfg.LockWait = 0 })
	if _, err := b3.Takeover(ctx, TakeoverOptions{}); !errors.Is(err, ErrTakeoverInProgress) {
		t.Errorf("takeover without lock wait: %v, want ErrTakeoverInProgress", err)
	}
	go func() {
		rep, err := b2.Takeover(ctx, TakeoverOptions{})
		r2 <- result{rep, err}
	}()
	waitFor(t, 10*time.Second, "the second takeover to queue", func() (bool, error) {
		kids, _, err := b1.Conn().Children(lockDir)
		return len(kids) == 2, err
	})
	close(resume)
	a, bb := <-r1, <-r2
	if a.err != nil || bb.err != nil {
		t.Fatalf("takeovers: %v / %v", a.err, bb.err)
	}
	j1, j2 := jobReport(t, a.rep, s.job), jobReport(t, bb.rep, s.job)
	if !slices.Equal(j1.Retracted, []int64{5, 3}) || len(j2.Retracted) != 0 || !slices.Equal(j2.Kept, []int64{4}) {
		t.Errorf("first retracted %v, second retracted %v kept %v", j1.Retracted, j2.Retracted, j2.Kept)
	}
	if !a.rep.Activated || bb.rep.Activated || !bb.rep.AlreadyActive || bb.rep.Epoch != 1 {
		t.Errorf("activation: first %+v second %+v", a.rep, bb.rep)
	}
	kids, _, err := b1.Conn().Children(e.ckptfs + "/default/pruned/" + s.job)
	slices.Sort(kids)
	if err != nil || !slices.Equal(kids, []string{checkpointName(3), checkpointName(4), checkpointName(5)}) {
		t.Errorf("backups %v, %v; want 3 and 5 retracted, 4 kept", kids, err)
	}
}

// TestIntegration_RetractionReplyLost: a retraction whose reply is lost
// is confirmed by reading; retrying it with the stale read neither deletes
// anything else nor writes a second backup.
func TestIntegration_RetractionReplyLost(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_17, false)
	s.jm.Close()
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	l, err := b.discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paths := b.ckptfsFor(l)
	for _, p := range []string{paths.prunedJob(s.job), paths.takeover()} {
		if err := b.zk.ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.zk.createIfAbsent(ctx, paths.epoch(), []byte("0")); err != nil {
		t.Fatal(err)
	}
	lock, err := b.acquireLock(ctx, paths, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		t.Fatal(err)
	}
	js, err := b.readJob(ctx, l.Jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	p5 := js.pointer(5)
	r := Retraction{ID: 5, Reason: ReasonAboveNewestComplete}
	if ok, err := b.retract(ctx, paths, lock, ep, js, p5, r, false); !ok || err != nil {
		t.Fatalf("retract: %v, %v", ok, err)
	}
	if ok, err := b.retractionApplied(ctx, p5, paths.pruned(s.job, 5)); !ok || err != nil {
		t.Errorf("retractionApplied after the retraction: %v, %v", ok, err)
	}
	before := e.dump(b.Conn())
	if ok, err := b.retract(ctx, paths, lock, ep, js, p5, r, false); ok || err != nil {
		t.Errorf("retrying the retraction: %v, %v; want not applied, no error (re-plan)", ok, err)
	}
	requireSameTree(t, "a repeated retraction", before, e.dump(b.Conn()))

	// A backup of different bytes in the way is a conflict, not an
	// overwrite.
	p4 := js.pointer(4)
	if _, err := b.Conn().Create(paths.pruned(s.job, 4), mustBackup(t, &Backup{Format: backupFormat, Znode: p4.Znode, Data: []byte("other")}), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.retract(ctx, paths, lock, ep, js, p4, Retraction{ID: 4}, false); !errors.Is(err, ErrBackupConflict) {
		t.Errorf("retract over a conflicting backup: %v", err)
	}
	if ok, _, _ := b.Conn().Exists(p4.Znode); !ok {
		t.Error("pointer 4 deleted despite the conflict")
	}
}

func mustBackup(t *testing.T, b *Backup) []byte {
	t.Helper()
	data, err := b.encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIntegration_TakeoverLeaderStop stops the ZooKeeper leader of a
// five-server ensemble between two retractions, reruns the takeover and
// compares the result with an undisturbed takeover of the same scenario.
func TestIntegration_TakeoverLeaderStop(t *testing.T) {
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 20 * time.Second })
	type outcome struct {
		kept    []int64
		backups []string
		active  string
		epoch   string
	}
	// run sets up three lagging jobs and takes over, calling hook before
	// every retraction; it returns the state reached after a rerun.
	run := func(t *testing.T, hook func(job string, id int64)) outcome {
		e := newEnv(t, c)
		jm, _ := e.startJM(flinkemu.Flink1_20, false)
		var jobs []string
		originals := map[string][]byte{}
		for range 3 {
			job := flinkemu.NewJobID()
			jobs = append(jobs, job)
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{100}})
				if err != nil {
					t.Fatal(err)
				}
				originals[cp.Znode] = cp.Data
			}
			cps := jm.Checkpoints(job)
			hideFile(t, cps[2].StateFiles[0]) // 5
			tearFile(t, cps[0].HAFile)        // 3
		}
		slices.Sort(jobs)
		jm.Close()
		b := e.bridge("dc2", func(cfg *Config) { cfg.SessionTimeout = 15 * time.Second; cfg.RetryTimeout = 60 * time.Second })
		ctx := testContext(t, 3*time.Minute)
		rep, err := b.Takeover(ctx, TakeoverOptions{beforeRetraction: hook})
		t.Logf("first run: %v", err)
		_ = rep
		b2 := e.bridge("dc2", func(cfg *Config) { cfg.SessionTimeout = 15 * time.Second; cfg.RetryTimeout = 60 * time.Second })
		rep, err = b2.Takeover(ctx, TakeoverOptions{})
		if err != nil {
			t.Fatalf("rerun: %v", err)
		}
		var out outcome
		for i, job := range jobs {
			jt := jobReport(t, rep, job)
			if i == 0 {
				out.kept = jt.Kept
			} else if !slices.Equal(jt.Kept, out.kept) {
				t.Errorf("job %s kept %v, job %s kept %v", jobs[0], out.kept, job, jt.Kept)
			}
			kids, _, err := b2.Conn().Children(e.ckptfs + "/default/pruned/" + job)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(kids)
			if i == 0 {
				out.backups = kids
			} else if !slices.Equal(kids, out.backups) {
				t.Errorf("backups differ between jobs: %v / %v", out.backups, kids)
			}
			for _, k := range kids {
				data, _, err := b2.Conn().Get(e.ckptfs + "/default/pruned/" + job + "/" + k)
				if err != nil {
					t.Fatal(err)
				}
				bk, err := decodeBackup(data)
				if err != nil || !bytes.Equal(originals[bk.Znode], bk.Data) {
					t.Errorf("backup %s/%s does not hold the original pointer: %v", job, k, err)
				}
			}
			// No pointer lost: every original is either present with its
			// bytes or backed up.
			for znode, data := range originals {
				if !strings.Contains(znode, job) {
					continue
				}
				cur, _, err := b2.Conn().Get(znode)
				switch {
				case err == nil && !bytes.Equal(cur, data):
					t.Errorf("%s changed", znode)
				case errors.Is(err, zk.ErrNoNode):
					if _, _, err := b2.Conn().Get(e.ckptfs + "/default/pruned/" + job + "/" + znode[len(znode)-19:]); err != nil {
						// Subsumed by Flink itself (ids 1, 2) is fine.
						if id, _ := parseCheckpointName(znode[len(znode)-19:]); id > 2 {
							t.Errorf("%s gone without a backup", znode)
						}
					}
				case err != nil:
					t.Fatal(err)
				}
			}
		}
		a, _, _ := b2.Conn().Get(e.ckptfs + "/default/active-site")
		ep, _, _ := b2.Conn().Get(e.ckptfs + "/default/epoch")
		out.active, out.epoch = string(a), string(ep)
		return out
	}

	var reference outcome
	t.Run("undisturbed", func(t *testing.T) { reference = run(t, nil) })
	t.Run("leader stopped mid-way", func(t *testing.T) {
		n := 0
		stopped := -1
		got := run(t, func(job string, id int64) {
			n++
			if n != 2 {
				return
			}
			leader, err := c.Leader()
			if err != nil {
				t.Errorf("leader: %v", err)
				return
			}
			t.Logf("stopping ZooKeeper leader %d before retracting %s/%d", leader, job, id)
			if err := c.Stop(leader); err != nil {
				t.Errorf("stop leader: %v", err)
			}
			stopped = leader
		})
		if stopped >= 0 {
			if err := c.Start(stopped); err != nil {
				t.Errorf("restart %d: %v", stopped, err)
			}
		}
		if !slices.Equal(got.kept, reference.kept) || !slices.Equal(got.backups, reference.backups) ||
			got.active != reference.active || got.epoch != reference.epoch {
			t.Errorf("after a leader stop and a rerun: %+v; undisturbed: %+v", got, reference)
		}
	})
}

// TestIntegration_TakeoverLockLost: when our session expires during a
// takeover, the lock goes with it and the next retraction fails on the
// lock check: nothing is written under a lock we no longer hold.
func TestIntegration_TakeoverLockLost(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_17, false)
	s.jm.Close()
	proxies, addrs := e.proxies()
	b := e.bridge("dc2", func(cfg *Config) { cfg.Servers = addrs })
	ctx := testContext(t, time.Minute)
	before := e.flinkTree(b.Conn())
	expired := false
	_, err := b.Takeover(ctx, TakeoverOptions{beforeRetraction: func(string, int64) {
		if !expired {
			expired = true
			zktest.ExpireConnSession(t, b.Conn(), proxies)
		}
	}})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("takeover after losing the session: %v, want ErrLockLost", err)
	}
	requireSameTree(t, "a takeover that lost its lock", before, e.flinkTree(b.Conn()))
	// Run again: it converges.
	rep, err := b.Takeover(ctx, TakeoverOptions{})
	if err != nil || !slices.Equal(jobReport(t, rep, s.job).Retracted, []int64{5, 3}) {
		t.Fatalf("rerun: %+v, %v", rep, err)
	}
}

// TestIntegration_RestorePrunedRules: a backup goes back only where its
// pointer is absent and its id is below the checkpoint counter; a dry run
// writes nothing; a live JobManager blocks it.
func TestIntegration_RestorePrunedRules(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	originalLocks := map[int64][]byte{}
	for _, id := range []int64{3, 5} {
		data, _, err := b.Conn().Get(s.cps[id].Znode + "/locks")
		if err != nil || len(data) == 0 {
			t.Fatalf("pointer %d's locks child: %q, %v; want Curator's default data", id, data, err)
		}
		originalLocks[id] = data
	}
	if _, err := b.Takeover(ctx, TakeoverOptions{}); err != nil {
		t.Fatal(err)
	}
	counter := e.root + "/default/jobs/" + s.job + "/checkpoint_id_counter"
	old, _, err := b.Conn().Get(counter)
	if err != nil {
		t.Fatal(err)
	}
	// A counter at 5 (as if checkpoint 5 had never been handed out) keeps
	// 5 out; a pointer 3 with other bytes keeps 3's backup in place.
	if _, err := b.Conn().Set(counter, []byte{0, 0, 0, 5}, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Conn().Create(s.cps[3].Znode, []byte("other"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	before := e.dump(b.Conn())
	rr, err := b.RestorePruned(ctx, RestoreOptions{Unverified: true, DryRun: true})
	if err != nil || len(rr.Jobs[0].Restored) != 0 || len(rr.Jobs[0].Skipped) != 3 {
		t.Fatalf("dry run: %+v, %v", rr, err)
	}
	requireSameTree(t, "a restore dry run", before, e.dump(b.Conn()))
	rr, err = b.RestorePruned(ctx, RestoreOptions{Unverified: true})
	if err != nil || len(rr.Jobs[0].Restored) != 0 {
		t.Fatalf("restore: %+v, %v", rr, err)
	}
	for _, sk := range rr.Jobs[0].Skipped {
		want := map[int64]string{3: "exists with other bytes", 4: "kept by a takeover", 5: "not below the checkpoint counter"}[sk.ID]
		if !strings.Contains(sk.Reason, want) {
			t.Errorf("skipped %d: %q, want %q", sk.ID, sk.Reason, want)
		}
	}
	if err := b.Conn().Delete(s.cps[3].Znode, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Conn().Set(counter, old, -1); err != nil {
		t.Fatal(err)
	}
	// 3's backup as a ckptfs before Backup.LocksData wrote it.
	bpath := e.ckptfs + "/default/pruned/" + s.job + "/" + checkpointName(3)
	data, _, err := b.Conn().Get(bpath)
	if err != nil {
		t.Fatal(err)
	}
	bk, err := decodeBackup(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bk.LocksData, originalLocks[3]) {
		t.Fatalf("backup 3 keeps locks data %q, want %q", bk.LocksData, originalLocks[3])
	}
	bk.LocksData = nil
	if _, err := b.Conn().Set(bpath, mustBackup(t, bk), -1); err != nil {
		t.Fatal(err)
	}
	jm, _ := e.startJM(flinkemu.Flink1_20, false)
	if _, err := b.RestorePruned(ctx, RestoreOptions{Unverified: true}); !errors.Is(err, ErrJobManagerAlive) {
		t.Errorf("restore with a live JobManager: %v", err)
	}
	jm.Close()
	rr, err = b.RestorePruned(ctx, RestoreOptions{Unverified: true, Jobs: []string{s.job}})
	if err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{3, 5}) {
		t.Fatalf("restore: %+v, %v", rr, err)
	}
	for _, id := range []int64{3, 5} {
		data, _, err := b.Conn().Get(s.cps[id].Znode)
		kids, _, _ := b.Conn().Children(s.cps[id].Znode)
		if err != nil || !bytes.Equal(data, s.cps[id].Data) || !slices.Equal(kids, []string{"locks"}) {
			t.Errorf("pointer %d: %v, children %v", id, err, kids)
		}
		// 5's locks child comes back with its bytes, 3's (from the old
		// backup) empty.
		want := map[int64][]byte{3: nil, 5: originalLocks[5]}[id]
		if locks, _, err := b.Conn().Get(s.cps[id].Znode + "/locks"); err != nil || !bytes.Equal(locks, want) {
			t.Errorf("pointer %d: locks child holds %q, %v; want %q", id, locks, err, want)
		}
	}
}

// TestIntegration_TakeoverWaitsOutAReturningJobManager: a JobManager
// that lost its session but not its site comes back within Flink's
// session timeout (a partition that leaves its site the quorum). A
// takeover that reads the gap must not go through: with Quiet it waits
// for none to be seen that long, sees it back, and refuses after its
// wait.
func TestIntegration_TakeoverWaitsOutAReturningJobManager(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	layout := flinkemu.Layouts()[len(flinkemu.Layouts())-1]
	s, _ := newLagScenario(t, e, layout, false)
	b := e.bridge("dc2")
	ctx := testContext(t, time.Minute)
	s.jm.Close()
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(time.Second)
		e.startJM(layout, false)
	}()
	start := time.Now()
	rep, err := b.Takeover(ctx, TakeoverOptions{Wait: 5 * time.Second, Quiet: 3 * time.Second})
	<-back
	if !errors.Is(err, ErrJobManagerAlive) || rep == nil || !rep.JobManager.Alive {
		t.Fatalf("takeover across a JobManager's return: %v, %+v (after %v)", err, rep, time.Since(start))
	}
	// The returning JobManager changed Flink's tree; the takeover wrote
	// nothing.
	if site, epoch, err := b.ActiveSite(ctx); err != nil || site != "" || epoch != 0 {
		t.Errorf("after a refused takeover: active site %q, epoch %d, %v", site, epoch, err)
	}
	if rep.Activated || len(rep.Jobs) > 0 {
		t.Errorf("a refused takeover reports %+v", rep)
	}
}

// TestIntegration_TakeoverStopsAtFailingJob: jobs are taken over at once;
// when one of them fails (a conflicting backup in its way) the takeover
// returns that error, names the job, reports the jobs that finished and
// does not activate the site.
func TestIntegration_TakeoverStopsAtFailingJob(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	jm, _ := e.startJM(flinkemu.Flink1_20, false)
	var jobs []string
	for range 4 {
		job := flinkemu.NewJobID()
		jobs = append(jobs, job)
		if err := jm.SubmitJob(job); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{100}}); err != nil {
				t.Fatal(err)
			}
		}
		hideFile(t, jm.Checkpoints(job)[2].StateFiles[0]) // 3
	}
	jm.Close()
	b := e.bridge("dc2")
	paths := newCkptfsPaths(e.ckptfs, "default")
	failing := jobs[2]
	for _, p := range []string{paths.prunedRoot(), paths.prunedJob(failing)} {
		if err := b.zk.ensure(testContext(t, time.Minute), p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Conn().Create(paths.pruned(failing, 3), mustBackup(t, &Backup{Format: backupFormat, Znode: "/elsewhere", Data: []byte("other")}), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Takeover(testContext(t, time.Minute), TakeoverOptions{})
	if !errors.Is(err, ErrBackupConflict) {
		t.Fatalf("takeover with a conflicting backup: %v, want ErrBackupConflict", err)
	}
	if rep == nil || rep.Activated || !strings.Contains(rep.Decision, "stopped at job "+failing) {
		t.Fatalf("report %+v", rep)
	}
	for _, jt := range rep.Jobs {
		if jt.JobID == failing || !slices.Equal(jt.Retracted, []int64{3}) {
			t.Errorf("reported job %s retracted %v", jt.JobID, jt.Retracted)
		}
	}
	if _, _, err := b.Conn().Get(e.ckptfs + "/default/active-site"); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("active-site after a failed takeover: %v", err)
	}
}

// TestIntegration_TakeoverJudgesFromTheNAS: a bridge whose verifier is a
// mount's, which trusts what it found complete (design §3.6), still
// judges a takeover from the NAS: a file torn in place since the
// verifier found it complete, which no directory shows, refuses its
// checkpoint although the same bridge's status still trusts it.
func TestIntegration_TakeoverJudgesFromTheNAS(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	jm, _ := e.startJM(flinkemu.Flink1_17, false)
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{4096}}); err != nil {
			t.Fatal(err)
		}
	}
	cps := jm.Checkpoints(job)
	jm.Close()
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: flinkemu.DefaultConfig().FlinkStorage, Dir: e.storage}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vcfg := manifest.DefaultVerifierConfig()
	vcfg.Resolver, vcfg.MaxAge = res, time.Hour
	mv, err := manifest.NewVerifier(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), e.config("dc2"), NewSiteVerifier(mv, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := testContext(t, time.Minute)
	newest := cps[len(cps)-1]
	// The mount's verifier finds every pointer complete (the lag tracker
	// verifies them so), and trusts their files.
	newestComplete := func() int64 {
		st, err := b.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range st.Jobs {
			if j.JobID == job && j.NewestComplete != nil {
				return *j.NewestComplete
			}
		}
		return 0
	}
	if got := newestComplete(); got != newest.ID {
		t.Fatalf("newest complete pointer %d, want %d", got, newest.ID)
	}
	tearFile(t, newest.StateFiles[0])
	if got := newestComplete(); got != newest.ID {
		t.Fatalf("the trusting verifier saw the torn file without the audit (this test's premise): newest complete %d", got)
	}
	rep, err := b.Takeover(ctx, TakeoverOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	jr := jobReport(t, rep, job)
	if slices.Contains(jr.Kept, newest.ID) || !slices.Contains(jr.Retracted, newest.ID) {
		t.Fatalf("the takeover kept %v and would retract %v: it judged checkpoint %d from the verifier's trust", jr.Kept, jr.Retracted, newest.ID)
	}
}
