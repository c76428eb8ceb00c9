// Package mounttest is the real-mount test harness for fusefs.
//
// New mounts fusefs in the test process over fresh orig/ and mnt/
// directories (DirectMount, so no fusermount is needed) and unmounts in
// t.Cleanup: it retries while the mount is busy and detaches lazily as a
// last resort, which still fails the test. StartDaemon serves a mount
// from a child process (the test binary re-executed through Main) for
// tests that kill or stop (SIGSTOP) the daemon, or that must not let the
// FUSE server share a process with the code touching the mount.
//
// Real mounts need root and /dev/fuse. Without them tests skip with a
// loud message, or fail when CKPTFS_REQUIRE_FUSE=1 (CI sets it). In
// -short mode (make unit) they skip without mounting.
//
// # Deadlocks to avoid with in-process mounts
//
// go-fuse documents deadlocks when the process that serves a mount also
// uses it (package fs, "Deadlocks"): a fork/exec whose child touches the
// mount before exec (a working directory or an inherited descriptor on
// the mount, or an executable stored on it), and memory-mapping a file
// on it. So: run child processes such as ls with their working directory
// outside the mount and pass mount paths only as arguments; never mmap
// through an in-process mount (use StartDaemon for that).
//
// A test binary killed while one of its goroutines waits on its own
// mount (a -timeout panic, say) cannot finish exiting: the kernel waits
// for a reply only that process could give. Abort the connection
// (echo 1 > /sys/fs/fuse/connections/<dev minor>/abort, with fusectl
// mounted) and detach the mount point.
//
// Visibility and Sealer are settable and recording fakes of the manifest
// interfaces.
package mounttest
