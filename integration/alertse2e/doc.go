// Package alertse2e proves the alert rules of deploy/prometheus in a real
// Prometheus: Debian's prometheus binary loads ckptfs-alerts.yml and
// scrapes real `ckptfs mount` daemons (the built binary, over real
// ZooKeeper from zktest, metrics-addr on loopback, scrape job ckptfs as
// docs/deploy.md names it) and the node exporter's textfile collector
// (its other collectors disabled) reading the file `ckptfs takeover
// --metrics-textfile` writes. Each alert is driven by the fault it is for,
// and the test reads Prometheus's HTTP API (/api/v1/alerts, /api/v1/rules,
// /api/v1/query) for its state.
//
// Why a real Prometheus and not promtool alone: promtool's unit tests
// (ckptfs-alerts_test.yml) feed the rules series written by hand, so they
// prove the expressions, not that ckptfs exports what the rules read when
// the fault happens: a counter born at 1 that increase() never sees, a
// label the daemon does not set, a gauge that stays at its last value
// while the NAS hangs, a textfile series that the rule's guard keeps
// silent. Here the series come from the daemons and the node exporter as
// they are deployed.
//
// # Worlds
//
// Each scenario is a world of its own: its daemons, its emulated Flink
// JobManager (integration/flinkemu) and two Prometheus servers that scrape
// only them, so that every alert belongs to exactly one world. The worlds
// share one ZooKeeper server (each its own Flink cluster id and ckptfs
// namespace), but for zkdown, which stops its own. They run at once.
//
// Per world, the fault, the alerts it drives, and in parentheses the
// others its silence check allows (each up to the state its world's list
// names):
//
//   - hidden: a lookup of an incomplete chk-N through the replica mount,
//     once Prometheus holds the job's counter at 0 (the first event):
//     CkptfsHiddenCheckpointAccess.
//   - refused: the first takeover ever run on a site that holds none of
//     ZooKeeper's pointers whole (exit 4), then a second one:
//     CkptfsTakeoverRefused (CkptfsNoCompletePointer: a takeover there
//     would refuse).
//   - lag: Flink keeps completing checkpoints, 10 minutes apart by their
//     trigger times, while the replication of the checkpoints to dc2
//     stops (that of the HA files keeps up); then it catches up:
//     CkptfsLagHigh, CkptfsLagSecondsHigh, and both end.
//   - down: kill -9 of dc2's daemon, then of dc1's, the last one:
//     CkptfsDaemonDown, CkptfsMetricsAbsent.
//   - hung: every operation on dc2's NAS hangs (faultfs):
//     CkptfsBackingHung (CkptfsNoCompleteCheckpoint,
//     CkptfsNoCompletePointer, CkptfsLagHigh: what the daemon cannot
//     read is not complete there).
//   - zkdown: the ZooKeeper server stops for two minutes while Flink
//     writes through the active site's mount (every millisecond while the
//     lease lapses), then starts again: CkptfsZooKeeperSessionDown (CkptfsZooKeeperSessionExpired).
//     The lease rules: dc1 stops holding the lease, its mount refuses the
//     first writes past its write deadline and the daemon fences it on
//     time (ckptfs_fence_overrun_seconds 0), the writes then fail with
//     EROFS, and CkptfsDaemonStalled stays silent (it fired on those
//     first refusals until it read the overrun); dc1 writes again
//     afterwards.
//   - failover: a planned switch (docs/runbook.md): Flink on dc1 stops,
//     dc2 holds its newest checkpoint, dc1's daemon stops, a takeover on
//     dc2 activates it, dc1's daemon starts again read-only, the
//     replication turns around, Flink on dc2 recovers the job and
//     checkpoints through dc2's promoted mount: nothing (CkptfsDaemonDown
//     of dc1's daemon, stopped for the switch: pending, firing only in
//     the scaled copy).
//   - restore: as failover, dc2 lacking the newest checkpoint: the
//     takeover retracts its pointer, the replication delivers it,
//     `ckptfs restore-pruned` puts the pointer back, and Flink starts on
//     dc2 a while later (past the sweeper's grace) and restores it:
//     nothing (the same). CkptfsStrayPointerRetracted would be the
//     sweeper retracting the pointer put back.
//
// The full form adds two worlds:
//
//   - stalled: dc2's NAS hangs and the daemon waits for it longer than
//     five minutes (--backing-timeout 10m): its verification pass does
//     not finish, nor does the lag, read from HA files on the same NAS:
//     CkptfsVerificationStalled, CkptfsLagUnknown. With the default
//     backing-timeout (30s) a pass gives up on the hung directory and
//     finishes, which hung's CkptfsBackingHung reports instead.
//   - flink: real Flink 1.20.5 (its JobManager and TaskManager started
//     by integration/realflink in dc1, a mount namespace of its own)
//     checkpoints every second through dc1's mount, replicated to dc2;
//     the replication stops while Flink goes on, then catches up:
//     CkptfsLagHigh and, once none of Flink's three retained pointers is
//     complete on dc2, CkptfsNoCompletePointer, and both end. It runs
//     once the other worlds are over. CkptfsLagSecondsHigh is left to
//     the emulator: it compares the trigger times of ZooKeeper's
//     pointers, which reach its 15 minutes only with checkpoint intervals
//     of minutes (lag sets them 10 minutes apart).
//
// Not driven: CkptfsStrayPointerLeft and CkptfsSweepLockedOut (the
// sweeper's rarer cases, left to zkbridge's tests),
// CkptfsZooKeeperSessionExpired (a server that stops and starts restarts
// its sessions' clocks: the daemons keep their sessions; allowed in
// zkdown, not required), and CkptfsDaemonStalled and
// CkptfsStrayPointerRetracted, which the silence checks hold silent.
//
// # Rules with a long for:
//
// A for: of 10 or 15 minutes cannot be waited out in make test. Each
// world runs two Prometheus servers side by side: one loads the rules
// unchanged, the other a copy whose only change is every for: divided by
// 20 (2m becomes 6s, 10m 30s, 15m 45s; TestScaledRulesChangeOnlyFor holds
// the copy to that, and each world checks through /api/v1/rules that
// both servers loaded every rule, healthy, with those durations). With the
// unchanged rules the test requires: firing for the rules without for:,
// firing for the two with for: 2m (CkptfsDaemonDown,
// CkptfsZooKeeperSessionDown: their worlds wait two minutes, beside the
// others), and pending, the expression true, for those with 10m and 15m.
// With the copy it requires firing for every driven alert. Thresholds
// that are durations inside an expression (CkptfsBackingHung's 120s,
// and in the full form CkptfsVerificationStalled's and CkptfsLagUnknown's
// 300s) are not for: and are the same in both servers: the test waits
// them out.
//
// Scrapes and evaluations are every second. The figures the test logs
// are from the fault (the test's clock when it acted) to the first
// evaluation Prometheus recorded in that state (the first sample of its
// ALERTS series), on the same machine's clock.
//
// # The takeover textfile's guard
//
// CkptfsTakeoverRefused sees a series born at 1 (the first run of the
// takeover creates the textfile) through `x > 0 unless x offset 1h`
// guarded by `up offset 1h == 1` of the node exporter: the node exporter
// must have been scraped an hour before. The unchanged server is given
// that hour: promtool tsdb create-blocks-from openmetrics writes an hour
// of the node exporter's up = 1 into its storage before it starts (the
// only series of the test not scraped). The scaled server has no such
// history, and the test requires the first refusal to stay silent there
// (the guard at work: a Prometheus that has scraped the node exporter for
// less than an hour does not alert on a first refused takeover) and the
// second (1 to 2, seen by increase()) to fire.
//
// # Silence checks
//
// Every world names, for each server, the alerts it allows and up to
// which state (pending, or firing); at its end the test reads from
// Prometheus's own ALERTS series every alert that was pending or firing
// since both servers first scraped every target, and fails on any other,
// or on one in a state the world does not allow. The failover and restore
// worlds allow nothing but CkptfsDaemonDown of the daemon stopped for the
// switch.
//
// # Short and full form
//
// TestAlerts without CKPTFS_ALERTS_E2E=1 is the short form make test
// runs: about two and a half minutes, the longest world being zkdown, and
// no Flink. make alerts-e2e sets it for the full form, about five
// minutes (stalled's). The tests need root and /dev/fuse
// (CKPTFS_REQUIRE_FUSE), ZooKeeper (CKPTFS_REQUIRE_ZK), Debian's
// prometheus, promtool and prometheus-node-exporter
// (CKPTFS_REQUIRE_PROMETHEUS), and in the full form Flink 1.20.5 from make
// flink and a JDK for its job (CKPTFS_REQUIRE_FLINK): without them they
// skip, loudly, or fail when the switch is 1. In -short mode they skip.
package alertse2e
