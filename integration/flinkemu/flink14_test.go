package flinkemu

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestIntegration_Flink14 holds the 1.4 layout to what real Flink 1.4.2
// wrote (docs/flink-formats.md §1.2, §1.8, §1.9, §2.9): the legacy
// JobManager's one leader election, a SubmittedJobGraph directly in the
// HA storage directory and the jar below <storageDir>/<cluster>/blob, no
// running job registry and no shared/ or taskowned/; RocksDB-style
// incremental checkpoints whose new files go to their own chk-N, where
// later checkpoints reference them, and which 1.4 discards file by file
// (a chk-N stays while a retained checkpoint references a file in it);
// a restore from the HA files alone, failing on a missing file every
// time; and a second JobManager that recovers the job, checkpoints on and
// subsumes the first one's checkpoints.
func TestIntegration_Flink14(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.Layout = Flink1_4
	cfg.ClusterID = "flink14"
	cfg.Storage = t.TempDir()
	cfg.MetadataInProgress = true // a 1.15+ setting: 1.4 writes no _metadata to stage
	var steps []Step
	cfg.BeforeStep = func(s Step) error { steps = append(steps, s); return nil }
	jm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	obs := zktest.Connect(t, c.Servers())
	ns := cfg.Namespace()

	// The legacy JobManager's leader information names its actor.
	data, _, err := obs.Conn.Get(ns + "/leader/" + legacyJobID + "/job_manager_lock")
	if err != nil {
		t.Fatal(err)
	}
	if li, err := flinkha.DecodeLeaderInfo(data); err != nil || li == nil || li.Address != "akka.tcp://flink@jm-dc1:6123/user/jobmanager" {
		t.Errorf("leader information %+v, %v; want the legacy JobManager's actor akka.tcp://flink@jm-dc1:6123/user/jobmanager", li, err)
	}
	for _, absent := range []string{ns + "/running_job_registry", ns + "/leader/" + job, ns + "/leaderlatch/" + job} {
		if ok, _, err := obs.Conn.Exists(absent); err != nil || ok {
			t.Errorf("%s exists (%v): 1.4's legacy JobManager writes no such node", absent, err)
		}
	}

	// The job graph: a SubmittedJobGraph in the storage directory itself,
	// the jar in the blob store below the cluster id.
	data, _, err = obs.Conn.Get(ns + "/jobgraphs/" + job)
	if err != nil {
		t.Fatal(err)
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		t.Fatal(err)
	}
	graphPath, _ := h.Path()
	graphFile := filepath.Join(cfg.Storage, "ha", strings.TrimPrefix(graphPath, cfg.FlinkStorage+"/ha/"))
	if !strings.HasPrefix(graphPath, cfg.FlinkStorage+"/ha/submittedJobGraph") || strings.Count(graphPath, "/") != strings.Count(cfg.FlinkStorage+"/ha/x", "/") {
		t.Errorf("job graph HA file %s, want %s/ha/submittedJobGraph<hex>", graphPath, cfg.FlinkStorage)
	}
	graph, err := os.ReadFile(graphFile)
	if err != nil {
		t.Fatal(err)
	}
	jg, err := flinkha.DecodeJobGraph(graph)
	if err != nil || !jg.Submitted || jg.JobID != job || len(jg.Blobs) != 1 || h.Size != int64(len(graph)) {
		t.Fatalf("job graph %+v, %v (%d bytes, the znode says %d); want job %s's SubmittedJobGraph naming its jar", jg, err, len(graph), h.Size, job)
	}
	jar, err := os.ReadFile(filepath.Join(cfg.Storage, "ha", cfg.ClusterID, "blob", "job_"+job, jg.Blobs[0].FileName()))
	if sum := sha1.Sum(jar); err != nil || hex.EncodeToString(sum[:]) != jg.Blobs[0].Hash {
		t.Errorf("the jar's blob: %v (SHA-1 %x, the key says %s)", err, sum, jg.Blobs[0].Hash)
	}

	var all []*Checkpoint
	for range 5 {
		cp, err := jm.CompleteCheckpoint(job, CheckpointSpec{SharedSizes: []int{500, 700}, KeepShared: 2, StateSizes: []int{100}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, cp)
	}
	jobDir := filepath.Join(cfg.Storage, "checkpoints", job)
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	// chk-1's sst files are reused by every later checkpoint (KeepShared
	// takes the first ones), chk-2's by none: chk-2 went whole, chk-1
	// keeps the two files the retained checkpoints reference.
	if !slices.Equal(dirs, []string{"chk-1", "chk-3", "chk-4", "chk-5"}) {
		t.Fatalf("%s holds %v, want chk-1 (its reused files) and the retained chk-3..5: no shared/, no taskowned/", jobDir, dirs)
	}
	held, _ := filepath.Glob(filepath.Join(jobDir, "chk-1", "*"))
	if !slices.Equal(held, slices.Sorted(slices.Values(all[0].NewSharedFiles))) {
		t.Errorf("chk-1 holds %v, want only its sst files %v", held, all[0].NewSharedFiles)
	}
	newest := all[4]
	for _, f := range newest.NewSharedFiles {
		if filepath.Dir(f) != newest.Dir {
			t.Errorf("new sst file %s, not in its own chk-%d", f, newest.ID)
		}
	}
	if newest.Metadata != "" {
		t.Errorf("checkpoint %d has metadata %s; 1.4 writes none unless externalized", newest.ID, newest.Metadata)
	}
	var kinds []StepKind
	for _, s := range steps {
		if s.ID == newest.ID && (len(kinds) == 0 || kinds[len(kinds)-1] != s.Kind) {
			kinds = append(kinds, s.Kind)
		}
	}
	if want := []StepKind{StepMkdir, StepState, StepShared, StepState, StepHAFile, StepPointer, StepSubsume}; !slices.Equal(kinds, want) {
		t.Errorf("steps of checkpoint %d: %v, want %v", newest.ID, kinds, want)
	}

	// ckptfs's own verifier finds the newest pointer complete from its HA
	// file alone (design §4.2.1).
	v := mounttest.Verifier(t, []manifest.Mapping{{Prefix: cfg.FlinkStorage, Dir: cfg.Storage}})
	st, err := flinkha.DecodeStateHandle(newest.Data)
	if err != nil {
		t.Fatal(err)
	}
	if pv := v.VerifyPointer(ctx, newest.ID, *st); !pv.L2Complete() || pv.Checkpoint.FieldSet != flinkha.FieldSet14 {
		t.Errorf("ckptfs's verdict on pointer %d: %+v", newest.ID, pv.Verdict)
	}

	// Restore: 3 HA files, then the state file, 4 sst files, the private
	// file and the meta file of checkpoint 5; no _metadata.
	got, err := Restore(obs.Conn, cfg, job, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.CheckpointID != newest.ID || !slices.Equal(got.Retained, []int64{3, 4, 5}) || got.Files != 3+1+4+1+1 {
		t.Errorf("restored %d from %v reading %d files, want 5 from [3 4 5] reading 10", got.CheckpointID, got.Retained, got.Files)
	}
	// A reused sst file missing from chk-1 fails every attempt on the
	// newest pointer, as a 1.4 task fails with FileNotFoundException.
	gone := all[0].NewSharedFiles[0]
	undo := hide(t, gone)
	_, err = Restore(obs.Conn, cfg, job, RestoreOptions{Attempts: 2, Backoff: time.Millisecond})
	var re *RestoreError
	if !errors.As(err, &re) || len(re.Attempts) != 2 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("restore without %s: %v", gone, err)
	}
	for _, a := range re.Attempts {
		var pe *PointerError
		if !errors.As(a, &pe) || pe.ID != newest.ID || pe.Stage != "state" {
			t.Errorf("attempt error %v, want the state of checkpoint %d", a, newest.ID)
		}
	}
	undo()

	// A second JobManager recovers the job and subsumes the first one's
	// checkpoints as it checkpoints on.
	jm.Close()
	checkSecondJobManager(ctx, t, cfg, obs.Conn, job, all)
}

// TestIntegration_Flink14Externalized: a retained 1.4 checkpoint is
// externalized as 1.4 does it (SavepointStore): a flat
// checkpoint_metadata-<hex> of format version 2 in state.checkpoints.dir,
// written before the HA file, which names it as its external pointer and
// externalized metadata; a restore does not read it (only flink run -s
// does); a subsumed checkpoint's goes with it.
func TestIntegration_Flink14Externalized(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.Layout = Flink1_4
	cfg.Storage = t.TempDir()
	cfg.Retention = flinkha.RetainOnCancellation
	cfg.Retained = 1
	var steps []Step
	cfg.BeforeStep = func(s Step) error { steps = append(steps, s); return nil }
	jm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	var all []*Checkpoint
	for range 2 {
		cp, err := jm.CompleteCheckpoint(job, CheckpointSpec{})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, cp)
	}
	cp := all[1]
	if dir, base := filepath.Split(cp.Metadata); dir != filepath.Join(cfg.Storage, "checkpoints")+"/" || !strings.HasPrefix(base, "checkpoint_metadata-") || len(base) != len("checkpoint_metadata-")+12 {
		t.Fatalf("externalized metadata %q, want %s/checkpoints/checkpoint_metadata-<12 hex>", cp.Metadata, cfg.Storage)
	}
	if _, err := os.Stat(all[0].Metadata); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the subsumed checkpoint's metadata file: %v, want it deleted", err)
	}
	if names, _ := filepath.Glob(filepath.Join(cp.Dir, "*")); slices.ContainsFunc(names, func(n string) bool { return filepath.Base(n) == "_metadata" }) {
		t.Errorf("chk-%d holds a _metadata: %v", cp.ID, names)
	}
	m, err := metadata.DecodeFile(cp.Metadata, metadata.Options{})
	if err != nil || m.Version != 2 || m.CheckpointID != cp.ID {
		t.Fatalf("externalized metadata: %+v, %v; want version 2 of checkpoint %d", m, err, cp.ID)
	}
	for _, op := range m.Operators {
		for _, st := range op.Subtasks {
			if k := st.ManagedKeyed; k != nil && (k.Delegate == nil || k.Delegate.Tag != metadata.TagFileStream || !strings.HasPrefix(k.Delegate.Path, cp.FlinkDir+"/")) {
				t.Errorf("keyed state %+v, want an absolute file handle into %s", k.Delegate, cp.FlinkDir)
			}
		}
	}
	ha, err := os.ReadFile(cp.HAFile)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(ha)
	if err != nil {
		t.Fatal(err)
	}
	flinkMeta := cfg.FlinkStorage + "/checkpoints/" + filepath.Base(cp.Metadata)
	if cc.FieldSet != flinkha.FieldSet14 || cc.ExternalPointer != flinkMeta || !slices.ContainsFunc(cc.Files, func(f flinkha.FileRef) bool { return f.Path == flinkMeta }) {
		t.Errorf("HA file: field set %s, pointer %q, files %v; want 1.4's naming %s", cc.FieldSet, cc.ExternalPointer, cc.Files, flinkMeta)
	}
	var kinds []StepKind
	for _, s := range steps {
		if s.ID == cp.ID && (len(kinds) == 0 || kinds[len(kinds)-1] != s.Kind) {
			kinds = append(kinds, s.Kind)
		}
	}
	if want := []StepKind{StepMkdir, StepState, StepMetadata, StepHAFile, StepPointer, StepSubsume}; !slices.Equal(kinds, want) {
		t.Errorf("steps of checkpoint %d: %v, want %v", cp.ID, kinds, want)
	}
	// The HA recovery reads the state files, not the metadata file.
	obs := zktest.Connect(t, c.Servers())
	hide(t, cp.Metadata)
	got, err := Restore(obs.Conn, cfg, job, RestoreOptions{Attempts: 1})
	if err != nil || got.CheckpointID != cp.ID || got.Files != 1+2 {
		t.Errorf("restore without the metadata file: %+v, %v; want checkpoint %d from its HA file and 2 state files", got, err, cp.ID)
	}
}

// hide moves a file away; the returned function brings it back.
func hide(t *testing.T, path string) func() {
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
