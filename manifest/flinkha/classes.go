package flinkha

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// Flink classes as Flink 1.20 declares them (doc.go lists the sources).
// Each serialVersionUID is the class's own constant, except where noted:
// those classes declare none, and the value is the JVM's default computed
// from the declaration.
const (
	classCompletedCheckpoint = "org.apache.flink.runtime.checkpoint.CompletedCheckpoint"
	suidCompletedCheckpoint  = -8360248179615702014

	classRetrievable = "org.apache.flink.runtime.state.RetrievableStreamStateHandle"
	suidRetrievable  = 314567453677355

	classAbstractID = "org.apache.flink.util.AbstractID"
	classJobID      = "org.apache.flink.api.common.JobID"
	classOperatorID = "org.apache.flink.runtime.jobgraph.OperatorID"
	classPath       = "org.apache.flink.core.fs.Path"

	classFileStateHandle = "org.apache.flink.runtime.state.filesystem.FileStateHandle"
	suidFileStateHandle  = 350284443258002355
	classRelativeFile    = "org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle"
	classByteStream      = "org.apache.flink.runtime.state.memory.ByteStreamStateHandle"
	suidByteStream       = -5280226231202517594
	classSegmentFile     = "org.apache.flink.runtime.state.filemerging.SegmentFileStateHandle"
	classEmptySegment    = "org.apache.flink.runtime.state.filemerging.EmptySegmentFileStateHandle"
	classDirectoryHandle = "org.apache.flink.runtime.state.filemerging.DirectoryStreamStateHandle"
	classStringBasedID   = "org.apache.flink.util.StringBasedID"
	classLogicalFileID   = "org.apache.flink.runtime.checkpoint.filemerging.LogicalFile$LogicalFileId"
	suidLogicalFileID    = 3549974743121937433 // computed: no serialVersionUID declared
	classScope           = "org.apache.flink.runtime.state.CheckpointedStateScope"
	classStateHandleID   = "org.apache.flink.runtime.state.StateHandleID"

	classKeyGroupRange        = "org.apache.flink.runtime.state.KeyGroupRange"
	suidKeyGroupRange         = 4869121477592070607
	classKeyGroupRangeOffsets = "org.apache.flink.runtime.state.KeyGroupRangeOffsets"
	suidKeyGroupRangeOffsets  = 6595415219136429696
	classKeyGroupsHandle      = "org.apache.flink.runtime.state.KeyGroupsStateHandle"
	suidKeyGroupsHandle       = -8070326169926626355
	classKeyGroupsSavepoint   = "org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle"
	classAbstractChannel      = "org.apache.flink.runtime.state.AbstractChannelStateHandle"
	classInputChannelHandle   = "org.apache.flink.runtime.state.InputChannelStateHandle"
	classSubpartitionHandle   = "org.apache.flink.runtime.state.ResultSubpartitionStateHandle"
	classInputChannelInfo     = "org.apache.flink.runtime.checkpoint.channel.InputChannelInfo"
	classSubpartitionInfo     = "org.apache.flink.runtime.checkpoint.channel.ResultSubpartitionInfo"
	classAbstractIncremental  = "org.apache.flink.runtime.state.AbstractIncrementalStateHandle"
	classIncrementalRemote    = "org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle"
	suidIncrementalRemote     = -8328808513197388231
	classHandleAndLocalPath   = "org.apache.flink.runtime.state.IncrementalKeyedStateHandle$HandleAndLocalPath"
	suidHandleAndLocalPath    = 7711754687567545052
	classOperatorStreamHandle = "org.apache.flink.runtime.state.OperatorStreamStateHandle"
	suidOperatorStreamHandle  = 35876522969227335
	classStateMetaInfo        = "org.apache.flink.runtime.state.OperatorStateHandle$StateMetaInfo"
	suidStateMetaInfo         = 3593817615858941166
	classOperatorStateMode    = "org.apache.flink.runtime.state.OperatorStateHandle$Mode"

	classStateObjectCollection = "org.apache.flink.runtime.checkpoint.StateObjectCollection"
	classEmptyList             = "java.util.Collections$EmptyList"
	suidEmptyList              = 8842843931221139166
	classSingletonSet          = "java.util.Collections$SingletonSet"
	suidSingletonSet           = 3193687207550431679
	classRescaling             = "org.apache.flink.runtime.checkpoint.InflightDataRescalingDescriptor"
	suidRescaling              = -3396674344669796295
	classNoRescaling           = "org.apache.flink.runtime.checkpoint.InflightDataRescalingDescriptor$NoRescalingDescriptor"
	classGateRescalingArray    = "[Lorg.apache.flink.runtime.checkpoint.InflightDataRescalingDescriptor$InflightDataGateOrPartitionRescalingDescriptor;"
	suidGateRescalingArray     = -3303479746745588746 // computed, as for every array class
	classSubtaskState          = "org.apache.flink.runtime.checkpoint.OperatorSubtaskState"
	suidSubtaskState           = -2394696997971923995
	classFinishedSubtask       = "org.apache.flink.runtime.checkpoint.FinishedOperatorSubtaskState"
	classOperatorState         = "org.apache.flink.runtime.checkpoint.OperatorState"
	suidOperatorState          = -4845578005863201810
	classFullyFinished         = "org.apache.flink.runtime.checkpoint.FullyFinishedOperatorState"
	classMasterState           = "org.apache.flink.runtime.checkpoint.MasterState"
	classStorageLocation       = "org.apache.flink.runtime.state.filesystem.FsCompletedCheckpointStorageLocation"

	classCheckpointProperties = "org.apache.flink.runtime.checkpoint.CheckpointProperties"
	suidCheckpointProperties  = 2                    // 1.5 and later
	suidCheckpointProps14     = -8835900655844879469 // 1.3 and 1.4
	classCheckpointType       = "org.apache.flink.runtime.checkpoint.CheckpointType"
	suidCheckpointType115     = -2963844630364414662 // 1.20's final class; computed: no serialVersionUID declared
	classSharingStrategy      = "org.apache.flink.runtime.checkpoint.SnapshotType$SharingFilesStrategy"
)

