package metadata

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/ckptfs/ckptfs/manifest/internal/chkname"
)

// Kind says what role a referenced file plays in Flink's layout. It is
// written as its name ("shared"), in JSON and wherever it is printed.
type Kind uint8

const (
	kindUnknown Kind = iota
	// KindExclusive is state owned by this checkpoint (chk-N/...).
	KindExclusive
	// KindShared is state shared between checkpoints (shared/...).
	KindShared
	// KindTaskOwned is state owned by TaskManagers (taskowned/...).
	KindTaskOwned
	// KindSegment is a range of a file-merging physical file.
	KindSegment
	// KindChangelog is a changelog (DSTL) file.
	KindChangelog
	// KindDirectory is a file-merging managed directory that must exist.
	KindDirectory
	// KindOther is any other file (another job's or a savepoint's files).
	KindOther
	numKinds
)

var kindNames = [numKinds]string{
	KindExclusive: "exclusive", KindShared: "shared", KindTaskOwned: "taskowned", KindSegment: "segment",
	KindChangelog: "changelog", KindDirectory: "directory", KindOther: "other",
}

// String returns the kind's name; the zero Kind has the empty name.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) {
	if k >= numKinds {
		return nil, fmt.Errorf("metadata: unknown kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, name := range kindNames {
		if string(b) == name {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("metadata: unknown file kind %q", b)
}

// Reference is one file (or directory) that a checkpoint needs.
type Reference struct {
	// Path is the path as written in _metadata: a Flink path or URI, or a
	// path relative to the checkpoint's directory.
	Path string
	// Resolved is Path made absolute against the checkpoint directory.
	Resolved string
	// Relative reports a relative handle (resolved against the directory
	// holding _metadata).
	Relative bool
	// Size is the exact file size (FileSize: one byte more than the
	// handle records for a changelog file), or the segment length; -1 is
	// unknown.
	Size int64
	// Offset is the start of a segment inside its file.
	Offset int64
	Kind   Kind
}

// MinLength is the smallest file length that satisfies the reference: the
// end of a segment, the exact size of a file, and 0 when the size is
// unknown.
func (r Reference) MinLength() int64 {
	if r.Size < 0 {
		return 0
	}
	return r.Offset + r.Size
}

// ExactSize reports whether the file must have exactly MinLength bytes.
func (r Reference) ExactSize() bool {
	return r.Kind != KindSegment && r.Kind != KindDirectory && r.Size >= 0
}

// OperatorIDString formats an operator id as Flink prints it.
func (op *Operator) OperatorIDString() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(op.IDLower))
	binary.BigEndian.PutUint64(b[8:], uint64(op.IDUpper))
	return hex.EncodeToString(b[:])
}

// Inline counts the inline byte-stream handles and their bytes.
func (m *Metadata) Inline() (count int, bytes int64) {
	m.walk(func(h *StreamHandle, _ bool) {
		if h.Tag == TagByteStream {
			count++
			bytes += int64(h.DataLen)
		}
	}, nil)
	return count, bytes
}

// References lists every file and directory the checkpoint needs, in file
// order, with duplicates (RocksDB checkpoints name some files twice).
// exclusiveDir is the directory holding _metadata; relative handles resolve
// against it.
func (m *Metadata) References(exclusiveDir string) []Reference {
	var refs []Reference
	m.EachReference(exclusiveDir, func(r Reference) { refs = append(refs, r) })
	return refs
}

// ReferenceCount is the number of references EachReference reports.
func (m *Metadata) ReferenceCount() int {
	n := 0
	m.walk(func(h *StreamHandle, _ bool) {
		switch h.Tag {
		case TagFileStream, TagRelativeStream, TagSegmentFile:
			n++
		}
	}, func(string) { n++ })
	return n
}

// EachReference calls fn for every reference, as References lists them,
// without collecting them. Resolved is only set when exclusiveDir is not
// empty.
func (m *Metadata) EachReference(exclusiveDir string, fn func(Reference)) {
	exclusiveDir = strings.TrimSuffix(exclusiveDir, "/")
	m.walk(func(h *StreamHandle, changelog bool) {
		switch h.Tag {
		case TagFileStream, TagRelativeStream, TagSegmentFile:
			r := Reference{Path: h.Path, Resolved: h.Path, Size: FileSize(h.Size, changelog), Kind: kindOf(h.Tag, changelog, h.Path, exclusiveDir)}
			switch h.Tag {
			case TagRelativeStream:
				r.Relative, r.Resolved = true, ""
				if exclusiveDir != "" {
					r.Resolved = exclusiveDir + "/" + h.Path
				}
			case TagSegmentFile:
				r.Offset = h.Offset
			}
			fn(r)
		}
	}, func(dir string) {
		fn(Reference{Path: dir, Resolved: dir, Size: -1, Kind: KindDirectory})
	})
}

// Visitor receives what DecodeReferences reads.
type Visitor interface {
	// Reference is called for every reference, in file order. r and
	// r.Path are reused for the next reference: copy what is kept, and
	// change nothing (r.Path may be the decoder's read buffer).
	Reference(r *RawReference)
	// Restart says that DecodeReferences reads the file again, with
	// Flink 1.11's channel layout, after Flink 1.12's failed (only
	// version-3 files with channel state): forget every reference
	// received so far.
	Restart()
}

