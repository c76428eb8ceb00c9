// Package flinkha reads and writes the Java-serialized objects that Flink's
// ZooKeeper high availability keeps, so that ckptfs can tell whether a
// site holds everything a ZooKeeper failover would restore (level L2).
//
// # What Flink keeps where
//
// A checkpoint znode (<namespace>/checkpoints/<job>/<%019d> up to 1.13,
// .../jobs/<job>/checkpoints/<%019d> later) holds a
// RetrievableStreamStateHandle wrapping a FileStateHandle: the URI and
// exact size of an HA file completedCheckpoint<hex> in
// high-availability.storageDir (StateHandle). Job-graph znodes have the
// same shape. Leader information znodes hold a writeUTF address and the
// leader session UUID (LeaderInfo).
//
// The HA file is a Java-serialized CompletedCheckpoint: job id, checkpoint
// id, timestamps, checkpoint properties, the chk-N directory (external
// pointer), the _metadata handle, and every operator's state handles as
// Java objects. Recovery reads only this file, not _metadata, and since
// Flink 1.12.5/1.13.1 one unreadable HA file of any retained znode fails
// the whole recovery. So L2 needs the HA file complete, and every file its
// handles name present with its size (CompletedCheckpoint).
//
// # Why the decoder walks the graph generically
//
// Which containers hold state handles, and how, changed in every Flink
// release (maps of OperatorID or JobVertexID, StateObjectCollections,
// incremental handles with maps or lists, changelog handles, channel
// state, file merging). DecodeCompletedCheckpoint does not follow that
// structure: it decodes the stream with package javaser and visits every
// object reachable from the root, collecting each object whose class (or a
// superclass) is named *FileStateHandle (file path and size; file-merging
// segments also their start), each DirectoryStreamStateHandle, and the
// bytes of every inline ByteStreamStateHandle. Only the CompletedCheckpoint
// itself is read by field name. Nothing is matched by bytes, so a handle
// in an unexpected place is still found, and a stream that breaks the
// serialization grammar fails with the offset where it broke.
//
// # Field sets
//
// CompletedCheckpoint's serialVersionUID never changed, but its fields
// did. The decoder tells the layouts apart by the fields the class
// descriptor declares:
//
//   - FieldSet14 (Flink 1.3, 1.4): duration, externalizedMetadata,
//     externalPointer (both null unless externalized). The externalized
//     metadata file is reported in Files; Metadata stays nil.
//   - FieldSet15 (Flink 1.5 to 1.13; read in 1.6.0, written by real
//     1.13.6): duration, storageLocation, metadataHandle, externalPointer.
//   - FieldSet115 (read in 1.20): completionTimestamp instead of duration,
//     and restoredProps.
//   - FieldSet1150: completionTimestamp without restoredProps, as real
//     Flink 1.14.6 (whose CheckpointProperties are still 1.5's) and 1.15.4
//     write it. 1.14 replaced duration; detection does not depend on it.
//
// EncodeCompletedCheckpoint writes CompletedCheckpoint and
// CheckpointProperties with the fields and serialVersionUIDs of the chosen
// field set: Flink 1.20 for FieldSet115, 1.15.4 for FieldSet1150, 1.6 for
// FieldSet15, 1.4 for FieldSet14. Everything below them (OperatorState,
// OperatorSubtaskState, the state handles, Path, ...) is written as Flink
// 1.20 declares it, with the differences of FieldSet115's releases that
// CheckpointSpec.Release (default: the newest release writing the
// _metadata's version) selects: restoredProps from 1.16,
// IncrementalRemoteKeyedStateHandle without AbstractIncrementalStateHandle
// before 1.19 (and with maps of StateHandleID before 1.16),
// OperatorState's operatorName and operatorUid from 2.0,
// OperatorSubtaskState's upstreamOutputBufferState from 2.3. These come
// from javap of each release's flink-dist (1.15.4 to 2.3.0) and from the
// HA files real Flink wrote (the corpus, integration/flinkdata/corpus and
// make corpus's other releases; manifest's TestCorpusHAEncoderMatches
// compares every class the encoder writes with them). Older releases had
// other deep classes still (1.4 incremental handles kept maps, the 1.15
// changelog handles had no checkpointId), which the generic decoder does
// not depend on. An emulator that needs exact older deep classes must not
// use this encoder for them.
//
// Sources (Flink 1.20 unless noted): flink-runtime .../checkpoint/
// CompletedCheckpoint.java (also 1.6.0 and 1.14.5), CheckpointProperties.java
// (also 1.4 and 1.6.0), CheckpointType.java, SnapshotType.java,
// OperatorState.java, OperatorSubtaskState.java, StateObjectCollection.java,
// InflightDataRescalingDescriptor.java, MasterState.java,
// FinishedOperatorSubtaskState.java, FullyFinishedOperatorState.java,
// metadata/MetadataV2V3SerializerBase.java (how handles are built from
// _metadata); .../state/ FileStateHandle, RelativeFileStateHandle,
// ByteStreamStateHandle, SegmentFileStateHandle, KeyGroupsStateHandle,
// KeyGroupsSavepointStateHandle, KeyGroupRange(Offsets),
// IncrementalRemoteKeyedStateHandle, AbstractIncrementalStateHandle,
// IncrementalKeyedStateHandle, OperatorStreamStateHandle,
// OperatorStateHandle, AbstractChannelStateHandle, InputChannelStateHandle,
// ResultSubpartitionStateHandle, StateHandleID, RetrievableStreamStateHandle,
// filesystem/FsCompletedCheckpointStorageLocation; flink-core Path,
// AbstractID, JobID, StringBasedID. CheckpointType (1.20) and
// LogicalFile$LogicalFileId declare no serialVersionUID; their values are
// the JVM's defaults, computed with serialver from stubs with identical
// declarations, and the JDK test checks them against such stubs.
//
// # Paths
//
// Path objects hold escaped java.net.URI strings; _metadata holds
// Path.toString(), unescaped. PathToURI and URIToPath convert as Flink and
// the JDK do, so FileRef.Path is always in the _metadata form.
package flinkha