// Type signatures of object fields.
const (
	sigString     = "Ljava/lang/String;"
	sigPath       = "Lorg/apache/flink/core/fs/Path;"
	sigStream     = "Lorg/apache/flink/runtime/state/StreamStateHandle;"
	sigRange      = "Lorg/apache/flink/runtime/state/KeyGroupRange;"
	sigHandleID   = "Lorg/apache/flink/runtime/state/StateHandleID;"
	sigCollection = "Ljava/util/Collection;"
	sigList       = "Ljava/util/List;"
	sigMap        = "Ljava/util/Map;"
	sigSOC        = "Lorg/apache/flink/runtime/checkpoint/StateObjectCollection;"
	sigRescaling  = "Lorg/apache/flink/runtime/checkpoint/InflightDataRescalingDescriptor;"
	sigProps      = "Lorg/apache/flink/runtime/checkpoint/CheckpointProperties;"
)

// classes makes each class descriptor once per stream, as a JVM has one
// ObjectStreamClass per class: ObjectOutputStream writes it in full the
// first time and refers back to it afterwards.
type classes struct {
	jdk   javaser.JDK
	descs map[string]*javaser.ClassDesc
	// shapes are the fields that differ between the releases of
	// FieldSet115 (shapesOf).
	shapes shapes
}

