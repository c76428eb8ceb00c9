package manifest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Shape is what kind of directory FindCheckpoints started from.
type Shape int

const (
	// ShapeCheckpoint: one directory holding _metadata.
	ShapeCheckpoint Shape = iota
	// ShapeJob: one job directory holding chk-N directories.
	ShapeJob
	// ShapeRoot: a checkpoints root holding <job-id>/chk-N directories.
	ShapeRoot
)

func (s Shape) String() string {
	switch s {
	case ShapeCheckpoint:
		return "checkpoint directory"
	case ShapeJob:
		return "job directory"
	case ShapeRoot:
		return "checkpoints root"
	}
	return fmt.Sprintf("Shape(%d)", int(s))
}

// ErrNoCheckpoints means FindCheckpoints found neither _metadata nor
// chk-N directories.
var ErrNoCheckpoints = errors.New("no checkpoints found")

// JobDir is a job's checkpoint directory and the checkpoints in it.
type JobDir struct {
	// ID is the directory name (Flink's job id) or, for a single
	// checkpoint directory, the name of the directory above it.
	ID          string
	Dir         string
	Checkpoints []CheckpointDir
	// Skipped are the entries named chk-N that are not checkpoint
	// directories a verification enters.
	Skipped []Skipped
}

// Skipped is an entry of a job directory, named like a checkpoint
// directory, that is not verified, and why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// CheckpointDir is one checkpoint directory.
type CheckpointDir struct {
	// ID is N of chk-N, or -1 for a directory with another name.
	ID  int64
	Dir string
}

// FindCheckpoints finds the checkpoint directories under dir, which may be
// a checkpoint directory (chk-N, or anything holding _metadata), a job
// directory (holding chk-N) or a checkpoints root (holding
// <job-id>/chk-N), and says which dir is. It reads directories only, no
// _metadata. Jobs and checkpoints are sorted by id.
func FindCheckpoints(dir string) (Shape, []JobDir, error) {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err != nil {
		return 0, nil, err
	} else if !fi.IsDir() {
		return 0, nil, fmt.Errorf("%s is not a directory", dir)
	}
	id, isChk := CheckpointIDFromDirName(filepath.Base(dir))
	if _, err := os.Lstat(filepath.Join(dir, MetadataFile)); err == nil || isChk {
		// A chk-N directory is a checkpoint even before its _metadata
		// exists (Flink creates it when the checkpoint is triggered).
		if !isChk {
			id = -1
		}
		job := JobDir{ID: filepath.Base(filepath.Dir(dir)), Dir: filepath.Dir(dir), Checkpoints: []CheckpointDir{{ID: id, Dir: dir}}}
		return ShapeCheckpoint, []JobDir{job}, nil
	}
	chks, skipped, err := listJob(dir)
	if err != nil {
		return 0, nil, err
	}
	if len(chks) > 0 || len(skipped) > 0 {
		return ShapeJob, []JobDir{{ID: filepath.Base(dir), Dir: dir, Checkpoints: chks, Skipped: skipped}}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, nil, err
	}
	var jobs []JobDir
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		jd := filepath.Join(dir, e.Name())
		chks, skipped, err := listJob(jd)
		if err != nil {
			return 0, nil, err
		}
		if len(chks) > 0 || len(skipped) > 0 {
			jobs = append(jobs, JobDir{ID: e.Name(), Dir: jd, Checkpoints: chks, Skipped: skipped})
		}
	}
	if len(jobs) == 0 {
		return 0, nil, fmt.Errorf("%s: %w (no _metadata, no chk-N, no <job>/chk-N)", dir, ErrNoCheckpoints)
	}
	return ShapeRoot, jobs, nil
}

// ListCheckpoints lists the chk-N directories of a job directory, by id.
func ListCheckpoints(jobDir string) ([]CheckpointDir, error) {
	out, _, err := listJob(jobDir)
	return out, err
}

// listJob lists the chk-N directories of a job directory, by id, and the
// other entries named chk-N, which are skipped: a symbolic link is never
// followed (it could lead anywhere).
func listJob(jobDir string) ([]CheckpointDir, []Skipped, error) {
	entries, err := os.ReadDir(jobDir)
	if err != nil {
		return nil, nil, err
	}
	var out []CheckpointDir
	var skipped []Skipped
	for _, e := range entries {
		id, ok := CheckpointIDFromDirName(e.Name())
		switch {
		case !ok:
		case e.IsDir():
			out = append(out, CheckpointDir{ID: id, Dir: filepath.Join(jobDir, e.Name())})
		case e.Type()&fs.ModeSymlink != 0:
			skipped = append(skipped, Skipped{Name: e.Name(), Reason: "symbolic link (not followed)"})
		default:
			skipped = append(skipped, Skipped{Name: e.Name(), Reason: "not a directory"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, skipped, nil
}

// JobReport is the verification of every checkpoint of one job.
type JobReport struct {
	JobID string
	// Checkpoints are the verdicts in ascending id order.
	Checkpoints []*Verdict
	// Skipped are the job's entries that were not verified (JobDir).
	Skipped []Skipped
}

// Newest returns the verdict with the highest id, or nil.
func (r *JobReport) Newest() *Verdict {
	var best *Verdict
	for _, v := range r.Checkpoints {
		if best == nil || v.CheckpointID > best.CheckpointID {
			best = v
		}
	}
	return best
}

// NewestComplete returns the complete verdict with the highest id, or nil.
func (r *JobReport) NewestComplete() *Verdict {
	var best *Verdict
	for _, v := range r.Checkpoints {
		if v.Complete && (best == nil || v.CheckpointID > best.CheckpointID) {
			best = v
		}
	}
	return best
}

// VerifyJob verifies every checkpoint of a job.
func (v *Verifier) VerifyJob(ctx context.Context, job JobDir) *JobReport {
	r := &JobReport{JobID: job.ID, Skipped: job.Skipped}
	for _, c := range job.Checkpoints {
		r.Checkpoints = append(r.Checkpoints, v.VerifyDir(ctx, c.Dir))
	}
	sort.SliceStable(r.Checkpoints, func(i, j int) bool { return r.Checkpoints[i].CheckpointID < r.Checkpoints[j].CheckpointID })
	return r
}
