package realflink

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestIntegration_RealFlink115OldHAServices: real Flink 1.15.4 with
// high-availability.use-old-ha-services elects its leaders as 1.14 does
// (a latch per component) but keeps 1.15's pointers, with a persistent
// locks child. ckptfs's discovery must decide by the locks child, with
// the JobManager alive and once it is gone, and a dry-run takeover must
// find the job whole (its job graph, blob and pointers). make test
// fetches 1.15.4 (its use is cold); run alone, the test skips unless its
// distribution is in the cache (bash flink/fetch.sh 1.15.4); about 25 s.
func TestIntegration_RealFlink115OldHAServices(t *testing.T) {
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(r Release) bool { return r.Version == "1.15.4" })
	if i < 0 {
		t.Fatal("flink/versions.tsv has no 1.15.4")
	}
	skipShort(t)
	if _, err := os.Stat(filepath.Join(cacheDir(), "flink", "dist", "1.15.4", ".sha256")); err != nil {
		t.Skip("Flink 1.15.4 is not in the cache: bash flink/fetch.sh 1.15.4")
	}
	d := FindDist(t, all[i])
	const session = 4 * time.Second
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	tmp := t.TempDir()
	root := filepath.Join(tmp, "flink")
	for _, dir := range []string{"checkpoints", "ha"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	site := NewSite(t, "dc1", filepath.Join(tmp, "log"))
	ports := freePorts(t, harvestAddr, 2)
	const clusterID = "/oldha"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fl, jm, tm := startCluster(t, site, ClusterConfig{
		Dist: d, Dir: filepath.Join(tmp, "dc1"), Addr: harvestAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: pathRoot, ClusterID: clusterID, SessionTimeout: session,
		CheckpointsDir: filepath.Join(root, "checkpoints"), HADir: filepath.Join(root, "ha"),
		Interval: 300 * time.Millisecond, Retained: 3,
		Extra: map[string]string{"high-availability.use-old-ha-services": "true"},
	})
	waitUntil(t, time.Minute, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1
	}, jm, tm)
	job, err := fl.REST.Submit(ctx, JobJar(t, d), []string{"--report", filepath.Join(tmp, "report.txt"), "--rate", "200", "--keys", "16", "--parallelism", "1"})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	waitUntil(t, time.Minute, "3 completed checkpoints", func() bool {
		cps, err := fl.REST.Checkpoints(ctx, job)
		return err == nil && cps.Counts.Completed >= 3
	}, jm, tm)

	zc := zktest.Connect(t, c.Servers())
	ns := pathRoot + clusterID
	// The setting took effect: 1.14's latch per component, not 1.15's one.
	if ok, _, _ := zc.Exists(ns + "/leader/latch"); ok {
		t.Fatalf("%s/leader/latch exists: use-old-ha-services was not applied", ns)
	}
	kids, _, err := zc.Children(ns + "/leader")
	if err != nil {
		t.Fatal(err)
	}
	perComponent := 0
	for _, k := range kids {
		if ok, _, _ := zc.Exists(ns + "/leader/" + k + "/latch"); ok {
			perComponent++
		}
	}
	if perComponent == 0 {
		t.Fatalf("no leader/<component>/latch under %s/leader (%v): not 1.14's leader election", ns, kids)
	}

	v := mounttest.Verifier(t, []manifest.Mapping{{Prefix: "file:" + root, Dir: root}})
	bcfg := zkbridge.DefaultConfig()
	bcfg.Servers, bcfg.PathRoot, bcfg.ClusterID, bcfg.Site, bcfg.CkptfsRoot = c.Servers(), pathRoot, clusterID, "dc2", "/ckptfs"
	bcfg.FlinkSessionTimeout = session
	b, err := zkbridge.New(ctx, bcfg, zkbridge.NewSiteVerifier(v, manifest.DefaultCatalogConfig().BackingTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	check := func(when string) {
		t.Helper()
		l, err := b.Discover(ctx)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		t.Logf("%s: candidates %v, evidence:\n%s", when, l.Candidates, strings.Join(l.Evidence, "\n"))
		if slices.Contains(l.Candidates, zkbridge.Gen1_14) || len(l.Candidates) == 0 || l.JobsLockStyle != zkbridge.LockChild ||
			len(l.Jobs) != 1 || l.Jobs[0].LockStyle != zkbridge.LockChild {
			t.Fatalf("%s: candidates %v, lock style %v, jobs %+v: want 1.15+ with locks children", when, l.Candidates, l.JobsLockStyle, l.Jobs)
		}
	}
	check("JobManager alive")
	jm.Kill()
	tm.Kill()
	check("JobManager killed")
	rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{DryRun: true, Wait: 3 * session})
	if err != nil {
		t.Fatalf("dry-run takeover: %v", err)
	}
	if len(rep.Jobs) != 1 || rep.Refused() || rep.Jobs[0].HA == nil || !rep.Jobs[0].HA.Complete() || rep.Jobs[0].HA.Blobs == nil || rep.Jobs[0].HA.Blobs.Files != 1 {
		t.Fatalf("dry-run takeover of a whole site: %+v, jobs %+v", rep, rep.Jobs)
	}
	t.Logf("dry-run takeover: %s; job %s: %s", rep.Decision, job, rep.Jobs[0].Reason)
}
