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
// # Mode
//
// The mode follower is a level-triggered loop: every FollowInterval it
// observes (Observation) this site's name, the mount's mode, what
// active-site holds or that there is no ZooKeeper session, the lease
// setting and whether the backing directory is still the one a primary
// was pinned to, and applies Decide, a pure function that is the one
// place the promotion and fencing rule is written. A missed event costs
// one interval, never a wrong mode.
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