// shapes are the fields FieldSet115's releases add, as each release's
// flink-dist declares them (javap of 1.15.4 to 2.3.0; the corpus's real
// HA files hold them): restoredProps is CompletedCheckpoint's (1.16 on),
// opNames OperatorState's operatorName and operatorUid (2.0 on), upstream
// OperatorSubtaskState's upstreamOutputBufferState (2.3 on).
// IncrementalRemoteKeyedStateHandle declares all its fields itself before
// 1.19 (flatIncremental; 1.19 moved them to AbstractIncrementalStateHandle),
// and before 1.16 keeps its shared and private state as
// Map<StateHandleID, StreamStateHandle> (mapIncremental) instead of
// List<HandleAndLocalPath>.
type shapes struct {
	restoredProps, opNames, upstream bool
	flatIncremental, mapIncremental  bool
	// enumCheckpointType: CheckpointProperties as 1.5 to 1.14 declare
	// them, checkpointType an enum and no unclaimed, which real 1.14.6
	// writes beside 1.15's CompletedCheckpoint fields.
	enumCheckpointType bool
}

// shapesOf returns the shapes of release ("major.minor", a patch level
// ignored), or when it is empty of the newest release that writes
// _metadata of version (MetadataV3Serializer up to 1.15, V4 in 1.16-1.20,
// V5 in 2.0, V6 from 2.1; 0, no metadata, means 1.20).
func shapesOf(release string, version int32) (shapes, error) {
	r := 0
	if release != "" {
		var major, minor int
		el := strings.Split(release, ".")
		if len(el) < 2 || len(el) > 3 {
			return shapes{}, fmt.Errorf("flinkha: release %q is not major.minor", release)
		}
		if _, err := fmt.Sscanf(el[0]+" "+el[1], "%d %d", &major, &minor); err != nil || major < 1 || minor < 0 || minor > 99 {
			return shapes{}, fmt.Errorf("flinkha: release %q is not major.minor", release)
		}
		r = major*100 + minor
	} else {
		switch {
		case version == 0 || version == 4:
			r = 120
		case version <= 3:
			r = 115
		case version == 5:
			r = 200
		default:
			r = 203
		}
	}
	return shapes{restoredProps: r >= 116, opNames: r >= 200, upstream: r >= 203,
		flatIncremental: r < 119, mapIncremental: r < 116, enumCheckpointType: r < 115}, nil
}

func (c *classes) get(name string, build func() *javaser.ClassDesc) *javaser.ClassDesc {
	if d, ok := c.descs[name]; ok {
		return d
	}
	if c.descs == nil {
		c.descs = make(map[string]*javaser.ClassDesc)
	}
	d := build()
	c.descs[name] = d
	return d
}

// plain returns a Serializable class without writeObject.
func (c *classes) plain(name string, suid int64, super func() *javaser.ClassDesc, fields ...javaser.FieldDesc) *javaser.ClassDesc {
	return c.get(name, func() *javaser.ClassDesc {
		d := javaser.NewClassDesc(name, suid, javaser.SCSerializable, fields...)
		if super != nil {
			d.Super = super()
		}
		return d
	})
}

var (
	fLong = func(name string) javaser.FieldDesc { return javaser.PrimField('J', name) }
	fInt  = func(name string) javaser.FieldDesc { return javaser.PrimField('I', name) }
	fBool = func(name string) javaser.FieldDesc { return javaser.PrimField('Z', name) }
	obj   = javaser.ObjField
)

func (c *classes) abstractID() *javaser.ClassDesc {
	return c.plain(classAbstractID, 1, nil, fLong("lowerPart"), fLong("upperPart"))
}

func (c *classes) jobID() *javaser.ClassDesc { return c.plain(classJobID, 1, c.abstractID) }

func (c *classes) operatorID() *javaser.ClassDesc { return c.plain(classOperatorID, 1, c.abstractID) }

func (c *classes) path() *javaser.ClassDesc {
	return c.plain(classPath, 1, nil, obj("uri", "Ljava/net/URI;"))
}

func (c *classes) retrievable() *javaser.ClassDesc {
	return c.plain(classRetrievable, suidRetrievable, nil, obj("wrappedStreamStateHandle", sigStream))
}

func (c *classes) fileStateHandle() *javaser.ClassDesc {
	return c.plain(classFileStateHandle, suidFileStateHandle, nil, fLong("stateSize"), obj("filePath", sigPath))
}

