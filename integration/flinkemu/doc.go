// Package flinkemu writes what a Flink JobManager writes for ZooKeeper
// high availability, byte for byte where ckptfs reads it, so that the
// ZooKeeper bridge can be tested against every layout without running
// six Flink releases.
//
// A JobManager holds its own ZooKeeper session, like a real one, and for
// the chosen Layout (and Config.Release within it) creates:
//
//   - the leader latch (Curator's LeaderLatch: one protected
//     EPHEMERAL_SEQUENTIAL child _c_<UUID>-latch-<%010d> per latch and
//     process) and the leader information nodes (ephemeral, written with
//     flinkha.EncodeLeaderInfo; 1.15+: one leader session id for all
//     components, as one election serves them) where that Flink release
//     keeps them, their RPC addresses naming the endpoints as Flink does
//     (RpcServiceUtils.createRandomName, one counter per process:
//     resourcemanager_0, dispatcher_1, then jobmanager_2, jobmanager_3
//     ... for the JobMasters of the jobs submitted or recovered); in 1.4
//     one election only, the legacy JobManager's for job 0
//     (leaderlatch/<0...0>/job_manager_lock, leader/<0...0>/
//     job_manager_lock, its actor akka.tcp://flink@<host>/user/jobmanager),
//     which runs every job itself;
//   - at start, the HA storage's directories: ha/<cluster>/blob,
//     ha/job-result-store/<cluster> (1.15+), and in 2.3 the empty
//     persistent applications znode and ha/application-result-store/
//     <cluster>;
//   - per job: the user jar in the HA blob store (ha/<cluster>/blob/
//     job_<job>/blob_p-<sha1>-<random>, in every release), the job graph
//     znode (execution plan in 2.x) pointing to a submittedJobGraph file
//     (a JobGraph, in 2.x a StreamGraph, up to 1.9 a SubmittedJobGraph
//     holding the JobGraph, with only the fields ckptfs reads: job id,
//     name and the jar's blob key), the checkpoint id counter
//     (Curator's SharedCount: a 4-byte big-endian int), the running job
//     registry entry (1.5-1.14), checkpoints/<job>/shared and taskowned
//     (1.5+);
//   - per checkpoint, written through whatever Config.Storage is (a ckptfs
//     mount in the scenario) in Flink's order: chk-N, the tasks' exclusive
//     state files, RocksDB-style shared/ files (new ones, and some of the
//     previous checkpoint's reused; the private MANIFEST file goes to
//     shared/ too), then _metadata (metadata.Encode, in the
//     release's format version with its CheckpointProperties; staged as
//     ._metadata.inprogress.<uuid> and renamed with MetadataInProgress),
//     the HA file completedCheckpoint<12 hex>
//     (flinkha.EncodeCompletedCheckpoint) in the HA directory
//     (ha/<cluster>; up to 1.9 ha itself, high-availability.storageDir),
//     and the
//     pointer znode %019d (flinkha.EncodeStateHandle) with its lock owned by
//     the JobManager's session, created in one multi like Flink's
//     addAndLock (1.15+: the node, a persistent locks child and the
//     ephemeral locks/<uuid>, the uuid naming the job's checkpoint store;
//     the job graph store has its own). The persistent locks child and
//     the ephemeral lock below it hold Curator's default data, the
//     host's address (Config.Address). A source operator's
//     state and RocksDB's CURRENT stay inline, as small state does in
//     Flink. 1.4 writes no _metadata: chk-N holds the state files alone,
//     referenced by absolute FileStateHandles from the HA file (1.4's
//     field set), the only description of the checkpoint; RocksDB's new
//     files go to the chk-N of the checkpoint that wrote them (there is
//     no shared/), where later ones reference them; a retained
//     (externalized, Config.Retention) checkpoint's metadata goes to a
//     flat checkpoint_metadata-<12 hex> (format version 2) beside the
//     jobs' directories, before the HA file;
//   - subsumption beyond Config.Retained in Flink's order: release the
//     lock, delete locks (1.15+), delete the HA file, delete the node, then
//     discard the checkpoint's files and the shared files no retained
//     checkpoint references (1.4: file by file, a chk-N going with its
//     last file, so it stays while a retained checkpoint references an
//     sst file in it).
//
// integration/realflink's TestEmulatorMatchesRealFlink holds all of this
// against what real Flink wrote, running the emulator as the release of
// each harvested fixture (integration/realflink/testdata: 1.4.2, 1.13.6,
// 1.14.6, 1.15.4, 1.20.5 and 2.3.0, a release of every layout), and lists
// what still differs; 1.5-1.12 and 1.16-1.17 follow Flink's sources alone.
//
// Config.BeforeStep can stop a checkpoint before any of its writes, as
// when the site dies in the middle of one. State files hold Content of
// their name, so Restore (Flink's recovery: every retained pointer's HA
// file, then every file of the newest checkpoint, retried on failure; in
// 1.4 from the HA file alone) can check every byte it reads, and Recover
// lets a second JobManager adopt a job after a failover and checkpoint
// on.
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
