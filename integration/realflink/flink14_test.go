//go:build linux

package realflink

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
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
// ZooKeeper and restores its newest checkpoint, the state exact.
func TestIntegration_Flink14Recovers(t *testing.T) {
	d := findLegacy(t)
	RequireRoot(t)
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 4*stepTimeout)
	defer cancel()
	root := t.TempDir()
	site := NewSite(t, "dc1", filepath.Join(root, "log"))
	ports := freePorts(t, siteAddr, 2)
	cfg := ClusterConfig{
		Dist: d, Dir: filepath.Join(root, "dc1"), Addr: siteAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: pathRoot, ClusterID: "/flink14", SessionTimeout: flinkSession,
		CheckpointsDir: filepath.Join(root, "nas", "checkpoints"), HADir: filepath.Join(root, "nas", "ha"),
		Retained: retained,
	}
	fl, jm, tm := startCluster(t, site, cfg)
	waitUntil(t, stepTimeout, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1 && o.Version == legacyRelease
	}, jm, tm)
	report := filepath.Join(root, "report.txt")
	job, err := fl.REST.Submit(ctx, JobJar(t, d), []string{"--report", report, "--rate", strconv.Itoa(rate),
		"--keys", strconv.Itoa(keys), "--payload", strconv.Itoa(payload), "--parallelism", strconv.Itoa(parallelism),
		"--interval", strconv.FormatInt(interval.Milliseconds(), 10)})
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
	for _, p := range ptrs {
		if !digits.MatchString(p) {
			t.Errorf("pointer %q is not 19 digits", p)
			continue
		}
		locks, _, err := zc.Conn.Children(ns + "/checkpoints/" + job + "/" + p)
		if err != nil || len(locks) == 0 {
			t.Errorf("pointer %s: no lock child (%v)", p, err)
		}
		checkHAFile14(t, zc.Conn, ns+"/checkpoints/"+job+"/"+p, job)
	}
	t.Logf("Flink %s: checkpoints %v on the NAS, pointers %v, HA files %d", d.Version, chks, ptrs, len(has))

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

// checkHAFile14 holds ckptfs's decoders to what Flink 1.4.2 wrote: the
// pointer's state handle names an HA file, which decodes as a
// CompletedCheckpoint of field set 1.4 of the job, with no _metadata,
// and every state file it names exists with its recorded size.
func checkHAFile14(t *testing.T, conn *zk.Conn, pointer, job string) {
	t.Helper()
	data, _, err := conn.Get(pointer)
	if err != nil {
		t.Errorf("%s: %v", pointer, err)
		return
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		t.Errorf("%s: the state handle does not decode: %v", pointer, err)
		return
	}
	path, err := flinkha.URIToPath(h.URI)
	if err != nil {
		t.Errorf("%s: HA file %q: %v", pointer, h.URI, err)
		return
	}
	ha, err := os.ReadFile(strings.TrimPrefix(path, "file:"))
	if err != nil {
		t.Errorf("%s: %v", pointer, err)
		return
	}
	if h.Size >= 0 && int64(len(ha)) != h.Size {
		t.Errorf("%s: the HA file has %d bytes, its handle says %d", pointer, len(ha), h.Size)
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(ha)
	if err != nil {
		t.Errorf("%s: %s does not decode: %v", pointer, path, err)
		return
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
}
