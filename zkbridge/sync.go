package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Synchronous replication's znodes (design §4.8). A primary in sync or
// strict mode holds the close of a checkpoint's HA file while it asks,
// with a request under <ckptfs>/<cluster>/sync, whether another site
// holds the checkpoint; the duty holder of each other site answers with
// an acknowledgement below the request once it does. A request is a new
// child of sync for every checkpoint, so that the other sites need one
// child watch for all jobs.

const (
	syncAckPrefix = "ack-"
	// maxSyncRequest bounds what a request znode is read as.
	maxSyncRequest = 64 << 10
)

// Request states.
const (
	SyncRequested = "requested"
	// SyncCompleted: the requester let Flink complete the checkpoint.
	SyncCompleted = "completed"
)

// SyncRequest asks other sites whether they hold a checkpoint.
type SyncRequest struct {
	JobID        string `json:"job_id"`
	CheckpointID int64  `json:"checkpoint_id"`
	// CheckpointPath is the checkpoint directory as Flink names it (the
	// HA file's external pointer).
	CheckpointPath string `json:"checkpoint_path"`
	// HAFile is the HA file as Flink names it; HASize and HACRC32C are
	// its bytes as the requester wrote them.
	HAFile   string `json:"ha_file"`
	HASize   int64  `json:"ha_size"`
	HACRC32C uint32 `json:"ha_crc32c"`
	// Epoch is the epoch the requester's site is active in; Site is that
	// site (both set by RequestSync).
	Epoch int64     `json:"epoch"`
	Site  string    `json:"site"`
	State string    `json:"state"`
	At    time.Time `json:"at"`
}

// SyncAck is a site's acknowledgement of a request: it holds the
// checkpoint and the HA file completely.
type SyncAck struct {
	CheckpointID int64     `json:"checkpoint_id"`
	Epoch        int64     `json:"epoch"`
	Site         string    `json:"site"`
	At           time.Time `json:"at"`
}

// ErrSyncEpoch means the epoch is no longer the request's: the site was
// fenced, and nothing may be released.
var ErrSyncEpoch = errors.New("zkbridge: the cluster's epoch is not the sync request's")

// syncName is the request's child name under sync: the job, then the
// checkpoint id in 19 digits, so that names sort by id within a job.
func syncName(job string, id int64) string { return fmt.Sprintf("%s-%019d", job, id) }

// parseSyncName splits a child name of sync; ok is false for another
// name.
func parseSyncName(name string) (job string, id int64, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || len(name)-i-1 != 19 {
		return "", 0, false
	}
	id, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || id < 0 {
		return "", 0, false
	}
	return name[:i], id, true
}

