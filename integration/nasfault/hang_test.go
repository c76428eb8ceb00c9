package nasfault

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
)

// TestReplicaHungListing: a job directory whose listing hangs (a hung
// NFS server for that path) makes that job's checkpoints unknown and
// hidden within the catalog's backing timeout, while other jobs'
// checkpoints keep being verified and shown, and health says so. When
// the NAS answers again, everything comes back without a restart.
func TestReplicaHungListing(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpReaddir, Path: jobA, Hang: true})
	s.waitFor(10*time.Second, "the catalog waits on the hung listing", func() bool { return s.fault.Hung() > 0 })
	s.put(jobC)
	s.waitFor(15*time.Second, "a new checkpoint of another job shown while one job's listing hangs", func() bool { return s.visible(jobC) })
	if !s.visible(jobB) {
		t.Error("another job's checkpoint was hidden")
	}
	s.waitFor(10*time.Second, "the hung job's checkpoint hidden", func() bool { return !s.visible(jobA) })
	s.waitFor(15*time.Second, "health reports the hung NAS", func() bool { return !s.health().OK })
	t.Logf("health while the listing hangs: %q", s.health().Problems)
	s.fault.Clear()
	s.waitFor(15*time.Second, "healthy again", func() bool { return s.health().OK })
	s.waitFor(10*time.Second, "the job's checkpoint visible again", func() bool { return s.visible(jobA) })
}

// TestReplicaHungMetadataRead: a _metadata whose read hangs holds up
// only its own checkpoint: a new checkpoint of another job is verified
// and shown meanwhile.
func TestReplicaHungMetadataRead(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpRead, Path: jobC, Name: "_metadata", Hang: true})
	s.put(jobC)
	s.waitFor(10*time.Second, "the verifier waits on the hung read", func() bool { return s.fault.Hung() > 0 })
	s.put(jobD)
	s.waitFor(15*time.Second, "another job's new checkpoint shown while a _metadata read hangs", func() bool { return s.visible(jobD) })
	if s.visible(jobC) {
		t.Error("the checkpoint whose _metadata does not read is visible")
	}
	s.fault.Clear()
	s.waitFor(15*time.Second, "the checkpoint shown once its _metadata reads", func() bool { return s.visible(jobC) })
}

// TestStopWithAHungNAS: a daemon whose NAS hangs every call, with a
// Flink request stuck on it, still stops when asked, within a bound.
func TestStopWithAHungNAS(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		os.ReadDir(filepath.Join(s.mnt, jobA, s.chk))
	}()
	s.waitFor(10*time.Second, "requests waiting on the NAS", func() bool { return s.fault.Hung() >= 2 })
	time.Sleep(time.Second) // the follower, the pin and the watcher meet the hang too
	start := time.Now()
	err := s.stopDaemon(15 * time.Second)
	t.Logf("stopped after %v: %v", time.Since(start).Round(time.Millisecond), err)
	s.fault.Clear()
	<-stuck
}

// TestReplicaHungLookupDoesNotStallInvalidation: a Flink lookup that
// hangs on the NAS holds its directory's lock in the kernel, which the
// mount's invalidation of a checkpoint in that directory needs too: the
// catalog goes on (another job's new checkpoint is shown) while that
// invalidation waits.
func TestReplicaHungLookupDoesNotStallInvalidation(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModeReplica, nil)
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "both checkpoints visible", func() bool { return s.visible(jobA) && s.visible(jobB) })
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpLookup, Path: jobA, Name: "probe", Hang: true})
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		os.Stat(filepath.Join(s.mnt, jobA, "probe"))
	}()
	s.waitFor(10*time.Second, "a lookup waiting on the NAS", func() bool { return s.fault.Hung() == 1 })
	// jobA's checkpoint stops being complete: the mount invalidates it.
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll &^ faultfs.OpLookup, Path: filepath.Join(jobA, s.chk), Name: "_metadata", Err: syscall.EIO})
	s.waitFor(10*time.Second, "a verdict change to invalidate", func() bool { return s.logs.contains("checkpoint no longer complete", filepath.Base(jobA)) })
	s.put(jobC)
	s.waitFor(10*time.Second, "another job's new checkpoint shown while an invalidation waits", func() bool { return s.visible(jobC) })
	s.fault.Clear()
	<-stuck
}
