package zkbridge

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Pointer is one checkpoint znode of a job, as read.
type Pointer struct {
	JobID string
	ID    int64
	Znode string
	// Data and Stat are the znode's bytes and stat, read together.
	Data []byte
	Stat zk.Stat
	// HasLocksNode: the persistent locks child exists (1.15+); LocksStat
	// is its stat.
	HasLocksNode bool
	LocksStat    zk.Stat
	// Locks are the ephemeral lock nodes: live JobManagers holding the
	// pointer.
	Locks []EphemeralNode
	// Other counts children that are neither locks nor ephemeral.
	Other int
	// Visible: Flink's recovery reads this pointer. A 1.15+ pointer
	// without locks is marked for deletion and skipped.
	Visible bool
	// Handle is the decoded znode data; HandleErr why it could not be
	// decoded.
	Handle    *flinkha.StateHandle
	HandleErr error
	// Verdict is filled by verification.
	Verdict *manifest.PointerVerdict
}

// JobState is one job's znodes as read.
type JobState struct {
	JobLayout
	// Pointers in ascending id order.
	Pointers []*Pointer
	// Counter is the checkpoint id counter (the next id Flink hands out),
	// -1 when absent.
	Counter int64
	// Notes are oddities found while reading (skipped names, ...).
	Notes []string
	// HasGraph: the job graph (execution plan) znode exists; Graph is its
	// decoded data, GraphErr why it does not decode.
	HasGraph bool
	Graph    *flinkha.StateHandle
	GraphErr error
	// HA is the verdict on the job graph, blobs and job results, filled
	// by verification.
	HA *manifest.JobHAVerdict
	// MarkerPath is the checkpoint this site's marker names, where the
	// restore hint also looks.
	MarkerPath string
}

// pointer returns the pointer with id, or nil.
func (j *JobState) pointer(id int64) *Pointer {
	for _, p := range j.Pointers {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// readJob reads a job's pointers with their lock children and decodes
// their data. It does not verify.
func (b *Bridge) readJob(ctx context.Context, jl JobLayout) (*JobState, error) {
	js := &JobState{JobLayout: jl, Counter: -1}
	// The counter, the job graph and the pointers' names at once, then
	// every pointer at once: go-zookeeper pipelines the requests on its
	// one connection, so a job costs the round trips of one pointer, not
	// of each (over a WAN, hundreds of jobs' worth).
	var (
		counter, graph       []byte
		names                []string
		cErr, gErr, namesErr error
		wg                   sync.WaitGroup
	)
	if jl.CounterPath != "" {
		wg.Go(func() { counter, _, cErr = b.zk.get(ctx, jl.CounterPath) })
	} else {
		cErr = zk.ErrNoNode
	}
	if jl.JobGraph != "" {
		wg.Go(func() { graph, _, gErr = b.zk.get(ctx, jl.JobGraph) })
	} else {
		gErr = zk.ErrNoNode
	}
	if jl.PointerDir != "" {
		wg.Go(func() { names, _, namesErr = b.zk.children(ctx, jl.PointerDir) })
	}
	wg.Wait()
	switch {
	case errors.Is(cErr, zk.ErrNoNode):
	case cErr != nil:
		return nil, cErr
	default:
		v, ok := decodeCounter(counter)
		if ok {
			js.Counter = v
			break
		}
		js.Notes = append(js.Notes, fmt.Sprintf("checkpoint counter %s holds %d bytes, want 4", jl.CounterPath, len(counter)))
	}
	switch {
	case errors.Is(gErr, zk.ErrNoNode):
	case gErr != nil:
		return nil, gErr
	default:
		js.HasGraph = true
		js.Graph, js.GraphErr = flinkha.DecodeStateHandle(graph)
	}
	if jl.PointerDir == "" || errors.Is(namesErr, zk.ErrNoNode) {
		return js, nil
	}
	if namesErr != nil {
		return nil, namesErr
	}
	var ids []int64
	for _, name := range names {
		id, ok := parseCheckpointName(name)
		if !ok {
			js.Notes = append(js.Notes, fmt.Sprintf("%s/%s is not a checkpoint pointer name", jl.PointerDir, name))
			continue
		}
		ids = append(ids, id)
	}
	pointers, errs := make([]*Pointer, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() { pointers[i], errs[i] = b.readPointer(ctx, jl, id) })
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if pointers[i] != nil {
			js.Pointers = append(js.Pointers, pointers[i])
		}
	}
	slices.SortFunc(js.Pointers, func(a, b *Pointer) int { return cmp.Compare(a.ID, b.ID) })
	if js.LockStyle == LockStyleUnknown {
		// The job's own pointers may tell what the namespace did not.
		for _, p := range js.Pointers {
			switch {
			case p.HasLocksNode:
				js.LockStyle = LockChild
			case len(p.Locks) > 0 || p.Other > 0:
				js.LockStyle = LockDirect
			default:
				continue
			}
			break
		}
		for _, p := range js.Pointers {
			p.Visible = js.LockStyle != LockChild || p.HasLocksNode
		}
	}
	return js, nil
}

// readPointer reads one pointer; nil if it vanished meanwhile.
func (b *Bridge) readPointer(ctx context.Context, jl JobLayout, id int64) (*Pointer, error) {
	znode := join(jl.PointerDir, checkpointName(id))
	p := &Pointer{JobID: jl.JobID, ID: id, Znode: znode}
	data, stat, err := b.zk.get(ctx, znode)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.Data, p.Stat = data, *stat
	locks, err := b.lockChildren(ctx, znode, KindCheckpointLock)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.HasLocksNode, p.LocksStat, p.Locks, p.Other = locks.hasLocksNode, locks.locksStat, locks.ephemeral, locks.other
	switch jl.LockStyle {
	case LockChild:
		p.Visible = p.HasLocksNode
	default:
		p.Visible = true
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		p.HandleErr = err
	} else {
		p.Handle = h
	}
	return p, nil
}

// lockState is what is below a state-handle-store node (pointer or job
// graph).
type lockState struct {
	hasLocksNode bool
	locksStat    zk.Stat
	ephemeral    []EphemeralNode
	other        int
}

// lockChildren reads the lock children of a state-handle-store node:
// direct ephemeral children (1.4-1.14) and ephemeral children of a locks
// node (1.15+).
func (b *Bridge) lockChildren(ctx context.Context, node string, kind EphemeralKind) (lockState, error) {
	var ls lockState
	kids, _, err := b.zk.children(ctx, node)
	if err != nil {
		return ls, err
	}
	for _, k := range kids {
		path := join(node, k)
		if k == "locks" {
			sub, stat, err := b.zk.children(ctx, path)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return ls, err
			}
			if stat.EphemeralOwner != 0 {
				ls.ephemeral = append(ls.ephemeral, EphemeralNode{Path: path, Kind: kind, Owner: SessionID(stat.EphemeralOwner), Czxid: stat.Czxid})
				continue
			}
			ls.hasLocksNode, ls.locksStat = true, *stat
			for _, s := range sub {
				st, err := b.zk.exists(ctx, join(path, s))
				if err != nil {
					return ls, err
				}
				if st == nil {
					continue
				}
				if st.EphemeralOwner != 0 {
					ls.ephemeral = append(ls.ephemeral, EphemeralNode{Path: join(path, s), Kind: kind, Owner: SessionID(st.EphemeralOwner), Czxid: st.Czxid})
				} else {
					ls.other++
				}
			}
			continue
		}
		st, err := b.zk.exists(ctx, path)
		if err != nil {
			return ls, err
		}
		if st == nil {
			continue
		}
		if st.EphemeralOwner != 0 {
			ls.ephemeral = append(ls.ephemeral, EphemeralNode{Path: path, Kind: kind, Owner: SessionID(st.EphemeralOwner), Czxid: st.Czxid})
		} else {
			ls.other++
		}
	}
	return ls, nil
}

