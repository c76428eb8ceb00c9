// Command drill lays out a failover rehearsal for ckptfs on a staging
// machine, without a real failover and without Flink: `make dr-rehearsal`
// runs it.
//
// It exists because rehearsing a takeover needs what only a failed site
// leaves behind: ZooKeeper pointing at a checkpoint the standby's replica
// holds only in part. Building that by hand took a program of its own
// against the test harnesses; drill builds it in one command on the
// operator's own ZooKeeper and directories:
//
//   - in ZooKeeper, under a Flink namespace of its own
//     (<-path-root>/<-cluster-id>, default /ckptfs-drill/drill), what a
//     Flink JobManager writes for one job with RocksDB-style incremental
//     checkpoints (integration/flinkemu), four checkpoints of which Flink
//     retains three; the JobManager's session is then closed, as when its
//     site dies;
//   - under -staging, dc1/nas (the active site's NAS) and dc2/nas (its
//     replica) holding every file but one shared/ file of the newest
//     checkpoint, which "is not replicated yet", and dc2/ckptfs.yaml, the
//     standby site's configuration;
//   - drill.json, what it laid, for -clean.
//
// It then prints the drill: the ckptfs commands to run (verify, status,
// takeover, restore-pruned), the exit status of each and lines of what
// each prints; the package's test runs exactly those commands against a
// real ZooKeeper and checks both. Between them, -recover shows what
// Flink's recovery on the standby site would do at that point: it reads
// the pointers and files as flinkemu.Restore does, and writes nothing.
//
// It refuses a namespace that already holds data (Flink's namespace, or
// ckptfs's /ckptfs/<cluster-id>) and a -staging directory that is neither
// empty nor a previous drill's, unless -replace, which deletes the
// namespace's znodes (and a previous drill's directories) first. -clean
// removes what drill.json lists, and nothing else.
package main
