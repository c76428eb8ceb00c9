package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// catalogMarkers publishes what the mount's catalog found: for every job
// directory, its newest complete checkpoint.
type catalogMarkers struct {
	catalog    *manifest.Catalog
	mountPoint string
}

var _ zkbridge.MarkerSource = catalogMarkers{}

// errNotJudged: the catalog's first pass has not ended, and an empty
// catalog would lower every marker.
var errNotJudged = errors.New("the mount's first verification pass has not ended")

func (c catalogMarkers) Markers(context.Context) ([]zkbridge.Marker, error) {
	if !judged(c.catalog) {
		return nil, errNotJudged
	}
	var out []zkbridge.Marker
	for _, job := range c.catalog.Jobs() {
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
	for _, j := range c.catalog.Jobs() {
		if filepath.Base(j.Dir) != job {
			continue
		}
		for _, v := range j.Checkpoints {
			if v.CheckpointID == id && v.Complete {
				return v.Level, nil
			}
		}
	}
	return manifest.LevelNone, nil
}
