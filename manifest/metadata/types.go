package metadata

// Magic is the first int32 of every _metadata file.
const Magic int32 = 0x4960672D

// masterStateMagic precedes every master (hook) state.
const masterStateMagic int32 = -0x3694E96A // 0xC96B1696 as int32

// Stream handle tags (MetadataV2V3SerializerBase).
const (
	TagNull             byte = 0
	TagByteStream       byte = 1
	TagFileStream       byte = 2
	TagKeyGroups        byte = 3
	TagRelativeStream   byte = 6
	TagSegmentFile      byte = 15
	TagEmptySegmentFile byte = 16
)

// Keyed handle tags.
const (
	TagIncrementalKeyGroups     byte = 5
	TagSavepointKeyGroups       byte = 7
	TagChangelog                byte = 8
	TagChangelogByteIncrement   byte = 9
	TagChangelogFileIncrement   byte = 10
	TagIncrementalKeyGroupsV2   byte = 11
	TagKeyGroupsV2              byte = 12
	TagChangelogFileIncrementV2 byte = 13
	TagChangelogV2              byte = 14
)

// Operator handle tags.
const (
	TagPartitionableOperator byte = 4
	TagFileMergingOperator   byte = 17
)

// Channel handle types of the tagged channel layout (metadata V6+).
const (
	ChannelInput        byte = 1
	ChannelOutput       byte = 2
	ChannelMergedInput  byte = 3
	ChannelMergedOutput byte = 4
)

// ChannelLayout says how version-3 channel state entries are laid out; the
// header does not record it.
type ChannelLayout int

const (
	// ChannelLayoutAuto tries the Flink 1.12+ layout and falls back to 1.11.
	ChannelLayoutAuto ChannelLayout = iota
	// ChannelLayout112 is Flink 1.12+: each entry starts with the subtask index.
	ChannelLayout112
	// ChannelLayout111 is Flink 1.11: no subtask index.
	ChannelLayout111
)

// Metadata is the complete parsed form of a _metadata file: everything needed
// to write the same bytes again.
type Metadata struct {
	Version      int32
	CheckpointID int64
	MasterStates []MasterState
	Operators    []Operator
	// Properties is the Java-serialized CheckpointProperties stream of
	// version 4 and later, exactly as stored; the stream may hold Java
	// null instead (the State Processor API writes no properties).
	Properties []byte
	// ChannelLayout is the layout used for channel state (versions 3 to 5).
	ChannelLayout ChannelLayout
}

// MasterState is the opaque state of a master hook.
type MasterState struct {
	Version int32
	Name    string
	Data    []byte
}

// Operator is the state of one operator (job vertex) in a checkpoint.
type Operator struct {
	// Name and UID are stored from version 5 on; empty means not set.
	Name, UID string
	// ID is the operator id, lower part first as Flink prints it.
	IDLower, IDUpper int64
	Parallelism      int32
	MaxParallelism   int32
	// ChainLength is the ignored chain length field of version 2.
	ChainLength int32
	// Coordinator is the operator coordinator state (version 3+).
	Coordinator *StreamHandle
	// FullyFinished operators carry no subtask states (version 3+).
	FullyFinished bool
	Subtasks      []Subtask
}

// Subtask is the state of one subtask of an operator.
type Subtask struct {
	Index int32
	// Finished subtasks carry no state (version 3+).
	Finished bool
	// Duration is the unused duration field of version 2.
	Duration int64
	// LegacyFlag and Legacy are version 2's non-partitionable operator
	// state of Flink <= 1.1 jobs: a handle follows when the flag is
	// non-zero. Flink 1.3 to 1.9 restore it; later versions refuse it.
	LegacyFlag int32
	Legacy     *StreamHandle

	// ManagedOperatorFlag and RawOperatorFlag are the stored presence
	// flags (any non-zero value means present).
	ManagedOperatorFlag int32
	ManagedOperator     *OperatorHandle
	RawOperatorFlag     int32
	RawOperator         *OperatorHandle
	ManagedKeyed        *KeyedHandle
	RawKeyed            *KeyedHandle

	InputChannels  []ChannelHandle
	OutputChannels []ChannelHandle

	// RefCheckpointMarker and RefCheckpointID are the version-7 regional
	// checkpoint reference: the id follows only when the marker is 1.
	RefCheckpointMarker byte
	RefCheckpointID     int64
}

