package zkbridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_SweepStrayPointer: DC1's JobManager loses its session
// in a partition, DC2 takes over and its JobManager recovers the job;
// then DC1's JobManager, back with a new session, completes a checkpoint
// whose HA file only DC1's NAS holds (as real Flink did in make
// chaos-net), and DC2's leader locks it too. DC2's sweeper retracts that
// pointer, locks and all, after the grace period, with a backup; it
// leaves alone the pointers from before the takeover and those DC2's
// leader wrote, even when a stale read of the NAS makes one look
// incomplete; DC1's sweeper, not active, does nothing.
func TestIntegration_SweepStrayPointer(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range flinkemu.Layouts() {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			ctx := testContext(t, 2*time.Minute)
			jm1, job := cutOffJobManager(t, e, layout, 2)
			b2, b1 := e.bridge("dc2"), e.bridge("dc1")
			if rep, err := b2.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second}); err != nil || !rep.Activated {
				t.Fatalf("takeover: %v %+v", err, rep)
			}
			jm2, _ := e.startJM(layout, false)
			if _, err := jm2.Recover(job, flinkemu.RestoreOptions{}); err != nil {
				t.Fatalf("DC2's JobManager recovers: %v", err)
			}
			// DC1's JobManager, back: checkpoint 3 is on DC1's NAS only.
			cp3, err := jm1.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
			if err != nil {
				t.Fatal(err)
			}
			hideFile(t, cp3.HAFile)
			// DC2's leader locks it as a recovery would (getAllAndLock),
			// which does not make it DC2's.
			lockDir := cp3.Znode
			if layout.LocksChild() {
				lockDir += "/locks"
			}
			if _, err := jm2.Conn().Create(lockDir+"/recovery-lock", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			// DC2's own checkpoint 4, read torn here as a stale NFS
			// client might: its leader holds it.
			cp4, err := jm2.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
			if err != nil {
				t.Fatal(err)
			}
			whole := tearFile(t, cp4.HAFile)

			const grace = time.Second
			s2, err := b2.NewSweeper(grace)
			if err != nil {
				t.Fatal(err)
			}
			s1, err := b1.NewSweeper(0)
			if err != nil {
				t.Fatal(err)
			}
			before := e.flinkTree(b2.Conn())
			if swept, err := s1.Pass(ctx); err != nil || len(swept) > 0 {
				t.Fatalf("DC1's sweeper (not active): %v, %v", swept, err)
			}
			if swept, err := s2.Pass(ctx); err != nil || len(swept) > 0 {
				t.Fatalf("DC2's first pass (within the grace period): %v, %v", swept, err)
			}
			requireSameTree(t, "passes that retract nothing", before, e.flinkTree(b2.Conn()))
			time.Sleep(grace)
			swept, err := s2.Pass(ctx)
			if err != nil || !slices.Equal(swept, []SweptPointer{{JobID: job, ID: cp3.ID, Reason: ReasonAboveNewestComplete}}) {
				t.Fatalf("DC2's pass after the grace period: %+v, %v; want checkpoint 3 retracted", swept, err)
			}
			for id, want := range map[int64]bool{1: true, 2: true, cp3.ID: false, cp4.ID: true} {
				ok, _, err := b2.Conn().Exists(e.root + "/default/" + pointerPath(layout, job, id))
				if err != nil || ok != want {
					t.Errorf("pointer %d exists=%v (%v), want %v", id, ok, err, want)
				}
			}
			data, _, err := b2.Conn().Get(e.ckptfs + "/default/pruned/" + job + "/" + checkpointName(cp3.ID))
			if bk, derr := decodeBackup(data); err != nil || derr != nil || bk.Znode != cp3.Znode {
				t.Errorf("backup of 3: %+v %v %v", bk, err, derr)
			}
			if st := s2.Stats(); st.Retracted != 1 || st.Failures != 0 {
				t.Errorf("stats %+v", st)
			}
			// Once checkpoint 4 reads whole, nothing more to do.
			whole()
			if swept, err := s2.Pass(ctx); err != nil || len(swept) > 0 {
				t.Errorf("pass with nothing stray: %v, %v", swept, err)
			}
		})
	}
}

