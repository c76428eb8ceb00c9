package flinkha

import (
	"crypto/md5"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// Retention is the checkpoint's retention policy, which selects Flink's
// CheckpointProperties (CheckpointRetentionPolicy).
type Retention int

const (
	// RetainNever: a plain checkpoint, discarded when the job terminates
	// (NEVER_RETAIN_AFTER_TERMINATION).
	RetainNever Retention = iota
	// RetainOnFailure: kept when the job fails (RETAIN_ON_FAILURE).
	RetainOnFailure
	// RetainOnCancellation: kept when the job fails or is cancelled
	// (RETAIN_ON_CANCELLATION).
	RetainOnCancellation
)

// CheckpointSpec describes an HA file for EncodeCompletedCheckpoint: what
// Flink's JobManager writes to high-availability.storageDir when a
// checkpoint completes.
type CheckpointSpec struct {
	FieldSet FieldSet // "" means FieldSet115
	// Release is the Flink release whose FieldSet115 classes to write
	// ("major.minor", a patch level ignored): CheckpointProperties as
	// 1.5 declares them before 1.15 (FieldSet1150 of 1.14),
	// CompletedCheckpoint's restoredProps (1.16 on), OperatorState's
	// operatorName and operatorUid (2.0 on), OperatorSubtaskState's
	// upstreamOutputBufferState (2.3 on). Empty means the newest release
	// that writes Metadata's version (1.20 without Metadata).
	Release      string
	JobID        string // 32 hex digits
	CheckpointID int64
	Timestamp    int64 // trigger time, ms since the epoch
	// CompletionTimestamp is stored as is from 1.15 on, as the duration
	// CompletionTimestamp-Timestamp before.
	CompletionTimestamp int64
	// ExternalPointer is the chk-N directory as a Flink path (for example
	// "file:/flink/checkpoints/<job>/chk-7"). Relative handles of Metadata
	// resolve against it. FieldSet14 without a pointer writes a checkpoint
	// that was not externalized.
	ExternalPointer string
	// MetadataPath is the _metadata file as a Flink path; empty means
	// ExternalPointer + "/_metadata". For FieldSet14 it is the externalized
	// metadata file.
	MetadataPath string
	// MetadataSize is the length of the metadata file.
	MetadataSize int64
	Retention    Retention
	// Metadata holds the operator and master states, the same state-handle
	// tree the checkpoint's _metadata holds (decoded with KeepInline when
	// it has inline state). Nil means no state.
	Metadata *metadata.Metadata
}

// EncodeCompletedCheckpoint writes the HA file described by spec with
// Flink's class names, field sets and serialVersionUIDs (doc.go says which
// Flink version each part follows). Stream handles: file, relative,
// inline, segment and nested key-groups; keyed handles: key groups (also
// of savepoints), incremental, and the changelog backend's (tags 14, 13
// and 9 as 1.20.5 and 2.3.0 write them, 8 and 10 as 1.15.4 does);
// operator handles: partitionable and file-merging (with empty segments);
// channel state of unaligned checkpoints, merged ones (2.x) too; finished
// subtasks and operators. It fails for the rest: Flink 1.1 legacy state.
func EncodeCompletedCheckpoint(spec CheckpointSpec) ([]byte, error) {
	b, err := newBuilder(spec)
	if err != nil {
		return nil, err
	}
	root, err := b.completedCheckpoint()
	if err != nil {
		return nil, err
	}
	return javaser.Encode(javaser.NewStream(root))
}

// builder makes the object graph of one HA file.
type builder struct {
	spec CheckpointSpec
	fs   FieldSet
	c    classes
	// exclusiveDir is ExternalPointer as a normalized Flink path.
	exclusiveDir string
	// ids counts derived StateHandleIDs, which Flink would draw at random.
	ids int
	// Singletons that Flink shares between all subtasks.
	emptySOC, noRescale, emptyRange *javaser.Object
	finished                        *javaser.Object
}

func newBuilder(spec CheckpointSpec) (*builder, error) {
	b := &builder{spec: spec, fs: spec.FieldSet}
	var version int32
	if spec.Metadata != nil {
		version = spec.Metadata.Version
	}
	release := spec.Release
	if b.fs == FieldSet1150 {
		// The 1.15 field set is the release's shape of FieldSet115:
		// shapesOf owns which releases write restoredProps.
		if release == "" {
			release = "1.15"
		}
		b.fs = FieldSet115
	}
	var err error
	if b.c.shapes, err = shapesOf(release, version); err != nil {
		return nil, err
	}
	if spec.FieldSet == FieldSet1150 && b.c.shapes.restoredProps {
		return nil, fmt.Errorf("flinkha: field set %q (no restoredProps) contradicts release %q", spec.FieldSet, spec.Release)
	}
	if b.fs == "" {
		b.fs = FieldSet115
	}
	switch b.fs {
	case FieldSet14, FieldSet15, FieldSet115:
	default:
		return nil, fmt.Errorf("flinkha: unknown field set %q", spec.FieldSet)
	}
	if _, _, err := parseID(spec.JobID); err != nil {
		return nil, err
	}
	if spec.CheckpointID < 0 || spec.Timestamp < 0 || spec.CompletionTimestamp < 0 {
		return nil, errors.New("flinkha: checkpoint id and timestamps must not be negative")
	}
	if spec.Retention < RetainNever || spec.Retention > RetainOnCancellation {
		return nil, fmt.Errorf("flinkha: unknown retention %d", spec.Retention)
	}
	if spec.Metadata != nil && spec.Metadata.CheckpointID != spec.CheckpointID {
		return nil, fmt.Errorf("flinkha: metadata of checkpoint %d for checkpoint %d", spec.Metadata.CheckpointID, spec.CheckpointID)
	}
	if spec.ExternalPointer == "" {
		if b.fs != FieldSet14 {
			return nil, errors.New("flinkha: ExternalPointer is required")
		}
		if spec.MetadataPath != "" {
			return nil, errors.New("flinkha: MetadataPath without ExternalPointer")
		}
		return b, nil
	}
	u, err := PathToURI(spec.ExternalPointer)
	if err != nil {
		return nil, err
	}
	if b.exclusiveDir, err = URIToPath(u); err != nil {
		return nil, err
	}
	if spec.MetadataSize < -1 {
		return nil, fmt.Errorf("flinkha: metadata size %d", spec.MetadataSize)
	}
	return b, nil
}

// derivedID returns a StateHandleID for a handle whose _metadata tag does
// not store one. Flink draws a random UUID there; a name-based UUID of the
// job, checkpoint and position keeps the output reproducible.
func (b *builder) derivedID() string {
	b.ids++
	return nameUUID(fmt.Sprintf("ckptfs/%s/%d/%d", b.spec.JobID, b.spec.CheckpointID, b.ids))
}

// nameUUID is UUID.nameUUIDFromBytes (version 3, MD5).
func nameUUID(name string) string {
	h := md5.Sum([]byte(name))
	h[6] = h[6]&0x0f | 0x30
	h[8] = h[8]&0x3f | 0x80
	return formatUUID(int64(getBE(h[:8])), int64(getBE(h[8:])))
}

func (b *builder) completedCheckpoint() (*javaser.Object, error) {
	spec := b.spec
	lower, upper, _ := parseID(spec.JobID)
	o := javaser.NewObject(b.c.completedCheckpoint(b.fs))
	set := func(name string, v any) {
		if err := o.Set(name, v); err != nil {
			panic(err) // a field missing from our own class table
		}
	}
	set("job", b.id(b.c.jobID(), lower, upper))
	set("checkpointID", spec.CheckpointID)
	set("timestamp", spec.Timestamp)
	if b.fs == FieldSet115 {
		set("completionTimestamp", spec.CompletionTimestamp)
	} else {
		set("duration", spec.CompletionTimestamp-spec.Timestamp)
	}
	ops, err := b.operatorStates()
	if err != nil {
		return nil, err
	}
	set("operatorStates", ops)
	masters, err := b.masterStates()
	if err != nil {
		return nil, err
	}
	set("masterHookStates", masters)
	props, err := b.props()
	if err != nil {
		return nil, err
	}
	set("props", props)

	if spec.ExternalPointer == "" { // FieldSet14, not externalized
		return o, nil
	}
	pointer := javaser.NewString(b.exclusiveDir)
	set("externalPointer", pointer)
	metaPath := spec.MetadataPath
	if metaPath == "" {
		metaPath = b.exclusiveDir + "/" + "_metadata"
	}
	meta, err := b.fileHandle(metaPath, spec.MetadataSize)
	if err != nil {
		return nil, err
	}
	if b.fs == FieldSet14 {
		set("externalizedMetadata", meta)
		return o, nil
	}
	dir, err := b.path(b.exclusiveDir)
	if err != nil {
		return nil, err
	}
	loc := javaser.NewObject(b.c.storageLocation()).
		With("exclusiveCheckpointDir", dir).
		With("metadataFileHandle", meta).
		With("externalPointer", pointer)
	set("storageLocation", loc)
	set("metadataHandle", meta)
	return o, nil
}

// props returns the CheckpointProperties Flink uses for a checkpoint with
// the spec's retention.
func (b *builder) props() (*javaser.Object, error) {
	// discard on: subsumed, finished, cancelled, failed, suspended
	d := [5]bool{true, true, true, true, true}
	switch b.spec.Retention {
	case RetainOnFailure:
		d[3] = false
	case RetainOnCancellation:
		d[2], d[3], d[4] = false, false, false
	}
	o := javaser.NewObject(b.c.checkpointProperties(b.fs)).
		With("discardSubsumed", d[0]).With("discardFinished", d[1]).With("discardCancelled", d[2]).
		With("discardFailed", d[3]).With("discardSuspended", d[4]).With("forced", false)
	switch {
	case b.fs == FieldSet14:
		// 1.4 retains only externalized checkpoints (EXTERNALIZED_CHECKPOINT_
		// RETAINED and _DELETED); a plain one is STANDARD_CHECKPOINT.
		externalized := b.spec.ExternalPointer != ""
		if externalized == (b.spec.Retention == RetainNever) {
			return nil, errors.New("flinkha: Flink 1.4 externalizes exactly the retained checkpoints: set ExternalPointer if and only if Retention is not RetainNever")
		}
		o.With("externalize", externalized)
	case b.fs == FieldSet15 || b.c.shapes.enumCheckpointType:
		o.With("checkpointType", b.c.jdk.Enum(classCheckpointType, "CHECKPOINT"))
	default:
		t := javaser.NewObject(b.c.checkpointType115()).
			With("name", "Checkpoint").
			With("sharingFilesStrategy", b.c.jdk.Enum(classSharingStrategy, "FORWARD_BACKWARD"))
		o.With("checkpointType", t).With("unclaimed", false)
	}
	return o, nil
}

func (b *builder) id(class *javaser.ClassDesc, lower, upper int64) *javaser.Object {
	return javaser.NewObject(class).With("lowerPart", lower).With("upperPart", upper)
}

// path returns a Flink Path object for the Flink path p.
func (b *builder) path(p string) (*javaser.Object, error) {
	u, err := PathToURI(p)
	if err != nil {
		return nil, err
	}
	return javaser.NewObject(b.c.path()).With("uri", b.c.jdk.URI(u)), nil
}

func (b *builder) fileHandle(p string, size int64) (*javaser.Object, error) {
	path, err := b.path(p)
	if err != nil {
		return nil, err
	}
	return javaser.NewObject(b.c.fileStateHandle()).With("filePath", path).With("stateSize", size), nil
}

func (b *builder) masterStates() (*javaser.Object, error) {
	m := b.spec.Metadata
	if m == nil || len(m.MasterStates) == 0 {
		return javaser.NewObject(b.c.emptyList()), nil // Collections.emptyList()
	}
	var items []javaser.Value
	for _, ms := range m.MasterStates {
		items = append(items, javaser.NewObject(b.c.masterState()).
			With("name", ms.Name).With("version", ms.Version).With("bytes", b.c.jdk.ByteArray(ms.Data)))
	}
	return b.c.jdk.ArrayList(items...), nil
}

func (b *builder) operatorStates() (*javaser.Object, error) {
	var entries []javaser.MapEntry
	if m := b.spec.Metadata; m != nil {
		for i := range m.Operators {
			op := &m.Operators[i]
			id := b.id(b.c.operatorID(), op.IDLower, op.IDUpper)
			state, err := b.operatorState(op, id)
			if err != nil {
				return nil, fmt.Errorf("flinkha: operator %s: %w", op.OperatorIDString(), err)
			}
			entries = append(entries, javaser.MapEntry{Key: id, Value: state})
		}
	}
	return b.c.jdk.HashMap(entries...), nil
}

func (b *builder) operatorState(op *metadata.Operator, id *javaser.Object) (*javaser.Object, error) {
	class := b.c.operatorState()
	if op.FullyFinished {
		class = b.c.fullyFinished()
	}
	o := javaser.NewObject(class).
		With("operatorID", id).With("parallelism", op.Parallelism).With("maxParallelism", op.MaxParallelism)
	if b.c.shapes.opNames {
		if op.Name != "" {
			o.With("operatorName", op.Name)
		}
		if op.UID != "" {
			o.With("operatorUid", op.UID)
		}
	}
	if op.Coordinator != nil {
		if op.Coordinator.Tag != metadata.TagByteStream {
			return nil, fmt.Errorf("coordinator state with tag %d, want an inline byte stream", op.Coordinator.Tag)
		}
		h, _, err := b.streamHandle(op.Coordinator)
		if err != nil {
			return nil, fmt.Errorf("coordinator state: %w", err)
		}
		o.With("coordinatorState", h)
	}
	var entries []javaser.MapEntry
	for j := range op.Subtasks {
		st := &op.Subtasks[j]
		s, err := b.subtaskState(st)
		if err != nil {
			return nil, fmt.Errorf("subtask %d: %w", st.Index, err)
		}
		entries = append(entries, javaser.MapEntry{Key: b.c.jdk.Integer(st.Index), Value: s})
	}
	return o.With("operatorSubtaskStates", b.c.jdk.HashMap(entries...)), nil
}

// sizes are a state object's getStateSize() and getCheckpointedSize().
type sizes struct{ state, checkpointed int64 }

func (s *sizes) add(o sizes) { s.state += o.state; s.checkpointed += o.checkpointed }

func (b *builder) subtaskState(st *metadata.Subtask) (*javaser.Object, error) {
	if st.Finished {
		return b.finishedSubtask(), nil
	}
	if st.Legacy != nil || st.LegacyFlag != 0 {
		return nil, errors.New("legacy (Flink 1.1) operator state is not supported")
	}
	var total sizes
	collection := func(v javaser.Value, s sizes, err error) (*javaser.Object, error) {
		if err != nil || v == nil {
			return b.emptyCollection(), err
		}
		total.add(s)
		return b.singleton(v), nil
	}
	mo, err := collection(b.operatorHandle(st.ManagedOperator))
	if err != nil {
		return nil, fmt.Errorf("managed operator state: %w", err)
	}
	ro, err := collection(b.operatorHandle(st.RawOperator))
	if err != nil {
		return nil, fmt.Errorf("raw operator state: %w", err)
	}
	mk, err := collection(b.keyedHandle(st.ManagedKeyed))
	if err != nil {
		return nil, fmt.Errorf("managed keyed state: %w", err)
	}
	rk, err := collection(b.keyedHandle(st.RawKeyed))
	if err != nil {
		return nil, fmt.Errorf("raw keyed state: %w", err)
	}
	in, err := b.channels(st.InputChannels, true, &total)
	if err != nil {
		return nil, fmt.Errorf("input channel state: %w", err)
	}
	out, err := b.channels(st.OutputChannels, false, &total)
	if err != nil {
		return nil, fmt.Errorf("output channel state: %w", err)
	}
	o := javaser.NewObject(b.c.subtaskState())
	if b.c.shapes.upstream {
		o.With("upstreamOutputBufferState", b.emptyCollection())
	}
	return o.With("managedOperatorState", mo).With("rawOperatorState", ro).
		With("managedKeyedState", mk).With("rawKeyedState", rk).
		With("inputChannelState", in).With("resultSubpartitionState", out).
		With("inputRescalingDescriptor", b.noRescaling()).With("outputRescalingDescriptor", b.noRescaling()).
		With("stateSize", total.state).With("checkpointedSize", total.checkpointed), nil
}

// channels returns the StateObjectCollection of a subtask's input or
// output channel state handles (unaligned checkpoints), adding their sizes
// to total.
func (b *builder) channels(hs []metadata.ChannelHandle, input bool, total *sizes) (*javaser.Object, error) {
	if len(hs) == 0 {
		return b.emptyCollection(), nil
	}
	var items []javaser.Value
	merged := false
	for i := range hs {
		h := &hs[i]
		if h.Type == metadata.ChannelMergedInput || h.Type == metadata.ChannelMergedOutput {
			if h.Delegate == nil {
				return nil, errors.New("merged channel state handle without a stream")
			}
			d, _, err := b.streamHandle(h.Delegate)
			if err != nil {
				return nil, err
			}
			items = append(items, javaser.NewObject(b.c.mergedChannel(input)).
				With("subtaskIndex", h.SubtaskIndex).With("delegate", d).With("size", h.StateSize).
				With("serializedChannelOffsets", b.c.jdk.ByteArray(h.MergedOffsets)))
			total.add(sizes{h.StateSize, h.StateSize})
			merged = true
			continue
		}
		if h.Delegate == nil {
			return nil, errors.New("channel state handle without a stream")
		}
		d, _, err := b.streamHandle(h.Delegate)
		if err != nil {
			return nil, err
		}
		var offsets []javaser.Value
		for _, off := range h.Offsets {
			offsets = append(offsets, b.c.jdk.Long(off))
		}
		class, info := b.c.subpartitionHandle(), javaser.NewObject(b.c.subpartitionInfo()).With("partitionIdx", h.A).With("subPartitionIdx", h.B)
		if input {
			class, info = b.c.inputChannelHandle(), javaser.NewObject(b.c.inputChannelInfo()).With("gateIdx", h.A).With("inputChannelIdx", h.B)
		}
		list := b.c.jdk.ArrayList(offsets...)
		if !input {
			// A result subpartition's offsets are unmodifiable in the HA
			// files of 1.20.5 (its input channels' were not seen).
			list = javaser.NewObject(b.c.unmodifiableList()).With("c", list).With("list", list)
		}
		items = append(items, javaser.NewObject(class).
			With("subtaskIndex", h.SubtaskIndex).With("info", info).With("delegate", d).
			With("offsets", list).With("size", h.StateSize))
		total.add(sizes{h.StateSize, h.StateSize})
	}
	if merged {
		// As 2.3.0 writes it: a HashSet, of capacity 2 for its one handle.
		return javaser.NewObject(b.c.stateObjectCollection()).With("stateObjects", b.c.hashSet(2, items...)), nil
	}
	return javaser.NewObject(b.c.stateObjectCollection()).With("stateObjects", b.c.jdk.ArrayList(items...)), nil
}

// emptyCollection is StateObjectCollection.empty(), one shared instance.
func (b *builder) emptyCollection() *javaser.Object {
	if b.emptySOC == nil {
		b.emptySOC = javaser.NewObject(b.c.stateObjectCollection()).With("stateObjects", javaser.NewObject(b.c.emptyList()))
	}
	return b.emptySOC
}

// singleton is StateObjectCollection.singleton(v), as OperatorSubtaskState's
// builder makes it.
func (b *builder) singleton(v javaser.Value) *javaser.Object {
	set := javaser.NewObject(b.c.singletonSet()).With("element", v)
	return javaser.NewObject(b.c.stateObjectCollection()).With("stateObjects", set)
}

// noRescaling is InflightDataRescalingDescriptor.NO_RESCALE.
func (b *builder) noRescaling() *javaser.Object {
	if b.noRescale == nil {
		empty := javaser.NewArray(b.c.gateRescalingArray(), []javaser.Value{})
		b.noRescale = javaser.NewObject(b.c.noRescaling()).With("gateOrPartitionDescriptors", empty)
	}
	return b.noRescale
}

// finishedSubtask is FinishedOperatorSubtaskState.INSTANCE.
func (b *builder) finishedSubtask() *javaser.Object {
	if b.finished == nil {
		b.finished = javaser.NewObject(b.c.finishedSubtask()).
			With("managedOperatorState", b.emptyCollection()).With("rawOperatorState", b.emptyCollection()).
			With("managedKeyedState", b.emptyCollection()).With("rawKeyedState", b.emptyCollection()).
			With("inputChannelState", b.emptyCollection()).With("resultSubpartitionState", b.emptyCollection()).
			With("inputRescalingDescriptor", b.noRescaling()).With("outputRescalingDescriptor", b.noRescaling())
		if b.c.shapes.upstream {
			b.finished.With("upstreamOutputBufferState", b.emptyCollection())
		}
	}
	return b.finished
}

// streamHandle returns a StreamStateHandle and its state size; a nil
// handle gives nil.
func (b *builder) streamHandle(h *metadata.StreamHandle) (javaser.Value, int64, error) {
	if h == nil {
		return nil, 0, nil
	}
	switch h.Tag {
	case metadata.TagFileStream:
		o, err := b.fileHandle(h.Path, h.Size)
		return o, h.Size, err
	case metadata.TagRelativeStream:
		if b.exclusiveDir == "" {
			return nil, 0, errors.New("relative handle without ExternalPointer to resolve it against")
		}
		if h.Path == "" || strings.HasPrefix(h.Path, "/") {
			return nil, 0, fmt.Errorf("relative handle with path %q", h.Path)
		}
		path, err := b.path(b.exclusiveDir + "/" + h.Path)
		if err != nil {
			return nil, 0, err
		}
		o := javaser.NewObject(b.c.relativeFile()).
			With("filePath", path).With("stateSize", h.Size).With("relativePath", h.Path)
		return o, h.Size, nil
	case metadata.TagByteStream:
		if len(h.Data) != int(h.DataLen) {
			return nil, 0, fmt.Errorf("inline handle %q has %d of %d bytes (decode the metadata with KeepInline)", h.Name, len(h.Data), h.DataLen)
		}
		data := h.Data
		if data == nil {
			data = []byte{}
		}
		o := javaser.NewObject(b.c.byteStream()).With("handleName", h.Name).With("data", b.c.jdk.ByteArray(data))
		return o, int64(len(data)), nil
	case metadata.TagSegmentFile:
		scopes := []string{"EXCLUSIVE", "SHARED"}
		if h.Scope < 0 || int(h.Scope) >= len(scopes) {
			return nil, 0, fmt.Errorf("segment with scope %d", h.Scope)
		}
		path, err := b.path(h.Path)
		if err != nil {
			return nil, 0, err
		}
		o := javaser.NewObject(b.c.segmentFile()).
			With("filePath", path).With("startPos", h.Offset).With("stateSize", h.Size).
			With("scope", b.c.jdk.Enum(classScope, scopes[h.Scope])).
			With("logicalFileId", javaser.NewObject(b.c.logicalFileID()).With("keyString", h.LogicalFileID))
		return o, h.Size, nil
	case metadata.TagEmptySegmentFile:
		// EmptySegmentFileStateHandle.INSTANCE: a placeholder of no file.
		path, err := b.path("empty")
		if err != nil {
			return nil, 0, err
		}
		o := javaser.NewObject(b.c.emptySegment()).
			With("filePath", path).With("startPos", int64(0)).With("stateSize", int64(0)).
			With("scope", b.c.jdk.Enum(classScope, "EXCLUSIVE")).
			With("logicalFileId", javaser.NewObject(b.c.logicalFileID()).With("keyString", "DUMMY"))
		return o, 0, nil
	case metadata.TagKeyGroups:
		if h.KeyGroups == nil {
			return nil, 0, errors.New("key-groups handle without key groups")
		}
		return b.keyGroups(h.KeyGroups.Start, int32(len(h.KeyGroups.Offsets)), h.KeyGroups.Offsets, h.Delegate, "")
	}
	return nil, 0, fmt.Errorf("stream handle tag %d is not supported", h.Tag)
}

// keyGroups returns a KeyGroupsStateHandle.
func (b *builder) keyGroups(start, count int32, offsets []int64, delegate *metadata.StreamHandle, id string) (*javaser.Object, int64, error) {
	if int(count) != len(offsets) {
		return nil, 0, fmt.Errorf("%d offsets for %d key groups", len(offsets), count)
	}
	if delegate == nil {
		return nil, 0, errors.New("key-groups handle without a stream")
	}
	d, size, err := b.streamHandle(delegate)
	if err != nil {
		return nil, 0, err
	}
	r, err := b.keyGroupRange(start, count)
	if err != nil {
		return nil, 0, err
	}
	if id == "" {
		id = b.derivedID()
	}
	kgro := javaser.NewObject(b.c.keyGroupRangeOffsets()).
		With("keyGroupRange", r).With("offsets", must(b.c.jdk.Array(append([]int64{}, offsets...))))
	o := javaser.NewObject(b.c.keyGroupsHandle()).
		With("groupRangeOffsets", kgro).With("stateHandle", d).With("stateHandleId", b.stateHandleID(id))
	return o, size, nil
}

// keyGroupRange is KeyGroupRange.of(start, start+count-1): the shared
// EMPTY_KEY_GROUP_RANGE (0, -1) when count is 0.
func (b *builder) keyGroupRange(start, count int32) (*javaser.Object, error) {
	if count < 0 || start < 0 || int64(start)+int64(count)-1 > 1<<31-1 {
		return nil, fmt.Errorf("key-group range of %d groups from %d", count, start)
	}
	if count == 0 {
		if b.emptyRange == nil {
			b.emptyRange = javaser.NewObject(b.c.keyGroupRange()).With("startKeyGroup", 0).With("endKeyGroup", -1)
		}
		return b.emptyRange, nil
	}
	return javaser.NewObject(b.c.keyGroupRange()).
		With("startKeyGroup", start).With("endKeyGroup", start+count-1), nil
}

func (b *builder) stateHandleID(id string) *javaser.Object {
	return javaser.NewObject(b.c.stateHandleID()).With("keyString", id)
}

// keyedHandle returns a KeyedStateHandle with its sizes.
func (b *builder) keyedHandle(k *metadata.KeyedHandle) (javaser.Value, sizes, error) {
	if k == nil {
		return nil, sizes{}, nil
	}
	switch k.Tag {
	case metadata.TagKeyGroups, metadata.TagKeyGroupsV2:
		id := ""
		if k.Tag == metadata.TagKeyGroupsV2 {
			id = k.StateHandleID
		}
		o, size, err := b.keyGroups(k.KeyGroupStart, k.KeyGroupCount, k.Offsets, k.Delegate, id)
		return o, sizes{size, size}, err
	case metadata.TagSavepointKeyGroups:
		o, size, err := b.keyGroups(k.KeyGroupStart, k.KeyGroupCount, k.Offsets, k.Delegate, "")
		if o != nil {
			o.Class = b.c.keyGroupsSavepoint()
		}
		return o, sizes{size, size}, err
	case metadata.TagIncrementalKeyGroups, metadata.TagIncrementalKeyGroupsV2:
		return b.incremental(k)
	case metadata.TagChangelogV2, metadata.TagChangelog:
		return b.changelog(k)
	case metadata.TagChangelogFileIncrementV2, metadata.TagChangelogFileIncrement:
		return b.changelogStream(k)
	case metadata.TagChangelogByteIncrement:
		return b.changelogInMemory(k)
	}
	return nil, sizes{}, fmt.Errorf("keyed state handle tag %d is not supported", k.Tag)
}

// changelog returns a ChangelogStateBackendHandleImpl as the JobManager of
// 1.20.5 and 2.3.0 writes it: both lists unmodifiable, the materialized
// one a singleton list when it holds one handle.
func (b *builder) changelog(k *metadata.KeyedHandle) (javaser.Value, sizes, error) {
	r, err := b.keyGroupRange(k.KeyGroupStart, k.KeyGroupCount)
	if err != nil {
		return nil, sizes{}, err
	}
	var total int64
	list := func(handles []*metadata.KeyedHandle, singleton bool, what string) (*javaser.Object, error) {
		var items []javaser.Value
		for i, h := range handles {
			v, s, err := b.keyedHandle(h)
			if err != nil {
				return nil, fmt.Errorf("%s handle %d: %w", what, i, err)
			}
			total += s.state
			items = append(items, v)
		}
		inner := b.c.jdk.ArrayList(items...)
		if singleton && len(items) == 1 {
			inner = javaser.NewObject(b.c.singletonList()).With("element", items[0])
		}
		return javaser.NewObject(b.c.unmodifiableList()).With("c", inner).With("list", inner), nil
	}
	materialized, err := list(k.Materialized, true, "materialized")
	if err != nil {
		return nil, sizes{}, err
	}
	nonMaterialized, err := list(k.NonMaterialized, false, "non-materialized")
	if err != nil {
		return nil, sizes{}, err
	}
	var o *javaser.Object
	if k.Tag == metadata.TagChangelog {
		// Flink 1.15: no checkpoint id.
		o = javaser.NewObject(b.c.changelogBackend115())
	} else {
		o = javaser.NewObject(b.c.changelogBackend()).With("checkpointId", k.CheckpointID)
	}
	o.With("materializationID", k.MaterializationID).
		With("persistedSizeOfThisCheckpoint", k.CheckpointedSize).With("keyGroupRange", r).
		With("materialized", materialized).With("nonMaterialized", nonMaterialized).
		With("stateHandleID", b.stateHandleID(k.StateHandleID))
	return o, sizes{total, k.CheckpointedSize}, nil
}

// changelogStream returns a ChangelogStateHandleStreamImpl: its parts are
// (handle, offset) tuples into DSTL files.
func (b *builder) changelogStream(k *metadata.KeyedHandle) (javaser.Value, sizes, error) {
	r, err := b.keyGroupRange(k.KeyGroupStart, k.KeyGroupCount)
	if err != nil {
		return nil, sizes{}, err
	}
	var parts []javaser.Value
	for i, p := range k.Parts {
		h, _, err := b.streamHandle(p.Handle)
		if err != nil {
			return nil, sizes{}, fmt.Errorf("part %d: %w", i, err)
		}
		if h == nil {
			return nil, sizes{}, fmt.Errorf("part %d has no handle", i)
		}
		parts = append(parts, javaser.NewObject(b.c.tuple2()).With("f0", h).With("f1", b.c.jdk.Long(p.Offset)))
	}
	o := javaser.NewObject(b.c.changelogStream())
	if k.Tag == metadata.TagChangelogFileIncrement {
		// Flink 1.15: no storage identifier.
		o = javaser.NewObject(b.c.changelogStream115())
	}
	o.With("incrementalSize", k.CheckpointedSize).With("size", k.StateSize).
		With("handlesAndOffsets", b.c.jdk.ArrayList(parts...)).With("keyGroupRange", r).
		With("stateHandleID", b.stateHandleID(k.StateHandleID))
	if k.Tag != metadata.TagChangelogFileIncrement {
		o.With("storageIdentifier", k.StorageIdentifier)
	}
	return o, sizes{k.StateSize, k.CheckpointedSize}, nil
}

// changelogInMemory returns an InMemoryChangelogStateHandle, the changes
// of the in-memory changelog storage (state.changelog.storage: memory)
// held inline, as 1.20.5 and 2.3.0 write it: an ArrayList of StateChange
// and the sequence numbers as GenericSequenceNumber. Its state size is
// the changes' bytes (InMemoryChangelogStateHandle.getStateSize).
func (b *builder) changelogInMemory(k *metadata.KeyedHandle) (javaser.Value, sizes, error) {
	r, err := b.keyGroupRange(k.KeyGroupStart, k.KeyGroupCount)
	if err != nil {
		return nil, sizes{}, err
	}
	var total int64
	changes := make([]javaser.Value, 0, len(k.Changes))
	for i, c := range k.Changes {
		if len(c.Data) != int(c.DataLen) {
			return nil, sizes{}, fmt.Errorf("change %d has %d of %d bytes (decode the metadata with KeepInline)", i, len(c.Data), c.DataLen)
		}
		data := c.Data
		if data == nil {
			data = []byte{}
		}
		total += int64(len(data))
		changes = append(changes, javaser.NewObject(b.c.stateChange()).With("keyGroup", c.KeyGroup).With("change", b.c.jdk.ByteArray(data)))
	}
	seq := func(n int64) *javaser.Object { return javaser.NewObject(b.c.sequenceNumber()).With("number", n) }
	o := javaser.NewObject(b.c.changelogInMemory()).
		With("changes", b.c.jdk.ArrayList(changes...)).With("from", seq(k.From)).With("keyGroupRange", r).
		With("stateHandleID", b.stateHandleID(k.StateHandleID)).With("to", seq(k.To))
	return o, sizes{total, total}, nil
}

// incremental returns an IncrementalRemoteKeyedStateHandle.
func (b *builder) incremental(k *metadata.KeyedHandle) (javaser.Value, sizes, error) {
	var total int64
	meta, size, err := b.streamHandle(k.Meta)
	if err != nil {
		return nil, sizes{}, fmt.Errorf("meta state: %w", err)
	}
	total += size
	list := func(named []metadata.NamedHandle, what string) (*javaser.Object, error) {
		var items []javaser.Value
		var entries []javaser.MapEntry
		for _, nh := range named {
			if nh.Handle == nil {
				return nil, fmt.Errorf("%s state %q has no handle", what, nh.LocalName)
			}
			h, size, err := b.streamHandle(nh.Handle)
			if err != nil {
				return nil, fmt.Errorf("%s state %q: %w", what, nh.LocalName, err)
			}
			total += size
			if b.c.shapes.mapIncremental {
				entries = append(entries, javaser.MapEntry{Key: b.stateHandleID(nh.LocalName), Value: h})
				continue
			}
			items = append(items, javaser.NewObject(b.c.handleAndLocalPath()).With("handle", h).With("localPath", nh.LocalName))
		}
		if b.c.shapes.mapIncremental { // before 1.16: keyed by the local name
			return b.c.jdk.HashMap(entries...), nil
		}
		return b.c.jdk.ArrayList(items...), nil
	}
	shared, err := list(k.Shared, "shared")
	if err != nil {
		return nil, sizes{}, err
	}
	private, err := list(k.Private, "private")
	if err != nil {
		return nil, sizes{}, err
	}
	r, err := b.keyGroupRange(k.KeyGroupStart, k.KeyGroupCount)
	if err != nil {
		return nil, sizes{}, err
	}
	msb, lsb, err := backendUUID(k.BackendID)
	if err != nil {
		return nil, sizes{}, err
	}
	id, persisted := b.derivedID(), int64(-1)
	if k.Tag == metadata.TagIncrementalKeyGroupsV2 {
		id, persisted = k.StateHandleID, k.CheckpointedSize
	}
	if persisted == -1 { // UNKNOWN_CHECKPOINTED_SIZE: Flink takes getStateSize()
		persisted = total
	}
	o := javaser.NewObject(b.c.incrementalRemote()).
		With("checkpointId", k.CheckpointID).With("backendIdentifier", b.c.jdk.UUID(msb, lsb)).
		With("keyGroupRange", r).With("metaStateHandle", meta).
		With("sharedState", shared).With("privateState", private).
		With("stateHandleId", b.stateHandleID(id)).With("persistedSizeOfThisCheckpoint", persisted)
	return o, sizes{total, persisted}, nil
}

// backendUUID is how Flink turns the stored backend id into a UUID:
// UUID.fromString, or for ids from before FLINK-6964 a name-based UUID of
// the id's UTF-8 bytes.
func backendUUID(s string) (msb, lsb int64, err error) {
	if msb, lsb, err := parseUUID(s); err == nil {
		return msb, lsb, nil
	}
	if msb, lsb, ok := parseLenientUUID(s); ok {
		return msb, lsb, nil
	}
	return parseUUID(nameUUID(s))
}

// parseLenientUUID accepts what UUID.fromString accepts besides the
// canonical form: five dash-separated groups of hex digits.
func parseLenientUUID(s string) (msb, lsb int64, ok bool) {
	parts := strings.Split(s, "-")
	if len(s) > 36 || len(parts) != 5 {
		return 0, 0, false
	}
	var v [5]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil || p == "" || p[0] == '+' {
			return 0, 0, false
		}
		v[i] = n
	}
	msb = int64((v[0]&0xffffffff)<<32 | (v[1]&0xffff)<<16 | v[2]&0xffff)
	lsb = int64((v[3]&0xffff)<<48 | v[4]&0xffffffffffff)
	return msb, lsb, true
}

