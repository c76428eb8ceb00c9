//go:build linux

package realflink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// legacyRelease is the release of the user's deployment (issue 30).
const legacyRelease = "1.4.2"

// findLegacy returns Flink 1.4.2's distribution (flink/versions.tsv).
func findLegacy(t *testing.T) Dist {
	t.Helper()
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(r Release) bool { return r.Version == legacyRelease })
	if i < 0 {
		t.Fatalf("flink/versions.tsv has no %s", legacyRelease)
	}
	return FindDist(t, all[i])
}

// TestIntegration_Flink14Recovers runs the user's Flink, 1.4.2, for real
// on Java 11, as its scripts would start it: a JobManager and a
// TaskManager with ZooKeeper HA and the filesystem (heap) state backend,
// the sequence job of job/src-1.4. It holds what ckptfs's picture of 1.4
// says (docs/flink-formats.md): checkpoints are chk-N directories of
// state files with no _metadata, Flink's pointers are
// checkpoints/<job>/<19 digits> with ephemeral lock children, and the HA
// files are completedCheckpoint<hex> in high-availability.storageDir.
// Then the JobManager is killed, and a new one recovers the job from
// ZooKeeper and restores its newest checkpoint, the state exact. Once
// for each state backend 1.4 has: the filesystem (heap) backend, the
// user's; RocksDB with full checkpoints (state.backend: rocksdb); and
// RocksDB with incremental checkpoints, which 1.4 turns on only in the
// job's code (the job's --rocksdb-incremental), whose HA files then
// reference sst files in the chk-N of older checkpoints (1.4 has no
// shared/ directory).
func TestIntegration_Flink14Recovers(t *testing.T) {
	d := findLegacy(t)
	RequireRoot(t)
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	for _, backend := range legacyBackends {
		t.Run(backend, func(t *testing.T) { flink14Recovers(t, c, d, backend) })
	}
}

