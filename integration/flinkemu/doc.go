// Package flinkemu writes what a Flink JobManager writes for ZooKeeper
// high availability, byte for byte where ckptfs reads it, so that the
// ZooKeeper bridge can be tested against every layout without running
// five Flink releases.
//
// A JobManager holds its own ZooKeeper session, like a real one, and for
// the chosen Layout creates:
//
//   - the leader latch (EPHEMERAL_SEQUENTIAL children, Curator's
//     LeaderLatch) and the leader information nodes (ephemeral, written
//     with flinkha.EncodeLeaderInfo) where that Flink release keeps them;
//   - per job: the job graph znode (execution plan in 2.x) pointing to a
//     submittedJobGraph file, the checkpoint id counter (Curator's
//     SharedCount: a 4-byte big-endian int), the running job registry entry
//     (1.5-1.14);
//   - per checkpoint, written through whatever Config.Storage is (a ckptfs
//     mount in the scenario) in Flink's order: chk-N, the tasks' exclusive
//     state files, RocksDB-style shared/ files (new ones, and some of the
//     previous checkpoint's reused), then _metadata (metadata.Encode;
//     staged as ._metadata.inprogress.<uuid> and renamed with
//     MetadataInProgress), the HA file completedCheckpoint<12 hex>
//     (flinkha.EncodeCompletedCheckpoint) in the HA directory, and the
//     pointer znode %019d (flinkha.EncodeStateHandle) with its lock owned by
//     the JobManager's session, created in one multi like Flink's
//     addAndLock (1.15+: the node, a persistent locks child and the
//     ephemeral locks/<uuid>);
//   - subsumption beyond Config.Retained in Flink's order: release the
//     lock, delete locks (1.15+), delete the HA file, delete the node, then
//     discard the checkpoint's files and the shared files no retained
//     checkpoint references.
//
// Config.BeforeStep can stop a checkpoint before any of its writes, as
// when the site dies in the middle of one. State files hold Content of
// their name, so Restore (Flink's recovery: every retained pointer's HA
// file, then every file of the newest checkpoint, retried on failure) can
// check every byte it reads, and Recover lets a second JobManager adopt a
// job after a failover and checkpoint on.
//
// Closing the JobManager's session (Close), or expiring it through a
// zktest proxy, makes its ephemeral nodes vanish, as when the site it runs
// in dies. Everything else stays.
//
// Files are written under Config.Storage, which stands for Flink's shared
// file system; every path stored in znodes, HA files and _metadata is the
// Flink path under Config.FlinkStorage instead (for example file:/flink),
// so a reader maps it back with --map FlinkStorage=Storage, as on a real
// standby site. A test makes a checkpoint incomplete "on the replica" by
// removing or truncating the files a Checkpoint lists.
//
// Dump reads a ZooKeeper subtree (data, children, ephemeral flags) so
// tests can prove that an operation left it byte-identical.
//
// NOTE: this is test infrastructure, not a stable API.
package flinkemu