func (c *classes) relativeFile() *javaser.ClassDesc {
	return c.plain(classRelativeFile, 1, c.fileStateHandle, obj("relativePath", sigString))
}

func (c *classes) byteStream() *javaser.ClassDesc {
	return c.plain(classByteStream, suidByteStream, nil, obj("data", "[B"), obj("handleName", sigString))
}

func (c *classes) stringBasedID() *javaser.ClassDesc {
	return c.plain(classStringBasedID, 1, nil, obj("keyString", sigString))
}

func (c *classes) logicalFileID() *javaser.ClassDesc {
	return c.plain(classLogicalFileID, suidLogicalFileID, c.stringBasedID)
}

func (c *classes) stateHandleID() *javaser.ClassDesc {
	return c.plain(classStateHandleID, 1, c.stringBasedID)
}

func (c *classes) segmentFile() *javaser.ClassDesc {
	return c.plain(classSegmentFile, 1, nil, fLong("startPos"), fLong("stateSize"), obj("filePath", sigPath),
		obj("logicalFileId", "Lorg/apache/flink/runtime/checkpoint/filemerging/LogicalFile$LogicalFileId;"),
		obj("scope", "Lorg/apache/flink/runtime/state/CheckpointedStateScope;"))
}

func (c *classes) keyGroupRange() *javaser.ClassDesc {
	return c.plain(classKeyGroupRange, suidKeyGroupRange, nil, fInt("endKeyGroup"), fInt("startKeyGroup"))
}

func (c *classes) keyGroupRangeOffsets() *javaser.ClassDesc {
	return c.plain(classKeyGroupRangeOffsets, suidKeyGroupRangeOffsets, nil, obj("keyGroupRange", sigRange), obj("offsets", "[J"))
}

func (c *classes) keyGroupsHandle() *javaser.ClassDesc {
	return c.plain(classKeyGroupsHandle, suidKeyGroupsHandle, nil,
		obj("groupRangeOffsets", "Lorg/apache/flink/runtime/state/KeyGroupRangeOffsets;"),
		obj("stateHandle", sigStream), obj("stateHandleId", sigHandleID))
}

func (c *classes) keyGroupsSavepoint() *javaser.ClassDesc {
	return c.plain(classKeyGroupsSavepoint, 1, c.keyGroupsHandle)
}

func (c *classes) abstractChannel() *javaser.ClassDesc {
	return c.plain(classAbstractChannel, 1, nil, fInt("subtaskIndex"), fLong("size"),
		obj("delegate", sigStream), obj("info", "Ljava/lang/Object;"), obj("offsets", sigList))
}

func (c *classes) inputChannelHandle() *javaser.ClassDesc {
	return c.plain(classInputChannelHandle, 1, c.abstractChannel)
}

func (c *classes) subpartitionHandle() *javaser.ClassDesc {
	return c.plain(classSubpartitionHandle, 1, c.abstractChannel)
}

func (c *classes) inputChannelInfo() *javaser.ClassDesc {
	return c.plain(classInputChannelInfo, 1, nil, fInt("gateIdx"), fInt("inputChannelIdx"))
}

func (c *classes) subpartitionInfo() *javaser.ClassDesc {
	return c.plain(classSubpartitionInfo, 1, nil, fInt("partitionIdx"), fInt("subPartitionIdx"))
}

func (c *classes) abstractIncremental() *javaser.ClassDesc {
	return c.plain(classAbstractIncremental, 1, nil, fLong("checkpointId"), obj("backendIdentifier", "Ljava/util/UUID;"),
		obj("keyGroupRange", sigRange), obj("metaStateHandle", sigStream), obj("sharedState", sigList),
		obj("stateHandleId", sigHandleID))
}

