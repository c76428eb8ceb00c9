// Package replication simulates the asynchronous replication that copies
// DC1's checkpoint NAS to DC2, so that scenario tests can put ckptfs on a
// replica that is behind, torn or inconsistent in every way a real one can
// be.
//
// ckptfs does not own the replication and cannot assume anything about it
// except that it eventually copies what DC1 holds. At the instant DC1 dies
// the replica may hold any prefix of DC1's history, applied in any order,
// including files that were being written when the copy stopped. Three
// families of tools cover the shapes this takes in practice, and ckptfs must
// be right for all three:
//
//   - Snapshot, like NetApp SnapMirror: each pass transfers a point-in-time
//     image of the source and makes it visible at once. The replica is
//     always a state DC1 really had, but an old one: a checkpoint that
//     ZooKeeper already points to may be missing entirely.
//   - FileLevel, like rsync: each pass walks the source and copies changed
//     files through temporary files ".<name>.<6 random characters>" renamed
//     into place, and deletes files that vanished, in no useful order. A pass
//     stopped halfway leaves a mix of two states that DC1 never had: some
//     files new, some old, deletions half done, perhaps a stray temporary
//     file.
//   - PerObject, like object-store replication: every file is copied on its
//     own after its own delay, in place, so a file may be observed half
//     written, and deletions race with copies.
//
// Every simulator copies the whole source tree, including the top-level
// .ckptfs directory (sealed manifests travel with the data), never follows
// a symbolic link (links are copied as links, file contents are opened
// beneath the source root), preserves file mode and modification time, and
// treats a source file that vanishes or changes while it is being copied as
// something to retry on the next pass, never as a failure.
//
// Every write to the destination (creating, writing a chunk, renaming,
// removing, changing metadata) goes through one gate, which gives tests
// three ways to stop a simulator at an arbitrary instant:
//
//   - Stop, which returns once no further byte will be written and every
//     goroutine of the simulator has returned;
//   - Options.Hook, called before every destination operation; returning an
//     error kills the simulator right there, as kill -9 would;
//   - Options.ByteBudget, which kills it once that many content bytes have
//     been written, possibly in the middle of a file.
//
// Given the same *rand.Rand seed and the same source, a pass performs the
// same operations in the same order (PerObject: draws the same delays;
// their completion order then follows the clock).
package replication
