package org.apache.flink.runtime.state.filesystem;

import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.state.StreamStateHandle;

/** Same name, serialVersionUID and serializable fields as Flink's class (flink-formats.md §1.7). */
public class FileStateHandle implements StreamStateHandle {
    private static final long serialVersionUID = 350284443258002355L;

    private final Path filePath;
    private final long stateSize;

    public FileStateHandle(Path filePath, long stateSize) {
        this.filePath = filePath;
        this.stateSize = stateSize;
    }

    public Path getFilePath() {
        return filePath;
    }

    public long getStateSize() {
        return stateSize;
    }
}
