package flinkemu

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// TestIntegration_IncrementalRestoreAndRecover writes incremental
// checkpoints, checks Flink's subsumption of shared files, restores, fails
// to restore on a missing shared file (every attempt, on the same
// pointer), and lets a second JobManager recover the job and go on.
func TestIntegration_IncrementalRestoreAndRecover(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range []Layout{Flink1_13, Flink1_14, Flink1_20} {
		t.Run(layout.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := DefaultConfig()
			cfg.Servers = c.Servers()
			cfg.Layout = layout
			cfg.ClusterID = "restore-" + layout.String()
			cfg.Storage = t.TempDir()
			cfg.MetadataInProgress = layout >= Flink1_17
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
			for range 5 {
				cp, err := jm.CompleteCheckpoint(job, CheckpointSpec{SharedSizes: []int{500, 700}, KeepShared: 2, StateSizes: []int{100}})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, cp)
			}
			// Flink's order within a checkpoint.
			var kinds []StepKind
			for _, s := range steps {
				if s.ID == all[4].ID && (len(kinds) == 0 || kinds[len(kinds)-1] != s.Kind) {
					kinds = append(kinds, s.Kind)
				}
			}
			want := []StepKind{StepMkdir, StepState, StepShared, StepState, StepMetadata, StepHAFile, StepPointer, StepSubsume}
			if !slices.Equal(kinds, want) {
				t.Errorf("steps of checkpoint %d: %v, want %v", all[4].ID, kinds, want)
			}
			// Checkpoint 5 reuses two shared files of 4, which reused two of 3.
			if n := len(all[4].SharedFiles); n != 4 {
				t.Fatalf("checkpoint 5 references %d shared files, want 4", n)
			}
			// Retained 3..5: the shared files only 1 and 2 used are gone,
			// every file a retained checkpoint needs is there.
			for _, cp := range all[:2] {
				for _, f := range cp.NewSharedFiles {
					used := slices.ContainsFunc(all[2:], func(k *Checkpoint) bool { return slices.Contains(k.SharedFiles, f) })
					if _, err := os.Stat(f); used != (err == nil) {
						t.Errorf("shared file %s of subsumed chk-%d: used by a retained one %v, stat %v", filepath.Base(f), cp.ID, used, err)
					}
				}
				if _, err := os.Stat(cp.Dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("subsumed %s still exists", cp.Dir)
				}
			}
			for _, cp := range all[2:] {
				for _, f := range cp.Files() {
					if _, err := os.Stat(f); err != nil {
						t.Errorf("retained chk-%d: %v", cp.ID, err)
					}
				}
				if matches, _ := filepath.Glob(filepath.Join(cp.Dir, "._metadata.inprogress.*")); len(matches) > 0 {
					t.Errorf("staged metadata left behind: %v", matches)
				}
			}
			// The emulated _metadata verifies complete with ckptfs's own engine.
			v := mounttest.Verifier(t, []manifest.Mapping{{Prefix: cfg.FlinkStorage, Dir: cfg.Storage}})
			if vd := v.VerifyDir(ctx, all[4].Dir); !vd.Complete || vd.Files != len(all[4].Files()) {
				t.Errorf("chk-%d: %+v, want complete with %d files", all[4].ID, vd, len(all[4].Files()))
			}

			obs := zktest.Connect(t, c.Servers())
			got, err := Restore(obs.Conn, cfg, job, RestoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.CheckpointID != all[4].ID || !slices.Equal(got.Retained, []int64{all[2].ID, all[3].ID, all[4].ID}) {
				t.Fatalf("restored %d from %v", got.CheckpointID, got.Retained)
			}
			// 3 HA files, _metadata, 1 state file, 4 shared, private, meta.
			if got.Files != 3+1+1+4+2 {
				t.Errorf("restore read %d files, want 11", got.Files)
			}

			// A changed byte is caught; a missing shared file fails every
			// attempt on the same pointer.
			f := all[4].StateFiles[0]
			orig, _ := os.ReadFile(f)
			bad := slices.Clone(orig)
			bad[len(bad)/2] ^= 1
			os.WriteFile(f, bad, 0o644)
			if _, err := Restore(obs.Conn, cfg, job, RestoreOptions{Attempts: 1}); !errors.Is(err, ErrContent) {
				t.Errorf("restore of a changed file: %v", err)
			}
			os.WriteFile(f, orig, 0o644)
			gone := all[4].NewSharedFiles[0]
			data, _ := os.ReadFile(gone)
			os.Remove(gone)
			_, err = Restore(obs.Conn, cfg, job, RestoreOptions{Attempts: 3, Backoff: time.Millisecond})
			var re *RestoreError
			if !errors.As(err, &re) || len(re.Attempts) != 3 || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("restore without a shared file: %v", err)
			}
			for _, a := range re.Attempts {
				var pe *PointerError
				if !errors.As(a, &pe) || pe.ID != all[4].ID || pe.Stage != "state" {
					t.Errorf("attempt error %v, want the state of checkpoint %d", a, all[4].ID)
				}
			}
			os.WriteFile(gone, data, 0o644)

			// A second JobManager takes over: it recovers, continues the
			// ids and subsumes what the first one wrote.
			jm.Close()
			checkSecondJobManager(ctx, t, cfg, obs.Conn, job, all)
		})
	}
}

