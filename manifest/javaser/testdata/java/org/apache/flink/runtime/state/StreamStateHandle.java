package org.apache.flink.runtime.state;

/** Stand-in for Flink's interface; only its name matters on the wire. */
public interface StreamStateHandle extends java.io.Serializable {}
