// Package nasfault runs real ckptfs mount daemons over a failing NAS:
// the backing directory is a faultfs mount (package faultfs) that fails,
// slows or hangs chosen operations on chosen paths, and each test checks
// what issue 18 asks of a daemon whose NAS fails, in replica and primary
// mode:
//
//   - no panic, and no verdict "complete" that the NAS did not prove: a
//     checkpoint the daemon cannot read becomes "unknown", hidden from
//     Flink and never published;
//   - a hung NAS path does not hang the verification of other
//     checkpoints, the mode follower (the daemon's ZooKeeper work) or
//     the daemon's stop, and health reports it;
//   - a primary hands Flink the NAS's error unchanged and seals nothing
//     the NAS did not hold;
//   - when the fault ends, everything recovers without a restart.
//
// The package holds only tests; they need root and /dev/fuse.
package nasfault