func (c *classes) incrementalRemote() *javaser.ClassDesc {
	if c.shapes.flatIncremental {
		states := sigList
		if c.shapes.mapIncremental {
			states = sigMap
		}
		return c.plain(classIncrementalRemote, suidIncrementalRemote, nil, fLong("checkpointId"),
			fLong("persistedSizeOfThisCheckpoint"), obj("backendIdentifier", "Ljava/util/UUID;"),
			obj("keyGroupRange", sigRange), obj("metaStateHandle", sigStream), obj("privateState", states),
			obj("sharedState", states), obj("stateHandleId", sigHandleID))
	}
	return c.plain(classIncrementalRemote, suidIncrementalRemote, c.abstractIncremental,
		fLong("persistedSizeOfThisCheckpoint"), obj("privateState", sigList))
}

func (c *classes) handleAndLocalPath() *javaser.ClassDesc {
	return c.plain(classHandleAndLocalPath, suidHandleAndLocalPath, nil, obj("handle", sigStream), obj("localPath", sigString))
}

func (c *classes) operatorStreamHandle() *javaser.ClassDesc {
	return c.plain(classOperatorStreamHandle, suidOperatorStreamHandle, nil,
		obj("delegateStateHandle", sigStream), obj("stateNameToPartitionOffsets", sigMap))
}

func (c *classes) stateMetaInfo() *javaser.ClassDesc {
	return c.plain(classStateMetaInfo, suidStateMetaInfo, nil,
		obj("distributionMode", "Lorg/apache/flink/runtime/state/OperatorStateHandle$Mode;"), obj("offsets", "[J"))
}

func (c *classes) stateObjectCollection() *javaser.ClassDesc {
	return c.plain(classStateObjectCollection, 1, nil, obj("stateObjects", sigCollection))
}

func (c *classes) emptyList() *javaser.ClassDesc { return c.plain(classEmptyList, suidEmptyList, nil) }

func (c *classes) singletonSet() *javaser.ClassDesc {
	return c.plain(classSingletonSet, suidSingletonSet, nil, obj("element", "Ljava/lang/Object;"))
}

func (c *classes) rescaling() *javaser.ClassDesc {
	return c.plain(classRescaling, suidRescaling, nil, obj("gateOrPartitionDescriptors", "["+"Lorg/apache/flink/runtime/checkpoint/InflightDataRescalingDescriptor$InflightDataGateOrPartitionRescalingDescriptor;"))
}

func (c *classes) noRescaling() *javaser.ClassDesc { return c.plain(classNoRescaling, 1, c.rescaling) }

func (c *classes) gateRescalingArray() *javaser.ClassDesc {
	return c.plain(classGateRescalingArray, suidGateRescalingArray, nil)
}

func (c *classes) subtaskState() *javaser.ClassDesc {
	fields := []javaser.FieldDesc{fLong("checkpointedSize"), fLong("stateSize"),
		obj("inputChannelState", sigSOC), obj("inputRescalingDescriptor", sigRescaling),
		obj("managedKeyedState", sigSOC), obj("managedOperatorState", sigSOC),
		obj("outputRescalingDescriptor", sigRescaling), obj("rawKeyedState", sigSOC),
		obj("rawOperatorState", sigSOC), obj("resultSubpartitionState", sigSOC)}
	if c.shapes.upstream {
		fields = append(fields, obj("upstreamOutputBufferState", sigSOC))
	}
	return c.plain(classSubtaskState, suidSubtaskState, nil, fields...)
}

func (c *classes) finishedSubtask() *javaser.ClassDesc {
	return c.plain(classFinishedSubtask, 1, c.subtaskState)
}

func (c *classes) operatorState() *javaser.ClassDesc {
	coordinator := obj("coordinatorState", "Lorg/apache/flink/runtime/state/memory/ByteStreamStateHandle;")
	id := obj("operatorID", "Lorg/apache/flink/runtime/jobgraph/OperatorID;")
	if c.shapes.opNames {
		return c.plain(classOperatorState, suidOperatorState, nil, fInt("maxParallelism"), fInt("parallelism"),
			coordinator, id, obj("operatorName", sigString), obj("operatorSubtaskStates", sigMap), obj("operatorUid", sigString))
	}
	return c.plain(classOperatorState, suidOperatorState, nil, fInt("maxParallelism"), fInt("parallelism"),
		coordinator, id, obj("operatorSubtaskStates", sigMap))
}

