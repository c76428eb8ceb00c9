package flinkha

// This file is the contract between the HA object codecs and their users
// (zkbridge, the L2 verification in manifest, the Flink emulator).

// StateHandle is the data of a checkpoint or job-graph znode: Flink's
// RetrievableStreamStateHandle wrapping a FileStateHandle that points to a
// file in high-availability.storageDir.
type StateHandle struct {
	// URI is the file's java.net.URI string exactly as stored (the escaped
	// form, e.g. spaces as %20).
	URI string
	// Size is the stateSize stored in the znode: the exact length of the
	// HA file, or -1 when unknown.
	Size int64
}

// LeaderInfo is the content of a leader information znode.
type LeaderInfo struct {
	// Address is the leader's RPC or REST address.
	Address string
	// SessionID is the leader session UUID in canonical 8-4-4-4-12 form.
	SessionID string
}

// FieldSet names the field layout of a serialized CompletedCheckpoint.
type FieldSet string

const (
	// FieldSet14 is Flink 1.4: externalizedMetadata, no storage location.
	FieldSet14 FieldSet = "1.4"
	// FieldSet15 is Flink 1.5 to 1.13 (real 1.13.6 writes it):
	// storageLocation, metadataHandle, externalPointer, duration. Its
	// name is older than the finding that 1.14 already writes
	// FieldSet1150 (real 1.14.6).
	FieldSet15 FieldSet = "1.5-1.13"
	// FieldSet115 is Flink 1.16 and later (1.20.5 and 2.3.0 write it):
	// completionTimestamp instead of duration, restoredProps.
	FieldSet115 FieldSet = "1.15+"
	// FieldSet1150 is FieldSet115 without restoredProps, as real Flink
	// 1.14.6 and 1.15.4 write it.
	FieldSet1150 FieldSet = "1.15"
)

// FileRef is one file an HA file needs: every *FileStateHandle-like object
// (FileStateHandle, RelativeFileStateHandle, SegmentFileStateHandle, ...)
// found in the object graph.
type FileRef struct {
	// Path is the file's Flink path (Path.uri, unescaped), always absolute
	// in an HA file: relative handles carry the writing site's full path.
	Path string
	// Size is the recorded stateSize (-1 unknown).
	Size int64
	// Offset is the start of a file-merging segment (0 otherwise).
	Offset int64
	// Class is the Java class of the handle.
	Class string
	// Segment marks a range of a file-merging physical file: the file
	// must hold at least Offset+Size bytes rather than exactly Size.
	Segment bool
	// Dir marks a file-merging directory (DirectoryStreamStateHandle) that
	// must exist; Size is then -1.
	Dir bool
	// Changelog marks a changelog (DSTL) file, a part of a
	// ChangelogStateHandleStreamImpl: the file holds one byte more than
	// Size (metadata.FileSize).
	Changelog bool
}

// CompletedCheckpoint is what Flink's HA file completedCheckpoint<hex>
// holds, as far as completeness is concerned.
type CompletedCheckpoint struct {
	FieldSet     FieldSet
	JobID        string // 32 lower-case hex digits, as Flink prints it
	CheckpointID int64
	Timestamp    int64 // trigger time, ms since the epoch
	// CompletionTimestamp is when the checkpoint completed (field sets
	// before 1.15 store the duration; this is Timestamp plus it).
	CompletionTimestamp int64
	// ExternalPointer is the chk-N directory (may be empty in 1.4).
	ExternalPointer string
	// Metadata is the _metadata file handle (nil in 1.4).
	Metadata *FileRef
	// Files are the distinct files referenced by the state handles (not
	// counting Metadata).
	Files []FileRef
	// InlineBytes counts state stored in the HA file itself.
	InlineBytes int64
}