// operatorHandle returns an OperatorStateHandle.
func (b *builder) operatorHandle(h *metadata.OperatorHandle) (javaser.Value, sizes, error) {
	if h == nil {
		return nil, sizes{}, nil
	}
	if h.Tag != metadata.TagPartitionableOperator && h.Tag != metadata.TagFileMergingOperator {
		return nil, sizes{}, fmt.Errorf("operator state handle tag %d is not supported", h.Tag)
	}
	modes := []string{"SPLIT_DISTRIBUTE", "UNION", "BROADCAST"}
	var entries []javaser.MapEntry
	for _, s := range h.States {
		if int(s.Mode) >= len(modes) {
			return nil, sizes{}, fmt.Errorf("state %q has distribution mode %d", s.Name, s.Mode)
		}
		info := javaser.NewObject(b.c.stateMetaInfo()).
			With("offsets", must(b.c.jdk.Array(append([]int64{}, s.Offsets...)))).
			With("distributionMode", b.c.jdk.Enum(classOperatorStateMode, modes[s.Mode]))
		entries = append(entries, javaser.MapEntry{Key: javaser.NewString(s.Name), Value: info})
	}
	if h.Delegate == nil {
		return nil, sizes{}, errors.New("operator state handle without a stream")
	}
	d, size, err := b.streamHandle(h.Delegate)
	if err != nil {
		return nil, sizes{}, err
	}
	if h.Tag == metadata.TagFileMergingOperator {
		return b.fileMergingOperator(h, entries, d, size)
	}
	o := javaser.NewObject(b.c.operatorStreamHandle()).
		With("stateNameToPartitionOffsets", b.c.jdk.HashMap(entries...)).With("delegateStateHandle", d)
	return o, sizes{size, size}, nil
}

