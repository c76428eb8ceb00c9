// Package scenario is the proof that ckptfs solves the user's problem:
// the end-to-end disaster-recovery scenario of docs/design.md §1, run
// through real mounts, real ZooKeeper servers and the built ckptfs
// binary, with a checker for the invariants of docs/design.md §6.
//
// One run (runScenario):
//
//  1. Five ZooKeeper servers: 0 and 1 stand for DC1, 2 and 3 for DC2, 4
//     for DC3 (the tie-breaker). Each data center has a NAS (a backing
//     directory) and a `ckptfs mount` daemon over it at the path Flink
//     uses: DC1's is primary (it seals a manifest for every checkpoint
//     written through it), DC2's a replica. Both publish site markers and
//     follow /ckptfs/<cluster>/active-site.
//  2. The flinkemu JobManager in DC1 (a Flink layout from 1.4-1.13 to 2.x)
//     writes its checkpoints through DC1's mount in Flink's order, with
//     RocksDB-style shared/ files reused across checkpoints and subsumed
//     ones deleted, while a replication simulator (snapshot, file-level or
//     per-object) copies DC1's NAS to DC2's.
//  3. At a moment drawn from the run's seed, between two checkpoints or
//     in the middle of one, DC1 is lost: the replication stops wherever it
//     is, DC1's mount daemon is killed, the JobManager's ZooKeeper session
//     closes or expires (cut off behind proxies), DC1's servers stop.
//  4. The checker records which pointers are L2-complete on DC2 at that
//     instant: the newest is the best recovery point DC2 allows.
//  5. The baseline: Flink restoring from ZooKeeper as it is, from DC2's
//     plain directory, without ckptfs. Whenever ZooKeeper is ahead of
//     DC2 it must fail on a missing or torn file on every attempt (the
//     user's restore loop); otherwise it must restore the newest.
//  6. `ckptfs takeover` runs on DC2 against the surviving servers.
//  7. A JobManager on DC2 restores through DC2's mount, reading every
//     file of the newest remaining checkpoint and checking every byte,
//     then, once the takeover's active-site has promoted DC2's mount,
//     completes new checkpoints through it, which DC2 seals and marks.
//
// The invariants checked on every run (docs/design.md §6.1 to §6.4):
//
//   - (1) the restore after takeover succeeds, every byte as DC1 wrote it,
//     and Flink on DC2 never reaches for a checkpoint the mount hides;
//   - (2) the newest pointer after takeover is L2-complete on DC2 and is
//     the one recorded at the instant of loss (the RPO is optimal);
//   - (3) exactly the pointers above it or with an unreadable HA file are
//     retracted, each backed up with its original bytes; no file of DC2
//     changes; with nothing restorable the takeover refuses (exit 4) and
//     changes nothing;
//   - (4) every marker either site publishes names a checkpoint complete
//     on that site at the marker's level (checked as each one appears).
//
// TestIntegration_Failover (make test) runs each replication family once,
// each with another Flink layout. TestChaos (make chaos) runs many
// randomized runs and prints a table. TestDemo (make demo) narrates one
// run. Every run logs its seed; CKPTFS_SCENARIO_SEED=<n> replays it.
// The tests need ZooKeeper, Java and FUSE; with CKPTFS_REQUIRE_ZK=1 and
// CKPTFS_REQUIRE_FUSE=1 they fail instead of skipping when those are
// missing.
package scenario
