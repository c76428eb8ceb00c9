package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// ReplicationMode is how a primary mount lets Flink complete a checkpoint
// (design §4.8).
type ReplicationMode string

const (
	// ReplicationAsync: at once; the other site catches up by itself.
	ReplicationAsync ReplicationMode = "async"
	// ReplicationSync: once another site holds the checkpoint, or after
	// SyncTimeout, degraded until a site acknowledges again.
	ReplicationSync ReplicationMode = "sync"
	// ReplicationStrict: once another site holds the checkpoint; after
	// SyncTimeout the checkpoint fails.
	ReplicationStrict ReplicationMode = "strict"
)

// syncRetry is how often the acker judges again a request this site
// does not hold yet.
const syncRetry = 250 * time.Millisecond

// haFilePrefix starts the name of the HA file Flink stores for every
// completed checkpoint (ZooKeeperStateHandleStore's storage helper).
const haFilePrefix = "completedCheckpoint"

// syncer is what the gate needs of ZooKeeper (zkbridge.Bridge).
type syncer interface {
	RequestSync(ctx context.Context, req zkbridge.SyncRequest) error
	AwaitSync(ctx context.Context, req zkbridge.SyncRequest) (string, error)
	CompleteSync(ctx context.Context, req zkbridge.SyncRequest) error
}

// syncGate holds the close of HA files (fusefs.CloseGate) until another
// site holds their checkpoint. It is the policy of design §4.8: the
// mount only asks it.
type syncGate struct {
	mode    ReplicationMode
	timeout time.Duration
	zk      syncer
	// uri names a file of the mount as Flink does (the request's HA
	// file).
	uri func(rel string) string
	log *slog.Logger

	mu sync.Mutex
	// epoch is the epoch this site is active in; fenced: it is not
	// (active is false), and every hold fails; stop ends the holds in
	// flight when it is fenced.
	epoch  int64
	active bool
	stop   chan struct{}

	// degraded: sync mode gave up waiting, and holds nothing until a
	// site acknowledges a request again.
	degraded atomic.Bool
	stats    syncStats
}

// syncStats count what the gate did.
type syncStats struct {
	acknowledged, timedOut, failed atomic.Uint64
	waited                         atomic.Int64 // ns, of the holds that ended
}

func newSyncGate(mode ReplicationMode, timeout time.Duration, zk syncer, uri func(string) string, log *slog.Logger) *syncGate {
	return &syncGate{mode: mode, timeout: timeout, zk: zk, uri: uri, log: log, stop: make(chan struct{})}
}

// state is what the gate did, for metrics and health.
func (g *syncGate) state() metrics.SyncState {
	return metrics.SyncState{
		Mode: string(g.mode), Degraded: g.degraded.Load(),
		Acknowledged: g.stats.acknowledged.Load(), TimedOut: g.stats.timedOut.Load(), Failed: g.stats.failed.Load(),
		HeldSeconds: time.Duration(g.stats.waited.Load()).Seconds(),
	}
}

// activate lets the gate hold closes for epoch; fence fails every hold,
// those in flight at once.
func (g *syncGate) activate(epoch int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.active {
		g.stop = make(chan struct{})
	}
	g.epoch, g.active = epoch, true
}

func (g *syncGate) fence() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active {
		close(g.stop)
	}
	g.active = false
}

// Claims reports whether rel is a checkpoint's HA file.
func (g *syncGate) Claims(rel string) bool {
	return g.mode != ReplicationAsync && strings.HasPrefix(path.Base(rel), haFilePrefix)
}

// errFenced fails a close while the site is not active: its pointer
// would be a stray (design §5.5.2).
var errFenced = fmt.Errorf("the site is not active: %w", syscall.EIO)

