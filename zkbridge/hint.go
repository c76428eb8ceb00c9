package zkbridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// RestoreHint tells how to start a refused job by hand from the newest
// checkpoint this site holds at L1 (restorable with flink run -s, which
// reads _metadata and not the HA file).
type RestoreHint struct {
	// CheckpointID is -1 when no L1-complete checkpoint was found.
	CheckpointID int64 `json:"checkpoint_id"`
	// Path is the checkpoint directory as Flink names it.
	Path string `json:"path,omitempty"`
	// FlinkRun is the command line option, Config the configuration key.
	FlinkRun string `json:"flink_run,omitempty"`
	Config   string `json:"config,omitempty"`
	// Message says it in words.
	Message string `json:"message"`
}

// restoreHint looks for the newest L1-complete checkpoint of a job on
// this site, in the job checkpoint directories named by its readable HA
// files and by Config.CheckpointsDirs.
func (b *Bridge) restoreHint(ctx context.Context, l *Layout, js *JobState) *RestoreHint {
	h := &RestoreHint{CheckpointID: -1}
	var dirs []string
	addDir := func(d string) {
		d = strings.TrimRight(d, "/")
		if d != "" && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, p := range js.Pointers {
		if cp := checkpointOf(p.Verdict); cp != nil && cp.ExternalPointer != "" {
			if i := strings.LastIndexByte(strings.TrimRight(cp.ExternalPointer, "/"), '/'); i > 0 {
				addDir(cp.ExternalPointer[:i])
			}
		}
	}
	if i := strings.LastIndexByte(strings.TrimRight(js.MarkerPath, "/"), '/'); i > 0 {
		addDir(js.MarkerPath[:i])
	}
	for _, d := range b.cfg.CheckpointsDirs {
		addDir(strings.TrimRight(d, "/") + "/" + js.JobID)
	}
	if b.verifier == nil || len(dirs) == 0 {
		h.Message = fmt.Sprintf("no L1-complete checkpoint of job %s found: no HA file of the job is readable here; pass Flink's state.checkpoints.dir (--checkpoints-dir) to search its chk-N directories", js.JobID)
		return h
	}
	for _, dir := range dirs {
		ids, err := b.verifier.ListCheckpointDirs(dir)
		if err != nil {
			b.log.Debug("cannot list checkpoint directory", "job", js.JobID, "dir", dir, "err", err)
			continue
		}
		for i := len(ids) - 1; i >= 0 && ids[i] > h.CheckpointID; i-- {
			path := fmt.Sprintf("%s/chk-%d", dir, ids[i])
			if v := b.verifier.VerifyCheckpointDir(ctx, path); v != nil && v.Complete {
				h.CheckpointID, h.Path = ids[i], path
				break
			}
		}
	}
	if h.CheckpointID < 0 {
		h.Message = fmt.Sprintf("no L1-complete checkpoint of job %s on this site (searched %s)", js.JobID, strings.Join(dirs, ", "))
		return h
	}
	h.FlinkRun = "flink run -s " + h.Path
	h.Config = "execution.savepoint.path: " + h.Path
	if l.Generation == Gen2 {
		h.Config = "execution.state-recovery.path: " + h.Path + " (Flink 2.x; execution.savepoint.path before)"
	}
	h.Message = fmt.Sprintf("newest checkpoint of job %s complete here at L1 is %d: start the job from it with `%s ...` or `%s` "+
		"(its pointers stay in ZooKeeper, where Flink's HA recovery would try them first)",
		js.JobID, h.CheckpointID, h.FlinkRun, h.Config)
	return h
}
