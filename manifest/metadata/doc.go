// Package metadata reads and writes Flink's checkpoint and savepoint
// metadata file, _metadata, in format versions 2 to 7.
//
// ckptfs decides whether a checkpoint is complete from this file: it names
// every state file the checkpoint needs (inside chk-N, in shared/, in
// taskowned/, in file-merging and changelog locations) with its exact size.
// A wrong answer either hides a good checkpoint or lets Flink restore one
// whose files are missing, so the decoder follows Flink's serializers
// (MetadataV2V3SerializerBase and the versioned subclasses) to the byte and
// accepts a file only when its structure ends exactly at the end of the
// file. A prefix of a valid file — which is what a replica holds while a
// copy is under way — always fails.
//
// The input is untrusted (a torn or corrupted replica, or worse), so the
// decoder never panics, bounds nesting, and checks every count and length
// against the bytes that remain before it allocates anything. Errors are
// *ParseError values carrying the byte offset.
//
// Decode keeps the complete structure, so Encode writes the same bytes
// again; the Flink emulator in integration/ writes its checkpoints with
// Encode. Decode reads sequentially through its own buffer and, unless
// Options.KeepInline is set, skips the bytes of inline state, so a large
// file is never held in memory.
//
// DecodeReferences is Decode for callers that only need the files a
// checkpoint references, which is what verification needs for every new
// checkpoint: the same decoder, with the same checks and errors, reports
// each reference to a Visitor and keeps nothing, so it costs little more
// than reading the bytes.
//
// Version 1 (Flink 1.1 and 1.2 savepoints) is refused with
// ErrUnsupportedVersion.
package metadata
