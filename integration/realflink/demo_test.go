//go:build linux

package realflink

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// demoEnv makes TestDemoFlink run: make demo sets it.
const demoEnv = "CKPTFS_DEMO"

// demoRelease is the release the demo runs (its baseline is the one
// docs/compatibility.md describes).
const demoRelease = "1.20.5"

// TestDemoFlink is `make demo` with real Flink: the user's failover,
// narrated on standard output, with the replication behind DC1 when DC1
// is lost; then the same loss with no ckptfs on DC2.
func TestDemoFlink(t *testing.T) {
	if os.Getenv(demoEnv) == "" {
		t.Skipf("the narrated demo runs with %s=1 (make demo)", demoEnv)
	}
	var d Dist
	for _, r := range TestReleases(t) {
		if r.Version == demoRelease {
			d = FindDist(t, r)
		}
	}
	if d.Home == "" {
		t.Fatalf("release %s is not marked test in flink/versions.tsv", demoRelease)
	}
	mounttest.RequireFUSE(t)
	fmt.Printf("ckptfs demo with real Flink %s: a JobManager and a TaskManager in DC1 checkpoint (RocksDB, incremental)\n", d.Version)
	fmt.Println("to DC1's NAS through a ckptfs mount; the NAS is replicated asynchronously to DC2; ZooKeeper spans DC1, DC2 and DC3.")
	fmt.Println("Each site is its own mount namespace: both see Flink's storage at the same path.")
	fmt.Println()
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	var with, without outcome
	ok := t.Run("ckptfs", func(t *testing.T) {
		r := newRun(t, d, true)
		r.ahead, r.kind, r.story = true, "filelevel", os.Stdout
		with = runFailover(t, c, r)
	})
	if !ok {
		return
	}
	fmt.Println()
	fmt.Println("Now the same loss with no ckptfs on DC2: Flink over the plain replica directory.")
	ok = t.Run("baseline", func(t *testing.T) {
		r := newRun(t, d, false)
		r.ahead, r.kind, r.story = true, "filelevel", os.Stdout
		without = runFailover(t, c, r)
	})
	if !ok {
		return
	}
	fmt.Println()
	fmt.Printf("RESULT: with ckptfs, real Flink on DC2 restored checkpoint %d, the newest complete on DC2, %v after DC1's loss, its state exactly as DC1 checkpointed it.\n",
		with.Restored, with.LossToRunning.Round(100*time.Millisecond))
	fmt.Printf("        without ckptfs, ZooKeeper pointed past what DC2 held (its newest pointer %d, DC2's newest complete %d): Flink's JobManager failed on the same missing file every time it started.\n", without.Newest, without.Optimal)
}
