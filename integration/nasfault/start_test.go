package nasfault

import (
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

// TestStartOnAHungNAS (issue 18, item 2): a daemon started on a NAS that
// already hangs every call comes up within a few backing timeouts: the
// mount is there, no checkpoint is complete (all hidden), health reports
// the hung NAS, and its ZooKeeper work goes on (it follows active-site:
// promoted when its site is made active). When the NAS answers, the
// checkpoints become visible, with no restart.
func TestStartOnAHungNAS(t *testing.T) {
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
	start := time.Now()
	s := startSiteOn(t, fusefs.ModeReplica, func(c *daemon.Config) {
		useZooKeeper(c, cluster)
		c.Mount.ProbeTimeout = c.Catalog.BackingTimeout
	}, func(f *faultfs.FS) { f.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true}) })
	defer s.dumpOnFailure()
	up := time.Since(start)
	t.Logf("ready %v after the start on a hung NAS", up.Round(time.Millisecond))
	// Each step of the start waits at most its timeout: the pin and the
	// first pass (backing timeout), the mount's stat and its first
	// request (probe timeout), 2 s each here.
	if up > 20*time.Second {
		t.Errorf("ready only %v after the start on a hung NAS (backing and probe timeouts 2s)", up)
	}
	// Not through the mount: a lookup of the job's directory waits on
	// the NAS, as it would on a NAS that hung later.
	if n := s.metric(`ckptfs_verifications_total{result="complete"`); n != 0 {
		t.Errorf("%v checkpoints of the hung NAS verified complete", n)
	}
	s.waitFor(15*time.Second, "health reports the hung NAS", func() bool {
		h := s.health()
		return !h.OK && strings.Contains(strings.Join(h.Problems, "\n"), "not answering")
	})
	t.Logf("health: %q", s.health().Problems)
	s.waitFor(15*time.Second, "ZooKeeper session up", func() bool {
		h := s.health()
		return h.ZooKeeper != nil && h.ZooKeeper.Session == zkbridge.SessionConnected
	})
	if _, err := client.Set("/ckptfs/c1/active-site", []byte("dc2"), -1); err != nil {
		t.Fatal(err)
	}
	s.waitFor(15*time.Second, "promoted after its site was made active, with the NAS hung",
		func() bool { return s.metric(`ckptfs_mount_mode{mode="primary"`) == 1 })

	s.fault.Clear()
	s.waitFor(15*time.Second, "the checkpoints visible once the NAS answers", func() bool { return s.visible(jobA) && s.visible(jobB) })
	s.waitFor(15*time.Second, "health OK once the NAS answers", func() bool { return s.health().OK })
}
