package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// fakeSyncer acknowledges a request when told to.
type fakeSyncer struct {
	mu        sync.Mutex
	requests  []zkbridge.SyncRequest
	completed []int64
	ack       chan string // an acknowledging site for the request awaited
	epochGone bool
}

func (f *fakeSyncer) RequestSync(_ context.Context, req zkbridge.SyncRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epochGone {
		return zkbridge.ErrSyncEpoch
	}
	f.requests = append(f.requests, req)
	return nil
}

func (f *fakeSyncer) AwaitSync(ctx context.Context, _ zkbridge.SyncRequest) (string, error) {
	select {
	case site := <-f.ack:
		return site, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (f *fakeSyncer) CompleteSync(_ context.Context, req zkbridge.SyncRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completed = append(f.completed, req.CheckpointID)
	return nil
}

// realHAFile opens a copy of an HA file real Flink 1.20.5 wrote, for
// writing as Flink's would be, and decodes it.
func realHAFile(t *testing.T) (*os.File, *flinkha.CompletedCheckpoint) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "integration", "realflink", "testdata", "1.20.5", "storage", "ha", "*", "completedCheckpoint*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no real HA file: %v", err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(t.TempDir(), filepath.Base(files[0])), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f, cc
}

func testGate(mode ReplicationMode, zk syncer) *syncGate {
	g := newSyncGate(mode, 200*time.Millisecond, zk, func(rel string) string { return "file:/flink/" + rel }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.activate(3)
	return g
}

// TestSyncGateClaims: HA files of checkpoints, in sync and strict mode.
func TestSyncGateClaims(t *testing.T) {
	for _, c := range []struct {
		mode ReplicationMode
		rel  string
		want bool
	}{
		{ReplicationSync, "ha/c1/completedCheckpoint5971e913be30", true},
		{ReplicationStrict, "completedCheckpoint01", true},
		{ReplicationAsync, "ha/c1/completedCheckpoint5971e913be30", false},
		{ReplicationSync, "ha/c1/submittedJobGraphd43bfb7e18db", false},
		{ReplicationSync, "checkpoints/j/chk-5/_metadata", false},
	} {
		if got := testGate(c.mode, &fakeSyncer{}).Claims(c.rel); got != c.want {
			t.Errorf("%s Claims(%s) = %v, want %v", c.mode, c.rel, got, c.want)
		}
	}
}

// TestSyncGateHolds: an acknowledgement releases the close and records
// the checkpoint completed; without one, strict fails the close after
// the timeout and sync lets it end, degraded, then holds nothing until a
// site acknowledges again; a fence fails a held close at once; a file
// that is no HA file is let through.
func TestSyncGateHolds(t *testing.T) {
	f, cc := realHAFile(t)
	fd := int(f.Fd())
	rel := "ha/c1/" + filepath.Base(f.Name())
	ctx := context.Background()

	zk := &fakeSyncer{ack: make(chan string, 1)}
	g := testGate(ReplicationStrict, zk)
	zk.ack <- "dc2"
	if err := g.Hold(ctx, rel, fd); err != nil {
		t.Fatalf("acknowledged: %v", err)
	}
	st, _ := f.Stat()
	zk.mu.Lock()
	req := zk.requests[0]
	zk.mu.Unlock()
	if req.JobID != cc.JobID || req.CheckpointID != cc.CheckpointID || req.CheckpointPath != cc.ExternalPointer ||
		req.HAFile != "file:/flink/"+rel || req.HASize != st.Size() || req.HACRC32C == 0 || req.Epoch != 3 {
		t.Errorf("request %+v, want checkpoint %d of job %s, its HA file's size %d, epoch 3", req, cc.CheckpointID, cc.JobID, st.Size())
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		zk.mu.Lock()
		n := len(zk.completed)
		zk.mu.Unlock()
		if n > 0 {
			break
		}
	}
	zk.mu.Lock()
	if len(zk.completed) != 1 || zk.completed[0] != cc.CheckpointID {
		t.Errorf("completed %v, want [%d]", zk.completed, cc.CheckpointID)
	}
	zk.mu.Unlock()

	start := time.Now()
	if err := g.Hold(ctx, rel, fd); !errors.Is(err, syscall.EIO) {
		t.Errorf("strict without an acknowledgement: %v, want EIO", err)
	}
	if took := time.Since(start); took < g.timeout {
		t.Errorf("strict failed after %v, before its timeout %v", took, g.timeout)
	}

	g = testGate(ReplicationSync, zk)
	if err := g.Hold(ctx, rel, fd); err != nil || !g.degraded.Load() {
		t.Fatalf("sync without an acknowledgement: %v, degraded %v; want nil, degraded", err, g.degraded.Load())
	}
	start = time.Now()
	if err := g.Hold(ctx, rel, fd); err != nil || time.Since(start) > g.timeout/2 {
		t.Errorf("degraded: %v after %v; want nil at once", err, time.Since(start))
	}
	zk.ack <- "dc2" // the degraded request's watch sees it
	deadline := time.Now().Add(5 * time.Second)
	for g.degraded.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if g.degraded.Load() {
		t.Fatal("still degraded after an acknowledgement")
	}

	held := make(chan error, 1)
	go func() { held <- g.Hold(ctx, rel, fd) }()
	time.Sleep(g.timeout / 4)
	start = time.Now()
	g.fence()
	if err := <-held; !errors.Is(err, syscall.EIO) || time.Since(start) > g.timeout/2 {
		t.Errorf("fenced while held: %v after %v; want EIO at once", err, time.Since(start))
	}
	if err := g.Hold(ctx, rel, fd); !errors.Is(err, syscall.EIO) {
		t.Errorf("fenced: %v, want EIO", err)
	}
	g.activate(4)
	zk.epochGone = true
	if err := g.Hold(ctx, rel, fd); !errors.Is(err, syscall.EIO) {
		t.Errorf("the epoch gone: %v, want EIO", err)
	}

	other, err := os.Create(filepath.Join(t.TempDir(), "completedCheckpoint0"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.WriteString("not a checkpoint")
	if err := g.Hold(ctx, "ha/completedCheckpoint0", int(other.Fd())); err != nil {
		t.Errorf("a file that is no HA file: %v, want nil", err)
	}
}

// TestSyncGateHoldsThroughInterrupts: a FUSE interrupt (the writer got a
// signal; a freeze's SIGSTOP is one) cancels the request's context; the
// close stays held until an acknowledgement or the gate's own timeout,
// else the checkpoint would complete without the other site.
func TestSyncGateHoldsThroughInterrupts(t *testing.T) {
	f, _ := realHAFile(t)
	fd := int(f.Fd())
	rel := "ha/c1/" + filepath.Base(f.Name())
	interrupted, cancel := context.WithCancel(context.Background())
	cancel()
	for _, mode := range []ReplicationMode{ReplicationSync, ReplicationStrict} {
		zk := &fakeSyncer{ack: make(chan string, 1)}
		g := testGate(mode, zk)
		after := g.timeout / 4
		start := time.Now()
		time.AfterFunc(after, func() { zk.ack <- "dc2" })
		err := g.Hold(interrupted, rel, fd)
		if took := time.Since(start); err != nil || g.degraded.Load() || took < after {
			t.Errorf("%s, interrupted: %v, degraded %v after %v; want held until the acknowledgement after %v", mode, err, g.degraded.Load(), took, after)
		}
	}
}
