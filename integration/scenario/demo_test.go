package scenario

import (
	"fmt"
	"os"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
)

// demoEnv makes TestDemo run: make demo sets it.
const demoEnv = "CKPTFS_DEMO"

// TestDemo is `make demo`: one run of the two-site scenario, narrated on
// standard output, in which the replica lags DC1 by a checkpoint when DC1
// is lost, followed by what Flink does on the same replica without ckptfs.
func TestDemo(t *testing.T) {
	if os.Getenv(demoEnv) == "" {
		t.Skipf("the narrated demo runs with %s=1 (make demo)", demoEnv)
	}
	c := startEnsemble(t)
	r := newRun("snapshot", 20261130)
	r.layout, r.midCheckpoint, r.lagLast, r.expire, r.lossAfter = flinkemu.Flink1_20, false, true, false, 5
	r.story = os.Stdout
	fmt.Println("ckptfs demo: Flink checkpoints in DC1 and replicates them asynchronously to DC2; ZooKeeper spans DC1, DC2 and DC3.")
	fmt.Println("Five ZooKeeper servers, two ckptfs mounts and an emulated Flink JobManager run on this machine.")
	fmt.Println()
	out := runScenario(t, c, r)
	if t.Failed() {
		return
	}
	fmt.Println()
	for _, l := range r.later {
		fmt.Println(l)
	}
	fmt.Println()
	if out.Refused {
		fmt.Println("RESULT: DC2 held no complete checkpoint, so ckptfs refused the takeover and changed nothing.")
		return
	}
	fmt.Printf("RESULT: with ckptfs, Flink on DC2 restored checkpoint %d (the newest complete on DC2) and checked every byte; %v from DC1's loss to the verified restore.\n",
		out.Restored, out.LossToRestore.Round(10e6))
}
