package alertse2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestAlerts drives each alert of deploy/prometheus/ckptfs-alerts.yml by
// its fault through real Prometheus servers scraping real ckptfs
// daemons, and checks that a normal failover and a restore-pruned fire
// nothing else (doc.go). Without CKPTFS_ALERTS_E2E=1 it is the short
// form make test runs; with it (make alerts-e2e), the full form.
func TestAlerts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper, FUSE mounts and Prometheus")
	}
	mounttest.RequireFUSE(t)
	for _, tool := range []string{"prometheus", "promtool", "prometheus-node-exporter"} {
		need(t, tool)
	}
	e := &env{zk: zktest.StartCluster(t, 1), full: os.Getenv(fullEnv) == "1"}
	e.binary = ckptfsBinary(t)
	type scenario struct {
		name string
		run  func(*testing.T, *env)
	}
	worlds := []scenario{
		{"hidden", hiddenAccess},
		{"refused", refusedTakeover},
		{"lag", replicationLag},
		{"down", deadDaemon},
		{"hung", hungNAS},
		{"zkdown", zooKeeperDown},
		{"failover", normalFailover},
		{"restore", restorePruned},
	}
	// The full form adds a NAS hung past five minutes, beside them, and
	// real Flink, once they are over: its JobManager and TaskManager on
	// two cores would slow the others' daemons.
	var beside, after []scenario
	if e.full {
		beside = append(beside, scenario{"stalled", stalledVerification})
		after = append(after, scenario{"flink", realFlinkLag})
	}
	// Every world at once, each in its own subtest: they mostly wait
	// (for: 2m, a NAS hung for two minutes), so the short form takes
	// about as long as its longest world. t.Run from goroutines, not
	// t.Parallel, which go test limits to -parallel (GOMAXPROCS) at once.
	start := time.Now()
	var first, all sync.WaitGroup
	for _, w := range worlds {
		first.Add(1)
		all.Go(func() {
			defer first.Done()
			t.Run(w.name, func(t *testing.T) { w.run(t, e) })
		})
	}
	for _, w := range beside {
		all.Go(func() { t.Run(w.name, func(t *testing.T) { w.run(t, e) }) })
	}
	for _, w := range after {
		all.Go(func() {
			first.Wait()
			t.Run(w.name, func(t *testing.T) { w.run(t, e) })
		})
	}
	all.Wait()
	e.report(t)
	t.Logf("the worlds took %v", time.Since(start).Round(time.Second))
}

