package manifest

import (
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// Source says where a manifest's list of files came from.
type Source string

const (
	// SourceMetadata: built from Flink's own _metadata.
	SourceMetadata Source = "metadata"
	// SourceSealed: sealed on the primary, with checksums.
	SourceSealed Source = "sealed"
)

// MetadataFile is the name Flink gives a checkpoint's metadata.
const MetadataFile = "_metadata"

// Manifest is everything a checkpoint needs: the distinct files it
// references with their sizes (a sealed manifest adds their checksums).
type Manifest struct {
	CheckpointID int64  `json:"checkpoint_id"`
	Source       Source `json:"source"`
	// MetadataVersion is the _metadata format version.
	MetadataVersion int32 `json:"metadata_version"`
	// MetadataSize is the length of _metadata.
	MetadataSize int64 `json:"metadata_size"`
	// MetadataChecksum is the checksum of _metadata when sealed.
	MetadataChecksum string `json:"metadata_checksum,omitempty"`
	Files            []File `json:"files"`
	// InlineCount and InlineBytes count state stored inside _metadata.
	InlineCount int   `json:"inline_count"`
	InlineBytes int64 `json:"inline_bytes"`
}

// File is one file (or directory) a checkpoint needs.
type File struct {
	// Path is the Flink path, or a path relative to the checkpoint
	// directory when Relative is set.
	Path     string        `json:"path"`
	Relative bool          `json:"relative,omitempty"`
	Kind     metadata.Kind `json:"kind"`
	// Size is the exact length the file must have; -1 means only its
	// existence is known to be needed.
	Size int64 `json:"size"`
	// MinLength is set instead of an exact size for segments of
	// file-merging physical files: the file must be at least this long.
	MinLength int64 `json:"min_length,omitempty"`
}

// IsDir reports whether the entry is a directory that must exist.
func (f *File) IsDir() bool { return f.Kind == metadata.KindDirectory }

// Satisfied reports whether a file of length n satisfies the entry.
func (f *File) Satisfied(n int64) bool {
	switch {
	case f.MinLength > 0:
		return n >= f.MinLength
	case f.Size < 0:
		return true
	default:
		return n == f.Size
	}
}

// FromMetadata builds the manifest of a parsed _metadata of size bytes.
// Files referenced more than once appear once; several segments of one
// physical file become one entry with the largest end.
func FromMetadata(m *metadata.Metadata, size int64) *Manifest {
	man := &Manifest{
		CheckpointID:    m.CheckpointID,
		Source:          SourceMetadata,
		MetadataVersion: m.Version,
		MetadataSize:    size,
	}
	man.InlineCount, man.InlineBytes = m.Inline()
	type key struct {
		path     string
		relative bool
	}
	n := m.ReferenceCount()
	index := make(map[key]int, n)
	man.Files = make([]File, 0, n)
	m.EachReference("", func(r metadata.Reference) {
		f := fileOf(r.Path, r.Relative, r.Kind, r.Size, r.MinLength())
		k := key{r.Path, r.Relative}
		if i, ok := index[k]; ok {
			man.Files[i].absorb(&f)
			return
		}
		index[k] = len(man.Files)
		man.Files = append(man.Files, f)
	})
	return man
}

// fileOf is the manifest entry of one reference.
func fileOf(path string, relative bool, kind metadata.Kind, size, minLength int64) File {
	var f File
	f.set(path, relative, kind, size, minLength)
	return f
}

// set makes f the manifest entry of one reference. It writes f's fields
// in place, for a manifestBuilder that fills a long list.
func (f *File) set(path string, relative bool, kind metadata.Kind, size, minLength int64) {
	f.Path, f.Relative, f.Kind, f.Size, f.MinLength = path, relative, kind, size, 0
	switch kind {
	case metadata.KindSegment:
		f.Size, f.MinLength = -1, minLength
	case metadata.KindDirectory:
		f.Size = -1
	}
}

// absorb merges g, a later reference to the same file, into f: a
// file-merging physical file must reach the end of its furthest segment.
func (f *File) absorb(g *File) {
	if g.Kind == metadata.KindSegment && g.MinLength > f.MinLength {
		f.MinLength = g.MinLength
	}
}

// Bytes sums the known sizes of the referenced files.
func (m *Manifest) Bytes() int64 {
	var n int64
	for i := range m.Files {
		n += m.Files[i].knownBytes()
	}
	return n
}

// knownBytes is what f adds to Bytes: its size, or the length a physical
// file of segments must reach.
func (f *File) knownBytes() int64 {
	switch {
	case f.Size > 0:
		return f.Size
	case f.MinLength > 0:
		return f.MinLength
	}
	return 0
}