// cutOffJobManager starts DC1's JobManager of layout, which submits a job
// and completes checkpoints of it, then loses its session as in a
// partition: its JobManager object lives on and can write again with a
// new session, as Curator's retries do once the link is back.
func cutOffJobManager(t *testing.T, e *env, layout flinkemu.Layout, checkpoints int) (*flinkemu.JobManager, string) {
	t.Helper()
	jm1, proxies := e.startJM(layout, true)
	job := flinkemu.NewJobID()
	if err := jm1.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	for range checkpoints {
		if _, err := jm1.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	zktest.ExpireConnSession(t, jm1.Conn(), proxies)
	return jm1, job
}

// strayAfterTakeover: DC1's JobManager cut off after it completed
// before checkpoints, DC2's takeover, then DC1's JobManager, back, adds
// a pointer DC2 does not hold (its HA file on DC1's NAS only). It
// returns DC2's bridge, the job and the stray checkpoint.
func strayAfterTakeover(t *testing.T, e *env, layout flinkemu.Layout, before int, modify ...func(*Config)) (*Bridge, string, *flinkemu.Checkpoint) {
	t.Helper()
	jm1, job := cutOffJobManager(t, e, layout, before)
	b2 := e.bridge("dc2", modify...)
	if rep, err := b2.Takeover(testContext(t, time.Minute), TakeoverOptions{Wait: 30 * time.Second}); err != nil || !rep.Activated {
		t.Fatalf("takeover: %v %+v", err, rep)
	}
	stray, err := jm1.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
	if err != nil {
		t.Fatal(err)
	}
	hideFile(t, stray.HAFile)
	return b2, job, stray
}

// pointerPath is a pointer's path below the namespace.
func pointerPath(layout flinkemu.Layout, job string, id int64) string {
	if layout <= flinkemu.Flink1_13 {
		return "checkpoints/" + job + "/" + checkpointName(id)
	}
	return "jobs/" + job + "/checkpoints/" + checkpointName(id)
}

// TestIntegration_SweepWithoutSession: during a ZooKeeper outage a pass
// does nothing and fails nothing (no warning a second), and sweeps again
// once the session is back.
func TestIntegration_SweepWithoutSession(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	proxies, addrs := e.proxies()
	b := e.bridge("dc2", func(cfg *Config) { cfg.Servers = addrs })
	s, err := b.NewSweeper(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	for _, p := range proxies {
		p.Block()
		p.DropConns()
	}
	waitFor(t, 10*time.Second, "the session to be lost", func() (bool, error) {
		return b.Session().State != SessionConnected, nil
	})
	if swept, err := s.Pass(ctx); err != nil || len(swept) > 0 {
		t.Fatalf("a pass without a session: %v, %v; want nothing", swept, err)
	}
	for _, p := range proxies {
		p.Unblock()
	}
	waitFor(t, 20*time.Second, "the session to be back", func() (bool, error) {
		return b.Session().State == SessionConnected, nil
	})
	if _, err := s.Pass(ctx); err != nil {
		t.Fatalf("a pass with the session back: %v", err)
	}
	if st := s.Stats(); st.Passes != 2 || st.Failures != 0 {
		t.Errorf("stats %+v, want 2 passes, no failure", st)
	}
}

// TestIntegration_SweepPointerBeforeActivation: DC1's returning
// JobManager creates a pointer after DC2's takeover read the job's
// pointers but before its activation committed (issue 29: the takeover
// never saw it, and the sweeper judged only pointers created after the
// activation, so neither did). The activation records the takeover
// lock's zxid in the lease, and DC2's sweeper judges every pointer
// created after it: the stray one is retracted; DC1's pointers from
// before the takeover stay.
func TestIntegration_SweepPointerBeforeActivation(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	layout := flinkemu.Flink1_20
	e := newEnv(t, c)
	ctx := testContext(t, 2*time.Minute)
	jm1, job := cutOffJobManager(t, e, layout, 2)
	b2 := e.bridge("dc2")
	var stray *flinkemu.Checkpoint
	rep, err := b2.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second, beforeActivation: func() {
		if stray != nil {
			return
		}
		// DC1's JobManager, back with a new session: checkpoint 3 is on
		// DC1's NAS only.
		cp, err := jm1.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
		if err != nil {
			t.Error(err)
			return
		}
		hideFile(t, cp.HAFile)
		stray = cp
	}})
	if err != nil || !rep.Activated || stray == nil {
		t.Fatalf("takeover: %v %+v (stray %v)", err, rep, stray)
	}
	if kept := jobReport(t, rep, job).Kept; slices.Contains(kept, stray.ID) {
		t.Fatalf("the takeover judged checkpoint %d, created after it read: kept %v", stray.ID, kept)
	}
	s2, err := b2.NewSweeper(0)
	if err != nil {
		t.Fatal(err)
	}
	swept, err := s2.Pass(ctx)
	if err != nil || !slices.Equal(swept, []SweptPointer{{JobID: job, ID: stray.ID, Reason: ReasonAboveNewestComplete}}) {
		t.Fatalf("DC2's sweeper: %+v, %v; want checkpoint %d retracted", swept, err, stray.ID)
	}
	for id, want := range map[int64]bool{1: true, 2: true, stray.ID: false} {
		ok, _, err := b2.Conn().Exists(e.root + "/default/" + pointerPath(layout, job, id))
		if err != nil || ok != want {
			t.Errorf("pointer %d exists=%v (%v), want %v", id, ok, err, want)
		}
	}
}

