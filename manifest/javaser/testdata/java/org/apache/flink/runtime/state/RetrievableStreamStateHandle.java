package org.apache.flink.runtime.state;

/** Same name, serialVersionUID and serializable fields as Flink's class (flink-formats.md §1.7). */
public class RetrievableStreamStateHandle<T extends java.io.Serializable> implements java.io.Serializable {
    private static final long serialVersionUID = 314567453677355L;

    private final StreamStateHandle wrappedStreamStateHandle;

    public RetrievableStreamStateHandle(StreamStateHandle wrapped) {
        this.wrappedStreamStateHandle = wrapped;
    }

    public StreamStateHandle getWrappedStreamStateHandle() {
        return wrappedStreamStateHandle;
    }
}