// fileMergingOperator returns a FileMergingOperatorStreamStateHandle, or
// the empty one (with Collections.emptyMap()) that a subtask without
// operator state reports, with its two managed directories.
func (b *builder) fileMergingOperator(h *metadata.OperatorHandle, entries []javaser.MapEntry, d javaser.Value, size int64) (javaser.Value, sizes, error) {
	dir := func(p string) (*javaser.Object, error) {
		path, err := b.path(p)
		if err != nil {
			return nil, err
		}
		return javaser.NewObject(b.c.directoryHandle()).With("directory", path), nil
	}
	taskOwned, err := dir(h.TaskOwnedDir)
	if err != nil {
		return nil, sizes{}, fmt.Errorf("task-owned directory: %w", err)
	}
	shared, err := dir(h.SharedDir)
	if err != nil {
		return nil, sizes{}, fmt.Errorf("shared directory: %w", err)
	}
	o := javaser.NewObject(b.c.fileMergingOperator())
	offsets := javaser.Value(b.c.jdk.HashMap(entries...))
	if h.EmptyFlag != 0 {
		o = javaser.NewObject(b.c.emptyFileMergingOperator())
		offsets = javaser.NewObject(b.c.emptyMap())
	}
	o.With("stateNameToPartitionOffsets", offsets).With("delegateStateHandle", d).
		With("sharedDirHandle", shared).With("taskOwnedDirHandle", taskOwned)
	return o, sizes{size, size}, nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