// checkSecondJobManager starts a second JobManager (the first one closed)
// that recovers job, completes three checkpoints, continuing the ids of
// first (five checkpoints, three retained) and subsuming them, and
// checks that a restore then finds its newest.
func checkSecondJobManager(ctx context.Context, t *testing.T, cfg Config, conn *zk.Conn, job string, first []*Checkpoint) {
	t.Helper()
	cfg.Host = "jm-dc2:6123"
	jm2, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm2.Close()
	if _, err := jm2.Recover(job, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	var next []*Checkpoint
	for range 3 {
		cp, err := jm2.CompleteCheckpoint(job, CheckpointSpec{SharedSizes: []int{300}, KeepShared: 1})
		if err != nil {
			t.Fatal(err)
		}
		next = append(next, cp)
	}
	if last := first[len(first)-1]; next[0].ID != last.ID+1 {
		t.Errorf("first checkpoint after recovery is %d, want %d", next[0].ID, last.ID+1)
	}
	for _, cp := range first[2:] {
		if _, err := os.Stat(cp.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("chk-%d of the first JobManager was not subsumed by the second", cp.ID)
		}
	}
	got, err := Restore(conn, cfg, job, RestoreOptions{})
	if err != nil || got.CheckpointID != next[2].ID {
		t.Fatalf("restore after recovery: %v, %+v", err, got)
	}
}

// TestStepStopsCheckpoint: an error from BeforeStep leaves the checkpoint
// half-written, with no pointer.
func TestIntegration_StepStopsCheckpoint(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	cfg := DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.Storage = t.TempDir()
	died := errors.New("site lost")
	cfg.BeforeStep = func(s Step) error {
		if s.ID == 2 && s.Kind == StepMetadata {
			return died
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jm, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	if _, err := jm.CompleteCheckpoint(job, CheckpointSpec{}); err != nil {
		t.Fatal(err)
	}
	if _, err := jm.CompleteCheckpoint(job, CheckpointSpec{}); !errors.Is(err, died) {
		t.Fatalf("checkpoint 2: %v, want the hook's error", err)
	}
	dir := filepath.Join(cfg.Storage, "checkpoints", job, "chk-2")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 2 {
		t.Fatalf("chk-2 holds %d entries (%v), want the 2 state files only", len(entries), err)
	}
	obs := zktest.Connect(t, c.Servers())
	got, err := Restore(obs.Conn, cfg, job, RestoreOptions{})
	if err != nil || got.CheckpointID != 1 {
		t.Fatalf("restore: %v %+v, want checkpoint 1", err, got)
	}
}