func (c *classes) fullyFinished() *javaser.ClassDesc {
	return c.plain(classFullyFinished, 1, c.operatorState)
}

func (c *classes) masterState() *javaser.ClassDesc {
	return c.plain(classMasterState, 1, nil, fInt("version"), obj("bytes", "[B"), obj("name", sigString))
}

func (c *classes) storageLocation() *javaser.ClassDesc {
	return c.plain(classStorageLocation, 1, nil, obj("exclusiveCheckpointDir", sigPath), obj("externalPointer", sigString),
		obj("metadataFileHandle", "Lorg/apache/flink/runtime/state/filesystem/FileStateHandle;"))
}

// checkpointProperties returns CheckpointProperties of a field set.
func (c *classes) checkpointProperties(fs FieldSet) *javaser.ClassDesc {
	discard := []javaser.FieldDesc{fBool("discardCancelled"), fBool("discardFailed"), fBool("discardFinished"),
		fBool("discardSubsumed"), fBool("discardSuspended"), fBool("forced")}
	switch {
	case fs == FieldSet14:
		return c.plain(classCheckpointProperties, suidCheckpointProps14, nil, append(discard, fBool("externalize"))...)
	case fs == FieldSet15 || c.shapes.enumCheckpointType:
		return c.plain(classCheckpointProperties, suidCheckpointProperties, nil,
			append(discard, obj("checkpointType", "Lorg/apache/flink/runtime/checkpoint/CheckpointType;"))...)
	}
	return c.plain(classCheckpointProperties, suidCheckpointProperties, nil,
		append(discard, fBool("unclaimed"), obj("checkpointType", "Lorg/apache/flink/runtime/checkpoint/SnapshotType;"))...)
}

// checkpointType115 is 1.20's CheckpointType class (an enum before 1.15).
func (c *classes) checkpointType115() *javaser.ClassDesc {
	return c.plain(classCheckpointType, suidCheckpointType115, nil, obj("name", sigString),
		obj("sharingFilesStrategy", "Lorg/apache/flink/runtime/checkpoint/SnapshotType$SharingFilesStrategy;"))
}

// completedCheckpoint returns CompletedCheckpoint of a field set.
func (c *classes) completedCheckpoint(fs FieldSet) *javaser.ClassDesc {
	fields := []javaser.FieldDesc{fLong("checkpointID"), fLong("timestamp"),
		obj("externalPointer", sigString), obj("job", "Lorg/apache/flink/api/common/JobID;"),
		obj("masterHookStates", sigCollection), obj("operatorStates", sigMap), obj("props", sigProps)}
	switch fs {
	case FieldSet14:
		fields = append(fields, fLong("duration"), obj("externalizedMetadata", sigStream))
	case FieldSet15:
		fields = append(fields, fLong("duration"), obj("metadataHandle", sigStream),
			obj("storageLocation", "Lorg/apache/flink/runtime/state/CompletedCheckpointStorageLocation;"))
	default:
		fields = append(fields, fLong("completionTimestamp"), obj("metadataHandle", sigStream),
			obj("storageLocation", "Lorg/apache/flink/runtime/state/CompletedCheckpointStorageLocation;"))
		if c.shapes.restoredProps {
			fields = append(fields, obj("restoredProps", sigProps))
		}
	}
	return c.plain(classCompletedCheckpoint, suidCompletedCheckpoint, nil, fields...)
}