func flink14Recovers(t *testing.T, c *zktest.Cluster, d Dist, backend string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*stepTimeout)
	defer cancel()
	root := t.TempDir()
	site := NewSite(t, "dc1", filepath.Join(root, "log"))
	ports := freePorts(t, siteAddr, 2)
	cfg := ClusterConfig{
		Dist: d, Dir: filepath.Join(root, "dc1"), Addr: siteAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: pathRoot, ClusterID: "/flink14-" + backend, SessionTimeout: flinkSession,
		CheckpointsDir: filepath.Join(root, "nas", "checkpoints"), HADir: filepath.Join(root, "nas", "ha"),
		Retained: retained,
	}
	report := filepath.Join(root, "report.txt")
	args := jobArgs(d, report)
	switch backend {
	case "rocksdb":
		cfg.Extra = map[string]string{"state.backend": "rocksdb"}
	case "rocksdb-incremental":
		args = append(args, "--rocksdb-incremental", "file://"+cfg.CheckpointsDir)
	}
	fl, jm, tm := startCluster(t, site, cfg)
	waitUntil(t, stepTimeout, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1 && o.Version == legacyRelease
	}, jm, tm)
	job, err := fl.REST.Submit(ctx, JobJar(t, d), args)
	if err != nil {
		t.Fatalf("submit the job: %v", err)
	}
	waitJob(ctx, t, fl, job, "RUNNING")
	var newest int64
	waitUntil(t, stepTimeout, "4 checkpoints", func() bool {
		cp, err := fl.REST.Checkpoints(ctx, job)
		if err != nil || cp.Latest.Completed == nil {
			return false
		}
		newest = cp.Latest.Completed.ID
		return newest >= 4
	}, jm, tm)

	// What 1.4 wrote: chk-N directories of state files, no _metadata.
	jobDir := filepath.Join(cfg.CheckpointsDir, job)
	chks := chkDirs(jobDir)
	if len(chks) == 0 {
		t.Fatalf("no chk-N directory in %s", jobDir)
	}
	for _, chk := range chks {
		names, err := os.ReadDir(filepath.Join(jobDir, chk))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Errorf("%s holds no state file", chk)
		}
		for _, n := range names {
			if n.Name() == "_metadata" {
				t.Errorf("%s holds a _metadata file: Flink 1.4 writes none", chk)
			}
		}
	}
	graphs, err := filepath.Glob(filepath.Join(cfg.HADir, "submittedJobGraph*"))
	if err != nil || len(graphs) != 1 {
		t.Errorf("job graph HA files directly in %s: %v (%v), want one", cfg.HADir, graphs, err)
	}
	for _, g := range graphs {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if jg, err := flinkha.DecodeJobGraph(data); err != nil || jg.JobID != job || len(jg.Blobs) != 1 {
			t.Errorf("%s: %+v, %v; want job %s's graph with its jar", g, jg, err, job)
		}
	}
	has, err := filepath.Glob(filepath.Join(cfg.HADir, "completedCheckpoint*"))
	if err != nil || len(has) == 0 {
		t.Errorf("no completedCheckpoint<hex> HA file directly in %s (%v)", cfg.HADir, err)
	}
	zc := zktest.Connect(t, c.Servers())
	ns := pathRoot + cfg.ClusterID
	ptrs, _, err := zc.Conn.Children(ns + "/checkpoints/" + job)
	if err != nil {
		t.Fatalf("Flink 1.4's pointers: %v", err)
	}
	digits := regexp.MustCompile(`^[0-9]{19}$`)
	reused := 0
	for _, p := range ptrs {
		if !digits.MatchString(p) {
			t.Errorf("pointer %q is not 19 digits", p)
			continue
		}
		locks, _, err := zc.Conn.Children(ns + "/checkpoints/" + job + "/" + p)
		if errors.Is(err, zk.ErrNoNode) {
			continue // subsumed since the listing: Flink keeps checkpointing
		}
		if err != nil || len(locks) == 0 {
			t.Errorf("pointer %s: no lock child (%v)", p, err)
		}
		id, _ := strconv.ParseInt(p, 10, 64)
		for _, f := range checkHAFile14(t, zc.Conn, ns+"/checkpoints/"+job+"/"+p, job) {
			if dir := filepath.Base(filepath.Dir(f.Path)); dir != fmt.Sprintf("chk-%d", id) {
				reused++
			}
		}
	}
	t.Logf("Flink %s, %s: checkpoints %v on the NAS, pointers %v, HA files %d, files of an older chk-N referenced %d", d.Version, backend, chks, ptrs, len(has), reused)
	// The backend is the one asked for: RocksDB loaded its library in
	// the TaskManager, and only incremental checkpoints reuse files.
	// 1.4 has no shared/ directory: an incremental checkpoint's new sst
	// files go to its own chk-N, where the later checkpoints that reuse
	// them reference them (and keep that chk-N when it is subsumed).
	tmLog, _ := os.ReadFile(tm.FlinkLog)
	if rocks := strings.Contains(string(tmLog), "RocksDB"); rocks != (backend != "filesystem") {
		t.Errorf("the TaskManager's log mentions RocksDB: %v, with the %s backend", rocks, backend)
	}
	if (reused > 0) != (backend == "rocksdb-incremental") {
		t.Errorf("the HA files reference %d files of an older chk-N, with the %s backend", reused, backend)
	}
	checkDiscovery14(ctx, t, c, cfg, job)

	// The JobManager dies; a new one recovers the job from ZooKeeper.
	jm.Kill()
	cp0, _ := ReadReport(report)
	jm2, err := fl.StartJobManager("jobmanager-2")
	if err != nil {
		t.Fatal(err)
	}
	restored := waitRestored(ctx, t, fl, job)
	rep, err := ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	next, ok := rep.NextRecord(restored.ID)
	if !ok {
		t.Fatalf("the job restored checkpoint %d, whose snapshot it never reported", restored.ID)
	}
	rep.Keys = rep.Keys[len(cp0.Keys):]
	waitUntil(t, stepTimeout, "every key reported after the restore", func() bool {
		r, err := ReadReport(report)
		if err != nil {
			return false
		}
		rep = r
		rep.Keys = rep.Keys[len(cp0.Keys):]
		return len(rep.Keys) >= keys
	}, jm2, tm)
	if err := rep.CheckRestore(keys, next); err != nil {
		t.Fatalf("after the restore of checkpoint %d: %v", restored.ID, err)
	}
	t.Logf("the new JobManager restored checkpoint %d (of %d), the state exact", restored.ID, newest)
}

