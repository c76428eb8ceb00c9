package zkbridge

import "fmt"

// Rollback is a takeover's rollback window for one job (design §4.8):
// the checkpoints Flink completed on the old site after the one it
// restores here. Exactly-once sinks committed their output when those
// checkpoints completed, and the job produces it again.
type Rollback struct {
	// Completed is the newest checkpoint Flink completed, as ZooKeeper
	// tells: its newest visible pointer, or a newer one that this
	// takeover or an earlier one retracted.
	Completed int64 `json:"completed"`
	// Restored is the checkpoint Flink restores here.
	Restored int64 `json:"restored"`
	// Checkpoints is Completed - Restored: at most that many completed
	// checkpoints lie between them (a checkpoint that failed took an id
	// too).
	Checkpoints int64 `json:"checkpoints"`
	// Seconds is the time between the two pointers' creation in
	// ZooKeeper; absent when the newer one's is not known (an earlier
	// run retracted it).
	Seconds *float64 `json:"seconds,omitempty"`
	// ExactlyOnce says what the window means for exactly-once sinks.
	ExactlyOnce string `json:"exactly_once,omitempty"`
}

// window gathers a job's rollback window over a takeover's rounds: the
// first round reads the pointers before any retraction.
type window struct {
	completed int64 // -1: no pointer seen
	createdMs int64 // its pointer's creation (ZooKeeper's ctime), 0: unknown
}

func newWindow(retractedEarlier []int64) *window {
	w := &window{completed: -1}
	for _, id := range retractedEarlier {
		if id > w.completed {
			w.completed, w.createdMs = id, 0
		}
	}
	return w
}

// saw takes in the visible pointers of one read of the job.
func (w *window) saw(js *JobState) {
	for _, p := range js.Pointers {
		if p.Visible && p.ID > w.completed {
			w.completed, w.createdMs = p.ID, p.Stat.Ctime
		}
	}
}

// rollback is the window when Flink restores restored, whose pointer js
// holds; nil when nothing is restored.
func (w *window) rollback(js *JobState, restored int64) *Rollback {
	if restored < 0 {
		return nil
	}
	r := &Rollback{Completed: max(w.completed, restored), Restored: restored}
	r.Checkpoints = r.Completed - restored
	if p := js.pointer(restored); r.Checkpoints == 0 {
		r.Seconds = new(float64)
	} else if p != nil && w.createdMs > 0 {
		s := float64(w.createdMs-p.Stat.Ctime) / 1000
		r.Seconds = &s
	}
	if r.Checkpoints == 0 {
		r.ExactlyOnce = "none: Flink restores the newest checkpoint it completed, and exactly-once sinks produce nothing twice"
		return r
	}
	r.ExactlyOnce = fmt.Sprintf("exactly-once sinks (Kafka transactions, FileSink part files) committed the output of checkpoints %d to %d on the old site, and the job produces it again from checkpoint %d; transactions checkpoint %d left open are committed again, and lost if older than the sink's transaction timeout (FLINK-7784)",
		restored+1, r.Completed, restored, restored)
	return r
}