// RawReference is a reference as DecodeReferences reads it.
type RawReference struct {
	// Path is the path as written (decoded from modified UTF-8).
	Path []byte
	// Tag is the tag of the handle: TagFileStream, TagRelativeStream or
	// TagSegmentFile; TagFileMergingOperator for one of the directories
	// that a file-merging operator handle names.
	Tag byte
	// Changelog reports a handle inside changelog state.
	Changelog bool
	// Size and Offset are as in Reference: Size is a file's length, which
	// for a changelog file counts one byte more than its handle (FileSize).
	Size   int64
	Offset int64
}

// Relative reports a path relative to the directory holding _metadata.
func (r *RawReference) Relative() bool { return r.Tag == TagRelativeStream }

// Kind is the Kind that References gives this reference.
func (r *RawReference) Kind(exclusiveDir string) Kind {
	// Classify only reads the path during the call.
	return kindOf(r.Tag, r.Changelog, unsafe.String(unsafe.SliceData(r.Path), len(r.Path)), strings.TrimSuffix(exclusiveDir, "/"))
}

// MinLength is as in Reference.
func (r *RawReference) MinLength() int64 {
	if r.Size < 0 {
		return 0
	}
	return r.Offset + r.Size
}

// Summary is what DecodeReferences returns besides the references.
type Summary struct {
	Version      int32
	CheckpointID int64
	// InlineCount and InlineBytes are what Metadata.Inline returns.
	InlineCount int
	InlineBytes int64
}

// FileSize is the length of the file that a stream handle of size bytes
// names (-1: unknown). A changelog (DSTL) file starts with one byte that
// says whether the rest is compressed, which its handle does not count:
// flink-dstl-dfs's StateChangeFsUploader writes the byte, then the changes,
// and records their length as the handle's size; its readers
// (ChangelogStreamWrapper.wrapAndSeek) read the byte before seeking to a
// part's offset. The length of a compressed file (dstl.dfs.compression.enabled,
// off by default) cannot be known from its handle: this is the length of
// an uncompressed one.
func FileSize(size int64, changelog bool) int64 {
	if changelog && size >= 0 && size < math.MaxInt64 {
		return size + 1
	}
	return size
}

// kindOf gives the Kind of a reference by the tag of its handle.
func kindOf(tag byte, changelog bool, path, exclusiveDir string) Kind {
	switch tag {
	case TagFileStream:
		if changelog {
			return KindChangelog
		}
		return Classify(path, exclusiveDir)
	case TagRelativeStream:
		if changelog {
			return KindChangelog
		}
		return KindExclusive
	case TagSegmentFile:
		return KindSegment
	}
	return KindDirectory
}

// Classify guesses the role of an absolute file that is not changelog
// state from Flink's layout: the Kind References gives a file stream
// handle naming path.
func Classify(path, exclusiveDir string) Kind {
	parent := path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parent = path[:i]
	}
	if exclusiveDir != "" && parent == exclusiveDir {
		return KindExclusive
	}
	base := parent[strings.LastIndexByte(parent, '/')+1:]
	switch {
	case base == "shared":
		return KindShared
	case isCheckpointDirName(base):
		return KindExclusive
	case hasComponent(parent, "shared"):
		return KindShared
	case hasComponent(parent, "taskowned"):
		return KindTaskOwned
	}
	return KindOther
}

// hasComponent reports whether a slash-separated path has the component.
func hasComponent(path, component string) bool {
	for i := 0; ; {
		j := strings.Index(path[i:], component)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(component)
		if (start == 0 || path[start-1] == '/') && (end == len(path) || path[end] == '/') {
			return true
		}
		i = end
	}
}

// isCheckpointDirName is manifest.CheckpointIDFromDirName's rule.
func isCheckpointDirName(name string) bool {
	_, ok := chkname.ID(name)
	return ok
}

// walk visits every stream handle (with whether it is part of a changelog)
// and every file-merging directory.
func (m *Metadata) walk(visit func(h *StreamHandle, changelog bool), dir func(string)) {
	var stream func(h *StreamHandle, changelog bool)
	stream = func(h *StreamHandle, changelog bool) {
		for h != nil {
			visit(h, changelog)
			h = h.Delegate
		}
	}
	var keyed func(k *KeyedHandle, changelog bool)
	keyed = func(k *KeyedHandle, changelog bool) {
		if k == nil {
			return
		}
		stream(k.Delegate, changelog)
		stream(k.Meta, changelog)
		for _, nh := range k.Shared {
			stream(nh.Handle, changelog)
		}
		for _, nh := range k.Private {
			stream(nh.Handle, changelog)
		}
		for _, c := range k.Materialized {
			keyed(c, changelog)
		}
		for _, c := range k.NonMaterialized {
			keyed(c, true)
		}
		for _, p := range k.Parts {
			stream(p.Handle, true)
		}
	}
	operator := func(h *OperatorHandle) {
		if h == nil {
			return
		}
		if h.Tag == TagFileMergingOperator && dir != nil {
			dir(h.TaskOwnedDir)
			dir(h.SharedDir)
		}
		stream(h.Delegate, false)
	}
	for i := range m.Operators {
		op := &m.Operators[i]
		stream(op.Coordinator, false)
		for j := range op.Subtasks {
			st := &op.Subtasks[j]
			stream(st.Legacy, false)
			operator(st.ManagedOperator)
			operator(st.RawOperator)
			keyed(st.ManagedKeyed, false)
			keyed(st.RawKeyed, false)
			for k := range st.InputChannels {
				stream(st.InputChannels[k].Delegate, false)
			}
			for k := range st.OutputChannels {
				stream(st.OutputChannels[k].Delegate, false)
			}
		}
	}
}
