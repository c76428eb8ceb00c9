package nasfault

import (
	"encoding/json"
	"path"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/daemon"
	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestMarkersOnAHungNAS (issue 18, item 3): a published checkpoint whose
// NAS path starts to hang becomes unknown and its marker stops naming
// it; a checkpoint that arrives behind a hung path is never published;
// the daemon's ZooKeeper work goes on (the mount follows active-site)
// and health reports the hung paths; once the NAS answers the markers
// follow, with no restart.
func TestMarkersOnAHungNAS(t *testing.T) {
	t.Parallel()
	runtime.LockOSThread() // see TestZooKeeperWorkOnAHungNAS
	cluster := zktest.StartCluster(t, 1)
	client := zktest.Connect(t, cluster.Servers())
	for _, p := range []string{"/ckptfs", "/ckptfs/c1"} {
		client.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	if _, err := client.Create("/ckptfs/c1/active-site", []byte("dc1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s := startSite(t, fusefs.ModeReplica, func(c *daemon.Config) {
		useZooKeeper(c, cluster)
	})
	defer s.dumpOnFailure()
	marker := func(job string) int64 {
		data, _, err := client.Get("/ckptfs/c1/sites/dc2/jobs/" + path.Base(job))
		if err != nil {
			return 0
		}
		var m zkbridge.Marker
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("marker of %s: %v", job, err)
		}
		return m.CheckpointID
	}
	s.waitFor(15*time.Second, "jobA's marker", func() bool { return marker(jobA) > 0 })
	want := marker(jobA)

	// jobA's directory hangs: its checkpoint becomes unknown, and the
	// marker must stop naming it; jobC, new meanwhile behind a hung path,
	// is never published.
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Path: jobA, Hang: true})
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Path: jobC, Hang: true})
	s.put(jobC)
	s.waitFor(15*time.Second, "health reports the hung job directory", func() bool {
		return strings.Contains(strings.Join(s.health().Problems, "\n"), "not answering")
	})
	s.waitFor(15*time.Second, "jobA's marker no longer names its checkpoint, now unknown", func() bool { return marker(jobA) <= 0 })
	if _, err := client.Set("/ckptfs/c1/active-site", []byte("dc2"), -1); err != nil {
		t.Fatal(err)
	}
	s.waitFor(15*time.Second, "promoted with job directories hung",
		func() bool { return s.metric(`ckptfs_mount_mode{mode="primary"`) == 1 })
	// More passes and publisher rounds with the paths hung.
	time.Sleep(2 * time.Second)
	if got := marker(jobC); got > 0 {
		t.Errorf("jobC's checkpoint %d published while its NAS path hangs (unknown)", got)
	}
	if got := marker(jobA); got > 0 {
		t.Errorf("jobA's checkpoint %d published again while its NAS path hangs (unknown)", got)
	}

	s.fault.Clear()
	s.waitFor(15*time.Second, "the markers once the NAS answers", func() bool { return marker(jobA) == want && marker(jobC) == want })
	s.waitFor(15*time.Second, "health OK once the NAS answers", func() bool { return s.health().OK })
}
