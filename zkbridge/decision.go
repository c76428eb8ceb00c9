package zkbridge

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest"
)

// RefusalReason says why a takeover leaves a job alone (docs/runbook.md
// says what the operator does for each).
type RefusalReason string

const (
	// RefusedJobGraph: the job graph (execution plan) HA file is missing,
	// of another size than its znode records, or does not deserialize
	// completely here. Flink's JobManager fails to recover the job, and
	// since 1.5 that ends the process.
	RefusedJobGraph RefusalReason = "job_graph_incomplete"
	// RefusedBlobs: a blob the job graph names (user jar, artifact) is
	// missing here or its content does not have the SHA-1 its key names.
	RefusedBlobs RefusalReason = "blobs_incomplete"
	// RefusedJobResult: an entry of the job in the job result store is
	// torn here; Flink reads every dirty entry when it starts.
	RefusedJobResult RefusalReason = "job_result_incomplete"
	// RefusedNoCompletePointer: the job has visible checkpoint pointers
	// and none is complete here at L2.
	RefusedNoCompletePointer RefusalReason = "no_complete_pointer"
	// RefusedCheckpointsLost: Flink would start the job (its job graph is
	// there) with no checkpoint pointer at all, but this site's marker or
	// a backup shows the job had a complete checkpoint: it would restart
	// from empty state. TakeoverOptions.AcceptStateLoss overrides it.
	RefusedCheckpointsLost RefusalReason = "checkpoints_lost"
)

// JobFacts is what the decision on one job rests on.
type JobFacts struct {
	// HA is the verdict on the job graph, blobs and job results (nil:
	// not verified, which counts as incomplete only for a job graph).
	HA *manifest.JobHAVerdict
	// HasGraph: the job has a job graph znode, so Flink recovers it.
	HasGraph bool
	// GraphUnreadable says why the job graph znode's data does not
	// decode ("" when it does).
	GraphUnreadable string
	// Plan is the pointer plan (PlanJob).
	Plan JobPlan
	// Visible counts the pointers Flink reads.
	Visible int
	// Evidence that the job had a complete checkpoint: this site's
	// marker (id >= 0) and backups of retracted pointers.
	MarkerID int64
	Backups  []int64
	// AcceptStateLoss: the operator accepts a restart from empty state.
	AcceptStateLoss bool
}

// JobDecision is what a takeover does with one job.
type JobDecision struct {
	Refused bool          `json:"refused"`
	Reason  RefusalReason `json:"reason,omitempty"`
	// Detail says it in words, with the first problem found.
	Detail string `json:"detail,omitempty"`
}

// DecideJob decides whether a takeover may let Flink recover a job here
// (docs/design.md §5.5.1). The job's HA state comes first: a job graph, blob
// or job result Flink cannot read here ends the JobManager process, so
// no pointer plan helps. Then the pointers: none complete, or none at all
// although the job had a complete checkpoint. Refusing changes nothing
// for the job.
func DecideJob(f JobFacts) JobDecision {
	refuse := func(r RefusalReason, format string, args ...any) JobDecision {
		return JobDecision{Refused: true, Reason: r, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case f.GraphUnreadable != "":
		return refuse(RefusedJobGraph, "the job graph znode's data does not decode: %s", f.GraphUnreadable)
	case f.HasGraph && (f.HA == nil || !f.HA.GraphComplete()):
		return refuse(RefusedJobGraph, "the job graph HA file is not complete here%s", firstProblem(f.HA, func(h *manifest.JobHAVerdict) *manifest.Verdict { return h.Graph }))
	case f.HA != nil && !f.HA.BlobsComplete():
		return refuse(RefusedBlobs, "a blob of the job is not complete here%s", firstProblem(f.HA, func(h *manifest.JobHAVerdict) *manifest.Verdict { return h.Blobs }))
	case f.HA != nil && !f.HA.ResultsComplete():
		return refuse(RefusedJobResult, "an entry of the job result store is torn here%s", firstProblem(f.HA, func(h *manifest.JobHAVerdict) *manifest.Verdict { return h.Results }))
	case f.Plan.Refused:
		return refuse(RefusedNoCompletePointer, "none of its %d checkpoint pointer(s) is complete on this site at L2; with no pointer left Flink would start the job from empty state", len(f.Plan.Keep))
	case f.Visible == 0 && f.HasGraph && !f.AcceptStateLoss && (f.MarkerID >= 0 || len(f.Backups) > 0):
		var ev []string
		if f.MarkerID >= 0 {
			ev = append(ev, fmt.Sprintf("this site's marker names complete checkpoint %d", f.MarkerID))
		}
		if len(f.Backups) > 0 {
			ev = append(ev, fmt.Sprintf("backups of retracted pointers %v exist (ckptfs restore-pruned)", f.Backups))
		}
		return refuse(RefusedCheckpointsLost, "the job has no checkpoint pointer Flink reads, so Flink would start it from empty state, but it had a complete checkpoint: %s; pass --accept-state-loss to start it empty", strings.Join(ev, "; "))
	}
	return JobDecision{}
}

func firstProblem(h *manifest.JobHAVerdict, part func(*manifest.JobHAVerdict) *manifest.Verdict) string {
	if h == nil {
		return ": not verified"
	}
	if v := part(h); v != nil && len(v.Problems) > 0 {
		return ": " + v.Problems[0].String()
	}
	return ""
}
