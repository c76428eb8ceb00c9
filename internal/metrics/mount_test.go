package metrics

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

const testJob = "0123456789abcdef0123456789abcdef"

// replicaBacking lays out a backing directory with one job: a real Flink
// checkpoint complete, and a later one missing a state file. It returns
// the backing directory and the complete checkpoint's id.
func replicaBacking(t *testing.T, backing string) int64 {
	t.Helper()
	var src string
	for _, d := range flinkdata.StateDirs(t) {
		if strings.HasSuffix(d, "-checkpoint") {
			src = d
			break
		}
	}
	if src == "" {
		t.Fatal("no real checkpoint with state files")
	}
	m, err := metadata.DecodeFile(filepath.Join(src, manifest.MetadataFile), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(backing, "checkpoints", testJob)
	copyDir(t, src, filepath.Join(job, "chk-"+strconv.FormatInt(m.CheckpointID, 10)))
	// The next checkpoint: the same _metadata with the next id, one state
	// file not yet copied.
	next := filepath.Join(job, "chk-"+strconv.FormatInt(m.CheckpointID+1, 10))
	copyDir(t, src, next)
	m2, err := metadata.DecodeFile(filepath.Join(src, manifest.MetadataFile), metadata.Options{KeepInline: true})
	if err != nil {
		t.Fatal(err)
	}
	m2.CheckpointID++
	f, err := os.Create(filepath.Join(next, manifest.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := metadata.Encode(f, m2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	entries, _ := os.ReadDir(next)
	for _, e := range entries {
		if e.Name() != manifest.MetadataFile {
			os.Remove(filepath.Join(next, e.Name()))
			break
		}
	}
	return m.CheckpointID
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntegration_ScrapeReplicaMount scrapes a replica mount over real
// Flink data: the verified checkpoint is the newest complete one, the
// torn one counts as incomplete, Flink's attempt to open it counts as a
// hidden access (a checkpoint that does not exist does not), and the
// requests show up in the latency histogram.
func TestIntegration_ScrapeReplicaMount(t *testing.T) {
	dir := t.TempDir()
	backing := filepath.Join(dir, "orig")
	complete := replicaBacking(t, backing)
	cat := mounttest.Catalog(t, backing)
	cat.Refresh(context.Background())
	m := mounttest.New(t, &mounttest.Options{Dir: dir, Mode: fusefs.ModeReplica, Visibility: cat})
	src := Sources{Site: "dc2", Version: "v1.2.3", Catalog: cat, Mount: m.Server}

	if before := scrape(t, src).value(t, HiddenCheckpointAccesses, "job_id="+testJob); before != 0 {
		t.Fatalf("hidden accesses before any: %v", before)
	}
	// A checkpoint that does not exist here hides nothing.
	if _, err := os.Stat(filepath.Join(m.Mnt, "checkpoints", testJob, "chk-999")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat of a checkpoint that does not exist: %v", err)
	}
	torn := filepath.Join(m.Mnt, "checkpoints", testJob, "chk-"+strconv.FormatInt(complete+1, 10), manifest.MetadataFile)
	for range 2 {
		if _, err := os.Stat(torn); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("stat of the torn checkpoint through the mount: %v", err)
		}
	}
	if _, err := os.ReadFile(filepath.Join(m.Mnt, "checkpoints", testJob, "chk-"+strconv.FormatInt(complete, 10), manifest.MetadataFile)); err != nil {
		t.Fatal(err)
	}

	s := scrape(t, src)
	job := "job_id=" + testJob
	if v := s.value(t, HiddenCheckpointAccesses, job); v != 2 {
		t.Errorf("hidden accesses = %v, want 2", v)
	}
	if v := s.value(t, SiteNewestComplete, job+",site=dc2"); v != float64(complete) {
		t.Errorf("newest complete = %v, want %d", v, complete)
	}
	if v := s.value(t, SiteNewestCheckpoint, job); v != float64(complete+1) {
		t.Errorf("newest checkpoint = %v, want %d", v, complete+1)
	}
	if v := s.value(t, IncompleteCheckpoints, job); v != 1 {
		t.Errorf("incomplete checkpoints = %v, want 1", v)
	}
	if v := s.value(t, Verifications, "result=complete"); v != 1 {
		t.Errorf("complete verifications = %v, want 1 (one pass)", v)
	}
	if v := s.value(t, Verifications, "result=incomplete"); v != 1 {
		t.Errorf("incomplete verifications = %v, want 1", v)
	}
	if v := s.value(t, CatalogPasses, ""); v != 1 {
		t.Errorf("passes = %v, want 1", v)
	}
	if s.value(t, MountMode, "mode=replica") != 1 || s.value(t, MountMode, "mode=primary") != 0 {
		t.Errorf("mode: %s", s.series(MountMode))
	}
	if v := s.value(t, BuildInfo, "version=v1.2.3,goversion="+runtime.Version()+",site=dc2"); v != 1 {
		t.Errorf("build info = %v", v)
	}
	// Reads went through FUSE passthrough, past the daemon.
	for _, op := range []string{"lookup", "getattr", "open"} {
		h, ok := s.find(FUSERequestDuration, "op="+op)
		if !ok || h.GetHistogram().GetSampleCount() == 0 {
			t.Errorf("no %s requests in the histogram: %s", op, s.series(FUSERequestDuration))
			continue
		}
		hist := h.GetHistogram()
		if n := len(hist.GetBucket()); n != len(fusefs.LatencyBuckets())+1 { // and +Inf
			t.Errorf("%s: %d buckets", op, n)
		}
		if hist.GetSampleSum() <= 0 {
			t.Errorf("%s: sum %v", op, hist.GetSampleSum())
		}
	}
	if _, ok := s[ZooKeeperSessionState]; ok {
		t.Error("ZooKeeper metrics without ZooKeeper")
	}
	if _, ok := s["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	code, h := healthz(t, src, "")
	if code != 200 || !h.OK || h.MountPoint != m.Mnt || h.Mode != "replica" || h.ZooKeeper != nil {
		t.Errorf("/healthz: %d %+v", code, h)
	}
	if code, h := healthz(t, src, "max_lag=3"); code != 503 || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], "without ZooKeeper") {
		t.Errorf("/healthz?max_lag=3 without ZooKeeper: %d %+v", code, h)
	}
	if code, _ := healthz(t, src, "max_lag=-1"); code != 400 {
		t.Errorf("/healthz?max_lag=-1: %d, want 400", code)
	}
}