// Changelog state backend handles (1.16+ with checkpointId, as 1.20.5 and
// 2.3.0 write them), and the JDK and Flink containers they come in.
const (
	classChangelogBackend = "org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle$ChangelogStateBackendHandleImpl"
	classChangelogStream  = "org.apache.flink.runtime.state.changelog.ChangelogStateHandleStreamImpl"
	suidChangelogStream   = -8070326169926626355
	classTuple            = "org.apache.flink.api.java.tuple.Tuple"
	classTuple2           = "org.apache.flink.api.java.tuple.Tuple2"
	classUnmodifiableColl = "java.util.Collections$UnmodifiableCollection"
	suidUnmodifiableColl  = 1820017752578914078
	classUnmodifiableList = "java.util.Collections$UnmodifiableList"
	suidUnmodifiableList  = -283967356065247728
	classSingletonList    = "java.util.Collections$SingletonList"
	suidSingletonList     = 3093736618740652951
	sigObject             = "Ljava/lang/Object;"
)

func (c *classes) changelogBackend() *javaser.ClassDesc {
	return c.plain(classChangelogBackend, 1, nil, fLong("checkpointId"), fLong("materializationID"),
		fLong("persistedSizeOfThisCheckpoint"), obj("keyGroupRange", sigRange), obj("materialized", sigList),
		obj("nonMaterialized", sigList), obj("stateHandleID", sigHandleID))
}

// changelogBackend115 and changelogStream115 are the classes as Flink
// 1.15 declares them (real 1.15.4 HA files), before 1.16 added
// checkpointId and storageIdentifier; a stream never holds both forms.
func (c *classes) changelogBackend115() *javaser.ClassDesc {
	return c.get(classChangelogBackend+" 1.15", func() *javaser.ClassDesc {
		return javaser.NewClassDesc(classChangelogBackend, 1, javaser.SCSerializable, fLong("materializationID"),
			fLong("persistedSizeOfThisCheckpoint"), obj("keyGroupRange", sigRange), obj("materialized", sigList),
			obj("nonMaterialized", sigList), obj("stateHandleID", sigHandleID))
	})
}

func (c *classes) changelogStream115() *javaser.ClassDesc {
	return c.get(classChangelogStream+" 1.15", func() *javaser.ClassDesc {
		return javaser.NewClassDesc(classChangelogStream, suidChangelogStream, javaser.SCSerializable, fLong("incrementalSize"), fLong("size"),
			obj("handlesAndOffsets", sigList), obj("keyGroupRange", sigRange), obj("stateHandleID", sigHandleID))
	})
}

func (c *classes) changelogStream() *javaser.ClassDesc {
	return c.plain(classChangelogStream, suidChangelogStream, nil, fLong("incrementalSize"), fLong("size"),
		obj("handlesAndOffsets", sigList), obj("keyGroupRange", sigRange), obj("stateHandleID", sigHandleID),
		obj("storageIdentifier", sigString))
}

// The in-memory changelog handle (tag 9) and what it holds, as 1.20.5
// and 2.3.0 declare them.
const (
	classChangelogInMemory = "org.apache.flink.runtime.state.changelog.inmemory.InMemoryChangelogStateHandle"
	classStateChange       = "org.apache.flink.runtime.state.changelog.StateChange"
	classSequenceNumber    = "org.apache.flink.runtime.state.changelog.SequenceNumber$GenericSequenceNumber"
	sigSequenceNumber      = "Lorg/apache/flink/runtime/state/changelog/SequenceNumber;"
)

func (c *classes) changelogInMemory() *javaser.ClassDesc {
	return c.plain(classChangelogInMemory, 1, nil, obj("changes", sigList), obj("from", sigSequenceNumber),
		obj("keyGroupRange", sigRange), obj("stateHandleID", sigHandleID), obj("to", sigSequenceNumber))
}

func (c *classes) stateChange() *javaser.ClassDesc {
	return c.plain(classStateChange, 1, nil, fInt("keyGroup"), obj("change", "[B"))
}

func (c *classes) sequenceNumber() *javaser.ClassDesc {
	return c.plain(classSequenceNumber, 1, nil, fLong("number"))
}

func (c *classes) tuple2() *javaser.ClassDesc {
	return c.plain(classTuple2, 1, func() *javaser.ClassDesc { return c.plain(classTuple, 1, nil) },
		obj("f0", sigObject), obj("f1", sigObject))
}

