// Package fusefs mounts a backing directory (the NAS, or its replica on
// the standby site) at Flink's checkpoint path and applies ckptfs's
// policy on the way: what a replica shows, that a replica or a fenced
// primary never writes, and what a primary reports for sealing. The
// policy itself lives in package manifest; this package only asks it
// (manifest.Visibility) and tells it (manifest.Sealer), and turns its
// answers into errno values in one place, errnoFor.
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
// # Modes
//
// ModeReplica is read-only and filtered through Visibility. ModePrimary
// is a plain read-write loopback. ModeFenced is a primary whose site is
// no longer active: unfiltered, read-only. The reserved directory
// .ckptfs at the root is hidden in every mode and cannot be created,
// renamed or removed through the mount.
//
// The kernel mount itself stays read-write, because promotion has to
// work without remounting; the daemon refuses mutations with EROFS.
// Every mutation (including WRITE on a handle opened long ago) holds a
// shared lock from checking the mode until the backing file system has
// answered, and SetMode takes it exclusively: when SetMode(ModeFenced)
// returns, no write is in progress and none can succeed any more. This
// is why writes use neither passthrough nor the kernel's writeback cache:
// both let data land without the daemon seeing it, so it could be neither
// fenced nor checksummed.
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
// file itself and the daemon never sees the data. Requests are up to
// 1 MiB (MaxWrite, max_read) for everything that still goes through the
// daemon; reads there use splice from the backing file.
//
// The kernel refuses (EIO) to open one inode both ways at once. So a
// reader gets passthrough only while nobody has the file open through
// the daemon, and a writer waits briefly for passthrough readers whose
// close is still in flight, then gets ETXTBSY. Flink does not read a
// checkpoint file while it writes it. Stats tells how many opens used passthrough and
// how many reads the daemon served.
//
// # Sealing
//
// In primary mode with a Sealer, each write handle computes the CRC-32C
// of what it writes while the data streams through, as long as it
// writes in order from offset 0 and nothing else writes the file. When
// the handle is flushed (inside close(2), so before Flink can rename the
// file) or released, the Sealer gets FileWritten with size and checksum,
// or FileWrittenWithoutChecksum. Closing a written _metadata, or renaming
// any file to _metadata, calls MetadataCommitted after it. Unlink reports
// FileRemoved, and every rename (of files and directories) Renamed: the
// Sealer moves what it recorded. Sealer calls happen on the FUSE request
// path and must be quick.
//
// The mount negotiates FUSE_HANDLE_KILLPRIV_V2, so the kernel does not
// ask for security.capability before every WRITE (it halved the
// throughput of 4 KiB writes); the daemon then drops setuid/setgid on
// unprivileged writes and truncates itself (privs.go).
//
// # Stale mount points
//
// A daemon killed with SIGKILL leaves a mount that answers ENOTCONN.
// Mount detects that and detaches it (MNT_DETACH) before mounting again;
// a live FUSE mount at the same place is an error (ErrAlreadyMounted).
package fusefs
