package zkbridge

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_SyncRequests: a request waits until another site's
// acker holds the checkpoint; the requester's own acker, a request of an
// epoch gone and a completed one are never acknowledged; a newer request
// of the job removes the older; a request of an epoch that is not the
// cluster's is refused.
func TestIntegration_SyncRequests(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	cluster := func(c *Config) { c.ClusterID = "default" }
	dc1, dc2 := e.bridge("dc1", cluster), e.bridge("dc2", cluster)
	ctx := testContext(t, time.Minute)
	job := flinkemu.NewJobID()

	var holds atomic.Bool
	var judged atomic.Int64
	judge := func(_ context.Context, req SyncRequest) (bool, error) {
		judged.Add(1)
		return holds.Load(), nil
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	for _, b := range []*Bridge{dc1, dc2} {
		a := b.NewSyncAcker(judge)
		go a.Run(actx, 20*time.Millisecond)
	}
	await := func(req SyncRequest, within time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		return dc1.AwaitSync(ctx, req)
	}

	req := SyncRequest{JobID: job, CheckpointID: 5, CheckpointPath: "file:/flink/" + job + "/chk-5", HAFile: "file:/flink/ha/completedCheckpoint0a", HASize: 100, HACRC32C: 7}
	if err := dc1.RequestSync(ctx, req); err != nil {
		t.Fatal(err)
	}
	if site, err := await(req, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acknowledged by %q (%v) while no site holds it", site, err)
	}
	if judged.Load() == 0 {
		t.Fatal("the acker never judged the request")
	}
	holds.Store(true)
	start := time.Now()
	if site, err := await(req, 5*time.Second); err != nil || site != "dc2" {
		t.Fatalf("once dc2 holds it: %q, %v; want dc2", site, err)
	}
	t.Logf("acknowledged %v after dc2 held it", time.Since(start).Round(time.Millisecond))

	// The newer request replaces the older; the requester's own acker
	// never answered.
	paths, err := dc1.clusterPaths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := req
	next.CheckpointID = 6
	if err := dc1.RequestSync(ctx, next); err != nil {
		t.Fatal(err)
	}
	if kids, _, err := dc1.zk.children(ctx, paths.syncRoot()); err != nil || !slices.Equal(kids, []string{syncName(job, 6)}) {
		t.Errorf("requests after the next one: %v, %v; want only %s", kids, err, syncName(job, 6))
	}
	if _, err := await(next, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if acks, _, _ := dc1.zk.children(ctx, join(paths.syncRoot(), syncName(job, 6))); !slices.Equal(acks, []string{"ack-dc2"}) {
		t.Errorf("acknowledgements %v, want dc2's alone", acks)
	}
	if err := dc1.CompleteSync(ctx, next); err != nil {
		t.Fatal(err)
	}

	// An epoch gone: refused to the requester, ignored by the acker.
	holds.Store(false)
	old := req
	old.CheckpointID = 7
	if err := dc1.RequestSync(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := dc1.zk.set(ctx, paths.epoch(), []byte("1"), -1); err != nil {
		if err := dc1.zk.create(ctx, paths.epoch(), []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	holds.Store(true)
	if site, err := await(old, 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request of epoch 0 acknowledged by %q (%v) in epoch 1", site, err)
	}
	newer := req
	newer.CheckpointID = 8
	if err := dc1.RequestSync(ctx, newer); !errors.Is(err, ErrSyncEpoch) {
		t.Fatalf("a request of epoch 0 in epoch 1: %v, want ErrSyncEpoch", err)
	}
	newer.Epoch = 1
	if err := dc1.RequestSync(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if site, err := await(newer, 5*time.Second); err != nil || site != "dc2" {
		t.Fatalf("a request of epoch 1: %q, %v", site, err)
	}
}