// Hold returns once another site holds the checkpoint whose HA file fd
// holds, or as the mode says when none does within the timeout.
func (g *syncGate) Hold(ctx context.Context, rel string, fd int) error {
	g.mu.Lock()
	epoch, active, stop := g.epoch, g.active, g.stop
	g.mu.Unlock()
	if !active {
		return errFenced
	}
	req, err := g.request(rel, fd, epoch)
	if err != nil {
		// Not an HA file ckptfs can name a checkpoint from: Flink's
		// close goes on as without the gate.
		g.log.Warn("synchronous replication: not holding the close of a file it cannot read as an HA file", "file", rel, "err", err)
		return nil
	}
	start := time.Now()
	defer func() { g.stats.waited.Add(int64(time.Since(start))) }()
	// Not the request's context: a FUSE interrupt (the writer got a
	// signal, a SIGSTOP included) cancels it, and the kernel still waits
	// for this answer; released then, the checkpoint would complete
	// without the other site. A killed writer's answer is dropped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	site, err := g.await(ctx, req)
	select {
	case <-stop:
		g.stats.failed.Add(1)
		return errFenced
	default:
	}
	switch {
	case err == nil:
		g.stats.acknowledged.Add(1)
		if g.degraded.Swap(false) {
			g.log.Warn("synchronous replication resumed", "site", site, "job", req.JobID, "checkpoint", req.CheckpointID)
		}
		// Off the close: ZooKeeper may be slow, and the checkpoint is
		// released already.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
			defer cancel()
			if err := g.zk.CompleteSync(ctx, req); err != nil {
				g.log.Warn("synchronous replication: recording the completed checkpoint", "job", req.JobID, "checkpoint", req.CheckpointID, "err", err)
			}
		}()
		return nil
	case errors.Is(err, errDegraded):
		return nil
	case errors.Is(err, zkbridge.ErrSyncEpoch):
		g.stats.failed.Add(1)
		return errFenced
	}
	g.stats.timedOut.Add(1)
	if g.mode == ReplicationStrict {
		g.stats.failed.Add(1)
		return fmt.Errorf("no other site holds checkpoint %d of job %s after %v (%v): %w", req.CheckpointID, req.JobID, g.timeout, err, syscall.EIO)
	}
	if !g.degraded.Swap(true) {
		g.log.Error("synchronous replication degraded: no other site acknowledged in time; checkpoints complete without waiting until one does",
			"job", req.JobID, "checkpoint", req.CheckpointID, "timeout", g.timeout, "err", err)
	}
	return nil
}

// await publishes req and waits for an acknowledgement. Degraded, it
// does not wait: it only watches, and an acknowledgement ends the
// degraded state.
func (g *syncGate) await(ctx context.Context, req zkbridge.SyncRequest) (string, error) {
	if err := g.zk.RequestSync(ctx, req); err != nil {
		return "", err
	}
	if !g.degraded.Load() || g.mode == ReplicationStrict {
		return g.zk.AwaitSync(ctx, req)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
		defer cancel()
		if site, err := g.zk.AwaitSync(ctx, req); err == nil && g.degraded.Swap(false) {
			g.log.Warn("synchronous replication resumed", "site", site, "job", req.JobID, "checkpoint", req.CheckpointID)
		}
	}()
	return "", errDegraded
}

var errDegraded = errors.New("degraded: not waiting")

// request reads the HA file back from the backing (after syncing it
// there) and names its checkpoint.
func (g *syncGate) request(rel string, fd int, epoch int64) (zkbridge.SyncRequest, error) {
	if err := unix.Fsync(fd); err != nil {
		return zkbridge.SyncRequest{}, fmt.Errorf("fsync: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return zkbridge.SyncRequest{}, fmt.Errorf("fstat: %w", err)
	}
	if st.Size > manifest.MaxHAFileSize {
		return zkbridge.SyncRequest{}, fmt.Errorf("%d bytes, more than an HA file's %d", st.Size, manifest.MaxHAFileSize)
	}
	data := make([]byte, st.Size)
	for off := 0; off < len(data); {
		n, err := unix.Pread(fd, data[off:], int64(off))
		if err != nil {
			return zkbridge.SyncRequest{}, fmt.Errorf("read back: %w", err)
		}
		if n == 0 {
			return zkbridge.SyncRequest{}, fmt.Errorf("read back: %d of %d bytes", off, len(data))
		}
		off += n
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(data)
	if err != nil {
		return zkbridge.SyncRequest{}, err
	}
	return zkbridge.SyncRequest{
		JobID: cc.JobID, CheckpointID: cc.CheckpointID, CheckpointPath: cc.ExternalPointer,
		HAFile: g.uri(rel), HASize: st.Size, HACRC32C: manifest.Checksum(data), Epoch: epoch,
	}, nil
}

// loopSyncer is the gate's syncer through the loop's bridge, once
// connected.
type loopSyncer struct{ l *loop }

var errNotConnected = errors.New("not connected to ZooKeeper")

func (s loopSyncer) RequestSync(ctx context.Context, req zkbridge.SyncRequest) error {
	if b := s.l.bridge.Load(); b != nil {
		return b.RequestSync(ctx, req)
	}
	return errNotConnected
}

func (s loopSyncer) AwaitSync(ctx context.Context, req zkbridge.SyncRequest) (string, error) {
	if b := s.l.bridge.Load(); b != nil {
		return b.AwaitSync(ctx, req)
	}
	return "", errNotConnected
}

func (s loopSyncer) CompleteSync(ctx context.Context, req zkbridge.SyncRequest) error {
	if b := s.l.bridge.Load(); b != nil {
		return b.CompleteSync(ctx, req)
	}
	return errNotConnected
}
