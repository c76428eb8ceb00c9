package zkbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// restoredFormat is the version of a put-back's record.
const restoredFormat = 1

// Restored is restore-pruned's record of a pointer it put back, at
// <ckptfs>/<cluster>/restored/<job>/<%019d>, written in the multi that
// creates the pointer: one transaction, so the record's mzxid is the
// pointer's czxid. The sweeper leaves such a pointer for the activation
// it was put back in (docs/design.md §5.5.2).
type Restored struct {
	Format       int    `json:"format"`
	JobID        string `json:"job_id"`
	CheckpointID int64  `json:"checkpoint_id"`
	// Znode is the pointer put back.
	Znode string `json:"znode"`
	// Site put it back while the epoch was Epoch, last written at zxid
	// EpochZxid (the epoch's mzxid, which every activation moves).
	Site      string `json:"site"`
	Epoch     int64  `json:"epoch"`
	EpochZxid int64  `json:"epoch_zxid"`
	// Unverified: put back without the L2 check (--unverified).
	Unverified bool      `json:"unverified,omitempty"`
	RestoredAt time.Time `json:"restored_at"`
}

func (r *Restored) encode() ([]byte, error) { return json.Marshal(r) }

func decodeRestored(data []byte) (*Restored, error) {
	var r Restored
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&r); err != nil {
		return nil, fmt.Errorf("restored record: %w", err)
	}
	if r.Format != restoredFormat {
		return nil, fmt.Errorf("restored record: format %d, want %d", r.Format, restoredFormat)
	}
	return &r, nil
}

// restoredOp writes rec at its place in a put-back's multi: a create, or
// a set at the version read of a record there already (an earlier
// put-back's), so that either way the record's mzxid is the multi's.
func (b *Bridge) restoredOp(ctx context.Context, paths ckptfsPaths, rec *Restored) (txOp, error) {
	path := paths.restored(rec.JobID, rec.CheckpointID)
	data, err := rec.encode()
	if err != nil {
		return txOp{}, err
	}
	stat, err := b.zk.exists(ctx, path)
	if err != nil {
		return txOp{}, err
	}
	if stat == nil {
		return txOp{name: "restored record", op: &zk.CreateRequest{Path: path, Data: data, Acl: b.zk.acls.forPath(path)}}, nil
	}
	return txOp{name: "restored record", op: &zk.SetDataRequest{Path: path, Data: data, Version: stat.Version}}, nil
}

// putBack reports whether p is a pointer this site's restore-pruned put
// back during the epoch last written at epochZxid: its record was
// written in the transaction that created p (mzxid = p's czxid) and
// names p's znode, this site and that epoch write. Read after p, on
// the same session, a record written with p is always seen.
func (b *Bridge) putBack(ctx context.Context, paths ckptfsPaths, p *Pointer, epochZxid int64) (bool, error) {
	data, stat, err := b.zk.get(ctx, paths.restored(p.JobID, p.ID))
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if stat.Mzxid != p.Stat.Czxid {
		return false, nil
	}
	r, err := decodeRestored(data)
	if err != nil {
		b.log.Warn("undecodable record of a put-back: the pointer is judged", "znode", paths.restored(p.JobID, p.ID), "err", err)
		return false, nil
	}
	return r.Znode == p.Znode && r.Site == b.cfg.Site && r.JobID == p.JobID && r.CheckpointID == p.ID && r.EpochZxid == epochZxid, nil
}

// dropStaleRecords deletes, each at the version read, the records of
// job whose pointer is gone or was created by another transaction: they
// match no pointer any more. Called under the takeover lock, so no
// put-back rewrites one meanwhile; an undecodable record is left as it
// is.
func (b *Bridge) dropStaleRecords(ctx context.Context, paths ckptfsPaths, job string) error {
	names, _, err := b.zk.children(ctx, paths.restoredJob(job))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		id, ok := parseCheckpointName(n)
		if !ok {
			continue
		}
		path := paths.restored(job, id)
		data, stat, err := b.zk.get(ctx, path)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		rec, err := decodeRestored(data)
		if err != nil || checkAbsPath(rec.Znode) != nil {
			continue
		}
		pstat, err := b.zk.exists(ctx, rec.Znode)
		if err != nil {
			return err
		}
		if pstat != nil && pstat.Czxid == stat.Mzxid {
			continue
		}
		err = b.zk.remove(ctx, path, stat.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return err
		}
		b.log.Info("record of a put-back dropped: its pointer is gone", "job", job, "checkpoint", id, "znode", path)
	}
	return nil
}
