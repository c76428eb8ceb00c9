// Package faultfs is a failing NAS for tests: a FUSE file system that
// serves a lower directory unchanged until a rule says otherwise, and then
// answers chosen operations on chosen paths with an error (EIO, ENOSPC,
// ESTALE), late (a slow NAS: seconds per stat), or not at all until the
// test releases them (a hung NFS server on a hard mount, which ignores
// signals).
//
// Tests mount it where a ckptfs daemon expects its backing directory, so
// the daemon meets the faults through the same system calls it makes on
// a real NAS. The kernel here has no device-mapper (no /dev/mapper, so
// no dm-error, dm-delay or dm-flakey targets), and device-mapper could
// not hang or fail one path while serving the rest anyway.
//
// The kernel caches nothing of a faultfs mount (entry, attribute and
// negative timeouts are 0, no passthrough), so every stat, lookup,
// listing, read and write reaches the rules. A listing is one OpReaddir
// (the open of the directory), as a NAS returns many names a round
// trip: READDIRPLUS is off, which would look up, and charge, each name.
//
// A hung request waits until Release, Clear or Unmount; the FUSE
// INTERRUPT a signal sends does not end it, as on a hard NFS mount,
// unless its caller is being killed (SIGKILL pending): then it fails with
// EINTR, as a hard NFS mount's killable waits do, so that a process can
// always be killed and exit.
package faultfs