func (c *classes) unmodifiableList() *javaser.ClassDesc {
	return c.plain(classUnmodifiableList, suidUnmodifiableList,
		func() *javaser.ClassDesc {
			return c.plain(classUnmodifiableColl, suidUnmodifiableColl, nil, obj("c", sigCollection))
		},
		obj("list", sigList))
}

func (c *classes) singletonList() *javaser.ClassDesc {
	return c.plain(classSingletonList, suidSingletonList, nil, obj("element", sigObject))
}

// File-merging operator handles (1.20+), as 1.20.5 and 2.3.0 write them.
const (
	classFileMergingOperator      = "org.apache.flink.runtime.state.filemerging.FileMergingOperatorStreamStateHandle"
	classEmptyFileMergingOperator = "org.apache.flink.runtime.state.filemerging.EmptyFileMergingOperatorStreamStateHandle"
	classEmptyMap                 = "java.util.Collections$EmptyMap"
	suidEmptyMap                  = 6428348081105594320
	sigDirectoryHandle            = "Lorg/apache/flink/runtime/state/filemerging/DirectoryStreamStateHandle;"
)

func (c *classes) fileMergingOperator() *javaser.ClassDesc {
	return c.plain(classFileMergingOperator, 1, c.operatorStreamHandle,
		obj("sharedDirHandle", sigDirectoryHandle), obj("taskOwnedDirHandle", sigDirectoryHandle))
}

func (c *classes) emptyFileMergingOperator() *javaser.ClassDesc {
	return c.plain(classEmptyFileMergingOperator, 1, c.fileMergingOperator)
}

func (c *classes) directoryHandle() *javaser.ClassDesc {
	return c.plain(classDirectoryHandle, 1, nil, obj("directory", sigPath))
}

func (c *classes) emptyMap() *javaser.ClassDesc { return c.plain(classEmptyMap, suidEmptyMap, nil) }

func (c *classes) emptySegment() *javaser.ClassDesc {
	return c.plain(classEmptySegment, 1, c.segmentFile)
}

// Merged channel state handles (2.x, metadata version 6+): one per subtask
// and direction, its channels' offsets serialized into one byte array; a
// subtask's StateObjectCollection holds it in a HashSet.
const (
	classAbstractMergedChannel = "org.apache.flink.runtime.state.AbstractMergedChannelStateHandle"
	classMergedInputChannel    = "org.apache.flink.runtime.state.MergedInputChannelStateHandle"
	classMergedSubpartition    = "org.apache.flink.runtime.state.MergedResultSubpartitionStateHandle"
	classHashSet               = "java.util.HashSet"
	suidHashSet                = -5024744406713321676
)

func (c *classes) abstractMergedChannel() *javaser.ClassDesc {
	return c.plain(classAbstractMergedChannel, 1, nil, fLong("size"), fInt("subtaskIndex"),
		obj("delegate", sigStream), obj("serializedChannelOffsets", "[B"))
}

func (c *classes) mergedChannel(input bool) *javaser.ClassDesc {
	if input {
		return c.plain(classMergedInputChannel, 1, c.abstractMergedChannel)
	}
	return c.plain(classMergedSubpartition, 1, c.abstractMergedChannel)
}

// hashSet is a java.util.HashSet of elements as HashSet.writeObject writes
// it: the backing map's capacity, its load factor, the size, the elements.
func (c *classes) hashSet(capacity int32, elements ...javaser.Value) *javaser.Object {
	d := c.get(classHashSet, func() *javaser.ClassDesc {
		return javaser.NewClassDesc(classHashSet, suidHashSet, javaser.SCSerializable|javaser.SCWriteMethod)
	})
	o := javaser.NewObject(d)
	var w javaser.ContentWriter
	w.WriteInt32(capacity)
	w.WriteFloat32(0.75)
	w.WriteInt32(int32(len(elements)))
	for _, e := range elements {
		w.WriteObject(e)
	}
	o.Data[0].Annotation = w.Contents()
	return o
}
