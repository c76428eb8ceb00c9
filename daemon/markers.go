package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// catalogMarkers publishes what the mount's catalog found: for every job
// directory, its newest complete checkpoint.
type catalogMarkers struct {
	catalog    *manifest.Catalog
	mountPoint string
	idx        *catalogIndex
}

var _ zkbridge.MarkerSource = catalogMarkers{}

// errNotJudged: the catalog's first pass has not ended, and an empty
// catalog would lower every marker.
var errNotJudged = errors.New("the mount's first verification pass has not ended")

func newCatalogMarkers(c *manifest.Catalog, mountPoint string) catalogMarkers {
	return catalogMarkers{catalog: c, mountPoint: mountPoint, idx: &catalogIndex{}}
}

// catalogIndex is the catalog's jobs by job id as of one pass: the
// publisher asks Level once or twice for every marker it writes, and
// Catalog.Jobs copies and sorts every job.
type catalogIndex struct {
	mu sync.Mutex
	// pass and jobs: GUARDED_BY(mu). INVARIANT: jobs is what
	// Catalog.Jobs returned while Catalog.Passes was pass (the catalog
	// replaces its verdicts and counts the pass under one lock).
	pass  uint64
	valid bool
	jobs  map[string][]manifest.JobState
	list  []manifest.JobState
}

// jobs returns the catalog's jobs of its last pass, by job id (the job
// directory's name) and in Catalog.Jobs's order.
func (c catalogMarkers) jobs() (map[string][]manifest.JobState, []manifest.JobState) {
	for {
		p := c.catalog.Passes()
		c.idx.mu.Lock()
		if c.idx.valid && c.idx.pass == p {
			m, l := c.idx.jobs, c.idx.list
			c.idx.mu.Unlock()
			return m, l
		}
		c.idx.mu.Unlock()
		list := c.catalog.Jobs()
		if c.catalog.Passes() != p {
			continue // a pass ended meanwhile: which one list is, is unknown
		}
		m := make(map[string][]manifest.JobState, len(list))
		for _, j := range list {
			id := filepath.Base(j.Dir)
			m[id] = append(m[id], j)
		}
		c.idx.mu.Lock()
		c.idx.pass, c.idx.valid, c.idx.jobs, c.idx.list = p, true, m, list
		c.idx.mu.Unlock()
		return m, list
	}
}

func (c catalogMarkers) Markers(context.Context) ([]zkbridge.Marker, error) {
	if !judged(c.catalog) {
		return nil, errNotJudged
	}
	_, jobs := c.jobs()
	var out []zkbridge.Marker
	for _, job := range jobs {
		id := filepath.Base(job.Dir)
		v := job.NewestComplete()
		if v == nil {
			out = append(out, zkbridge.NoMarker(id))
			continue
		}
		out = append(out, zkbridge.Marker{
			JobID: id, CheckpointID: v.CheckpointID, Level: v.Level,
			// Flink reads the checkpoint through the mount.
			Path:  "file:" + filepath.Join(c.mountPoint, job.Dir, "chk-"+strconv.FormatInt(v.CheckpointID, 10)),
			Files: v.Files, Bytes: v.Bytes, VerifiedAt: time.Now().UTC(),
		})
	}
	return out, nil
}

func (c catalogMarkers) Level(_ context.Context, job string, id int64) (manifest.Level, error) {
	if !judged(c.catalog) {
		return manifest.LevelNone, errNotJudged
	}
	jobs, _ := c.jobs()
	for _, j := range jobs[job] { // job directories of one name in different places
		for _, v := range j.Checkpoints {
			if v.CheckpointID == id && v.Complete {
				return v.Level, nil
			}
		}
	}
	return manifest.LevelNone, nil
}
