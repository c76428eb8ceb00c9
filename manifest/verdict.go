package manifest

import (
	"encoding/json"
	"fmt"
)

// Level is how completely a site holds a checkpoint. Each level includes
// the ones below it.
type Level int

const (
	// LevelNone: not restorable from this site (or not known to be).
	LevelNone Level = iota
	// L1: _metadata parses completely and every file it references is
	// present with its recorded size (restorable with flink run -s).
	L1
	// L2: L1 plus the HA file of the ZooKeeper pointer is complete
	// (restorable by ZooKeeper failover).
	L2
	// L3: L2 (or L1 without HA) plus content checksums from a manifest
	// sealed on the primary match.
	L3
)

func (l Level) String() string {
	switch l {
	case LevelNone:
		return "none"
	case L1, L2, L3:
		return fmt.Sprintf("L%d", int(l))
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// MarshalText writes the level as "none", "L1", "L2" or "L3".
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (l *Level) UnmarshalText(b []byte) error {
	for _, c := range []Level{LevelNone, L1, L2, L3} {
		if string(b) == c.String() {
			*l = c
			return nil
		}
	}
	return fmt.Errorf("unknown level %q", b)
}

// ProblemKind names why a checkpoint is not complete.
type ProblemKind string

const (
	ProblemMissing           ProblemKind = "missing"
	ProblemWrongCheckpointID ProblemKind = "wrong_checkpoint_id"
	ProblemSizeMismatch      ProblemKind = "size_mismatch"
	ProblemParseError        ProblemKind = "parse_error"
	ProblemIOError           ProblemKind = "io_error"
	ProblemOutsideRoot       ProblemKind = "outside_root"
	ProblemNotDirectory      ProblemKind = "not_directory"
	ProblemChecksumMismatch  ProblemKind = "checksum_mismatch"
)

// Problem is one reason a checkpoint is not complete.
type Problem struct {
	// Path is the file as the checkpoint names it (relative paths stay
	// relative to the checkpoint directory).
	Path   string      `json:"path"`
	Kind   ProblemKind `json:"problem"`
	Detail string      `json:"detail,omitempty"`
	// Expected and Found are sizes (size_mismatch) or ids
	// (wrong_checkpoint_id).
	Expected int64 `json:"expected,omitempty"`
	Found    int64 `json:"found,omitempty"`
	// Offset is where a parse error was found.
	Offset int64 `json:"offset,omitempty"`
	// ExpectedChecksum is what the primary sealed and FoundChecksum what
	// the file holds here (checksum_mismatch).
	ExpectedChecksum string `json:"expected_checksum,omitempty"`
	FoundChecksum    string `json:"found_checksum,omitempty"`
}

func (p Problem) String() string {
	if p.Detail == "" {
		return fmt.Sprintf("%s: %s", p.Kind, p.Path)
	}
	return fmt.Sprintf("%s: %s: %s", p.Kind, p.Path, p.Detail)
}

// Verdict is the result of verifying one checkpoint on this site.
type Verdict struct {
	// CheckpointID is the id from _metadata, or from the directory name
	// when _metadata could not be read.
	CheckpointID int64 `json:"id"`
	// Dir is the local checkpoint directory.
	Dir      string `json:"dir"`
	Complete bool   `json:"complete"`
	Level    Level  `json:"level"`
	// Unknown means an I/O error prevented a decision; it counts as
	// incomplete for every decision.
	Unknown bool `json:"unknown,omitempty"`
	// Files and Bytes count the distinct files the checkpoint needs.
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	Problems []Problem `json:"problems"`
	// HoldsFilesOf is, for an incomplete checkpoint directory, the id of
	// a complete checkpoint described outside its own directory (Flink
	// 1.3/1.4) that needs files in it, 0 for none: a replica shows the
	// directory (docs/design.md §4.2.1).
	HoldsFilesOf int64 `json:"holds_files_of,omitempty"`
	// Manifest is what the checkpoint needs (nil when _metadata could not
	// be parsed).
	Manifest *Manifest `json:"-"`
}

// String summarizes a verdict in one line.
func (v *Verdict) String() string {
	if v.Complete {
		return fmt.Sprintf("checkpoint %d complete at %s (%d files, %d bytes)", v.CheckpointID, v.Level, v.Files, v.Bytes)
	}
	s := fmt.Sprintf("checkpoint %d incomplete (%d problems)", v.CheckpointID, len(v.Problems))
	if len(v.Problems) > 0 {
		s += ": " + v.Problems[0].String()
	}
	return s
}

// MarshalJSON keeps "problems" an array, never null.
func (v Verdict) MarshalJSON() ([]byte, error) {
	type plain Verdict
	if v.Problems == nil {
		v.Problems = []Problem{}
	}
	return json.Marshal(plain(v))
}
