package alertse2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/realflink"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// The worlds of the full form only (make alerts-e2e).

// stalledVerification: dc2's NAS hangs, and the daemon waits for it
// longer than the rule's five minutes (--backing-timeout 10m, longer
// than the rule allows): its verification pass does not finish, and
// CkptfsVerificationStalled (time since the last pass > 300s) fires after
// five minutes; so does CkptfsLagUnknown, the lag being computed from HA
// files on the same NAS. With the default backing-timeout (30s) a pass gives up on
// the hung directory and finishes, which CkptfsBackingHung reports
// instead (hungNAS).
func stalledVerification(t *testing.T, e *env) {
	w := newWorld(t, e, "stalled", e.zk)
	lower, nas := w.path("dc2/lower"), w.path("dc2/nas")
	jm := w.emulator(lower)
	job := submit(t, jm)
	complete(t, jm, job, 2, nil)
	jm.Close()
	nasfs := faultfs.Mount(t, lower, nas)
	w.startDaemon("dc2", nas, "--backing-timeout", "10m")
	t.Cleanup(nasfs.Clear) // before the daemon stops
	w.watch(false)

	at := w.fault("every operation on dc2's NAS hangs (backing-timeout 10m)")
	nasfs.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	// The lag is computed from HA files on the same NAS: it stops too.
	for _, name := range []string{"CkptfsVerificationStalled", "CkptfsLagUnknown"} {
		for _, p := range w.proms {
			w.expect(p, name, "firing", map[string]string{"site": "dc2"}, at, "the NAS hung", 7*time.Minute)
		}
	}
	w.silence("NAS hung past five minutes", w.watching, time.Now(),
		allow{"CkptfsVerificationStalled": "firing", "CkptfsLagUnknown": "firing"},
		allow{"CkptfsVerificationStalled": "firing", "CkptfsLagUnknown": "firing"})
	nasfs.Clear()
}

// flinkRelease is the release of the real-Flink lag phase.
const flinkRelease = "1.20.5"

// realFlinkLag: real Flink 1.20.5 (a JobManager and a TaskManager in
// dc1, a mount namespace of its own, as integration/realflink runs it)
// checkpoints every second through dc1's mount, replicated to dc2 by
// rsync-like passes; the replication stops while Flink goes on:
// CkptfsLagHigh (pending; firing in the scaled server), and once none of
// Flink's three retained pointers is complete on dc2,
// CkptfsNoCompletePointer. CkptfsLagSecondsHigh cannot turn true here:
// it compares the trigger times of ZooKeeper's pointers, at most two
// checkpoint intervals (2s) apart (the emulated lag world drives it).
// The replication catches up: both end.
func realFlinkLag(t *testing.T, e *env) {
	var rel realflink.Release
	rels, err := realflink.Releases()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rels {
		if r.Version == flinkRelease {
			rel = r
		}
	}
	if rel.Version == "" {
		t.Fatalf("flink/versions.tsv has no Flink %s", flinkRelease)
	}
	dist := realflink.FindDist(t, rel)
	realflink.RequireRoot(t)

	w := newWorld(t, e, "flink", e.zk)
	// Flink writes under flink, dc1's mount inside dc1's namespace.
	flink := filepath.Join(w.dir, "storage", "flink")
	w.flinkURI = "file:" + flink
	nas1, nas2 := w.path("dc1/nas"), w.path("dc2/nas")
	w.createNamespace()
	if _, said, code := w.takeover("dc1", nas1); code != 0 {
		t.Fatalf("takeover of dc1: exit %d\n%s", code, said)
	}
	dc1 := realflink.NewSite(t, "dc1", w.path("dc1/log"))
	addr1 := freeAddr(t)
	args := append([]string{"--map", w.flinkURI + "=" + nas1, "--poll", "500ms", "--lag-interval", "1s", "--metrics-addr", addr1}, w.zkArgs()...)
	if _, err := dc1.StartMount("ckptfs", e.binary, "replica", nas1, flink, args...); err != nil {
		t.Fatal(err)
	}
	w.others = append(w.others, addr1)
	if err := mounttest.WaitWritable(dc1.Path(flink), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	w.startDaemon("dc2", nas2)

	ports, err := zktest.FreePorts("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := realflink.ClusterConfig{
		Dist: dist, Dir: w.path("dc1/flink"), Addr: "127.0.0.1", RESTPort: ports[0], RPCPort: ports[1],
		ZK: w.zk.ConnectString(), PathRoot: pathRoot, ClusterID: w.cluster, SessionTimeout: flinkSession,
		CheckpointsDir: filepath.Join(flink, "checkpoints"), HADir: filepath.Join(flink, "ha"),
		Interval: time.Second, Retained: 3,
	}
	fl, err := realflink.NewCluster(dc1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fl.StartJobManager("jobmanager"); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.StartTaskManager("taskmanager"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w.waitFor(3*time.Minute, "Flink's TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1
	})
	jar := realflink.JobJar(t, dist)
	report := filepath.Join(w.path("dc1/local"), "report.txt")
	job, err := fl.REST.Submit(ctx, jar, []string{"--report", report, "--rate", "300", "--keys", "32", "--payload", "4096", "--parallelism", "2"})
	if err != nil {
		t.Fatalf("submit the job: %v", err)
	}
	w.logf("real Flink %s runs job %s, checkpointing every %v through dc1's mount", dist.Version, job, cfg.Interval)
	data := w.replicate(nas1, nas2)
	w.watch(false)
	newest := selector("ckptfs_site_newest_complete_checkpoint_id", map[string]string{"job_id": job, "site": "dc2"})
	w.waitFor(3*time.Minute, "dc2 to hold a checkpoint of Flink's", func() bool {
		v, ok := w.value(w.unchanged(), newest)
		return ok && v >= 2
	})

	at := w.fault("the replication to dc2 stops; real Flink goes on checkpointing")
	data.stop()
	labels := map[string]string{"job_id": job, "site": "dc2"}
	what := "the replication stopped (Flink checkpoints every 1s)"
	w.expect(w.unchanged(), "CkptfsLagHigh", "pending", labels, at, what, 2*time.Minute)
	w.expect(w.scaled(), "CkptfsLagHigh", "firing", labels, at, what, 3*time.Minute)
	w.expect(w.unchanged(), "CkptfsNoCompletePointer", "pending", labels, at, what, 2*time.Minute)
	w.expect(w.scaled(), "CkptfsNoCompletePointer", "firing", labels, at, what, 3*time.Minute)

	w.fault("the replication catches up")
	w.replicate(nas1, nas2)
	for _, p := range w.proms {
		w.waitFor(2*time.Minute, "Prometheus ("+p.name+"): the lag alerts to end", func() bool {
			as, err := p.alerts()
			return err == nil && len(as) == 0
		})
	}
	w.linger(lingerFor)
	w.silence("real Flink's lag", w.watching, time.Now(),
		allow{"CkptfsLagHigh": "pending", "CkptfsNoCompletePointer": "pending"},
		allow{"CkptfsLagHigh": "firing", "CkptfsNoCompletePointer": "firing"})
}
