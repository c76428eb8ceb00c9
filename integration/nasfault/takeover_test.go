package nasfault

import (
	"context"
	"encoding/json"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestTakeoverOnAHungNAS: a takeover whose NAS hangs (every call) does
// not hang with it: within the backing timeout its verdicts are unknown,
// it refuses the job with that reason, changes nothing and releases its
// lock, so a second takeover runs at once (and does not start the hung
// verification again). Once the NAS answers, a takeover proceeds, with
// no restart.
func TestTakeoverOnAHungNAS(t *testing.T) {
	t.Parallel()
	runtime.LockOSThread() // see TestZooKeeperWorkOnAHungNAS
	cluster := zktest.StartCluster(t, 1)
	lower, nas := t.TempDir(), t.TempDir()
	fault := faultfs.Mount(t, lower, nas)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jcfg := flinkemu.DefaultConfig()
	jcfg.Servers, jcfg.PathRoot, jcfg.Storage = cluster.Servers(), "/flink", lower
	jm, err := flinkemu.Start(ctx, jcfg)
	if err != nil {
		t.Fatal(err)
	}
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	jm.Close() // DC1 is gone

	v := mounttest.Verifier(t, []manifest.Mapping{{Prefix: jcfg.FlinkStorage, Dir: nas}})
	const backingTimeout = time.Second
	zcfg := zkbridge.DefaultConfig()
	zcfg.Servers, zcfg.PathRoot, zcfg.Site = cluster.Servers(), "/flink", "dc2"
	zcfg.Logger = slog.New(slog.DiscardHandler)
	b, err := zkbridge.New(ctx, zcfg, zkbridge.NewSiteVerifier(v, backingTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	for i, what := range []string{"a takeover on the hung NAS", "a second one while the first's verification still waits"} {
		start := time.Now()
		rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{Wait: 30 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		said, _ := json.Marshal(rep.Jobs)
		if rep.Activated || !rep.Refused() || !strings.Contains(string(said), "did not answer") {
			t.Fatalf("%s: %+v (jobs %s), want the job refused for a NAS that did not answer", what, rep, said)
		}
		t.Logf("%s: refused after %v: %s", what, time.Since(start).Round(time.Millisecond), rep.Jobs[0].Reason)
		if i == 0 && fault.Hung() == 0 {
			t.Fatal("nothing waited on the NAS")
		}
	}
	hung := fault.Hung()
	fault.Clear()
	rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{Wait: 30 * time.Second})
	if err != nil || !rep.Activated {
		t.Fatalf("a takeover once the NAS answers: %v %+v", err, rep)
	}
	t.Logf("calls that waited on the hung NAS: %d", hung)
}
