package org.apache.flink.core.fs;

import java.net.URI;

/** Same name, serialVersionUID and serializable fields as Flink's class (flink-formats.md §1.7). */
public class Path implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    private URI uri;

    public Path(URI uri) {
        this.uri = uri;
    }

    public URI toUri() {
        return uri;
    }
}
