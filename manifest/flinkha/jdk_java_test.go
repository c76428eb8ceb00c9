package flinkha

// Java stand-ins for the Flink classes in HA files. Each declares the name,
// superclass, serialVersionUID and serializable fields (names and declared
// types) of the Flink 1.20 class of the same name, unless its comment
// names another version; behaviour is reduced to constructors. Classes
// without a declared serialVersionUID (CheckpointType,
// LogicalFile$LogicalFileId) declare exactly the members Flink's do,
// because the JVM computes the default from them. They are the reference
// the Go encoder is tested against: the JDK must read what we write, and
// every class descriptor we write must equal the JDK's for these classes.

// javaCommon are the classes every field set shares.
var javaCommon = map[string]string{
	"org/apache/flink/util/AbstractID.java": `package org.apache.flink.util;
public class AbstractID implements Comparable<AbstractID>, java.io.Serializable {
    private static final long serialVersionUID = 1L;
    protected final long upperPart;
    protected final long lowerPart;
    private transient String hexString;
    public AbstractID(long lowerPart, long upperPart) { this.lowerPart = lowerPart; this.upperPart = upperPart; }
    public long getLowerPart() { return lowerPart; }
    public long getUpperPart() { return upperPart; }
    // The bytes of lowerPart, then of upperPart, most significant first.
    public final String toHexString() {
        StringBuilder sb = new StringBuilder();
        for (long part : new long[] {lowerPart, upperPart}) {
            for (int shift = 56; shift >= 0; shift -= 8) {
                sb.append(String.format("%02x", (part >>> shift) & 0xff));
            }
        }
        return sb.toString();
    }
    public int compareTo(AbstractID o) { return 0; }
    public boolean equals(Object o) {
        return o != null && o.getClass() == getClass() && ((AbstractID) o).lowerPart == lowerPart && ((AbstractID) o).upperPart == upperPart;
    }
    public int hashCode() { return (int) lowerPart ^ (int) (lowerPart >>> 32) ^ (int) upperPart ^ (int) (upperPart >>> 32); }
    public String toString() { return toHexString(); }
}
`,
	"org/apache/flink/util/StringBasedID.java": `package org.apache.flink.util;
public class StringBasedID implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final String keyString;
    protected StringBasedID(String keyString) { this.keyString = keyString; }
    public String getKeyString() { return keyString; }
}
`,
	"org/apache/flink/api/common/JobID.java": `package org.apache.flink.api.common;
public final class JobID extends org.apache.flink.util.AbstractID {
    private static final long serialVersionUID = 1L;
    public JobID(long lowerPart, long upperPart) { super(lowerPart, upperPart); }
}
`,
	"org/apache/flink/runtime/jobgraph/OperatorID.java": `package org.apache.flink.runtime.jobgraph;
public class OperatorID extends org.apache.flink.util.AbstractID {
    private static final long serialVersionUID = 1L;
    public OperatorID(long lowerPart, long upperPart) { super(lowerPart, upperPart); }
}
`,
	// Path: the constructor and toString follow Flink's documented
	// behaviour; the escaping is the JDK's own java.net.URI.
	"org/apache/flink/core/fs/Path.java": `package org.apache.flink.core.fs;
import java.net.URI;
import java.net.URISyntaxException;
public class Path implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private URI uri;
    public Path(URI uri) { this.uri = uri; }
    public Path(String s) {
        if (s == null || s.isEmpty()) throw new IllegalArgumentException("empty path");
        if (drive(s, false)) s = "/" + s;
        String scheme = null, authority = null;
        int start = 0, colon = s.indexOf(':'), slash = s.indexOf('/');
        if (colon != -1 && (slash == -1 || colon < slash)) { scheme = s.substring(0, colon); start = colon + 1; }
        if (s.startsWith("//", start) && s.length() - start > 2) {
            int next = s.indexOf('/', start + 2);
            int end = next > 0 ? next : s.length();
            authority = s.substring(start + 2, end);
            start = end;
        }
        String path = s.substring(start).replace('\\', '/');
        while (path.contains("//")) path = path.replace("//", "/");
        if (path.endsWith("/") && !path.equals("/") && !path.matches("/\\p{Alpha}+:/")) path = path.substring(0, path.length() - 1);
        try {
            uri = new URI(scheme, authority, path, null, null).normalize();
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException(e);
        }
    }
    private static boolean drive(String p, boolean slashed) {
        int st = slashed ? 1 : 0;
        return p.length() >= st + 2 && (!slashed || p.charAt(0) == '/') && p.charAt(st + 1) == ':'
            && ((p.charAt(st) >= 'A' && p.charAt(st) <= 'Z') || (p.charAt(st) >= 'a' && p.charAt(st) <= 'z'));
    }
    public URI toUri() { return uri; }
    public String toString() {
        StringBuilder b = new StringBuilder();
        if (uri.getScheme() != null) b.append(uri.getScheme()).append(':');
        if (uri.getAuthority() != null) b.append("//").append(uri.getAuthority());
        if (uri.getPath() != null) {
            String p = uri.getPath();
            if (p.startsWith("/") && drive(p, true) && uri.getScheme() == null && uri.getAuthority() == null) p = p.substring(1);
            b.append(p);
        }
        if (uri.getFragment() != null) b.append('#').append(uri.getFragment());
        return b.toString();
    }
}
`,
	"org/apache/flink/runtime/state/StateObject.java": `package org.apache.flink.runtime.state;
public interface StateObject extends java.io.Serializable {}
`,
	"org/apache/flink/runtime/state/StreamStateHandle.java": `package org.apache.flink.runtime.state;
public interface StreamStateHandle extends StateObject {}
`,
	"org/apache/flink/runtime/state/KeyedStateHandle.java": `package org.apache.flink.runtime.state;
public interface KeyedStateHandle extends StateObject {}
`,
	"org/apache/flink/runtime/state/CompletedCheckpointStorageLocation.java": `package org.apache.flink.runtime.state;
public interface CompletedCheckpointStorageLocation extends java.io.Serializable {}
`,
	"org/apache/flink/runtime/state/CheckpointedStateScope.java": `package org.apache.flink.runtime.state;
public enum CheckpointedStateScope { EXCLUSIVE, SHARED }
`,
	"org/apache/flink/runtime/state/OperatorStateHandle.java": `package org.apache.flink.runtime.state;
public interface OperatorStateHandle extends StreamStateHandle {
    enum Mode { SPLIT_DISTRIBUTE, UNION, BROADCAST }
    class StateMetaInfo implements java.io.Serializable {
        private static final long serialVersionUID = 3593817615858941166L;
        private final long[] offsets;
        private final Mode distributionMode;
        public StateMetaInfo(long[] offsets, Mode distributionMode) { this.offsets = offsets; this.distributionMode = distributionMode; }
    }
}
`,
	"org/apache/flink/runtime/state/IncrementalKeyedStateHandle.java": `package org.apache.flink.runtime.state;
public interface IncrementalKeyedStateHandle extends KeyedStateHandle {
    final class HandleAndLocalPath implements java.io.Serializable {
        private static final long serialVersionUID = 7711754687567545052L;
        StreamStateHandle handle;
        final String localPath;
        public HandleAndLocalPath(StreamStateHandle handle, String localPath) { this.handle = handle; this.localPath = localPath; }
    }
}
`,
	"org/apache/flink/runtime/state/StateHandleID.java": `package org.apache.flink.runtime.state;
public class StateHandleID extends org.apache.flink.util.StringBasedID {
    private static final long serialVersionUID = 1L;
    public StateHandleID(String keyString) { super(keyString); }
}
`,
	"org/apache/flink/runtime/state/KeyGroupRange.java": `package org.apache.flink.runtime.state;
public class KeyGroupRange implements java.io.Serializable {
    private static final long serialVersionUID = 4869121477592070607L;
    private final int startKeyGroup;
    private final int endKeyGroup;
    public KeyGroupRange(int startKeyGroup, int endKeyGroup) { this.startKeyGroup = startKeyGroup; this.endKeyGroup = endKeyGroup; }
}
`,
	"org/apache/flink/runtime/state/KeyGroupRangeOffsets.java": `package org.apache.flink.runtime.state;
public class KeyGroupRangeOffsets implements java.io.Serializable {
    private static final long serialVersionUID = 6595415219136429696L;
    private final KeyGroupRange keyGroupRange;
    private final long[] offsets;
    public KeyGroupRangeOffsets(KeyGroupRange r, long[] offsets) { this.keyGroupRange = r; this.offsets = offsets; }
}
`,
	"org/apache/flink/runtime/state/KeyGroupsStateHandle.java": `package org.apache.flink.runtime.state;
public class KeyGroupsStateHandle implements StreamStateHandle, KeyedStateHandle {
    private static final long serialVersionUID = -8070326169926626355L;
    private final KeyGroupRangeOffsets groupRangeOffsets;
    private final StreamStateHandle stateHandle;
    private final StateHandleID stateHandleId;
    public KeyGroupsStateHandle(KeyGroupRangeOffsets o, StreamStateHandle h, StateHandleID id) { groupRangeOffsets = o; stateHandle = h; stateHandleId = id; }
}
`,
	"org/apache/flink/runtime/state/KeyGroupsSavepointStateHandle.java": `package org.apache.flink.runtime.state;
public class KeyGroupsSavepointStateHandle extends KeyGroupsStateHandle {
    private static final long serialVersionUID = 1L;
    public KeyGroupsSavepointStateHandle(KeyGroupRangeOffsets o, StreamStateHandle h, StateHandleID id) { super(o, h, id); }
}
`,
	"org/apache/flink/runtime/state/AbstractIncrementalStateHandle.java": `package org.apache.flink.runtime.state;
import java.util.List;
import java.util.UUID;
public abstract class AbstractIncrementalStateHandle implements IncrementalKeyedStateHandle {
    private static final long serialVersionUID = 1L;
    protected final long checkpointId;
    protected final UUID backendIdentifier;
    protected final KeyGroupRange keyGroupRange;
    protected final List<HandleAndLocalPath> sharedState;
    protected final StreamStateHandle metaStateHandle;
    protected final StateHandleID stateHandleId;
    public AbstractIncrementalStateHandle(UUID backend, KeyGroupRange range, long checkpointId, List<HandleAndLocalPath> shared, StreamStateHandle meta, StateHandleID id) {
        this.checkpointId = checkpointId; this.backendIdentifier = backend; this.keyGroupRange = range;
        this.sharedState = shared; this.metaStateHandle = meta; this.stateHandleId = id;
    }
}
`,
	"org/apache/flink/runtime/state/IncrementalRemoteKeyedStateHandle.java": `package org.apache.flink.runtime.state;
import java.util.List;
import java.util.UUID;
public class IncrementalRemoteKeyedStateHandle extends AbstractIncrementalStateHandle {
    private static final long serialVersionUID = -8328808513197388231L;
    private final List<HandleAndLocalPath> privateState;
    private final long persistedSizeOfThisCheckpoint;
    private transient Object sharedStateRegistry;
    public IncrementalRemoteKeyedStateHandle(UUID backend, KeyGroupRange range, long checkpointId, List<HandleAndLocalPath> shared,
            List<HandleAndLocalPath> priv, StreamStateHandle meta, long persisted, StateHandleID id) {
        super(backend, range, checkpointId, shared, meta, id);
        this.privateState = priv; this.persistedSizeOfThisCheckpoint = persisted;
    }
}
`,
	"org/apache/flink/runtime/state/OperatorStreamStateHandle.java": `package org.apache.flink.runtime.state;
import java.util.Map;
public class OperatorStreamStateHandle implements OperatorStateHandle {
    private static final long serialVersionUID = 35876522969227335L;
    private final Map<String, StateMetaInfo> stateNameToPartitionOffsets;
    private final StreamStateHandle delegateStateHandle;
    public OperatorStreamStateHandle(Map<String, StateMetaInfo> m, StreamStateHandle d) { stateNameToPartitionOffsets = m; delegateStateHandle = d; }
}
`,
	"org/apache/flink/runtime/state/AbstractChannelStateHandle.java": `package org.apache.flink.runtime.state;
import java.util.List;
public abstract class AbstractChannelStateHandle<Info> implements StateObject {
    private static final long serialVersionUID = 1L;
    private final Info info;
    private final StreamStateHandle delegate;
    private final List<Long> offsets;
    private final long size;
    private final int subtaskIndex;
    AbstractChannelStateHandle(StreamStateHandle delegate, List<Long> offsets, int subtaskIndex, Info info, long size) {
        this.subtaskIndex = subtaskIndex; this.info = info; this.delegate = delegate; this.offsets = offsets; this.size = size;
    }
}
`,
	"org/apache/flink/runtime/state/InputChannelStateHandle.java": `package org.apache.flink.runtime.state;
import org.apache.flink.runtime.checkpoint.channel.InputChannelInfo;
import java.util.List;
public class InputChannelStateHandle extends AbstractChannelStateHandle<InputChannelInfo> {
    private static final long serialVersionUID = 1L;
    public InputChannelStateHandle(int subtask, InputChannelInfo info, StreamStateHandle d, List<Long> offsets, long size) { super(d, offsets, subtask, info, size); }
}
`,
	"org/apache/flink/runtime/state/ResultSubpartitionStateHandle.java": `package org.apache.flink.runtime.state;
import org.apache.flink.runtime.checkpoint.channel.ResultSubpartitionInfo;
import java.util.List;
public class ResultSubpartitionStateHandle extends AbstractChannelStateHandle<ResultSubpartitionInfo> {
    private static final long serialVersionUID = 1L;
    public ResultSubpartitionStateHandle(int subtask, ResultSubpartitionInfo info, StreamStateHandle d, List<Long> offsets, long size) { super(d, offsets, subtask, info, size); }
}
`,
	"org/apache/flink/runtime/checkpoint/channel/InputChannelInfo.java": `package org.apache.flink.runtime.checkpoint.channel;
public class InputChannelInfo implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final int gateIdx;
    private final int inputChannelIdx;
    public InputChannelInfo(int g, int c) { gateIdx = g; inputChannelIdx = c; }
}
`,
	"org/apache/flink/runtime/checkpoint/channel/ResultSubpartitionInfo.java": `package org.apache.flink.runtime.checkpoint.channel;
public class ResultSubpartitionInfo implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final int partitionIdx;
    private final int subPartitionIdx;
    public ResultSubpartitionInfo(int p, int s) { partitionIdx = p; subPartitionIdx = s; }
}
`,
	"org/apache/flink/runtime/state/RetrievableStreamStateHandle.java": `package org.apache.flink.runtime.state;
public class RetrievableStreamStateHandle<T extends java.io.Serializable> implements StreamStateHandle {
    private static final long serialVersionUID = 314567453677355L;
    private final StreamStateHandle wrappedStreamStateHandle;
    public RetrievableStreamStateHandle(StreamStateHandle h) { wrappedStreamStateHandle = h; }
    public StreamStateHandle wrapped() { return wrappedStreamStateHandle; }
}
`,
	"org/apache/flink/runtime/state/filesystem/FileStateHandle.java": `package org.apache.flink.runtime.state.filesystem;
import org.apache.flink.core.fs.Path;
public class FileStateHandle implements org.apache.flink.runtime.state.StreamStateHandle {
    private static final long serialVersionUID = 350284443258002355L;
    private final Path filePath;
    private final long stateSize;
    public FileStateHandle(Path filePath, long stateSize) { this.filePath = filePath; this.stateSize = stateSize; }
    public Path getFilePath() { return filePath; }
    public long getStateSize() { return stateSize; }
}
`,
	"org/apache/flink/runtime/state/filesystem/RelativeFileStateHandle.java": `package org.apache.flink.runtime.state.filesystem;
import org.apache.flink.core.fs.Path;
public class RelativeFileStateHandle extends FileStateHandle {
    private static final long serialVersionUID = 1L;
    private final String relativePath;
    public RelativeFileStateHandle(Path p, String rel, long size) { super(p, size); relativePath = rel; }
}
`,
	"org/apache/flink/runtime/state/filesystem/FsCompletedCheckpointStorageLocation.java": `package org.apache.flink.runtime.state.filesystem;
import org.apache.flink.core.fs.Path;
public class FsCompletedCheckpointStorageLocation implements org.apache.flink.runtime.state.CompletedCheckpointStorageLocation {
    private static final long serialVersionUID = 1L;
    private final Path exclusiveCheckpointDir;
    private final FileStateHandle metadataFileHandle;
    private final String externalPointer;
    private transient Object fs;
    public FsCompletedCheckpointStorageLocation(Path dir, FileStateHandle meta, String pointer) { exclusiveCheckpointDir = dir; metadataFileHandle = meta; externalPointer = pointer; }
}
`,
	"org/apache/flink/runtime/state/memory/ByteStreamStateHandle.java": `package org.apache.flink.runtime.state.memory;
public class ByteStreamStateHandle implements org.apache.flink.runtime.state.StreamStateHandle {
    private static final long serialVersionUID = -5280226231202517594L;
    private final byte[] data;
    private final String handleName;
    public ByteStreamStateHandle(String name, byte[] data) { handleName = name; this.data = data; }
    public byte[] getData() { return data; }
}
`,
	"org/apache/flink/runtime/state/filemerging/SegmentFileStateHandle.java": `package org.apache.flink.runtime.state.filemerging;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.filemerging.LogicalFile;
import org.apache.flink.runtime.state.CheckpointedStateScope;
public class SegmentFileStateHandle implements org.apache.flink.runtime.state.StreamStateHandle {
    private static final long serialVersionUID = 1L;
    private final Path filePath;
    protected final long stateSize;
    private final long startPos;
    private final CheckpointedStateScope scope;
    private final LogicalFile.LogicalFileId logicalFileId;
    public SegmentFileStateHandle(Path p, long startPos, long size, CheckpointedStateScope scope, LogicalFile.LogicalFileId id) {
        filePath = p; this.startPos = startPos; stateSize = size; this.scope = scope; logicalFileId = id;
    }
    public Path getFilePath() { return filePath; }
    public long getStartPos() { return startPos; }
    public long getStateSize() { return stateSize; }
}
`,
	"org/apache/flink/runtime/state/filemerging/EmptySegmentFileStateHandle.java": `package org.apache.flink.runtime.state.filemerging;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.filemerging.LogicalFile;
import org.apache.flink.runtime.state.CheckpointedStateScope;
public class EmptySegmentFileStateHandle extends SegmentFileStateHandle {
    private static final long serialVersionUID = 1L;
    public static final EmptySegmentFileStateHandle INSTANCE =
        new EmptySegmentFileStateHandle(new Path("empty"), 0, 0, CheckpointedStateScope.EXCLUSIVE, new LogicalFile.LogicalFileId("DUMMY"));
    private EmptySegmentFileStateHandle(Path p, long s, long n, CheckpointedStateScope sc, LogicalFile.LogicalFileId id) { super(p, s, n, sc, id); }
}
`,
	"org/apache/flink/runtime/state/filemerging/DirectoryStreamStateHandle.java": `package org.apache.flink.runtime.state.filemerging;
import org.apache.flink.core.fs.Path;
public class DirectoryStreamStateHandle implements org.apache.flink.runtime.state.StreamStateHandle {
    private static final long serialVersionUID = 1L;
    private final Path directory;
    public DirectoryStreamStateHandle(Path directory) { this.directory = directory; }
    public Path getDirectory() { return directory; }
}
`,
	// No serialVersionUID: the members below are exactly Flink 1.20's.
	"org/apache/flink/runtime/checkpoint/filemerging/LogicalFile.java": `package org.apache.flink.runtime.checkpoint.filemerging;
import org.apache.flink.util.StringBasedID;
import java.util.UUID;
public class LogicalFile {
    public static class LogicalFileId extends StringBasedID {
        public LogicalFileId(String keyString) { super(keyString); }
        public static LogicalFileId generateRandomId() { return new LogicalFileId(UUID.randomUUID().toString()); }
    }
}
`,
	"org/apache/flink/runtime/checkpoint/StateObjectCollection.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Collection;
public class StateObjectCollection<T extends org.apache.flink.runtime.state.StateObject> implements org.apache.flink.runtime.state.StateObject {
    private static final long serialVersionUID = 1L;
    private final Collection<T> stateObjects;
    public StateObjectCollection(Collection<T> c) { stateObjects = c; }
}
`,
	"org/apache/flink/runtime/checkpoint/InflightDataRescalingDescriptor.java": `package org.apache.flink.runtime.checkpoint;
public class InflightDataRescalingDescriptor implements java.io.Serializable {
    public static final InflightDataRescalingDescriptor NO_RESCALE = new NoRescalingDescriptor();
    private static final long serialVersionUID = -3396674344669796295L;
    private final InflightDataGateOrPartitionRescalingDescriptor[] gateOrPartitionDescriptors;
    public InflightDataRescalingDescriptor(InflightDataGateOrPartitionRescalingDescriptor[] d) { gateOrPartitionDescriptors = d; }
    public static class InflightDataGateOrPartitionRescalingDescriptor implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
    }
    private static class NoRescalingDescriptor extends InflightDataRescalingDescriptor {
        private static final long serialVersionUID = 1L;
        public NoRescalingDescriptor() { super(new InflightDataGateOrPartitionRescalingDescriptor[0]); }
        private Object readResolve() throws java.io.ObjectStreamException { return NO_RESCALE; }
    }
}
`,
	"org/apache/flink/runtime/checkpoint/OperatorSubtaskState.java": `package org.apache.flink.runtime.checkpoint;
