// Package manifest answers one question: does this site hold every byte
// that checkpoint N needs?
//
// A checkpoint is never complete because its directory exists, because
// _metadata exists, or because a listing looks plausible: Flink creates
// chk-N when it triggers a checkpoint, and an asynchronous replica sees
// files in any order. The answer comes from Flink's own _metadata (package
// metadata): a Manifest lists the distinct files it references with their
// exact sizes, and a Verifier checks them against a directory tree.
//
// Levels (docs/design.md §3): L1 (metadata-complete), L2 (the ZooKeeper
// pointer's HA file is complete too), L3 (checksums sealed on the primary
// match). An I/O error is "unknown", and unknown counts as incomplete.
//
// Flink stores absolute URIs of the writing site. A Resolver maps them
// (--map URI_PREFIX=LOCAL_DIR) and confines every result to the configured
// roots: a reference that climbs out with ".." or names an unmapped file
// system is an outside_root problem and is never opened, and files are
// opened with RESOLVE_BENEATH so a symbolic link cannot lead out either.
//
// Verification is incremental, and a mount's costs what changed (design
// §3.6). A parsed manifest is reused while its _metadata keeps the same
// inode, size and times. A file found complete is trusted (MaxAge > 0)
// until its directory loses its name (Observe: directory stamps decide
// what is listed again, watch.go), the audit finds it changed (Audit:
// each trusted file is stat'ed again every MaxAge/2), or MaxAge passes;
// a complete verdict stands, without a look at its files, while the
// directories holding them keep their generations (trust.go). So a new
// checkpoint that shares most of its shared/ files with the previous one
// costs only its new files: its _metadata is parsed completely and every
// file not trusted is stat'ed, and that is all. What acts on a verdict
// verifies WithoutTrust. To keep the rest cheap, the Verifier remembers
// each path it has seen with where it resolves (a path is resolved and
// classified once) and when it was found complete, and a manifestBuilder
// builds the new manifest while _metadata is parsed, mapped and decoded
// where it lies (metadata.DecodeReferencesBytes), without a decoded
// tree: a known path that comes in the previous checkpoint's order costs
// one comparison, any other known path a map lookup that does not copy
// it. The same pass merges repeated paths, decides which files need a
// stat, and hands new files to stat workers. Parses on one Verifier take
// turns.
//
// Sizes come from the handles, except for one kind of file: a changelog
// (DSTL) file is a flag byte and its changes, Snappy-framed when
// dstl.dfs.compression.enabled, and its handles count the uncompressed
// changes. Its flag byte is read, and when compressed its chunk headers
// (dstl.go): their uncompressed lengths must add up to the handle's size
// and the last chunk must end where the file does. What was found is
// kept per file version, so each version is read once.
//
// Besides checkpoints, a JobManager recovering a job on another site
// reads the job graph (execution plan) HA file, the job's blobs and its
// job result store entries; any of them missing or torn ends the
// JobManager process. VerifyJobHA judges them per job (hastate.go): the
// HA file at its recorded size deserializing completely, each blob with
// the SHA-1 its key names (Flink records no size), each result entry
// complete JSON. A Catalog hides those that are not complete from a
// replica mount, as it hides incomplete checkpoints (hafiles.go).
//
// The names ckptfs gives a meaning to, .ckptfs (IsStateDir), chk-N
// (CheckpointIDFromDirName) and savepoint-... (IsSavepointDirName), and
// what L2-complete means
// (PointerVerdict.L2Complete) are defined here once; fusefs, zkbridge and
// the commands use these definitions rather than their own.
//
// The package is pure policy: no FUSE, no ZooKeeper, no logging. fusefs and
// zkbridge translate its verdicts.
package manifest
