// Package javaser reads and writes Java Object Serialization streams
// (Java Object Serialization Specification, chapter 6).
//
// Flink keeps the facts ckptfs must check in Java-serialized form: the
// checkpoint znodes in ZooKeeper, the HA files completedCheckpoint<hex>
// they point to, and the CheckpointProperties at the end of every _metadata
// of format version 4 or later. To tell whether a replica holds everything
// a checkpoint needs, and to write znodes and HA files from an emulator,
// ckptfs must decode and encode those streams without a JVM.
//
// The package implements the protocol's grammar generically: it knows no
// Flink or JDK class, except the small JDK helper used to build common
// objects. A decoded Stream keeps every detail needed to write the same
// bytes again: which values are back references to earlier handles
// (shared Go pointers), where TC_RESET occurred, how blocks and strings
// were framed. Encode of a decoded stream reproduces its input exactly.
//
// Input is treated as hostile. Decoding
//   - never panics and never loops without consuming input;
//   - checks every length and count against the bytes left before
//     allocating (an array of 2^31 longs in a 20-byte input fails at
//     once), and charges what it allocates to a budget proportional to
//     the input (DecodeBudget, Decoder.MaxAlloc), so that values costing
//     a byte each (nulls) cannot take 16 bytes each;
//   - limits nesting (Decoder.MaxDepth), so deep input cannot exhaust the
//     stack;
//   - accepts a reference only to an existing handle of a fitting kind;
//   - requires the stream to end exactly at the end of the input
//     (DecodePrefix is the variant for embedded streams);
//   - reports failures as *DecodeError with the byte offset and one of
//     ErrTruncated, ErrMalformed, ErrTooDeep, ErrUnsupported or
//     ErrTooLarge.
//
// Decoding is slightly stricter than the JDK where the JDK accepts
// non-canonical input that no Java writer produces (booleans other than 0
// and 1, overlong modified UTF-8), because such bytes could not be written
// back identically. Two valid constructs cannot be parsed without the
// writing class and are reported as ErrUnsupported: TC_EXCEPTION, and
// Externalizable data in the old protocol version 1.
package javaser
