package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// StatusReport is what ZooKeeper says about the cluster and how this
// site compares.
type StatusReport struct {
	Site      string  `json:"site"`
	ClusterID string  `json:"cluster_id"`
	Layout    *Layout `json:"layout"`
	// JobManager says whether a Flink JobManager is alive, and where.
	JobManager *Liveness `json:"jobmanager"`
	ActiveSite string    `json:"active_site"`
	Epoch      int64     `json:"epoch"`
	// Lease is the cluster's lease (design §5.10), nil when there is none.
	Lease *LeaseInfo `json:"lease"`
	// AutoTakeover is the journal of the latest automatic takeover (nil:
	// none ran).
	AutoTakeover *AutoTakeover `json:"auto_takeover"`
	Jobs         []*JobStatus  `json:"jobs"`
	// NoNamespace says, when Flink's namespace does not exist, what that
	// means: Flink has not started yet, or the path root or cluster id
	// differ from Flink's ("" when it exists).
	NoNamespace string `json:"no_namespace,omitempty"`
}

// JobStatus is one job's pointers and markers.
type JobStatus struct {
	JobID string `json:"job_id"`
	// Pointers are Flink's checkpoint pointers with their verdict here,
	// ascending.
	Pointers []*PointerStatus `json:"pointers"`
	// Newest is the newest pointer Flink would restore.
	Newest *int64 `json:"newest"`
	// NewestComplete is the newest pointer complete here at L2.
	NewestComplete *int64 `json:"newest_complete"`
	// LagCheckpoints is Newest - NewestComplete; LagSeconds the time
	// between their checkpoints, from the HA files' timestamps (or, when
	// one is unreadable here, the znodes' creation times: LagSource).
	LagCheckpoints *int64   `json:"lag_checkpoints"`
	LagSeconds     *float64 `json:"lag_seconds"`
	LagSource      string   `json:"lag_source,omitempty"`
	// Counter is the next checkpoint id Flink hands out (-1 unknown).
	Counter int64 `json:"checkpoint_counter"`
	// Markers are every site's marker of the job, by site.
	Markers map[string]Marker `json:"markers"`
	// Pruned are the ids with a backup (retracted by a takeover).
	Pruned []int64 `json:"pruned"`
	// KeptBackups are pointers a takeover kept and backed up: if Flink
	// deleted them since, restore-pruned brings them back.
	KeptBackups []int64 `json:"kept_backups,omitempty"`
	// HA is the verdict on the job graph, blobs and job results here.
	HA *manifest.JobHAVerdict `json:"ha,omitempty"`
	// Takeover is what a takeover on this site would decide for the job
	// now (without --accept-state-loss).
	Takeover JobDecision `json:"takeover"`
	// Summary says it in one sentence.
	Summary string   `json:"summary"`
	Notes   []string `json:"notes,omitempty"`
}

// PointerStatus is one pointer and its verdict here.
type PointerStatus struct {
	ID    int64  `json:"id"`
	Znode string `json:"znode"`
	// HAFile and HAFileSize are what the znode names.
	HAFile     string `json:"ha_file,omitempty"`
	HAFileSize int64  `json:"ha_file_size"`
	// Visible: Flink's recovery reads it; Locked: a JobManager holds it.
	Visible bool `json:"visible"`
	Locked  bool `json:"locked"`
	// Complete and Level: restorable by failover here when Complete at L2.
	Complete       bool               `json:"complete"`
	Level          manifest.Level     `json:"level"`
	HAFileReadable bool               `json:"ha_file_readable"`
	Problems       []manifest.Problem `json:"problems"`
	// CheckpointTime is Flink's trigger time from the HA file (when
	// readable); Created is when the znode was created.
	CheckpointTime *time.Time `json:"checkpoint_time,omitempty"`
	Created        time.Time  `json:"created"`
}