// TestIntegration_SweepAfterAdopt: a stray pointer the sweeper has seen
// but not yet retracted when an operator deletes the lease must still be
// retracted after the daemon adopts the lease again. The adopt judges no
// pointer, so it must not move the bound past the stray (design §5.5.2;
// make jepsen found it: the adopt wrote its own lock's zxid). Without a
// lease naming its site the sweeper judges nothing.
func TestIntegration_SweepAfterAdopt(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, 2*time.Minute)
	b2, job, stray := strayAfterTakeover(t, e, flinkemu.Flink1_20, 2)
	const grace = time.Minute
	s, err := b2.NewSweeper(grace)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	pass := func(when string, want ...SweptPointer) {
		t.Helper()
		swept, err := s.Pass(ctx)
		if err != nil || !slices.Equal(swept, want) {
			t.Fatalf("%s: swept %+v, %v; want %+v", when, swept, err, want)
		}
	}
	pass("the stray's first pass, within the grace")
	if err := b2.Conn().Delete(e.ckptfs+"/default/lease", -1); err != nil {
		t.Fatal(err)
	}
	advance(grace)
	pass("without a lease")
	if _, err := b2.ActivateSelf(ctx, Adopt, 30*time.Second); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	st, err := b2.ReadState(ctx)
	if err != nil || !st.Holds("dc2") || st.Lease.Judged != 0 {
		t.Fatalf("after the adopt: %+v, %v; want the lease held by dc2, judged_after_zxid 0", st.Lease, err)
	}
	pass("the first pass after the adopt")
	advance(grace)
	pass("a grace later", SweptPointer{JobID: job, ID: stray.ID, Reason: ReasonAboveNewestComplete})
}