// hiddenAccess: Flink on the standby site looks up a checkpoint the
// replica holds in part (chk-2, a state file missing); the mount hides it
// and counts the lookup, the first event of a counter born at 0:
// CkptfsHiddenCheckpointAccess fires.
func hiddenAccess(t *testing.T, e *env) {
	w := newWorld(t, e, "hidden", e.zk)
	nas := w.path("dc2/nas")
	jm := w.emulator(nas)
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	var cp *flinkemu.Checkpoint
	for range 2 {
		var err error
		if cp, err = jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(cp.StateFiles[0]); err != nil {
		t.Fatal(err)
	}
	jm.Close()
	d := w.startDaemon("dc2", nas)
	w.watch(false)
	// The job's counter, born at 0, is in both before the first event.
	w.waitValue(selector("ckptfs_hidden_checkpoint_accesses_total", map[string]string{"job_id": job}), 0, 30*time.Second)

	at := w.fault("Flink on dc2 looks up chk-2, which the replica holds in part")
	_, err := os.Stat(filepath.Join(d.mnt, "checkpoints", job, "chk-2"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of the incomplete chk-2 through the replica mount: %v, want ENOENT", err)
	}
	for _, p := range w.proms {
		w.expect(p, "CkptfsHiddenCheckpointAccess", "firing", map[string]string{"job_id": job, "site": "dc2"}, at, "the first lookup of an incomplete chk-N", 30*time.Second)
	}
	w.linger(lingerFor)
	all := allow{"CkptfsHiddenCheckpointAccess": "firing"}
	w.silence("hidden access", w.watching, time.Now(), all, all)
}

// submit submits a new job to the emulated JobManager.
func submit(t *testing.T, jm *flinkemu.JobManager) string {
	t.Helper()
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	return job
}

// complete completes n checkpoints of job, spec(i) shaping the i-th (from 0).
func complete(t *testing.T, jm *flinkemu.JobManager, job string, n int, spec func(int) flinkemu.CheckpointSpec) []*flinkemu.Checkpoint {
	t.Helper()
	var cps []*flinkemu.Checkpoint
	for i := range n {
		var s flinkemu.CheckpointSpec
		if spec != nil {
			s = spec(i)
		}
		cp, err := jm.CompleteCheckpoint(job, s)
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, cp)
	}
	return cps
}

// refusedTakeover: the first takeover ever run on the standby site, whose
// replica holds none of ZooKeeper's pointers whole, refuses the job (exit
// 4); its textfile, which that run creates, is born with refuse_job at 1,
// and CkptfsTakeoverRefused fires from the node exporter's textfile
// collector. Its guard (the node exporter was scraped an hour before)
// holds in the unchanged server, which has an hour of the node
// exporter's up; the scaled one has none, so the first refusal stays
// silent there (the guard at work), and the second one (1 -> 2) fires.
func refusedTakeover(t *testing.T, e *env) {
	w := newWorld(t, e, "refused", e.zk)
	nas := w.path("dc2/nas")
	jm := w.emulator(nas, func(c *flinkemu.Config) { c.Retained, c.KeepSubsumedData = 2, true })
	job := submit(t, jm)
	cps := complete(t, jm, job, 3, nil)
	// The replica holds chk-1 whole (ZooKeeper no longer points at it),
	// chk-2 and chk-3, ZooKeeper's pointers, in part.
	for _, cp := range cps[1:] {
		if err := os.Remove(cp.StateFiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	jm.Close()
	w.startDaemon("dc2", nas)
	w.nodeExporter()
	w.watch(true)

	refused := map[string]string{"action": "refuse_job", "site": "dc2"}
	w.fault("ckptfs takeover on dc2, its first run")
	rep, said, code := w.takeover("dc2", nas)
	if code != 4 || len(rep.Jobs) != 1 || rep.Jobs[0].Status != "refused" {
		t.Fatalf("the takeover: exit %d, want 4 with the job refused\n%s", code, said)
	}
	at := time.Now() // its textfile is written as it ends
	w.expect(w.unchanged(), "CkptfsTakeoverRefused", "firing", refused, at, "the first refused takeover ended", 30*time.Second)
	time.Sleep(5 * interval)
	w.absent(w.scaled(), "CkptfsTakeoverRefused", "no hour of the node exporter's history: the rule's guard should keep a series born at 1 silent")

	w.fault("ckptfs takeover on dc2 again")
	if _, said, code := w.takeover("dc2", nas); code != 4 {
		t.Fatalf("the second takeover: exit %d, want 4\n%s", code, said)
	}
	at = time.Now()
	w.expect(w.scaled(), "CkptfsTakeoverRefused", "firing", refused, at, "the second refused takeover ended", 30*time.Second)
	w.linger(lingerFor)
	// A takeover here would refuse the job: CkptfsNoCompletePointer says
	// so too (for: 15m).
	w.silence("refused takeovers", w.watching, time.Now(),
		allow{"CkptfsTakeoverRefused": "firing", "CkptfsNoCompletePointer": "pending"},
		allow{"CkptfsTakeoverRefused": "firing", "CkptfsNoCompletePointer": "firing"})
}

// replicationLag: Flink triggers a checkpoint every 10 minutes and keeps
// completing them in ZooKeeper while the replication of the checkpoints
// to dc2 stops (that of the HA files, another volume, keeps up): once
// ZooKeeper is 3 checkpoints (30 minutes of Flink's trigger times) ahead
// of what dc2 holds, CkptfsLagHigh and CkptfsLagSecondsHigh are true.
// Both have for: 10m: pending in the unchanged server, firing in the
// scaled one. The replication catches up: both end.
func replicationLag(t *testing.T, e *env) {
	w := newWorld(t, e, "lag", e.zk)
	nas1, nas2 := w.path("dc1/nas"), w.path("dc2/nas")
	jm := w.emulator(nas1, func(c *flinkemu.Config) { c.Retained = 5 })
	job := submit(t, jm)
	t0 := time.Now().Add(-70 * time.Minute)
	every10m := func(from int) func(int) flinkemu.CheckpointSpec {
		return func(i int) flinkemu.CheckpointSpec {
			return flinkemu.CheckpointSpec{Timestamp: t0.Add(time.Duration(from+i) * 10 * time.Minute)}
		}
	}
	complete(t, jm, job, 2, every10m(1))
	data := w.replicate(filepath.Join(nas1, "checkpoints"), w.path("dc2/nas/checkpoints"))
	w.replicate(filepath.Join(nas1, "ha"), w.path("dc2/nas/ha"))
	w.startDaemon("dc2", nas2)
	w.watch(false)
	newest := selector("ckptfs_site_newest_complete_checkpoint_id", map[string]string{"job_id": job, "site": "dc2"})
	w.waitValue(newest, 2, 30*time.Second)

	w.fault("the replication of dc1's checkpoints to dc2 stops; Flink completes checkpoints 3, 4 and 5")
	data.stop()
	complete(t, jm, job, 3, every10m(3))
	at := time.Now()
	what := "ZooKeeper's pointer went 3 checkpoints (30 min) ahead of dc2"
	labels := map[string]string{"job_id": job, "site": "dc2"}
	for _, name := range []string{"CkptfsLagHigh", "CkptfsLagSecondsHigh"} {
		w.expect(w.unchanged(), name, "pending", labels, at, what, 60*time.Second)
		w.expect(w.scaled(), name, "firing", labels, at, what, 90*time.Second)
	}

	w.fault("the replication catches up")
	w.replicate(filepath.Join(nas1, "checkpoints"), filepath.Join(nas2, "checkpoints"))
	w.waitValue(newest, 5, 30*time.Second)
	for _, p := range w.proms {
		w.waitFor(30*time.Second, "Prometheus ("+p.name+"): the lag alerts to end", func() bool {
			as, err := p.alerts()
			return err == nil && len(as) == 0
		})
	}
	w.linger(lingerFor)
	w.silence("replication lag", w.watching, time.Now(),
		allow{"CkptfsLagHigh": "pending", "CkptfsLagSecondsHigh": "pending"},
		allow{"CkptfsLagHigh": "firing", "CkptfsLagSecondsHigh": "firing"})
}

// deadDaemon: kill -9 of dc2's daemon: up == 0, CkptfsDaemonDown (for:
// 2m: pending at once, firing after 2 minutes in the unchanged server).
// Then kill -9 of dc1's, the last: CkptfsMetricsAbsent (for: 10m).
func deadDaemon(t *testing.T, e *env) {
	w := newWorld(t, e, "down", e.zk)
	d1 := w.startDaemon("dc1", w.path("dc1/nas"))
	d2 := w.startDaemon("dc2", w.path("dc2/nas"))
	w.watch(false)

	at := w.fault("kill -9 of dc2's daemon")
	d2.kill()
	what := "kill -9 of a daemon"
	dc2 := map[string]string{"instance": d2.addr, "job": "ckptfs"}
	w.expect(w.unchanged(), "CkptfsDaemonDown", "pending", dc2, at, what, 30*time.Second)
	w.expect(w.scaled(), "CkptfsDaemonDown", "firing", dc2, at, what, 60*time.Second)

	last := w.fault("kill -9 of dc1's daemon, the last one")
	d1.kill()
	what = "kill -9 of the last daemon"
	w.expect(w.unchanged(), "CkptfsMetricsAbsent", "pending", nil, last, what, 30*time.Second)
	w.expect(w.scaled(), "CkptfsMetricsAbsent", "firing", nil, last, what, 90*time.Second)
	w.expect(w.unchanged(), "CkptfsDaemonDown", "firing", dc2, at, "kill -9 of a daemon", 3*time.Minute)
	w.silence("dead daemons", w.watching, time.Now(),
		allow{"CkptfsDaemonDown": "firing", "CkptfsMetricsAbsent": "pending"},
		allow{"CkptfsDaemonDown": "firing", "CkptfsMetricsAbsent": "firing"})
}

// hungNAS: every operation on dc2's NAS hangs (a hard NFS mount whose
// server is gone, faultfs). The daemon's passes give up on it after
// --backing-timeout and go on; ckptfs_backing_hung_seconds grows, and
// CkptfsBackingHung (> 120s, no for:) fires after two minutes.
func hungNAS(t *testing.T, e *env) {
	w := newWorld(t, e, "hung", e.zk)
	lower, nas := w.path("dc2/lower"), w.path("dc2/nas")
	jm := w.emulator(lower)
	job := submit(t, jm)
	complete(t, jm, job, 2, nil)
	jm.Close()
	nasfs := faultfs.Mount(t, lower, nas)
	w.startDaemon("dc2", nas, "--backing-timeout", "2s")
	t.Cleanup(nasfs.Clear) // before the daemon stops
	w.watch(false)

	at := w.fault("every operation on dc2's NAS hangs")
	nasfs.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	for _, p := range w.proms {
		w.expect(p, "CkptfsBackingHung", "firing", map[string]string{"site": "dc2"}, at, "the NAS hung", 3*time.Minute)
	}
	// What the daemon cannot read is not complete here: the job's
	// checkpoints are hidden, so the rules on what the site holds turn
	// true too (for: 10m and 15m).
	w.silence("hung NAS", w.watching, time.Now(),
		allow{"CkptfsBackingHung": "firing", "CkptfsNoCompleteCheckpoint": "pending", "CkptfsNoCompletePointer": "pending", "CkptfsLagHigh": "pending"},
		allow{"CkptfsBackingHung": "firing", "CkptfsNoCompleteCheckpoint": "firing", "CkptfsNoCompletePointer": "firing", "CkptfsLagHigh": "firing"})
	nasfs.Clear()
}

// zooKeeperDown: the ZooKeeper server stops (a world of its own). Both
// daemons lose their session: CkptfsZooKeeperSessionDown (for: 2m).
// dc1, the active site, stops holding the lease while Flink writes
// through its mount (every millisecond then): the mount refuses the
// first writes past its write deadline by its own clock, the daemon
// fences it a moment later, on time (ckptfs_fence_overrun_seconds stays
// 0), and every later write fails with EROFS. CkptfsDaemonStalled must
// stay silent: the daemon never stopped running. The server comes back:
// sessions again, dc1 writes again.
func zooKeeperDown(t *testing.T, e *env) {
	zk := zktest.StartCluster(t, 1)
	w := newWorld(t, e, "zkdown", zk)
	nas1, nas2 := w.path("dc1/nas"), w.path("dc2/nas")
	w.createNamespace()
	if _, said, code := w.takeover("dc1", nas1); code != 0 {
		t.Fatalf("takeover of dc1: exit %d\n%s", code, said)
	}
	d1 := w.startDaemon("dc1", nas1)
	if err := mounttest.WaitWritable(d1.mnt, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	jm := w.emulator(d1.mnt)
	job := submit(t, jm)
	complete(t, jm, job, 2, nil)
	w.syncOnce(nas1, nas2)
	w.startDaemon("dc2", nas2)
	w.watch(false)
	writes := w.writeEvery(d1.mnt, 200*time.Millisecond)

	at := w.fault("the ZooKeeper server stops")
	// A write every millisecond while the lease lapses (half a lease
	// after its last renewal): one meets the lapse in every run.
	writes.burstFor(mounttest.TestLease)
	if err := zk.Stop(0); err != nil {
		t.Fatal(err)
	}
	what := "the ZooKeeper server stopped"
	for _, site := range []string{"dc1", "dc2"} {
		w.expect(w.unchanged(), "CkptfsZooKeeperSessionDown", "pending", map[string]string{"site": site}, at, what, 30*time.Second)
		w.expect(w.scaled(), "CkptfsZooKeeperSessionDown", "firing", map[string]string{"site": site}, at, what, 60*time.Second)
	}
	claiming := selector("ckptfs_lease_claiming", map[string]string{"site": "dc1"})
	lapsed := w.firstAt(w.unchanged(), claiming, 0, at, 30*time.Second)
	w.logf("dc1's ckptfs_lease_claiming 0 in Prometheus %.1fs after the server stopped", lapsed.Sub(at).Seconds())
	for _, site := range []string{"dc1", "dc2"} {
		w.expect(w.unchanged(), "CkptfsZooKeeperSessionDown", "firing", map[string]string{"site": site}, at, what, 3*time.Minute)
	}

	back := w.fault("the ZooKeeper server starts again")
	if err := zk.Start(0); err != nil {
		t.Fatal(err)
	}
	again := w.firstAt(w.unchanged(), claiming, 1, back, 60*time.Second)
	w.logf("dc1's ckptfs_lease_claiming 1 again in Prometheus %.1fs after the server started", again.Sub(back).Seconds())
	if err := mounttest.WaitWritable(d1.mnt, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w.linger(5 * time.Second)
	ok, erofs, other, firstEROFS := writes.stop()
	w.logf("Flink's writes through dc1's mount: %d written, %d refused with EROFS (the first %.1fs after the server stopped), %d other errors %v",
		ok, erofs, firstEROFS.Sub(at).Seconds(), len(other), other)
	if erofs == 0 || len(other) > 0 {
		t.Errorf("writes through dc1's mount during the outage: %d EROFS, other errors %v; want EROFS only", erofs, other)
	}
	refused, _ := w.value(w.unchanged(), selector("ckptfs_fence_deadline_refusals_total", map[string]string{"site": "dc1"}))
	overrun := selector("ckptfs_fence_overrun_seconds", map[string]string{"site": "dc1"})
	late, present := w.value(w.unchanged(), overrun)
	w.logf("dc1's mount refused %v writes past its write deadline before the daemon fenced it; the daemon's overrun: %vs", refused, late)
	if !present || late != 0 {
		t.Errorf("%s = %v (present %v): the daemon was late past its write deadline", overrun, late, present)
	}
	w.linger(lingerFor / 2)
	w.silence("ZooKeeper down", w.watching, time.Now(),
		allow{"CkptfsZooKeeperSessionDown": "firing", "CkptfsZooKeeperSessionExpired": "firing"},
		allow{"CkptfsZooKeeperSessionDown": "firing", "CkptfsZooKeeperSessionExpired": "firing"})
}

// normalFailover: Flink runs on dc1, the active site, through its
// primary mount, replicated to dc2. A planned switch as
// docs/runbook.md says: Flink on dc1 stops, dc2 holds its newest
// checkpoint, dc1's daemon stops (systemctl stop), `ckptfs takeover` on
// dc2 activates it (nothing to retract), dc1's daemon starts again
// read-only, the replication turns around, and Flink on dc2 recovers the
// job and checkpoints through dc2's promoted mount. Nothing may fire;
// dc1's daemon, stopped for the switch, is CkptfsDaemonDown pending (for:
// 2m) in the unchanged server, firing in the scaled one (for: 6s).
func normalFailover(t *testing.T, e *env) {
	w := newWorld(t, e, "failover", e.zk)
	s := w.twoSites()
	w.nodeExporter()
	w.watch(false)
	time.Sleep(10 * time.Second) // Flink on dc1 checkpoints, replicated

	last := s.stopFlinkOnDC1()
	w.waitValue(selector("ckptfs_site_newest_complete_checkpoint_id", map[string]string{"job_id": s.job, "site": "dc2"}), float64(last), 30*time.Second)
	s.d1.stop()
	s.repl.stop()
	rep, said, code := w.takeover("dc2", s.nas2)
	if code != 0 || !rep.Activated || len(rep.Jobs) != 1 || len(rep.Jobs[0].Retracted) != 0 {
		t.Fatalf("the takeover on dc2: exit %d, want 0, activated, nothing retracted\n%s", code, said)
	}
	s.switchToDC2(last)
	w.linger(lingerFor)
	w.silence("normal failover", w.watching, time.Now(),
		allow{"CkptfsDaemonDown": "pending"},
		allow{"CkptfsDaemonDown": "firing"})
}

// restorePruned: as normalFailover, but dc2 lacks the newest checkpoint
// when it takes over: the takeover retracts its pointer. The replication
// then delivers it, `ckptfs restore-pruned` on dc2 puts the pointer back,
// and Flink on dc2 restores it. Nothing may fire but CkptfsDaemonDown as
// in normalFailover.
func restorePruned(t *testing.T, e *env) {
	w := newWorld(t, e, "restore", e.zk)
	s := w.twoSites()
	w.nodeExporter()
	w.watch(false)
	time.Sleep(5 * time.Second)

	// Once dc2 holds Flink's newest checkpoint, the replication stops;
	// Flink on dc1 completes one more, which does not reach dc2, and
	// stops.
	held, err := s.cps.stop()
	if err != nil {
		t.Fatal(err)
	}
	w.waitValue(selector("ckptfs_site_newest_complete_checkpoint_id", map[string]string{"job_id": s.job, "site": "dc2"}), float64(held), 30*time.Second)
	s.repl.stop()
	cp, err := s.jm1.CompleteCheckpoint(s.job, flinkemu.CheckpointSpec{})
	if err != nil {
		t.Fatal(err)
	}
	s.jm1.Close()
	last := cp.ID
	s.d1.stop()
	rep, said, code := w.takeover("dc2", s.nas2)
	if code != 0 || !rep.Activated || len(rep.Jobs) != 1 || len(rep.Jobs[0].Retracted) != 1 || rep.Jobs[0].Retracted[0] != last {
		t.Fatalf("the takeover on dc2: exit %d, want 0 with pointer %d retracted\n%s", code, last, said)
	}
	w.syncOnce(s.nas1, s.nas2) // the replication delivers the rest
	w.waitValue(selector("ckptfs_site_newest_complete_checkpoint_id", map[string]string{"job_id": s.job, "site": "dc2"}), float64(last), 30*time.Second)
	rr, said, code := w.restorePruned("dc2", s.nas2)
	if code != 0 || len(rr.Jobs) != 1 || len(rr.Jobs[0].Restored) != 1 || rr.Jobs[0].Restored[0] != last {
		t.Fatalf("restore-pruned on dc2: exit %d, want pointer %d put back\n%s", code, last, said)
	}
	// Flink starts on dc2 a while later: dc2's sweeper judges the pointer
	// put back, which no JobManager holds, past its grace.
	time.Sleep(3 * flinkSession)
	s.switchToDC2(last)
	w.linger(lingerFor)
	w.silence("restore-pruned", w.watching, time.Now(),
		allow{"CkptfsDaemonDown": "pending"},
		allow{"CkptfsDaemonDown": "firing"})
}

// sites is two sites of a world: dc1 active, its Flink writing through
// its primary mount, replicated to dc2.
type sites struct {
	w          *world
	nas1, nas2 string
	d1, d2     *daemon
	jm1        *flinkemu.JobManager
	job        string
	cps        *checkpointer
	repl       *replica
}

func (w *world) twoSites() *sites {
	t := w.t
	s := &sites{w: w, nas1: w.path("dc1/nas"), nas2: w.path("dc2/nas")}
	w.createNamespace()
	if _, said, code := w.takeover("dc1", s.nas1); code != 0 {
		t.Fatalf("takeover of dc1: exit %d\n%s", code, said)
	}
	s.d1 = w.startDaemon("dc1", s.nas1)
	if err := mounttest.WaitWritable(s.d1.mnt, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s.d2 = w.startDaemon("dc2", s.nas2)
	s.jm1 = w.emulator(s.d1.mnt)
	s.job = submit(t, s.jm1)
	s.repl = w.replicate(s.nas1, s.nas2)
	s.cps = w.checkpointEvery(s.jm1, s.job, 500*time.Millisecond)
	return s
}

// stopFlinkOnDC1 stops dc1's Flink and returns its last checkpoint.
func (s *sites) stopFlinkOnDC1() int64 {
	last, err := s.cps.stop()
	if err != nil {
		s.w.t.Fatal(err)
	}
	s.jm1.Close()
	s.w.logf("Flink on dc1 stopped after checkpoint %d", last)
	return last
}

// switchToDC2 follows a takeover on dc2: dc2's mount turns primary, dc1's
// daemon starts again read-only, the replication turns around, and Flink
// on dc2 restores checkpoint want and checkpoints for 10 seconds.
func (s *sites) switchToDC2(want int64) {
	w, t := s.w, s.w.t
	s.d2.waitMode("primary", 30*time.Second)
	if err := mounttest.WaitWritable(s.d2.mnt, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s.d1.start()
	s.d1.waitMode("replica", 30*time.Second)
	probe := filepath.Join(s.d1.mnt, "probe")
	if err := os.WriteFile(probe, nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write through dc1's mount after the switch: %v, want EROFS", err)
	}
	w.replicate(s.nas2, s.nas1)
	jm2 := w.emulator(s.d2.mnt)
	r, err := jm2.Recover(s.job, flinkemu.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.CheckpointID != want {
		t.Errorf("Flink on dc2 restored checkpoint %d, want %d", r.CheckpointID, want)
	}
	w.logf("Flink on dc2 restored checkpoint %d through dc2's mount", r.CheckpointID)
	cps := w.checkpointEvery(jm2, s.job, 500*time.Millisecond)
	time.Sleep(10 * time.Second)
	last, err := cps.stop()
	if err != nil {
		t.Fatal(err)
	}
	w.logf("Flink on dc2 completed checkpoints up to %d", last)
}