// Status reads everything a person needs before a takeover: per job,
// Flink's pointers with their verdict on this site, the newest complete
// one, the lag, every site's marker; whether a JobManager is alive, the
// active site and the epoch. It writes nothing.
func (b *Bridge) Status(ctx context.Context) (*StatusReport, error) {
	l, err := b.discover(ctx)
	if errors.Is(err, ErrNoNamespace) {
		return b.statusWithoutNamespace(ctx, err)
	}
	if err != nil {
		return nil, err
	}
	paths := b.ckptfsFor(l)
	rep := &StatusReport{Site: b.cfg.Site, ClusterID: l.ClusterID, Layout: l, Jobs: []*JobStatus{}}
	if rep.JobManager, err = b.liveness(ctx, l); err != nil {
		return nil, err
	}
	if err := b.readSiteState(ctx, paths, rep); err != nil {
		return nil, err
	}
	markers, err := b.readMarkers(ctx, paths)
	if err != nil {
		return nil, err
	}
	// Jobs are read several at once (forEachJob): each costs a few
	// round trips one after another, and a status of hundreds of jobs
	// from a server across the WAN would otherwise take minutes.
	jobs := make([]*JobStatus, len(l.Jobs))
	if _, err := forEachJob(ctx, len(l.Jobs), func(ctx context.Context, i int) error {
		st, err := b.jobStatusOf(ctx, l, paths, l.Jobs[i], markers)
		jobs[i] = st
		return err
	}); err != nil {
		return nil, err
	}
	rep.Jobs = append(rep.Jobs, jobs...)
	return rep, nil
}

// jobStatusOf reads and judges one job for Status.
func (b *Bridge) jobStatusOf(ctx context.Context, l *Layout, paths ckptfsPaths, jl JobLayout, markers map[string]map[string]Marker) (*JobStatus, error) {
	js, err := b.readJob(ctx, jl)
	if err != nil {
		return nil, err
	}
	b.verifyJob(ctx, l, js)
	st := jobStatus(js)
	for site, byJob := range markers {
		if m, ok := byJob[jl.JobID]; ok {
			st.Markers[site] = m
		}
	}
	if st.Pruned, st.KeptBackups, err = b.backups(ctx, paths, jl.JobID); err != nil {
		return nil, err
	}
	if st.Pruned == nil {
		st.Pruned = []int64{}
	}
	marker := int64(-1)
	if m, ok := markers[b.cfg.Site][jl.JobID]; ok && b.cfg.Site != "" {
		marker = m.CheckpointID
	}
	st.HA = js.HA
	st.Takeover = DecideJob(jobFacts(js, PlanJob(facts(js)), marker, append(slices.Clone(st.Pruned), st.KeptBackups...), false))
	if st.Takeover.Refused {
		st.Summary += fmt.Sprintf("; a takeover here would refuse the job (%s)", st.Takeover.Reason)
	}
	if js.LockStyle == LockStyleUnknown && len(js.Pointers) > 0 {
		st.Notes = append(st.Notes, "cannot tell Flink 1.14 from 1.15+: whether these pointers are visible to Flink is unknown")
	}
	return st, nil
}

// readSiteState reads ckptfs's own znodes of the cluster into rep: the
// epoch, the active site, the lease and the automatic takeover.
func (b *Bridge) readSiteState(ctx context.Context, paths ckptfsPaths, rep *StatusReport) error {
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return err
	}
	rep.Epoch = ep.value
	if rep.ActiveSite, _, err = b.readActiveSite(ctx, paths); err != nil {
		return err
	}
	if rep.Lease, err = b.readLease(ctx, paths); err != nil {
		return err
	}
	rep.AutoTakeover, err = b.readAutoTakeover(ctx, paths)
	return err
}