// StreamHandle is a stream state handle: a file, a part of a file, or bytes
// stored inline. A nil *StreamHandle is the null handle.
type StreamHandle struct {
	Tag byte

	// Name of an inline byte stream handle (often a path that never exists).
	Name string
	// Data of an inline handle, kept only with Options.KeepInline.
	Data []byte
	// DataLen is the length of inline data, also when Data is not kept.
	DataLen int32

	// Path of a file, relative path or segment file, as written.
	Path string
	// Size of the file (or segment); -1 means unknown.
	Size int64

	// Offset, Scope and LogicalFileID describe a file-merging segment.
	Offset        int64
	Scope         int32
	LogicalFileID string

	// KeyGroups and Delegate describe a legacy nested key-groups handle.
	KeyGroups *KeyGroupOffsets
	Delegate  *StreamHandle
}

// KeyGroupOffsets is a key-group range with one offset per key group.
type KeyGroupOffsets struct {
	Start   int32
	Offsets []int64
}

// OperatorHandle is operator (non-keyed) state.
type OperatorHandle struct {
	Tag    byte
	States []OperatorStateMeta
	// TaskOwnedDir, SharedDir and EmptyFlag are set for file-merging
	// operator handles.
	TaskOwnedDir string
	SharedDir    string
	EmptyFlag    byte
	Delegate     *StreamHandle
}

// OperatorStateMeta describes one named operator state inside a handle.
type OperatorStateMeta struct {
	Name    string
	Mode    byte
	Offsets []int64
}

// KeyedHandle is keyed state; its Tag says which fields are used.
type KeyedHandle struct {
	Tag byte
	// KeyGroupStart and KeyGroupCount give the key-group range.
	KeyGroupStart int32
	KeyGroupCount int32

	// Offsets and Delegate: key-groups handles (tags 3, 7, 12).
	Offsets  []int64
	Delegate *StreamHandle

	// StateHandleID: tags 8, 9, 10, 11, 12, 13, 14.
	StateHandleID string

	// Incremental handles (tags 5, 11).
	CheckpointID     int64
	BackendID        string
	CheckpointedSize int64
	Meta             *StreamHandle
	Shared           []NamedHandle
	Private          []NamedHandle

	// Changelog backend handles (tags 8, 14).
	Materialized      []*KeyedHandle
	NonMaterialized   []*KeyedHandle
	MaterializationID int64

	// In-memory changelog (tag 9).
	From, To int64
	Changes  []StateChange

	// File changelog (tags 10, 13).
	Parts             []OffsetHandle
	StateSize         int64
	StorageIdentifier string
}

// NamedHandle is a stream handle with the local file name it restores to.
type NamedHandle struct {
	LocalName string
	Handle    *StreamHandle
}

// StateChange is one inline changelog entry.
type StateChange struct {
	KeyGroup int32
	Data     []byte
	DataLen  int32
}

// OffsetHandle is a stream handle with an offset into it.
type OffsetHandle struct {
	Offset int64
	Handle *StreamHandle
}

// ChannelHandle is the in-flight data of one channel (unaligned checkpoints).
type ChannelHandle struct {
	// Type is the tag of the V6+ layout (ChannelInput...); zero before V6.
	Type         byte
	SubtaskIndex int32
	// A and B are gate/channel or partition/subpartition indexes.
	A, B      int32
	Offsets   []int64
	StateSize int64
	Delegate  *StreamHandle
	// MergedOffsets is the serialized offsets blob of merged handles.
	MergedOffsets []byte
}