public class OperatorSubtaskState implements org.apache.flink.runtime.state.StateObject {
    private static final long serialVersionUID = -2394696997971923995L;
    private final StateObjectCollection managedOperatorState;
    private final StateObjectCollection rawOperatorState;
    private final StateObjectCollection managedKeyedState;
    private final StateObjectCollection rawKeyedState;
    private final StateObjectCollection inputChannelState;
    private final StateObjectCollection resultSubpartitionState;
    private final InflightDataRescalingDescriptor inputRescalingDescriptor;
    private final InflightDataRescalingDescriptor outputRescalingDescriptor;
    private final long stateSize;
    private final long checkpointedSize;
    public OperatorSubtaskState(StateObjectCollection mo, StateObjectCollection ro, StateObjectCollection mk, StateObjectCollection rk,
            StateObjectCollection in, StateObjectCollection out, long stateSize, long checkpointedSize) {
        managedOperatorState = mo; rawOperatorState = ro; managedKeyedState = mk; rawKeyedState = rk;
        inputChannelState = in; resultSubpartitionState = out;
        inputRescalingDescriptor = InflightDataRescalingDescriptor.NO_RESCALE; outputRescalingDescriptor = InflightDataRescalingDescriptor.NO_RESCALE;
        this.stateSize = stateSize; this.checkpointedSize = checkpointedSize;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/FinishedOperatorSubtaskState.java": `package org.apache.flink.runtime.checkpoint;
public class FinishedOperatorSubtaskState extends OperatorSubtaskState {
    private static final long serialVersionUID = 1L;
    public FinishedOperatorSubtaskState(StateObjectCollection empty) { super(empty, empty, empty, empty, empty, empty, 0, 0); }
}
`,
	"org/apache/flink/runtime/checkpoint/OperatorState.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Map;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
public class OperatorState implements org.apache.flink.runtime.state.StateObject {
    private static final long serialVersionUID = -4845578005863201810L;
    private final OperatorID operatorID;
    private final Map<Integer, OperatorSubtaskState> operatorSubtaskStates;
    private ByteStreamStateHandle coordinatorState;
    private final int parallelism;
    private final int maxParallelism;
    public OperatorState(OperatorID id, Map<Integer, OperatorSubtaskState> m, ByteStreamStateHandle coord, int p, int maxP) {
        operatorID = id; operatorSubtaskStates = m; coordinatorState = coord; parallelism = p; maxParallelism = maxP;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/FullyFinishedOperatorState.java": `package org.apache.flink.runtime.checkpoint;
public class FullyFinishedOperatorState extends OperatorState {
    private static final long serialVersionUID = 1L;
    public FullyFinishedOperatorState(org.apache.flink.runtime.jobgraph.OperatorID id, int p, int maxP) { super(id, new java.util.HashMap<>(), null, p, maxP); }
}
`,
	"org/apache/flink/runtime/checkpoint/MasterState.java": `package org.apache.flink.runtime.checkpoint;
public class MasterState implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final String name;
    private final byte[] bytes;
    private final int version;
    public MasterState(String name, byte[] bytes, int version) { this.name = name; this.bytes = bytes; this.version = version; }
}
`,
}

// javaFlink2 are OperatorState and OperatorSubtaskState as Flink 2.3
// declares them (flink-runtime .../checkpoint/OperatorState.java and
// OperatorSubtaskState.java of 2.3.0's flink-dist, read with javap): 2.0
// added operatorName and operatorUid, 2.3 upstreamOutputBufferState.
// Over javaCommon and javaFieldSet115 they make the 2.x classes.
var javaFlink2 = map[string]string{
	"org/apache/flink/runtime/checkpoint/OperatorSubtaskState.java": `package org.apache.flink.runtime.checkpoint;
public class OperatorSubtaskState implements org.apache.flink.runtime.state.StateObject {
    private static final long serialVersionUID = -2394696997971923995L;
    private final StateObjectCollection managedOperatorState;
    private final StateObjectCollection rawOperatorState;
    private final StateObjectCollection managedKeyedState;
    private final StateObjectCollection rawKeyedState;
    private final StateObjectCollection inputChannelState;
    private final StateObjectCollection upstreamOutputBufferState;
    private final StateObjectCollection resultSubpartitionState;
    private final InflightDataRescalingDescriptor inputRescalingDescriptor;
    private final InflightDataRescalingDescriptor outputRescalingDescriptor;
    private final long stateSize;
    private final long checkpointedSize;
    public OperatorSubtaskState(StateObjectCollection mo, StateObjectCollection ro, StateObjectCollection mk, StateObjectCollection rk,
            StateObjectCollection in, StateObjectCollection out, long stateSize, long checkpointedSize) {
        this(mo, ro, mk, rk, in, new StateObjectCollection(java.util.Collections.emptyList()), out, stateSize, checkpointedSize);
    }
    public OperatorSubtaskState(StateObjectCollection mo, StateObjectCollection ro, StateObjectCollection mk, StateObjectCollection rk,
            StateObjectCollection in, StateObjectCollection upstream, StateObjectCollection out, long stateSize, long checkpointedSize) {
        managedOperatorState = mo; rawOperatorState = ro; managedKeyedState = mk; rawKeyedState = rk;
        inputChannelState = in; upstreamOutputBufferState = upstream; resultSubpartitionState = out;
        inputRescalingDescriptor = InflightDataRescalingDescriptor.NO_RESCALE; outputRescalingDescriptor = InflightDataRescalingDescriptor.NO_RESCALE;
        this.stateSize = stateSize; this.checkpointedSize = checkpointedSize;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/OperatorState.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Map;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
public class OperatorState implements org.apache.flink.runtime.state.StateObject {
    private static final long serialVersionUID = -4845578005863201810L;
    private String operatorName;
    private String operatorUid;
    private final OperatorID operatorID;
    private final Map<Integer, OperatorSubtaskState> operatorSubtaskStates;
    private ByteStreamStateHandle coordinatorState;
    private final int parallelism;
    private final int maxParallelism;
    public OperatorState(OperatorID id, Map<Integer, OperatorSubtaskState> m, ByteStreamStateHandle coord, int p, int maxP) {
        this(null, null, id, m, coord, p, maxP);
    }
    public OperatorState(String name, String uid, OperatorID id, Map<Integer, OperatorSubtaskState> m, ByteStreamStateHandle coord, int p, int maxP) {
        operatorName = name; operatorUid = uid;
        operatorID = id; operatorSubtaskStates = m; coordinatorState = coord; parallelism = p; maxParallelism = maxP;
    }
}
`,
}

// javaFieldSet115 are Flink 1.20's CompletedCheckpoint and
// CheckpointProperties.
var javaFieldSet115 = map[string]string{
	"org/apache/flink/runtime/checkpoint/SnapshotType.java": `package org.apache.flink.runtime.checkpoint;
import java.io.Serializable;
public interface SnapshotType extends Serializable {
    boolean isSavepoint();
    String getName();
    SharingFilesStrategy getSharingFilesStrategy();
    enum SharingFilesStrategy { FORWARD_BACKWARD, FORWARD, NO_SHARING; }
}
`,
	// No serialVersionUID: the members below are exactly Flink 1.20's.
	"org/apache/flink/runtime/checkpoint/CheckpointType.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Objects;
public final class CheckpointType implements SnapshotType {
    public static final CheckpointType CHECKPOINT = new CheckpointType("Checkpoint", SharingFilesStrategy.FORWARD_BACKWARD);
    public static final CheckpointType FULL_CHECKPOINT = new CheckpointType("Full Checkpoint", SharingFilesStrategy.FORWARD);
    private final String name;
    private final SharingFilesStrategy sharingFilesStrategy;
    private CheckpointType(final String name, SharingFilesStrategy sharingFilesStrategy) { this.name = name; this.sharingFilesStrategy = sharingFilesStrategy; }
    public boolean isSavepoint() { return false; }
    public String getName() { return name; }
    public SharingFilesStrategy getSharingFilesStrategy() { return sharingFilesStrategy; }
    @Override public boolean equals(Object o) { return o instanceof CheckpointType && name.equals(((CheckpointType) o).name); }
    @Override public int hashCode() { return Objects.hash(name, sharingFilesStrategy); }
    @Override public String toString() { return "CheckpointType{name='" + name + "'}"; }
}
`,
	"org/apache/flink/runtime/checkpoint/CheckpointProperties.java": `package org.apache.flink.runtime.checkpoint;
public class CheckpointProperties implements java.io.Serializable {
    private static final long serialVersionUID = 2L;
    private final SnapshotType checkpointType;
    private final boolean forced;
    private final boolean discardSubsumed;
    private final boolean discardFinished;
    private final boolean discardCancelled;
    private final boolean discardFailed;
    private final boolean discardSuspended;
    private final boolean unclaimed;
    public CheckpointProperties(boolean forced, SnapshotType t, boolean subsumed, boolean finished, boolean cancelled, boolean failed, boolean suspended, boolean unclaimed) {
        this.forced = forced; checkpointType = t; discardSubsumed = subsumed; discardFinished = finished;
        discardCancelled = cancelled; discardFailed = failed; discardSuspended = suspended; this.unclaimed = unclaimed;
    }
    public String describe() {
        return "props " + checkpointType.getName() + " forced=" + forced + " discard=" + discardSubsumed + discardFinished + discardCancelled + discardFailed + discardSuspended + " unclaimed=" + unclaimed;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/CompletedCheckpoint.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Collection;
import java.util.Map;
import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.CompletedCheckpointStorageLocation;
import org.apache.flink.runtime.state.StreamStateHandle;
public class CompletedCheckpoint implements java.io.Serializable {
    private static final long serialVersionUID = -8360248179615702014L;
    private final JobID job;
    private final long checkpointID;
    private final long timestamp;
    private final long completionTimestamp;
    private final Map<OperatorID, OperatorState> operatorStates;
    private final CheckpointProperties props;
    private final CheckpointProperties restoredProps;
    private final Collection<MasterState> masterHookStates;
    private final CompletedCheckpointStorageLocation storageLocation;
    private final StreamStateHandle metadataHandle;
    private final String externalPointer;
    private final transient Object completedCheckpointStats;
    public CompletedCheckpoint(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops, Collection<MasterState> masters,
            CheckpointProperties props, CompletedCheckpointStorageLocation loc, StreamStateHandle meta, String pointer) {
        this.job = job; checkpointID = id; timestamp = ts; completionTimestamp = completion; operatorStates = ops; masterHookStates = masters;
        this.props = props; restoredProps = null; storageLocation = loc; metadataHandle = meta; externalPointer = pointer; completedCheckpointStats = null;
    }
    public static CompletedCheckpoint create(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops,
            Collection<MasterState> masters, int retention, org.apache.flink.core.fs.Path dir,
            org.apache.flink.runtime.state.filesystem.FileStateHandle meta, String pointer) {
        CheckpointProperties props = new CheckpointProperties(false, CheckpointType.CHECKPOINT, true, true, retention < 2, retention < 1, retention < 2, false);
        return new CompletedCheckpoint(job, id, ts, completion, ops, masters, props,
            new org.apache.flink.runtime.state.filesystem.FsCompletedCheckpointStorageLocation(dir, meta, pointer), meta, pointer);
    }
    public JobID job() { return job; }
    public long id() { return checkpointID; }
    public long timestamp() { return timestamp; }
    public long completion() { return completionTimestamp; }
    public String pointer() { return externalPointer; }
    public StreamStateHandle metadata() { return metadataHandle; }
    public CheckpointProperties props() { return props; }
}
`,
}

// javaFieldSet15 are CompletedCheckpoint and CheckpointProperties as Flink
// 1.6.0 declares them (CheckpointType is an enum there).
var javaFieldSet15 = map[string]string{
	"org/apache/flink/runtime/checkpoint/CheckpointType.java": `package org.apache.flink.runtime.checkpoint;
public enum CheckpointType { CHECKPOINT, SAVEPOINT; }
`,
	"org/apache/flink/runtime/checkpoint/CheckpointProperties.java": `package org.apache.flink.runtime.checkpoint;
public class CheckpointProperties implements java.io.Serializable {
    private static final long serialVersionUID = 2L;
    private final CheckpointType checkpointType;
    private final boolean forced;
    private final boolean discardSubsumed;
    private final boolean discardFinished;
    private final boolean discardCancelled;
    private final boolean discardFailed;
    private final boolean discardSuspended;
    public CheckpointProperties(boolean forced, CheckpointType t, boolean subsumed, boolean finished, boolean cancelled, boolean failed, boolean suspended) {
        this.forced = forced; checkpointType = t; discardSubsumed = subsumed; discardFinished = finished;
        discardCancelled = cancelled; discardFailed = failed; discardSuspended = suspended;
    }
    public String describe() {
        return "props " + checkpointType + " forced=" + forced + " discard=" + discardSubsumed + discardFinished + discardCancelled + discardFailed + discardSuspended;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/CompletedCheckpoint.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Collection;
import java.util.Map;
import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.CompletedCheckpointStorageLocation;
import org.apache.flink.runtime.state.StreamStateHandle;
public class CompletedCheckpoint implements java.io.Serializable {
    private static final long serialVersionUID = -8360248179615702014L;
    private final JobID job;
    private final long checkpointID;
    private final long timestamp;
    private final long duration;
    private final Map<OperatorID, OperatorState> operatorStates;
    private final CheckpointProperties props;
    private final Collection<MasterState> masterHookStates;
    private final CompletedCheckpointStorageLocation storageLocation;
    private final StreamStateHandle metadataHandle;
    private final String externalPointer;
    private transient volatile Object discardCallback;
    public CompletedCheckpoint(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops, Collection<MasterState> masters,
            CheckpointProperties props, CompletedCheckpointStorageLocation loc, StreamStateHandle meta, String pointer) {
        this.job = job; checkpointID = id; timestamp = ts; duration = completion - ts; operatorStates = ops; masterHookStates = masters;
        this.props = props; storageLocation = loc; metadataHandle = meta; externalPointer = pointer;
    }
    public static CompletedCheckpoint create(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops,
            Collection<MasterState> masters, int retention, org.apache.flink.core.fs.Path dir,
            org.apache.flink.runtime.state.filesystem.FileStateHandle meta, String pointer) {
        CheckpointProperties props = new CheckpointProperties(false, CheckpointType.CHECKPOINT, true, true, retention < 2, retention < 1, retention < 2);
        return new CompletedCheckpoint(job, id, ts, completion, ops, masters, props,
            new org.apache.flink.runtime.state.filesystem.FsCompletedCheckpointStorageLocation(dir, meta, pointer), meta, pointer);
    }
    public JobID job() { return job; }
    public long id() { return checkpointID; }
    public long timestamp() { return timestamp; }
    public long completion() { return timestamp + duration; }
    public String pointer() { return externalPointer; }
    public StreamStateHandle metadata() { return metadataHandle; }
    public CheckpointProperties props() { return props; }
}
`,
}

// javaFieldSet14 are CompletedCheckpoint and CheckpointProperties as Flink
// 1.4 declares them.
var javaFieldSet14 = map[string]string{
	"org/apache/flink/runtime/checkpoint/CheckpointProperties.java": `package org.apache.flink.runtime.checkpoint;
public class CheckpointProperties implements java.io.Serializable {
    private static final long serialVersionUID = -8835900655844879469L;
    private final boolean forced;
    private final boolean externalize;
    private final boolean discardSubsumed;
    private final boolean discardFinished;
    private final boolean discardCancelled;
    private final boolean discardFailed;
    private final boolean discardSuspended;
    public CheckpointProperties(boolean forced, boolean externalize, boolean subsumed, boolean finished, boolean cancelled, boolean failed, boolean suspended) {
        this.forced = forced; this.externalize = externalize; discardSubsumed = subsumed; discardFinished = finished;
        discardCancelled = cancelled; discardFailed = failed; discardSuspended = suspended;
    }
    public String describe() {
        return "props externalize=" + externalize + " forced=" + forced + " discard=" + discardSubsumed + discardFinished + discardCancelled + discardFailed + discardSuspended;
    }
}
`,
	"org/apache/flink/runtime/checkpoint/CompletedCheckpoint.java": `package org.apache.flink.runtime.checkpoint;
import java.util.Collection;
import java.util.Map;
import org.apache.flink.api.common.JobID;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.StreamStateHandle;
public class CompletedCheckpoint implements java.io.Serializable {
    private static final long serialVersionUID = -8360248179615702014L;
    private final JobID job;
    private final long checkpointID;
    private final long timestamp;
    private final long duration;
    private final Map<OperatorID, OperatorState> operatorStates;
    private final CheckpointProperties props;
    private final Collection<MasterState> masterHookStates;
    private final StreamStateHandle externalizedMetadata;
    private final String externalPointer;
    private transient volatile Object discardCallback;
    public CompletedCheckpoint(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops, Collection<MasterState> masters,
            CheckpointProperties props, StreamStateHandle meta, String pointer) {
        this.job = job; checkpointID = id; timestamp = ts; duration = completion - ts; operatorStates = ops; masterHookStates = masters;
        this.props = props; externalizedMetadata = meta; externalPointer = pointer;
    }
    // retention: 0 never (not externalized), 1 on failure, 2 on cancellation.
    public static CompletedCheckpoint create(JobID job, long id, long ts, long completion, Map<OperatorID, OperatorState> ops,
            Collection<MasterState> masters, int retention, org.apache.flink.core.fs.Path dir,
            org.apache.flink.runtime.state.filesystem.FileStateHandle meta, String pointer) {
        boolean ext = retention > 0;
        CheckpointProperties props = new CheckpointProperties(false, ext, true, true, retention < 2, !ext, retention < 2);
        return new CompletedCheckpoint(job, id, ts, completion, ops, masters, props, ext ? meta : null, ext ? pointer : null);
    }
    public JobID job() { return job; }
    public long id() { return checkpointID; }
    public long timestamp() { return timestamp; }
    public long completion() { return timestamp + duration; }
    public String pointer() { return externalPointer; }
    public StreamStateHandle metadata() { return null; }
    public CheckpointProperties props() { return props; }
}
`,
}

// javaTool reads and writes HA objects with the real JDK:
//
//	describe          class names on stdin; prints each class's descriptor
//	read ha|znode|leader FILE...  prints what ObjectInputStream reads
//	write DIR         writes znode.ser, leader*.ser and ha.ser
//	uri               hex UTF-8 Flink paths on stdin; prints hex URI and Path strings
var javaTool = `import java.io.*;
import java.lang.reflect.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.flink.api.common.JobID;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.*;
import org.apache.flink.runtime.checkpoint.channel.*;
import org.apache.flink.runtime.checkpoint.filemerging.LogicalFile;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.*;
import org.apache.flink.runtime.state.filemerging.*;
import org.apache.flink.runtime.state.filesystem.*;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

public class HaTool {
    static PrintStream out;

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        switch (args[0]) {
            case "describe": describe(); break;
            case "read":
                for (int i = 2; i < args.length; i++) {
                    out.println("== " + new File(args[i]).getName());
                    read(args[1], args[i]);
                }
                break;
            case "write": write(args[1]); break;
            case "uri": uri(); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        out.flush();
    }

    static List<String> stdinLines() throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> lines = new ArrayList<>();
        for (String l; (l = r.readLine()) != null; ) if (!l.isEmpty()) lines.add(l);
        return lines;
    }

    static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (byte c : s.getBytes(StandardCharsets.UTF_8)) b.append(String.format("%02x", c & 0xff));
        return b.toString();
    }

    static String unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }

    static void describe() throws Exception {
        for (String name : stdinLines()) {
            Class<?> c = Class.forName(name);
            ObjectStreamClass d = ObjectStreamClass.lookup(c);
            int flags = 0;
            if (Serializable.class.isAssignableFrom(c)) flags |= 0x02;
            if (Externalizable.class.isAssignableFrom(c)) flags |= 0x04;
            if (Enum.class.isAssignableFrom(c)) flags |= 0x10;
            try {
                Method m = c.getDeclaredMethod("writeObject", ObjectOutputStream.class);
                if (Modifier.isPrivate(m.getModifiers()) && !Modifier.isStatic(m.getModifiers())) flags |= 0x01;
            } catch (NoSuchMethodException e) {
            }
            Class<?> sup = c.getSuperclass();
            String superName = sup != null && Serializable.class.isAssignableFrom(sup) ? sup.getName() : "-";
            out.println("class " + name + " " + d.getSerialVersionUID() + " " + flags + " " + superName);
            for (ObjectStreamField f : d.getFields()) {
                out.println("field " + name + " " + f.getTypeCode() + " " + f.getName() + " " + (f.isPrimitive() ? "-" : f.getTypeString()));
            }
        }
    }

    static Object readObject(String file) throws Exception {
        try (ObjectInputStream in = new ObjectInputStream(new FileInputStream(file))) {
            Object o = in.readObject();
            if (in.read() != -1) throw new IOException("data after the object");
            return o;
        }
    }

    static void read(String kind, String file) throws Exception {
        if (kind.equals("leader")) {
            try (ObjectInputStream in = new ObjectInputStream(new FileInputStream(file))) {
                out.println("address " + in.readUTF());
                Object id = in.readObject();
                out.println("session " + (id == null ? "" : ((UUID) id).toString()));
                if (in.read() != -1) throw new IOException("data after the session id");
            }
            return;
        }
        Object o = readObject(file);
        if (kind.equals("znode")) {
            FileStateHandle h = (FileStateHandle) ((RetrievableStreamStateHandle<?>) o).wrapped();
            out.println("uri " + h.getFilePath().toUri().toString());
            out.println("path " + h.getFilePath());
            out.println("size " + h.getStateSize());
            return;
        }
        CompletedCheckpoint cc = (CompletedCheckpoint) o;
        out.println("job " + cc.job().toHexString());
        out.println("id " + cc.id());
        out.println("timestamp " + cc.timestamp());
        out.println("completion " + cc.completion());
        out.println("pointer " + (cc.pointer() == null ? "" : cc.pointer()));
        out.println(cc.props().describe());
        String meta = null;
        if (cc.metadata() instanceof FileStateHandle) {
            meta = fileLine((FileStateHandle) cc.metadata());
            out.println("metadata " + meta);
        }
        TreeSet<String> lines = new TreeSet<>();
        long inline = 0;
        IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
        ArrayList<Object> todo = new ArrayList<>();
        todo.add(cc);
        while (!todo.isEmpty()) {
            Object x = todo.remove(todo.size() - 1);
            if (x == null || seen.put(x, Boolean.TRUE) != null) continue;
            if (x instanceof OperatorState) opName(lines, x);
            if (x instanceof SegmentFileStateHandle) {
                if (!(x instanceof EmptySegmentFileStateHandle)) {
                    SegmentFileStateHandle s = (SegmentFileStateHandle) x;
                    lines.add("file " + x.getClass().getName() + "\t" + s.getFilePath() + "\t" + s.getStateSize() + "\t" + s.getStartPos() + "\tsegment");
                }
            } else if (x instanceof FileStateHandle) {
                if (x != cc.metadata()) {
                    String l = fileLine((FileStateHandle) x);
                    if (!l.equals(meta)) lines.add("file " + l);
                }
            } else if (x instanceof DirectoryStreamStateHandle) {
                lines.add("dir " + ((DirectoryStreamStateHandle) x).getDirectory());
            } else if (x instanceof ByteStreamStateHandle) {
                byte[] d = ((ByteStreamStateHandle) x).getData();
                inline += d == null ? 0 : d.length;
            }
            if (x instanceof Map) {
                for (Map.Entry<?, ?> e : ((Map<?, ?>) x).entrySet()) { todo.add(e.getKey()); todo.add(e.getValue()); }
                continue;
            }
            if (x instanceof Collection) {
                todo.addAll((Collection<?>) x);
                continue;
            }
            if (x instanceof Object[]) {
                todo.addAll(Arrays.asList((Object[]) x));
                continue;
            }
            Class<?> c = x.getClass();
            if (c.isArray() || x instanceof Enum || c.getName().startsWith("java.")) continue;
            for (Class<?> k = c; k != null && !k.getName().startsWith("java."); k = k.getSuperclass()) {
                for (Field f : k.getDeclaredFields()) {
                    if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) continue;
                    f.setAccessible(true);
                    todo.add(f.get(x));
                }
            }
        }
        for (String l : lines) out.println(l);
        out.println("inline " + inline);
    }

    // opName adds "opname NAME\tUID" for an OperatorState of the 2.x classes.
    static void opName(Set<String> lines, Object op) throws Exception {
        try {
            Field n = OperatorState.class.getDeclaredField("operatorName");
            Field u = OperatorState.class.getDeclaredField("operatorUid");
            n.setAccessible(true);
            u.setAccessible(true);
            lines.add("opname " + n.get(op) + "\t" + u.get(op));
        } catch (NoSuchFieldException e) {
        }
    }

    // opState is an OperatorState with a name and uid where the classes
    // have them (2.x).
    static OperatorState opState(String name, String uid, OperatorID id, Map<Integer, OperatorSubtaskState> m, ByteStreamStateHandle coord, int p, int maxP) throws Exception {
        try {
            return OperatorState.class.getConstructor(String.class, String.class, OperatorID.class, Map.class, ByteStreamStateHandle.class, int.class, int.class)
                .newInstance(name, uid, id, m, coord, p, maxP);
        } catch (NoSuchMethodException e) {
            return new OperatorState(id, m, coord, p, maxP);
        }
    }

    // withUpstream is an OperatorSubtaskState with upstream output buffer
    // state where the classes have it (2.3), else without.
    static OperatorSubtaskState withUpstream(StateObjectCollection mo, StateObjectCollection mk, StateObjectCollection in, StateObjectCollection upstream, long size) throws Exception {
        try {
            Class<?> c = StateObjectCollection.class;
            return OperatorSubtaskState.class.getConstructor(c, c, c, c, c, c, c, long.class, long.class)
                .newInstance(mo, none(), mk, none(), in, upstream, none(), size, size);
        } catch (NoSuchMethodException e) {
            return new OperatorSubtaskState(mo, none(), mk, none(), in, none(), size, size);
        }
    }

    static String fileLine(FileStateHandle h) {
        return h.getClass().getName() + "\t" + h.getFilePath() + "\t" + h.getStateSize() + "\t0\tfile";
    }

    static void uri() throws Exception {
        for (String line : stdinLines()) {
            try {
                Path p = new Path(unhex(line));
                out.println(hex(p.toUri().toString()) + " " + hex(p.toString()));
            } catch (IllegalArgumentException e) {
                out.println("error");
            }
        }
    }

    static void writeObject(File f, Object o) throws IOException {
        try (ObjectOutputStream os = new ObjectOutputStream(new FileOutputStream(f))) {
            os.writeObject(o);
        }
    }

    static void leader(File f, String address, UUID id) throws IOException {
        try (ObjectOutputStream os = new ObjectOutputStream(new FileOutputStream(f))) {
            os.writeUTF(address);
            os.writeObject(id);
        }
    }

    static StateObjectCollection one(Object o) { return new StateObjectCollection(Collections.singleton(o)); }

    static StateObjectCollection none() { return new StateObjectCollection(Collections.emptyList()); }

    static void write(String dir) throws Exception {
        writeObject(new File(dir, "znode.ser"), new RetrievableStreamStateHandle<>(
            new FileStateHandle(new Path("file:/flink/ha/default/completed Checkpoint-\u00fc\u20ac\ud834\udd1e#1"), 4321)));
        leader(new File(dir, "leader.ser"), "pekko.tcp://flink@jm-\u00fc:6123/user/rpc/dispatcher_1",
            new UUID(0x0123456789abcdefL, 0xfedcba9876543210L));
        StringBuilder longAddr = new StringBuilder("http://");
        for (int i = 0; i < 600; i++) longAddr.append("h\u00e9");
        leader(new File(dir, "leader-long.ser"), longAddr.toString(), new UUID(-1L, 1L));
        leader(new File(dir, "leader-null.ser"), "", null);

        JobID job = new JobID(0x0102030405060708L, 0xf0e0d0c0b0a09080L);
        String chk = "file:/flink/checkpoints/job \u00fc/chk-42";
        Path chkDir = new Path(chk);
        FileStateHandle meta = new FileStateHandle(new Path(chk + "/_metadata"), 777);

        Map<String, OperatorStateHandle.StateMetaInfo> names = new HashMap<>();
        names.put("list-state", new OperatorStateHandle.StateMetaInfo(new long[] {0, 8}, OperatorStateHandle.Mode.UNION));
        OperatorStreamStateHandle opHandle = new OperatorStreamStateHandle(names,
            new RelativeFileStateHandle(new Path(chk + "/op 0"), "op 0", 64));
        KeyGroupsStateHandle kg = new KeyGroupsStateHandle(
            new KeyGroupRangeOffsets(new KeyGroupRange(0, 1), new long[] {0, 50}),
            new FileStateHandle(new Path(chk + "/kg 0"), 100), new StateHandleID("kg-0"));
        List<InputChannelStateHandle> channels = new ArrayList<>();
        FileStateHandle channelFile = new FileStateHandle(new Path(chk + "/channels"), 300);
        channels.add(new InputChannelStateHandle(0, new InputChannelInfo(0, 0), channelFile, new ArrayList<>(Arrays.asList(0L, 100L)), 150));
        channels.add(new InputChannelStateHandle(0, new InputChannelInfo(0, 1), channelFile, new ArrayList<>(Arrays.asList(150L)), 150));
        List<InputChannelStateHandle> upstream = new ArrayList<>();
        upstream.add(new InputChannelStateHandle(0, new InputChannelInfo(1, 0), new FileStateHandle(new Path(chk + "/upstream"), 40), new ArrayList<>(Arrays.asList(0L)), 40));
        OperatorSubtaskState s0 = withUpstream(one(opHandle), one(kg), new StateObjectCollection(channels), new StateObjectCollection(upstream), 464);

        List<IncrementalKeyedStateHandle.HandleAndLocalPath> shared = new ArrayList<>();
        shared.add(new IncrementalKeyedStateHandle.HandleAndLocalPath(new FileStateHandle(new Path("hdfs://nn:8020/flink/shared/000001.sst"), 1234), "000001.sst"));
        shared.add(new IncrementalKeyedStateHandle.HandleAndLocalPath(new ByteStreamStateHandle("tiny", new byte[] {1, 2, 3}), "000002.sst"));
        List<IncrementalKeyedStateHandle.HandleAndLocalPath> priv = new ArrayList<>();
        priv.add(new IncrementalKeyedStateHandle.HandleAndLocalPath(new RelativeFileStateHandle(new Path(chk + "/MANIFEST"), "MANIFEST", 55), "MANIFEST-000003"));
        priv.add(new IncrementalKeyedStateHandle.HandleAndLocalPath(new DirectoryStreamStateHandle(new Path("s3://bucket/taskowned dir")), "dir"));
        IncrementalRemoteKeyedStateHandle inc = new IncrementalRemoteKeyedStateHandle(new UUID(7, 8), new KeyGroupRange(2, 3), 42, shared, priv,
            EmptySegmentFileStateHandle.INSTANCE, 1292, new StateHandleID("inc-1"));
        OperatorStreamStateHandle segmented = new OperatorStreamStateHandle(new HashMap<>(),
            new SegmentFileStateHandle(new Path("file:/flink/checkpoints/shared/op_1_2_/seg file"), 10, 20, CheckpointedStateScope.SHARED,
                new LogicalFile.LogicalFileId("logical-1")));
        OperatorSubtaskState s1 = new OperatorSubtaskState(one(segmented), none(), one(inc), none(), none(), none(), 1312, 1312);

        Map<Integer, OperatorSubtaskState> subtasks = new HashMap<>();
        subtasks.put(0, s0);
        subtasks.put(1, s1);
        subtasks.put(2, new FinishedOperatorSubtaskState(none()));
        OperatorID op1 = new OperatorID(11, 22);
        OperatorID op2 = new OperatorID(-1, Long.MIN_VALUE);
        Map<OperatorID, OperatorState> ops = new HashMap<>();
        ops.put(op1, opState("Map \u00fc", "uid-1", op1, subtasks, new ByteStreamStateHandle("coordinator", new byte[10]), 3, 128));
        ops.put(op2, new FullyFinishedOperatorState(op2, 1, 128));
        List<MasterState> masters = new ArrayList<>();
        masters.add(new MasterState("hook", new byte[] {9, 9}, 1));

        CompletedCheckpoint cc = CompletedCheckpoint.create(job, 42, 1700000000000L, 1700000001234L, ops, masters, 2, chkDir, meta, chkDir.toString());
        writeObject(new File(dir, "ha.ser"), cc);
        CompletedCheckpoint plain = CompletedCheckpoint.create(job, 43, 1700000002000L, 1700000003000L, new HashMap<>(), Collections.emptyList(), 0,
            new Path("file:/flink/checkpoints/job \u00fc/chk-43"), new FileStateHandle(new Path("file:/flink/checkpoints/job \u00fc/chk-43/_metadata"), 99),
            "file:/flink/checkpoints/job \u00fc/chk-43");
        writeObject(new File(dir, "ha-plain.ser"), plain);
    }
}
`