// statusWithoutNamespace is the status when Flink's namespace does not
// exist (discover's err): no jobs and no JobManager, what that means,
// and ckptfs's own znodes when the cluster id is known. Before Flink's
// first start this is no error.
func (b *Bridge) statusWithoutNamespace(ctx context.Context, err error) (*StatusReport, error) {
	root := b.cfg.PathRoot
	rep := &StatusReport{Site: b.cfg.Site, ClusterID: b.cfg.ClusterID, JobManager: &Liveness{}, Jobs: []*JobStatus{},
		Layout: &Layout{PathRoot: root, ClusterID: b.cfg.ClusterID, Namespace: root, Evidence: []string{err.Error()}}}
	if b.cfg.ClusterID == "" {
		rep.NoNamespace = fmt.Sprintf("no Flink job under %s yet: Flink has not started under this path root, or path-root differs from Flink's high-availability.zookeeper.path.root (give cluster-id to read ckptfs's znodes of the cluster)", root)
		return rep, nil
	}
	ns := namespaceCandidates(root, b.cfg.ClusterID)[0]
	rep.Layout.Namespace = ns
	rep.NoNamespace = fmt.Sprintf("no Flink job under %s yet: Flink has not started with this cluster id, or path-root or cluster-id differ from Flink's", ns)
	beside, ran, err := b.newClusterDoubt(ctx)
	if err != nil {
		return nil, err
	}
	for _, doubt := range []string{beside, ran} {
		if doubt != "" {
			rep.NoNamespace += "; " + doubt
		}
	}
	if err := b.readSiteState(ctx, b.ckptfsFor(rep.Layout), rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// jobStatus computes a job's status from its verified pointers.
func jobStatus(js *JobState) *JobStatus {
	st := &JobStatus{JobID: js.JobID, Pointers: []*PointerStatus{}, Counter: js.Counter, Markers: map[string]Marker{}, Notes: js.Notes}
	var newest, complete *Pointer
	for _, p := range js.Pointers {
		ps := &PointerStatus{
			ID: p.ID, Znode: p.Znode, Visible: p.Visible, Locked: len(p.Locks) > 0,
			Complete: p.Verdict.L2Complete(), HAFileReadable: haReadable(p.Verdict),
			Problems: []manifest.Problem{}, Created: time.UnixMilli(p.Stat.Ctime).UTC(),
		}
		if p.Handle != nil {
			ps.HAFile, ps.HAFileSize = p.Handle.URI, p.Handle.Size
		}
		if p.Verdict != nil && p.Verdict.Verdict != nil {
			v := p.Verdict.Verdict
			ps.Level = v.Level
			if v.Problems != nil {
				ps.Problems = v.Problems
			}
		}
		if cp := checkpointOf(p.Verdict); cp != nil && cp.Timestamp > 0 {
			t := time.UnixMilli(cp.Timestamp).UTC()
			ps.CheckpointTime = &t
		}
		st.Pointers = append(st.Pointers, ps)
		if !p.Visible {
			continue
		}
		newest = p
		if ps.Complete {
			complete = p
		}
	}
	if newest != nil {
		id := newest.ID
		st.Newest = &id
	}
	if complete != nil {
		id := complete.ID
		st.NewestComplete = &id
	}
	switch {
	case newest == nil:
		st.Summary = "no checkpoint pointers in ZooKeeper"
	case complete == nil:
		st.Summary = fmt.Sprintf("ZooKeeper points at checkpoint %d; none of its pointers is complete on this site", newest.ID)
	default:
		lag := newest.ID - complete.ID
		st.LagCheckpoints = &lag
		var secs float64
		nc, cc := checkpointOf(newest.Verdict), checkpointOf(complete.Verdict)
		if nc != nil && cc != nil && nc.Timestamp > 0 && cc.Timestamp > 0 {
			secs, st.LagSource = float64(nc.Timestamp-cc.Timestamp)/1000, "ha_file_timestamps"
		} else {
			secs, st.LagSource = float64(newest.Stat.Ctime-complete.Stat.Ctime)/1000, "znode_ctime"
		}
		st.LagSeconds = &secs
		if lag == 0 {
			st.Summary = fmt.Sprintf("checkpoint %d, the newest in ZooKeeper, is complete on this site", complete.ID)
		} else {
			st.Summary = fmt.Sprintf("ZooKeeper is %d checkpoint(s) / %.0f seconds ahead of this site (newest %d, newest complete here %d)", lag, secs, newest.ID, complete.ID)
		}
	}
	return st
}

// ActiveSite returns the site allowed to write ("" before any takeover)
// and the epoch, for a mount's promotion and fencing (docs/design.md §4.4).
func (b *Bridge) ActiveSite(ctx context.Context) (site string, epoch int64, err error) {
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return "", 0, err
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return "", 0, err
	}
	site, _, err = b.readActiveSite(ctx, paths)
	return site, ep.value, err
}