// RequestSync publishes req as its job's request, in this site's name,
// and removes the job's older requests. It fails with ErrSyncEpoch when
// the cluster's epoch is not req.Epoch.
func (b *Bridge) RequestSync(ctx context.Context, req SyncRequest) error {
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return err
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return err
	}
	if ep.value != req.Epoch {
		return fmt.Errorf("%w: %d, the request's %d", ErrSyncEpoch, ep.value, req.Epoch)
	}
	req.Site, req.State = b.cfg.Site, SyncRequested
	if req.At.IsZero() {
		req.At = time.Now().UTC()
	}
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := b.zk.ensure(ctx, paths.syncRoot()); err != nil {
		return err
	}
	node := join(paths.syncRoot(), syncName(req.JobID, req.CheckpointID))
	if err := b.zk.create(ctx, node, data); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	kids, _, err := b.zk.children(ctx, paths.syncRoot())
	if err != nil {
		return err
	}
	for _, k := range kids {
		if job, id, ok := parseSyncName(k); ok && job == req.JobID && id < req.CheckpointID {
			if err := b.removeSync(ctx, join(paths.syncRoot(), k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeSync removes a request with its acknowledgements.
func (b *Bridge) removeSync(ctx context.Context, node string) error {
	acks, _, err := b.zk.children(ctx, node)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, a := range acks {
		if err := b.zk.remove(ctx, join(node, a), -1); err != nil {
			return err
		}
	}
	return b.zk.remove(ctx, node, -1)
}

// AwaitSync waits until a site other than this one acknowledges req's
// checkpoint at req's epoch, and returns that site; or until ctx ends.
func (b *Bridge) AwaitSync(ctx context.Context, req SyncRequest) (string, error) {
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return "", err
	}
	node := join(paths.syncRoot(), syncName(req.JobID, req.CheckpointID))
	for {
		acks, ch, err := b.zk.childrenW(ctx, node)
		if err != nil {
			return "", err
		}
		for _, a := range acks {
			site, ok := strings.CutPrefix(a, syncAckPrefix)
			if !ok || site == b.cfg.Site {
				continue
			}
			data, _, err := b.zk.get(ctx, join(node, a))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return "", err
			}
			var ack SyncAck
			if json.Unmarshal(data, &ack) == nil && ack.CheckpointID == req.CheckpointID && ack.Epoch == req.Epoch {
				return site, nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// CompleteSync records that this site let Flink complete req's
// checkpoint: the newest checkpoint it completed, for the rollback
// window of a takeover.
func (b *Bridge) CompleteSync(ctx context.Context, req SyncRequest) error {
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return err
	}
	node := join(paths.syncRoot(), syncName(req.JobID, req.CheckpointID))
	data, stat, err := b.zk.get(ctx, node)
	if err != nil {
		return err
	}
	var cur SyncRequest
	if err := json.Unmarshal(data, &cur); err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	if cur.State == SyncCompleted {
		return nil
	}
	cur.State = SyncCompleted
	if data, err = json.Marshal(cur); err != nil {
		return err
	}
	_, err = b.zk.set(ctx, node, data, stat.Version)
	return err
}

// SyncAcker answers other sites' sync requests for this site (run by its
// duty holder, design §5.5.3). It is a level-triggered reconciler: each
// Pass reads every request of the current epoch and acknowledges those
// that holds says this site holds.
type SyncAcker struct {
	b *Bridge
	// holds judges a request here, from the NAS.
	holds func(ctx context.Context, req SyncRequest) (bool, error)
	// watch is the child watch on sync kept until it fires; settled are
	// the requests a pass need not read again (acknowledged here, or not
	// this site's to answer), by name: a name is one checkpoint's.
	watch   <-chan zk.Event
	settled map[string]bool
}

// NewSyncAcker returns an acker for this site.
func (b *Bridge) NewSyncAcker(holds func(ctx context.Context, req SyncRequest) (bool, error)) *SyncAcker {
	return &SyncAcker{b: b, holds: holds, settled: map[string]bool{}}
}

// Run passes until ctx ends: at once, whenever a request appears, and
// every retry while one waits for this site.
func (a *SyncAcker) Run(ctx context.Context, retry time.Duration) error {
	for {
		waiting, err := a.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			a.b.log.Warn("answering sync requests", "err", err)
			waiting = true
		}
		var tick <-chan time.Time
		if waiting {
			tick = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.watch:
			a.watch = nil
		case <-tick:
		}
	}
}

// Pass acknowledges every request of the current epoch from another site
// that this site holds and has not acknowledged yet. It reports whether
// some request still waits for this site.
func (a *SyncAcker) Pass(ctx context.Context) (waiting bool, err error) {
	b := a.b
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return false, err
	}
	var kids []string
	if a.watch == nil {
		// Nothing is made until a requester makes sync: a site that
		// never runs sync mode has no znode of it.
		stat, ch, err := b.zk.existsW(ctx, paths.syncRoot())
		if err != nil || stat == nil {
			a.watch = ch
			return false, err
		}
		kids, a.watch, err = b.zk.childrenW(ctx, paths.syncRoot())
	} else {
		kids, _, err = b.zk.children(ctx, paths.syncRoot())
	}
	if err != nil {
		return false, err
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return false, err
	}
	for name := range a.settled {
		if _, found := slices.BinarySearch(kids, name); !found {
			delete(a.settled, name)
		}
	}
	for _, k := range kids {
		if _, _, ok := parseSyncName(k); !ok || a.settled[k] {
			continue
		}
		node := join(paths.syncRoot(), k)
		data, _, err := b.zk.get(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return waiting, err
		}
		var req SyncRequest
		if len(data) > maxSyncRequest || json.Unmarshal(data, &req) != nil {
			b.log.Warn("a sync request that does not decode", "znode", node)
			continue
		}
		if req.Site == b.cfg.Site || req.Epoch != ep.value || req.State != SyncRequested || syncName(req.JobID, req.CheckpointID) != k {
			a.settled[k] = true // an epoch never comes back
			continue
		}
		ackNode := join(node, syncAckPrefix+b.cfg.Site)
		if stat, err := b.zk.exists(ctx, ackNode); err != nil {
			return waiting, err
		} else if stat != nil {
			a.settled[k] = true
			continue
		}
		ok, err := a.holds(ctx, req)
		if err != nil {
			b.log.Warn("judging a sync request", "job", req.JobID, "checkpoint", req.CheckpointID, "err", err)
		}
		if !ok {
			waiting = true
			continue
		}
		ack, _ := json.Marshal(SyncAck{CheckpointID: req.CheckpointID, Epoch: req.Epoch, Site: b.cfg.Site, At: time.Now().UTC()})
		if err := b.zk.create(ctx, ackNode, ack); err != nil && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) {
			return waiting, err
		}
		a.settled[k] = true
	}
	return waiting, nil
}

// SyncHolds judges a sync request on this site, from its NAS and trusting
// nothing remembered: the checkpoint is complete at L2 as a pointer to
// the request's HA file would be, and that HA file holds the bytes the
// requester wrote (its CRC-32C).
func (b *Bridge) SyncHolds(ctx context.Context, req SyncRequest) (bool, error) {
	if b.verifier == nil {
		return false, errors.New("no verifier")
	}
	ref := PointerRef{JobID: req.JobID, CheckpointID: req.CheckpointID, Znode: "sync request",
		Handle: flinkha.StateHandle{URI: req.HAFile, Size: req.HASize}}
	// With the catalog's trust first, while the replication catches up
	// (the acker asks again every retry), then once from the NAS alone.
	if !b.verifier.VerifyPointer(ctx, ref).L2Complete() {
		return false, nil
	}
	ctx = manifest.WithoutTrust(ctx)
	if !b.verifier.VerifyPointer(ctx, ref).L2Complete() {
		return false, nil
	}
	crc, err := b.verifier.HAFileChecksum(ctx, req.HAFile, req.HASize)
	if err != nil {
		return false, err
	}
	return crc == req.HACRC32C, nil
}