// TestIntegration_SweepBacksOff: a retraction that keeps failing (a
// backup of another pointer in the way) makes the sweeper wait twice as
// long after each failed pass, not take the takeover lock every
// interval (make jepsen saw 8 a second per daemon).
func TestIntegration_SweepBacksOff(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, 2*time.Minute)
	b2, job, stray := strayAfterTakeover(t, e, flinkemu.Flink1_20, 1)
	paths := newCkptfsPaths(e.ckptfs, "default")
	for _, p := range []string{paths.prunedRoot(), paths.prunedJob(job)} {
		if err := b2.zk.ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b2.Conn().Create(paths.pruned(job, stray.ID), mustBackup(t, &Backup{Format: backupFormat, Znode: "/elsewhere", Data: []byte("other")}), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s, err := b2.NewSweeper(0)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	s.Run(runCtx, 10*time.Millisecond)
	// Passes at 0, 20, 60, 140, 300, 620 and 940 ms (then every 320 ms):
	// about 8, against 150 at the interval.
	st := s.Stats()
	if st.Failures < 3 || st.Passes > 15 || !strings.Contains(st.LastError, "conflicting backup") {
		t.Errorf("in 1.5 s at a 10 ms interval: %d passes, %d failed (%s); want at most 15, of which 3 or more failed on the backup", st.Passes, st.Failures, st.LastError)
	}
}

// TestIntegration_SweepSkipsLockedPasses: a node under takeover/ that
// some client other than ckptfs created with a lock's name (possible
// while ckptfs's znodes are open: an anonymous ckptfs) holds the takeover
// lock for ever. The sweeper cannot retract the stray pointer meanwhile;
// it does not go silent: every skipped pass is counted with who holds the
// lock, named as not ckptfs's, since when, and logged (a warning at once
// for a foreign holder, then at most once per bound while it stays).
// Once the node is gone, the next pass retracts and the lock fields
// clear.
func TestIntegration_SweepSkipsLockedPasses(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, 2*time.Minute)
	logger, logs := newLogRecorder(t)
	b2, _, cp2 := strayAfterTakeover(t, e, flinkemu.Flink1_20, 1, func(cfg *Config) { cfg.Logger = logger })

	squatter := zktest.Connect(t, c.Servers())
	lockNode := e.ckptfs + "/default/takeover/_c_00000000-0000-0000-0000-000000000000-lock-0000000000"
	if _, err := squatter.Create(lockNode, []byte("mine"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	s, err := b2.NewSweeper(0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	start := s.now()
	session := SessionID(squatter.SessionID()).String()

	_, mark := logs.since(0)
	if swept, err := s.Pass(ctx); err != nil || len(swept) > 0 {
		t.Fatalf("pass with the lock held: %v, %v; want nothing, no error", swept, err)
	}
	st := s.Stats()
	if st.SkippedLocked != 1 || !st.LockForeign || !strings.Contains(st.LockHolder, lockNode) || !strings.Contains(st.LockHolder, session) || !st.LockedSince.Equal(start) {
		t.Errorf("stats after a skipped pass: %+v; want 1 skipped, the foreign holder %s of session %s, since %v", st, lockNode, session, start)
	}
	lines, mark := logs.since(mark)
	if w := matching(lines, slog.LevelWarn, lockNode, "not ckptfs's"); len(w) != 1 {
		t.Errorf("log of the first skipped pass: %v; want one warning naming %s as not ckptfs's", lines, lockNode)
	}

	// Within the bound: counted, not warned again.
	advance(time.Minute)
	if _, err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	lines, mark = logs.since(mark)
	if st := s.Stats(); st.SkippedLocked != 2 || !st.LockedSince.Equal(start) {
		t.Errorf("stats after a second skipped pass: %+v", st)
	}
	if w := matching(lines, slog.LevelWarn, lockNode); len(w) != 0 {
		t.Errorf("second skipped pass warned again within the bound: %v", w)
	}
	// Past the bound: warned again, saying for how long.
	advance(b2.stuckLockAfter())
	if _, err := s.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	lines, mark = logs.since(mark)
	if w := matching(lines, slog.LevelWarn, lockNode, "waited="); len(w) != 1 {
		t.Errorf("a pass past the bound: %v; want one warning with how long the lock is held", lines)
	}

	if err := squatter.Delete(lockNode, -1); err != nil {
		t.Fatal(err)
	}
	swept, err := s.Pass(ctx)
	if err != nil || len(swept) != 1 || swept[0].ID != cp2.ID {
		t.Fatalf("pass once the node is gone: %v, %v; want checkpoint %d retracted", swept, err, cp2.ID)
	}
	if st := s.Stats(); st.SkippedLocked != 3 || st.LockHolder != "" || !st.LockedSince.IsZero() || st.LockForeign || st.Retracted != 1 {
		t.Errorf("stats after the lock was taken: %+v", st)
	}
	_ = mark
}

// TestIntegration_SweepJobWithoutCompletePointer: a job had no pointer
// when DC2 took over (DC1's JobManager was cut off before its first
// checkpoint); back, DC1's JobManager adds two pointers DC2 does not
// hold. PlanJob refuses a job with no complete pointer, yet every
// pointer was written since the activation: DC2's sweeper retracts both
// (none_complete_since_activation), putting the job back as the
// takeover left it (design §5.5.2). With DC2's marker naming a complete
// checkpoint of the job, retracting them would start it from empty
// state: the sweeper leaves them, counts the job and warns once.
func TestIntegration_SweepJobWithoutCompletePointer(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, marker := range []bool{false, true} {
		name := "no marker"
		if marker {
			name = "marker names a complete checkpoint"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, c)
			ctx := testContext(t, 2*time.Minute)
			layout := flinkemu.Layouts()[len(flinkemu.Layouts())-1]
			jm1, job := cutOffJobManager(t, e, layout, 0)
			log, rec := newLogRecorder(t)
			b2 := e.bridge("dc2", func(c *Config) { c.Logger = log })
			if rep, err := b2.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second}); err != nil || !rep.Activated {
				t.Fatalf("takeover: %v %+v", err, rep)
			}
			var strays []int64
			for range 2 {
				cp, err := jm1.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				if err != nil {
					t.Fatal(err)
				}
				hideFile(t, cp.HAFile)
				strays = append(strays, cp.ID)
			}
			if marker {
				m := Marker{JobID: job, CheckpointID: 7, Level: 2, Path: "file:/flink/checkpoints/" + job + "/chk-7", Site: "dc2"}
				data, _ := json.Marshal(m)
				base := e.ckptfs + "/default/sites/dc2/jobs"
				for _, p := range []string{e.ckptfs + "/default/sites", e.ckptfs + "/default/sites/dc2", base} {
					b2.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll))
				}
				if _, err := b2.Conn().Create(base+"/"+job, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
			}
			s2, err := b2.NewSweeper(0)
			if err != nil {
				t.Fatal(err)
			}
			before := e.flinkTree(b2.Conn())
			swept, err := s2.Pass(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if marker {
				if len(swept) > 0 {
					t.Fatalf("retracted %+v although DC2 holds a complete checkpoint of the job", swept)
				}
				requireSameTree(t, "a pass that leaves the job", before, e.flinkTree(b2.Conn()))
				if _, err := s2.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				lines, _ := rec.since(0)
				if st := s2.Stats(); st.LeftNoComplete != 2 || st.Retracted != 0 {
					t.Errorf("stats %+v, want the job left twice", st)
				}
				if w := matching(lines, slog.LevelWarn, "stray pointers left", job, "checkpoint=7"); len(w) != 1 {
					t.Errorf("%d warnings naming the job and checkpoint 7, want 1: %v", len(w), lines)
				}
				return
			}
			var want []SweptPointer
			for _, id := range strays {
				want = append(want, SweptPointer{JobID: job, ID: id, Reason: ReasonNoneCompleteSinceActivation})
			}
			if !slices.Equal(swept, want) {
				t.Fatalf("swept %+v, want %+v", swept, want)
			}
			for _, id := range strays {
				if ok, _, err := b2.Conn().Exists(e.root + "/default/" + pointerPath(layout, job, id)); err != nil || ok {
					t.Errorf("pointer %d exists=%v (%v), want it retracted", id, ok, err)
				}
			}
		})
	}
}
