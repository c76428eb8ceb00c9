package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// Marker is what a site publishes about one job at
// <ckptfs>/<cluster>/sites/<site>/jobs/<job>: the newest checkpoint it
// holds completely, and how completely.
type Marker struct {
	JobID string `json:"job_id"`
	// CheckpointID is the newest complete checkpoint, -1 when none is.
	CheckpointID int64 `json:"checkpoint_id"`
	// Level is the level it is complete at ("none" with id -1).
	Level manifest.Level `json:"level"`
	// Path is the checkpoint directory as Flink names it.
	Path string `json:"path,omitempty"`
	// CheckpointTimestamp is Flink's trigger time of the checkpoint.
	CheckpointTimestamp time.Time `json:"checkpoint_timestamp,omitzero"`
	// VerifiedAt is when the publisher that last changed the marker
	// verified it. An unchanged marker is not rewritten.
	VerifiedAt time.Time `json:"verified_at,omitzero"`
	// Files and Bytes count what the checkpoint needs.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Site is the publishing site (set by the Publisher).
	Site string `json:"site"`
}

// NoMarker is the marker of a job with no complete checkpoint here.
func NoMarker(job string) Marker {
	return Marker{JobID: job, CheckpointID: -1, Level: manifest.LevelNone}
}

// sameState reports whether two markers say the same thing (VerifiedAt
// aside), so that an unchanged marker is not rewritten on every pass.
func (m Marker) sameState(o Marker) bool {
	m.VerifiedAt, o.VerifiedAt = time.Time{}, time.Time{}
	return m.JobID == o.JobID && m.CheckpointID == o.CheckpointID && m.Level == o.Level &&
		m.Path == o.Path && m.CheckpointTimestamp.Equal(o.CheckpointTimestamp) &&
		m.Files == o.Files && m.Bytes == o.Bytes && m.Site == o.Site
}

func (m Marker) String() string {
	if m.CheckpointID < 0 {
		return fmt.Sprintf("job %s: no complete checkpoint at %s", m.JobID, m.Site)
	}
	return fmt.Sprintf("job %s: checkpoint %d complete at %s on %s", m.JobID, m.CheckpointID, m.Level, m.Site)
}

func decodeMarker(data []byte) (Marker, error) {
	var m Marker
	err := json.Unmarshal(data, &m)
	return m, err
}

// MarkerSource is where a Publisher gets the truth about this site. The
// mount daemon implements it from its verifier's verdicts.
type MarkerSource interface {
	// Markers returns the desired marker of every job this site knows:
	// its newest complete checkpoint and the level (NoMarker when none
	// is). Jobs missing from the result get NoMarker.
	Markers(ctx context.Context) ([]Marker, error)
	// Level reports how completely this site holds a checkpoint now
	// (manifest.LevelNone when not complete or unknown).
	Level(ctx context.Context, job string, checkpointID int64) (manifest.Level, error)
}

// ErrMarkerAhead means a marker named a checkpoint that the source does
// not report complete at the marker's level: it was not written.
var ErrMarkerAhead = errors.New("zkbridge: marker ahead of this site")

// checkMarker is the invariant checked before every marker write
// (docs/design.md §6.4): a marker never names a checkpoint that the source
// does not report complete at the marker's level or higher. A marker may
// always say "none".
func checkMarker(ctx context.Context, src MarkerSource, m Marker) error {
	if m.CheckpointID < 0 {
		if m.Level != manifest.LevelNone {
			return fmt.Errorf("%w: job %s: no checkpoint but level %s", ErrMarkerAhead, m.JobID, m.Level)
		}
		return nil
	}
	if m.Level == manifest.LevelNone {
		return fmt.Errorf("%w: job %s: checkpoint %d at level none", ErrMarkerAhead, m.JobID, m.CheckpointID)
	}
	have, err := src.Level(ctx, m.JobID, m.CheckpointID)
	if err != nil {
		return fmt.Errorf("job %s checkpoint %d: %w", m.JobID, m.CheckpointID, err)
	}
	if have < m.Level {
		return fmt.Errorf("%w: job %s checkpoint %d is %s here, the marker says %s", ErrMarkerAhead, m.JobID, m.CheckpointID, have, m.Level)
	}
	return nil
}
