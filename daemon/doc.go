// Package daemon is the ckptfs mount daemon as a library: one Config,
// built from the configurations of the parts it joins, and one Run that
// mounts, serves and unmounts.
//
// The parts are the verification catalog and its verifier (package
// manifest), the recorder that seals what a primary saw written, the FUSE
// server (fusefs), the file-system-notification fast path of the
// catalog, the ZooKeeper bridge with this site's marker publisher and
// the lag tracker (zkbridge, internal/metrics), the metrics and health
// server, and the mode follower. Run starts every goroutine in one run
// group: the first error, or the end of the caller's context, stops them
// all, and Run returns only when all have ended (as etcd's embed does).
// The recorder alone outlives the mount: unmounting hands it what the
// mount still had to report, and it seals that before Run returns.
//
// # One loop
//
// The daemon's loop (loop.go, design §5.14) is level-triggered, after
// consul's anti-entropy: each pass, every min(FollowInterval, D/16), reads
// the epoch, active-site and the lease once into one Observation (with
// the mount's mode and whether the backing directory is still the one a
// primary was pinned to), applies the pure rules (Decide for the mode,
// DecideRenew, DecideActivate, DecideTakeover; DecideHold for the gate)
// and hands each part the values it needs: the lease's write deadline to
// the mount, the watchdog's deadline to the kernel, the mode to SetMode.
// Every call of a pass is bounded by the pass. An activation or an
// automatic takeover it decides on runs beside the passes, bounded by
// its own wait; the next pass sees how it ended. A missed event costs one
// pass, never a write past the deadline: the mount checks the deadline
// on its own, and the kernel's watchdog ends a daemon that stops running
// with its mount writable.
//
// # The backing directory
//
// The FUSE server serves its backing directory by path. A primary's
// writes must reach the NAS, so a primary is pinned to the directory
// (device and inode) it was mounted or promoted on; when another is at
// the path (the NAS was unmounted and the directory beneath shows), the
// primary is fenced for good and health fails until a restart. A replica
// writes nothing and shows only what it verifies, so it follows a
// replacement and logs it.
//
// # Mappings
//
// Flink reads a path inside the mount point through the mount, which
// serves it from the same place below the backing directory. Validate
// refuses a mapping that resolves such a path anywhere else: ckptfs
// would verify one directory while Flink reads another. A mapping of
// other paths (files Flink reads from elsewhere) is free.
//
// cmd/ckptfs maps its settings onto Config and the errors of Run onto
// exit statuses; signals reach Run as its context (SIGTERM, SIGINT) and
// Config.Hangup (SIGHUP).
package daemon
