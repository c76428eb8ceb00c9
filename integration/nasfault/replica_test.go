package nasfault

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/daemon"
	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
)

// TestReplicaReadErrors: a checkpoint whose files the NAS fails to serve
// (EIO, ESTALE) becomes unknown, so hidden, and stays hidden as long as
// the fault lasts; other checkpoints stay visible; when the fault ends it
// is visible again, without a restart.
func TestReplicaReadErrors(t *testing.T) {
	t.Parallel()
	for _, errno := range []syscall.Errno{syscall.EIO, syscall.ESTALE} {
		t.Run(errno.Error(), func(t *testing.T) {
			s := startSite(t, fusefs.ModeReplica, nil)
			defer s.dumpOnFailure()
			s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
			before := s.unknownVerifications()
			remove := s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Path: filepath.Join(jobA, s.chk), Name: "_metadata", Err: errno})
			s.waitFor(10*time.Second, "the failing checkpoint hidden", func() bool { return !s.visible(jobA) })
			s.waitFor(10*time.Second, "unknown verdicts counted", func() bool { return s.unknownVerifications() > before })
			for i := 0; i < 10; i++ {
				if s.visible(jobA) {
					t.Fatal("a checkpoint the NAS fails to serve is visible again while the fault lasts")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !s.visible(jobB) {
				t.Error("another job's checkpoint was hidden too")
			}
			remove()
			s.waitFor(10*time.Second, "visible again once the NAS serves it", func() bool { return s.visible(jobA) })
		})
	}
}

// TestReplicaMetadataReadErrorHeals: a _metadata whose read fails (its
// open and stat succeed) is not remembered as unreadable: once the NAS
// reads it, the checkpoint is verified and shown.
func TestReplicaMetadataReadErrorHeals(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	before := s.unknownVerifications()
	remove := s.fault.Add(faultfs.Rule{Ops: faultfs.OpRead, Path: jobC, Name: "_metadata", Err: syscall.EIO})
	s.put(jobC)
	s.waitFor(10*time.Second, "the unreadable checkpoint counted unknown", func() bool { return s.unknownVerifications() > before })
	if s.visible(jobC) {
		t.Fatal("a checkpoint whose _metadata cannot be read is visible")
	}
	remove()
	s.waitFor(10*time.Second, "the checkpoint visible once its _metadata reads", func() bool { return s.visible(jobC) })
}

// TestReplicaListingErrorKeepsJob: a job directory the NAS fails to list
// keeps its checkpoints, unknown (hidden, and counted as incomplete), so
// the job does not vanish from the catalog, its metrics and its markers
// as if Flink had deleted it.
func TestReplicaListingErrorKeepsJob(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
	incomplete := `ckptfs_incomplete_checkpoints{job_id="` + filepath.Base(jobA) + `"`
	remove := s.fault.Add(faultfs.Rule{Ops: faultfs.OpReaddir, Path: jobA, Err: syscall.EIO})
	s.waitFor(10*time.Second, "the job's checkpoint hidden", func() bool { return !s.visible(jobA) })
	s.waitFor(10*time.Second, "the job still known, its checkpoint incomplete", func() bool { return s.metric(incomplete) == 1 })
	remove()
	s.waitFor(10*time.Second, "visible again", func() bool { return s.visible(jobA) })
	if n := s.metric(incomplete); n != 0 {
		t.Errorf("%s: %v after the fault, want 0", incomplete, n)
	}
}

// TestReplicaSlowNAS: a NAS that answers every stat late (within the
// backing timeout) slows verification down but changes no verdict: a new
// complete checkpoint is shown, a torn one never.
func TestReplicaSlowNAS(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, func(c *daemon.Config) {
		c.Catalog.BackingTimeout, c.Verifier.MaxAge = 30*time.Second, time.Minute
	})
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
	// The torn checkpoint is made beside the NAS and moved in whole, so
	// that it is never complete there.
	staged := filepath.Join(t.TempDir(), "chk")
	copyDir(t, s.src, staged)
	entries, err := os.ReadDir(staged)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "_metadata" {
			if err := os.Remove(filepath.Join(staged, e.Name())); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	torn := filepath.Join(s.lower, jobC, s.chk)
	if err := os.MkdirAll(filepath.Dir(torn), 0o755); err != nil {
		t.Fatal(err)
	}
	copyDir(t, staged, torn)
	// Every state file (named by a UUID) answers its stat late.
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpStat, Path: "jobs", Name: "*-*-*-*-*", Delay: 50 * time.Millisecond})
	s.put(jobD)
	start := time.Now()
	for !s.visible(jobD) {
		if s.visible(jobC) {
			t.Fatal("a torn checkpoint is visible on a slow NAS")
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("a complete checkpoint not shown within 15 s on a slow NAS")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("new checkpoint shown after %v with 50 ms per stat", time.Since(start).Round(time.Millisecond))
	if s.visible(jobC) {
		t.Error("a torn checkpoint is visible on a slow NAS")
	}
}
