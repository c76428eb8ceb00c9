// Package idle runs a daemon's background work on CPU that its
// neighbours leave unused.
//
// ckptfs shares its machine with Flink. On a primary, every byte Flink
// writes through the mount is read back once to take its checksum, and
// every checkpoint is decoded and sealed: work that matters for the next
// takeover, not for the checkpoint Flink is writing now. Run at normal
// priority it competes with Flink's uploads for the same cores, and
// Flink's checkpoints take longer. On a thread with Linux's SCHED_IDLE
// policy the kernel runs it only when no normal thread wants that core,
// so it waits for the gaps between Flink's bursts instead.
//
// The Go runtime multiplexes goroutines over threads, so a scheduling
// policy belongs to a thread, not to a goroutine: Lower locks the
// calling goroutine to its thread first, and never unlocks it. When the
// goroutine returns, the runtime ends that thread rather than handing an
// idle-priority thread to some FUSE request.
package idle
