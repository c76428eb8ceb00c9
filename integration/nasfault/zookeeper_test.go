package nasfault

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/daemon"
	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestZooKeeperWorkOnAHungNAS: a primary whose NAS hangs (every call,
// with a writer open and a change in flight) still does its ZooKeeper
// work: it keeps its session, sees another site take over in
// active-site and fences itself within its fence timeout, and health
// reports both the NAS and the session. When the NAS answers, the
// fenced mount refuses writes, with no restart.
func TestZooKeeperWorkOnAHungNAS(t *testing.T) {
	t.Parallel()
	// zktest starts ZooKeeper with Pdeathsig, which fires when the OS
	// thread that started it ends, and a daemon in this process ends
	// threads (its sealing goroutine locks one and ends with it). Started
	// from this goroutine's own locked thread, the server lives until the
	// cleanups that stop it have run.
	runtime.LockOSThread()
	cluster := zktest.StartCluster(t, 1)
	client := zktest.Connect(t, cluster.Servers())
	for _, p := range []string{"/ckptfs", "/ckptfs/c1"} {
		client.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	if _, err := client.Create("/ckptfs/c1/active-site", []byte("dc2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s := startSite(t, fusefs.ModePrimary, func(c *daemon.Config) {
		useZooKeeper(c, cluster)
		c.Mount.FenceTimeout = time.Second
	})
	defer s.dumpOnFailure()
	s.waitFor(15*time.Second, "ZooKeeper session up", func() bool {
		return s.health().ZooKeeper != nil && s.health().ZooKeeper.Session == zkbridge.SessionConnected
	})
	// active-site names dc2 and nobody owns the lease: dc2's daemon
	// adopts it after seeing it unchanged for D (design §5.14).
	s.waitFor(15*time.Second, "dc2 holds the lease", func() bool { return s.metric("ckptfs_lease_claiming") == 1 })
	w, err := os.OpenFile(filepath.Join(s.mnt, jobA, s.chk, "state"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A change admitted by the mount, then hung on the NAS; then every
	// call hangs.
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpMkdir, Hang: true})
	inflight := make(chan error, 1)
	go func() { inflight <- os.Mkdir(filepath.Join(s.mnt, jobB, "chk-9"), 0o755) }()
	s.waitFor(10*time.Second, "a mkdir waiting on the NAS", func() bool { return s.fault.Hung() == 1 })
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	s.waitFor(10*time.Second, "the daemon's work waiting on the NAS", func() bool { return s.fault.Hung() >= 2 })

	if _, err := client.Set("/ckptfs/c1/active-site", []byte("dc1"), -1); err != nil {
		t.Fatal(err)
	}
	s.waitFor(15*time.Second, "fenced after another site took over, with the NAS hung",
		func() bool { return s.metric(`ckptfs_mount_mode{mode="fenced"`) == 1 })
	h := s.health()
	if h.ZooKeeper == nil || h.ZooKeeper.Session != zkbridge.SessionConnected {
		t.Errorf("ZooKeeper session with the NAS hung: %+v", h.ZooKeeper)
	}
	s.waitFor(15*time.Second, "health reports the hung NAS", func() bool { return !s.health().OK })
	t.Logf("health: %q", s.health().Problems)

	// The writer opened before is refused by the daemon.
	s.fault.Clear()
	<-inflight
	if _, err := w.Write([]byte("after")); !isEROFS(err) {
		t.Errorf("a writer opened before fencing: %v, want EROFS", err)
	}
	if err := os.WriteFile(filepath.Join(s.mnt, jobB, "new"), []byte("x"), 0o644); !isEROFS(err) {
		t.Errorf("a write after fencing: %v, want EROFS", err)
	}
}

func isEROFS(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.EROFS
}