// checkDiscovery14 holds ckptfs's layout discovery and liveness to the
// namespace a running Flink 1.4.2 JobManager wrote: the generation 1.4
// (or 1.5-1.6 in legacy mode, which elect alike),
// the job's pointers under checkpoints/<job> with their locks directly,
// and the JobManager alive, none of its nodes foreign.
func checkDiscovery14(ctx context.Context, t *testing.T, c *zktest.Cluster, cfg ClusterConfig, job string) {
	t.Helper()
	storage := filepath.Dir(cfg.CheckpointsDir)
	v := newVerifier(t, "file:"+storage, storage)
	bcfg := zkbridge.DefaultConfig()
	bcfg.Servers, bcfg.PathRoot, bcfg.ClusterID, bcfg.Site, bcfg.CkptfsRoot = c.Servers(), cfg.PathRoot, cfg.ClusterID, "dc2", "/ckptfs"
	bcfg.FlinkSessionTimeout = cfg.SessionTimeout
	b, err := zkbridge.New(ctx, bcfg, zkbridge.NewSiteVerifier(v, manifest.DefaultCatalogConfig().BackingTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	zc := zktest.Connect(t, c.Servers())
	ns := cfg.PathRoot + cfg.ClusterID
	for _, dir := range []string{"leader", "leaderlatch"} {
		var tree []string
		var walk func(p string)
		walk = func(p string) {
			kids, _, err := zc.Conn.Children(p)
			if err != nil {
				return
			}
			for _, k := range kids {
				tree = append(tree, strings.TrimPrefix(p+"/"+k, ns+"/"))
				walk(p + "/" + k)
			}
		}
		walk(ns + "/" + dir)
		t.Logf("Flink 1.4.2's %s/: %v", dir, tree)
	}
	l, err := b.Discover(ctx)
	if err != nil {
		t.Fatalf("layout discovery on Flink 1.4.2's namespace: %v", err)
	}
	t.Logf("layout %s (candidates %v): %s", l.Generation, l.Candidates, strings.Join(l.Evidence, "; "))
	want := zkbridge.JobLayout{JobID: job, PointerDir: ns + "/checkpoints/" + job, CounterPath: ns + "/checkpoint-counter/" + job,
		LockStyle: zkbridge.LockDirect, JobGraph: ns + "/jobgraphs/" + job}
	// ZooKeeper alone does not tell 1.4 from 1.5 or 1.6 in legacy mode.
	if !slices.Equal(l.Candidates, []zkbridge.Generation{zkbridge.Gen1_4, zkbridge.Gen1_5}) || len(l.Jobs) != 1 || l.Jobs[0] != want {
		t.Errorf("layout %s (candidates %v), jobs %+v; want 1.4 or 1.5-1.13 and [%+v]", l.Generation, l.Candidates, l.Jobs, want)
	}
	live, err := b.Liveness(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !live.Alive || len(live.Foreign) > 0 {
		t.Errorf("liveness with Flink 1.4.2's JobManager running: alive %v, nodes %+v, foreign %+v", live.Alive, live.Nodes, live.Foreign)
	}
}

// checkHAFile14 holds ckptfs's decoders to what Flink 1.4.2 wrote: the
// pointer's state handle names an HA file, which decodes as a
// CompletedCheckpoint of field set 1.4 of the job, with no _metadata,
// and every state file it names exists with its recorded size.
func checkHAFile14(t *testing.T, conn *zk.Conn, pointer, job string) []flinkha.FileRef {
	t.Helper()
	data, _, err := conn.Get(pointer)
	if err != nil {
		t.Errorf("%s: %v", pointer, err)
		return nil
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		t.Errorf("%s: the state handle does not decode: %v", pointer, err)
		return nil
	}
	path, err := flinkha.URIToPath(h.URI)
	if err != nil {
		t.Errorf("%s: HA file %q: %v", pointer, h.URI, err)
		return nil
	}
	ha, err := os.ReadFile(strings.TrimPrefix(path, "file:"))
	if err != nil {
		t.Errorf("%s: %v", pointer, err)
		return nil
	}
	if h.Size >= 0 && int64(len(ha)) != h.Size {
		t.Errorf("%s: the HA file has %d bytes, its handle says %d", pointer, len(ha), h.Size)
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(ha)
	if err != nil {
		t.Errorf("%s: %s does not decode: %v", pointer, path, err)
		return nil
	}
	if cc.FieldSet != flinkha.FieldSet14 || cc.JobID != job || cc.Metadata != nil || len(cc.Files) == 0 {
		t.Errorf("%s: %s decodes as field set %s, job %s, metadata %v, %d files; want 1.4, %s, none, some", pointer, path, cc.FieldSet, cc.JobID, cc.Metadata, len(cc.Files), job)
	}
	for _, f := range cc.Files {
		st, err := os.Stat(strings.TrimPrefix(f.Path, "file:"))
		if err != nil {
			t.Errorf("checkpoint %d: %v", cc.CheckpointID, err)
			continue
		}
		if f.Size >= 0 && st.Size() != f.Size {
			t.Errorf("checkpoint %d: %s has %d bytes, its handle says %d", cc.CheckpointID, f.Path, st.Size(), f.Size)
		}
	}
	return cc.Files
}

// TestIntegration_UserFlink142 is the user's deployment (issue 30), for
// real: Flink 1.4.2 on Java 11, five ZooKeeper servers 2 + 2 + 1, on DC1
// two JobManagers (JM1 leads, JM2 stands by) and a TaskManager writing
// the heap backend's checkpoints and high-availability.storageDir to
// the NAS through DC1's primary mount, 3 checkpoints retained, the NAS
// replicated asynchronously; DC1 is lost, ckptfs takeover runs on DC2,
// and two JobManagers and a TaskManager started on DC2 recover the job
// through DC2's mount, its state exact.
//
// Then the user's own experiment: once DC2 holds ZooKeeper's newest
// checkpoint N, DC1 is lost and N's files are deleted on DC2's NAS,
// while ZooKeeper still points at N. Without ckptfs, 1.4.2 tries N again
// and again, each time failing with the user's exception chain
// (IllegalStateException: Could not initialize keyed state backend,
// caused by FileNotFoundException: .../chk-N/<uuid>), or its twin for
// the source's operator state when that task restores first. With ckptfs, the
// takeover retracts N and Flink restores N-1 on its first attempt.
func TestIntegration_UserFlink142(t *testing.T) {
	d := findLegacy(t)
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	t.Run("failover", func(t *testing.T) {
		r := newRun(t, d, true)
		r.standby, r.backend = true, "filesystem" // the user's
		runFailover(t, c, r)
	})
	experiment := func(t *testing.T, ckptfs bool) outcome {
		r := newRun(t, d, ckptfs)
		r.standby, r.deleteNewest, r.backend = true, true, "filesystem" // the user's
		if r.kind == "snapshot" {
			// A snapshot continues the TaskManager it stops for it.
			r.kind = "filelevel"
		}
		return runFailover(t, c, r)
	}
	t.Run("experiment-without-ckptfs", func(t *testing.T) {
		out := experiment(t, false)
		if len(out.Attempts) < baselineTries {
			t.Fatalf("%d failed attempts, want %d", len(out.Attempts), baselineTries)
		}
		// Every attempt fails on a file of N. The first task to fail it
		// is the keyed one (the user's chain) or the source's operator
		// state, whichever restores first: a fresh-clone CI run (seed
		// 871373) saw the operator state's chain in all three attempts.
		missing := "java.io.FileNotFoundException: "
		chk := "chk-" + strconv.FormatInt(out.Newest, 10) + "/"
		chains := []string{
			"java.lang.IllegalStateException: Could not initialize keyed state backend. <- " + missing,
			"java.lang.IllegalStateException: Could not initialize operator state backend. <- " + missing,
		}
		for i, a := range out.Attempts {
			if !strings.Contains(a, chk) || !slices.ContainsFunc(chains, func(c string) bool { return strings.Contains(a, c) }) {
				t.Errorf("attempt %d failed with %q, not the keyed or the operator state backend on a missing file of %s", i+1, a, chk)
			}
		}
	})
	t.Run("experiment-with-ckptfs", func(t *testing.T) {
		out := experiment(t, true)
		if out.Restored != out.Newest-1 {
			t.Errorf("restored checkpoint %d, want %d: the one before ZooKeeper's newest, %d, whose files are gone", out.Restored, out.Newest-1, out.Newest)
		}
	})
}

// TestLegacyFailures reads the failures out of Flink 1.4's JobManager log as
// log4j 1.2 writes it (cluster.go's pattern): each job failure's chain,
// the state file cut after its checkpoint directory.
func TestLegacyFailures(t *testing.T) {
	log := filepath.Join(t.TempDir(), "jm.log")
	text := `10:00:01,000 INFO  ExecutionGraph [flink-akka.actor.default-dispatcher-4] - Job SeqJob (0123) switched from state CREATED to RUNNING.
10:00:02,000 INFO  ExecutionGraph [flink-akka.actor.default-dispatcher-4] - Job SeqJob (0123) switched from state RUNNING to FAILING.
java.lang.IllegalStateException: Could not initialize keyed state backend.
	at org.apache.flink.streaming.api.operators.AbstractStreamOperator.initKeyedState(AbstractStreamOperator.java:293)
Caused by: java.io.FileNotFoundException: /nas/checkpoints/0123/chk-14/9a4b-77 (No such file or directory)
	at java.base/java.io.FileInputStream.open0(Native Method)
	... 5 more
10:00:02,001 INFO  ExecutionGraph [flink-akka.actor.default-dispatcher-4] - Job SeqJob (0123) switched from state FAILING to RESTARTING.
10:00:12,000 INFO  ExecutionGraph [flink-akka.actor.default-dispatcher-4] - Job SeqJob (0123) switched from state RUNNING to FAILING.
java.lang.IllegalStateException: Could not initialize keyed state backend.
Caused by: java.io.FileNotFoundException: /nas/checkpoints/0123/chk-14/c3d2-01 (No such file or directory)
`
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := legacyFailures(log)
	want := "java.lang.IllegalStateException: Could not initialize keyed state backend. <- java.io.FileNotFoundException: /nas/checkpoints/0123/chk-14/… (No such file or directory)"
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Fatalf("failures %q, want twice %q", got, want)
	}
}
