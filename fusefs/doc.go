// Package fusefs mounts a backing directory (the NAS, or its replica on
// the standby site) at Flink's checkpoint path and applies ckptfs's
// policy on the way: what a replica shows, that a replica or a fenced
// primary never writes, and what a primary reports for sealing. The
// policy itself lives in package manifest; this package only asks it
// (manifest.Visibility) and tells it (manifest.Sealer), and turns its
// answers into errno values in one place, errnoFor. The names it gives a
// meaning to (.ckptfs, chk-N) are manifest's rules too
// (manifest.IsStateDir, manifest.CheckpointIDFromDirName), so a mount
// never counts or logs as a checkpoint a name manifest does not verify
// as one.
//
// In this package fs is always go-fuse's fs package; io/fs is imported
// as iofs.
//
// # Wrapping go-fuse's loopback
//
// Every inode is a node: go-fuse's fs.LoopbackNode embedded, plus the
// policy. NodeWrapChilder makes go-fuse wrap every child the loopback
// creates, so the policy reaches the whole tree without a fork of the
// loopback code. Each override carries a compile-time interface
// assertion, so a go-fuse interface change breaks the build instead of
// silently dropping an override.
//
// Hiding a name takes two overrides that must agree: Lookup (also used
// by READDIRPLUS for every entry) and OpendirHandle (go-fuse never calls
// Readdir while the loopback's OpendirHandle exists). A listing is
// filtered once when the directory is opened and again on rewinddir.
//
// # The backing directory
//
// The daemon runs as root, and other hosts write the NAS: a directory
// of the backing may be swapped for a symbolic link to anywhere. So the
// daemon never follows a link below the backing root: every operation
// opens the root by its configured path (a replica follows a backing
// replaced as a whole), resolves its directory beneath it (openat2 with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS) and acts on the final name
// with the *at calls (beneath.go). Every path-based method of go-fuse's
// loopback is overridden for that. A link where a directory was
// expected is refused (ELOOP, ENOTDIR or EXDEV) and logged; a link as
// the final name is shown as a link, which the kernel follows for the
// caller.
//
// # Modes
//
// ModeReplica is read-only and filtered through Visibility. ModePrimary
// is a plain read-write loopback. ModeFenced is a primary whose site is
// no longer active: read-only and filtered as a replica is, since a
// JobManager left running there must not open an incomplete checkpoint. The reserved directory
// .ckptfs at the root is hidden in every mode and cannot be created,
// renamed or removed through the mount.
//
// The kernel mount itself stays read-write, because promotion has to
// work without remounting; the daemon refuses mutations with EROFS, in
// one place (refuseReadOnly): read-only is the mount's mode, not an
// error of manifest's.
// Every mutation the daemon serves (including WRITE on a handle opened
// long ago) is admitted by the mode and counted until the backing file
// system has answered; SetMode to a read-only mode refuses new ones at
// once and waits for those in flight. No lock is held across a backing
// call, so a hung NAS holds up neither SetMode nor other mutations.
//
// # Fencing
//
// Every change to the backing directory is served by the daemon: no file
// opened for writing is passed through to the kernel, because the kernel
// cannot take a backing file back from an open passthrough file, and
// such a writer went on writing the NAS while the daemon was stopped or
// after it died (docs/design.md §5.14). So the admission of each change
// is the whole fence:
//
//   - with Config.DeadlineFence, a change is admitted only before the
//     write deadline the daemon gave (Server.SetWriteDeadline, after
//     each renewal of its site's lease), checked by the mount on its own
//     clock: a daemon whose loop is stuck still stops admitting then
//     (Stats.DeadlineRefusals);
//   - SetMode to a mode that does not write refuses new changes at once
//     and waits, at most FenceTimeout, for those admitted before; when
//     the NAS did not answer one within it the error wraps
//     ErrFenceIncomplete, and such a change that lands later is counted
//     (Stats.WritesAfterFence) and logged as an error.
//
// Server.InFlight says how many admitted changes have not come back yet:
// the daemon's watchdog stays armed until the deadline has passed and
// none is left.
//
// The kernel's writeback cache stays off: it would accept write(2) into
// the page cache that the daemon then refuses, and it trusts its own
// idea of a file's size over the backing file system's.
//
// # Kernel caching
//
// NegativeTimeout defaults to 0: the kernel never remembers that a name
// does not exist, so a checkpoint that becomes complete is found on the
// next lookup even if nobody tells the mount. Positive entries and
// attributes are cached for EntryTimeout and AttrTimeout (1 s by
// default); Server.Invalidate drops one entry, positive or negative,
// at once (FUSE_NOTIFY_INVAL_ENTRY), and the verifier calls it whenever a
// verdict changes, so a checkpoint that stops being complete disappears
// without waiting. Switching into or out of replica mode drops every
// cached name. Directory listings, and file data read through the
// daemon, are not cached across opens.
//
// # Reads at the backing file system's speed
//
// Files opened read-only are offered to the kernel as FUSE passthrough
// files (Linux 6.9+, CAP_SYS_ADMIN): the kernel then reads the backing
// file itself and the daemon never sees the data. Files opened for
// writing go through the daemon (see Fencing). Requests are up to 1 MiB
// (MaxWrite, max_read) for everything that goes through the daemon;
// reads there use splice from the backing file. Read-only opens ask for
// no FLUSH at close (FOPEN_NOFLUSH): there is nothing to do then.
//
// The kernel refuses (EIO) to open one inode both ways at once. So an
// open gets passthrough only while nobody has the file open through the
// daemon, and one that needs the daemon waits briefly for passthrough
// opens whose close is still in flight, then gets ETXTBSY. Flink does not
// read a checkpoint file while it writes it. Stats tells how many opens
// used passthrough and how many reads the daemon served.
//
// # Sealing
//
// In primary mode with a Sealer, a written file's checksum is read back
// rather than computed from the writes (a file may be written through
// several descriptors, and mapped): when a
// writer's handle is flushed (inside close(2), so before Flink can rename
// the file) the mount stamps the file (inode, size, mtime), opens it
// again and queues it. One goroutine (reporter) reads queued files back,
// from the page cache as a rule, and reports FileWritten with size and
// CRC-32C if the file still matches its stamp after the read, or
// FileWrittenWithoutChecksum. So the checksum is of the bytes the file
// held when its writer closed it, however they were written. Close only
// pays an fstat and an open; the CPU and, for a file no longer cached,
// the reading happen off Flink's path. A handle released with its file
// changed since that flush (another descriptor of it still wrote) is
// reported again. Closing a written _metadata, or renaming any file to
// _metadata, calls MetadataCommitted after it. Unlink reports FileRemoved,
// a truncate by path FileWrittenWithoutChecksum, and every rename (of
// files and directories) Renamed: the Sealer moves what it recorded. All
// of it reaches the Sealer in order, off the FUSE request path;
// Server.SyncSealer waits for it, and unmounting delivers the rest. The
// queue holds at most 65,536 events (a report waits beyond that) and 256
// files to read back (more are reported without checksum).
//
// The mount negotiates FUSE_HANDLE_KILLPRIV_V2, so the kernel does not
// ask for security.capability before every WRITE (it halved the
// throughput of 4 KiB writes); the daemon then drops setuid/setgid on
// unprivileged writes and truncates itself (privs.go).
//
// # Stale mount points
//
// A daemon killed with SIGKILL leaves a mount that answers ENOTCONN.
// Mount detects that and detaches it (MNT_DETACH) before mounting again.
// A daemon that is alive but does not answer (SIGSTOP, a deadlock) leaves
// a mount on which every request waits: Mount gives a statfs of the mount
// point ProbeTimeout to return, and if it does not and the mount is a
// ckptfs one, aborts its FUSE connection (fusectl's abort file, mounting
// fusectl if needed), which makes it a dead mount to detach. A mount that
// answers, however late within ProbeTimeout, is never aborted: a live
// FUSE mount at the same place is an error (ErrAlreadyMounted), and so is
// a hung one of another file system.
package fusefs
