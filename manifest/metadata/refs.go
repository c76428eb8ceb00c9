package metadata

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// Kind says what role a referenced file plays in Flink's layout.
type Kind string

const (
	// KindExclusive is state owned by this checkpoint (chk-N/...).
	KindExclusive Kind = "exclusive"
	// KindShared is state shared between checkpoints (shared/...).
	KindShared Kind = "shared"
	// KindTaskOwned is state owned by TaskManagers (taskowned/...).
	KindTaskOwned Kind = "taskowned"
	// KindSegment is a range of a file-merging physical file.
	KindSegment Kind = "segment"
	// KindChangelog is a changelog (DSTL) file.
	KindChangelog Kind = "changelog"
	// KindDirectory is a file-merging managed directory that must exist.
	KindDirectory Kind = "directory"
	// KindOther is any other file (another job's or a savepoint's files).
	KindOther Kind = "other"
)

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
	// Size is the exact file size, or the segment length; -1 is unknown.
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
		case TagFileStream:
			kind := KindChangelog
			if !changelog {
				kind = classify(h.Path, exclusiveDir)
			}
			fn(Reference{Path: h.Path, Resolved: h.Path, Size: h.Size, Kind: kind})
		case TagRelativeStream:
			kind := KindExclusive
			if changelog {
				kind = KindChangelog
			}
			r := Reference{Path: h.Path, Relative: true, Size: h.Size, Kind: kind}
			if exclusiveDir != "" {
				r.Resolved = exclusiveDir + "/" + h.Path
			}
			fn(r)
		case TagSegmentFile:
			fn(Reference{Path: h.Path, Resolved: h.Path, Size: h.Size, Offset: h.Offset, Kind: KindSegment})
		}
	}, func(dir string) {
		fn(Reference{Path: dir, Resolved: dir, Size: -1, Kind: KindDirectory})
	})
}

// classify guesses the role of an absolute file from Flink's layout.
func classify(path, exclusiveDir string) Kind {
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

func isCheckpointDirName(name string) bool {
	if !strings.HasPrefix(name, "chk-") || len(name) == 4 {
		return false
	}
	for _, c := range name[4:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