// verifyJob fills every pointer's verdict. Undecodable znode data is an
// unreadable HA file: Flink fails on it too.
func (b *Bridge) verifyJob(ctx context.Context, l *Layout, js *JobState) {
	for _, p := range js.Pointers {
		p.Verdict = b.verifyPointer(ctx, p)
	}
	if b.verifier != nil && (js.Graph != nil || b.cfg.JobResultStore != "") {
		js.HA = b.verifier.VerifyJobHA(ctx, manifest.JobHARef{JobID: js.JobID, Graph: js.Graph, JobResultStore: b.cfg.JobResultStore, ClusterID: l.ClusterID})
	}
}

// jobFacts gathers what DecideJob needs; marker is this site's marker of
// the job (id -1 when none), backups the job's backups.
func jobFacts(js *JobState, plan JobPlan, marker int64, backups []int64, acceptStateLoss bool) JobFacts {
	f := JobFacts{HA: js.HA, HasGraph: js.HasGraph, Plan: plan, MarkerID: marker, Backups: backups, AcceptStateLoss: acceptStateLoss}
	if js.HasGraph && js.Graph == nil {
		f.GraphUnreadable = fmt.Sprint(js.GraphErr)
	}
	for _, p := range js.Pointers {
		if p.Visible {
			f.Visible++
		}
	}
	return f
}

func (b *Bridge) verifyPointer(ctx context.Context, p *Pointer) *manifest.PointerVerdict {
	if p.Handle == nil {
		return &manifest.PointerVerdict{Verdict: &manifest.Verdict{
			CheckpointID: p.ID,
			Problems: []manifest.Problem{{
				Path: p.Znode, Kind: manifest.ProblemParseError,
				Detail: fmt.Sprintf("znode data: %v", p.HandleErr),
			}},
		}}
	}
	if b.verifier == nil {
		return &manifest.PointerVerdict{Verdict: &manifest.Verdict{
			CheckpointID: p.ID,
			Problems:     []manifest.Problem{{Path: p.Handle.URI, Kind: manifest.ProblemIOError, Detail: "no verifier configured"}},
			Unknown:      true,
		}}
	}
	v := b.verifier.VerifyPointer(ctx, PointerRef{JobID: p.JobID, CheckpointID: p.ID, Znode: p.Znode, Handle: *p.Handle})
	if v == nil {
		v = &manifest.PointerVerdict{}
	}
	if v.Verdict == nil {
		v.Verdict = &manifest.Verdict{CheckpointID: p.ID, Unknown: true}
	}
	return v
}

// decodeCounter reads Flink's checkpoint id counter: Curator's SharedCount
// stores a big-endian int32.
func decodeCounter(data []byte) (int64, bool) {
	if len(data) != 4 {
		return 0, false
	}
	return int64(int32(binary.BigEndian.Uint32(data))), true
}
