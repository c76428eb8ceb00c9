// Package scenario holds the end-to-end disaster-recovery scenario of
// design §1: Flink runs in DC1 with ZooKeeper HA over an ensemble
// stretched across three sites, its checkpoint storage is replicated to
// DC2 asynchronously, and DC1 is lost at an arbitrary instant.
//
// One run (TestIntegration_Failover/<kind>, one per replication family of
// package replication: snapshot, filelevel, perobject):
//
//  1. Five real ZooKeeper servers: 0 and 1 stand for DC1, 2 and 3 for DC2,
//     4 for DC3. DC1 and DC2 each have a backing directory (their NAS).
//     The flinkemu JobManager (Flink 1.20 layout, num-retained 3) writes
//     its checkpoints, HA files and pointer znodes with DC1's backing
//     directory as Flink's file system (no FUSE mount on DC1: the
//     emulator writes the backing directory directly).
//  2. The JobManager completes checkpoints while a replication simulator
//     copies DC1's backing directory to DC2's. At a seeded random moment
//     DC1 is lost: the replication is stopped wherever it is, the
//     JobManager's ZooKeeper session is closed (its ephemeral locks
//     vanish) and ZooKeeper servers 0 and 1 are stopped (3 of 5 remain).
//  3. At that instant the test records, with a manifest.Verifier over
//     DC2's backing directory, which pointers are L2-complete on DC2; the
//     newest of them is the optimal recovery point.
//  4. zkbridge.Takeover runs for site dc2 against the surviving servers,
//     with the path mapping Flink path -> DC2 backing directory.
//  5. A Flink-like restore follows the pointers that remain: every
//     retained pointer's HA file must be readable (Flink 1.12.5+), and
//     the newest one's _metadata and state files are read in full from
//     DC2's backing directory and compared, byte for byte (SHA-256),
//     with what the emulator wrote in DC1.
//
// The checker asserts the invariants of design §6 that apply:
//
//   - (1) the restore after takeover succeeds: no file is missing or
//     short, every byte matches;
//   - (2) the newest remaining pointer is L2-complete on DC2 and is the
//     optimal one recorded at the instant of loss;
//   - (3) a job that had an L2-complete pointer still has one, every
//     retracted pointer has a backup under /ckptfs/<cluster>/pruned
//     holding its original bytes, no pointer at or below the optimal one
//     is touched, and not one file of DC2's backing directory changed;
//     when DC2 held no L2-complete pointer the takeover refuses and
//     changes no pointer.
//
// Invariant (4) (markers never ahead) needs a publishing mount, which this
// scenario does not run yet.
//
// TestIntegration_Baseline/<kind> is the same run without ckptfs: the
// restore starts from ZooKeeper's pointers as they are. It proves the
// problem of seed-problem.md: whenever ZooKeeper's newest pointer is ahead
// of DC2's newest L2-complete checkpoint, the restore fails on a missing
// or short file, and whenever it is not, the newest checkpoint restores
// byte for byte (the whole recovery can then still fail only on an older
// retained pointer whose HA file is unreadable on DC2, which is asserted
// to be the only other cause).
//
// Every subtest draws its moments from a seed derived from its name,
// logged at its start; CKPTFS_SCENARIO_SEED=<n> replays a run with seed n.
// The tests need ZooKeeper and Java (zktest); with CKPTFS_REQUIRE_ZK=1
// they fail instead of skipping when those are missing.
package scenario
