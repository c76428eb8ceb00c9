package zkbridge

import (
	"cmp"
	"slices"
)

// PointerFacts is what the takeover plan needs to know about one pointer.
type PointerFacts struct {
	ID int64
	// Visible: Flink's recovery reads the pointer (false for a 1.15+
	// pointer without locks, which Flink treats as deleted).
	Visible bool
	// L2Complete: restorable by ZooKeeper failover on this site.
	L2Complete bool
	// HAFileReadable: the HA file exists with its size, deserializes and
	// names the checkpoint.
	HAFileReadable bool
}

// RetractReason says why a pointer is retracted.
type RetractReason string

const (
	// ReasonAboveNewestComplete: the pointer is newer than the newest
	// pointer this site holds completely; Flink would restore it and fail.
	ReasonAboveNewestComplete RetractReason = "above_newest_complete"
	// ReasonHAFileUnreadable: the pointer's HA file is not readable here;
	// Flink 1.12.5+ fails the whole recovery on it.
	ReasonHAFileUnreadable RetractReason = "ha_file_unreadable"
	// ReasonNoneCompleteSinceActivation: the sweeper's (design §5.5.2).
	// None of the job's visible pointers is complete here, and every one
	// was created after the activation judged the job's pointers: all go,
	// and the job is back where its activation left it, without one.
	ReasonNoneCompleteSinceActivation RetractReason = "none_complete_since_activation"
	// ReasonKept marks the backup of a pointer the takeover kept
	// (Backup.Kept): not a retraction.
	ReasonKept RetractReason = "kept"
)

// Retraction is one pointer to retract.
type Retraction struct {
	ID     int64         `json:"id"`
	Reason RetractReason `json:"reason"`
}

// JobPlan is what a takeover does to one job.
type JobPlan struct {
	// NewestComplete is the newest visible L2-complete pointer, -1 if none.
	NewestComplete int64
	// Refused: the job has visible pointers but none is L2-complete here.
	// Nothing is changed for it: with no pointer left Flink would start the
	// job from empty state, silently.
	Refused bool
	// Keep are the visible pointers that stay, ascending.
	Keep []int64
	// Retract are the pointers to retract, newest first.
	Retract []Retraction
	// Ignored are pointers Flink does not read (marked for deletion);
	// ckptfs leaves them alone.
	Ignored []int64
}

// PlanJob decides a job's retractions (docs/design.md §5.5): retract every
// visible pointer above the newest L2-complete one and every visible
// pointer whose HA file is unreadable; never the newest L2-complete one;
// nothing at all when no visible pointer is L2-complete.
//
// INVARIANT: when Refused is false and a visible pointer exists, Keep
// contains NewestComplete, and no kept pointer is newer than it.
func PlanJob(pointers []PointerFacts) JobPlan {
	ps := slices.Clone(pointers)
	slices.SortFunc(ps, func(a, b PointerFacts) int { return cmp.Compare(a.ID, b.ID) })
	plan := JobPlan{NewestComplete: -1}
	visible := 0
	for _, p := range ps {
		if !p.Visible {
			plan.Ignored = append(plan.Ignored, p.ID)
			continue
		}
		visible++
		if p.L2Complete && p.HAFileReadable {
			plan.NewestComplete = p.ID
		}
	}
	if plan.NewestComplete < 0 {
		plan.Refused = visible > 0
		for _, p := range ps {
			if p.Visible {
				plan.Keep = append(plan.Keep, p.ID)
			}
		}
		return plan
	}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		switch {
		case !p.Visible:
		case p.ID == plan.NewestComplete:
		case p.ID > plan.NewestComplete:
			plan.Retract = append(plan.Retract, Retraction{ID: p.ID, Reason: ReasonAboveNewestComplete})
		case !p.HAFileReadable:
			plan.Retract = append(plan.Retract, Retraction{ID: p.ID, Reason: ReasonHAFileUnreadable})
		}
	}
	for _, p := range ps {
		if p.Visible && !slices.ContainsFunc(plan.Retract, func(r Retraction) bool { return r.ID == p.ID }) {
			plan.Keep = append(plan.Keep, p.ID)
		}
	}
	return plan
}

// facts extracts the plan's input from read and verified pointers.
func facts(js *JobState) []PointerFacts {
	out := make([]PointerFacts, 0, len(js.Pointers))
	for _, p := range js.Pointers {
		out = append(out, PointerFacts{
			ID:             p.ID,
			Visible:        p.Visible,
			L2Complete:     p.Verdict.L2Complete(),
			HAFileReadable: haReadable(p.Verdict),
		})
	}
	return out
}
