// Package scale is the scale harness of issue 32: a real `ckptfs mount
// --mode replica` over a NAS of many jobs, measured as an operator would.
//
// The NAS is a directory of J jobs × 3 retained RocksDB-incremental
// checkpoints (chk-N with _metadata and a few exclusive files, shared/
// with the SST files, consecutive checkpoints sharing 95% of them), served
// by integration/faultfs with a delay added to every operation (a NAS
// whose metadata round trip costs that much; a stat is one, as on NFS,
// since it uses the attributes its LOOKUP returned). Every _metadata is real
// Flink format, made from a real RocksDB-incremental _metadata of the
// committed corpus (integration/flinkdata) with its handles rewritten to
// the generated files, which are sparse: sizes without content. The
// layout is cached under $CKPTFS_CACHE/scale, keyed by its parameters.
//
// The daemon is the binary the tree builds, run as a separate process
// with its default poll (2 s). A writer adds one checkpoint per job
// every interval, round robin over the jobs, as Flink does (the shared
// files first, then chk-N's files, then ._metadata.inprogress.<uuid>
// renamed to _metadata) and retires the oldest (Flink's subsumption:
// chk-N and the shared files no retained checkpoint references any
// more). It writes the NAS's directory itself, not through faultfs: its
// writes are the replication's, and neither delayed nor counted.
//
// BenchmarkScale (make bench-scale) reports start to mounted, the time
// until every job's newest checkpoint is visible, the daemon's CPU and
// RSS, its pass time, the visibility latency of new checkpoints and of
// a deleted or truncated shared file, the backing operations per pass,
// and the floor: the same number of operations at the rate the faultfs
// mount serves them issued directly with the daemon's concurrency. TestScaleShort is its
// short form for make test (CKPTFS_SCALE_SHORT=1 switches it on): it
// fails when a steady pass with nothing new costs the whole tree again.
package scale
