// Package watchdog kills its own process, from the kernel, when a
// deadline passes: the fence of a mount whose daemon does not run
// (docs/design.md §5.14).
//
// A primary mount admits changes only before its write deadline, and the
// daemon itself checks that deadline. A daemon that is stopped (SIGSTOP),
// frozen (the cgroup freezer, a paused VM) or starved checks nothing: a
// goroutine that admitted a change just before the deadline and was
// stopped before its system call would make it whenever the process runs
// again, after another site took over. Patroni solves the same problem
// for a database leader with /dev/watchdog, which resets the machine
// when the leader's loop stops feeding it before its key expires. Here
// the one process that can write is the daemon, so the kernel ends that
// process instead: a POSIX timer (timer_create on CLOCK_BOOTTIME) that
// delivers SIGKILL. SIGKILL is the one signal the kernel acts on without
// the process running: it ends a stopped process at once, one frozen by
// the cgroup v2 freezer while frozen, and one frozen by the v1 freezer
// as it thaws, before it runs any code of its own. The daemon's FUSE
// connection ends with it, and every request to the mount fails.
//
// The daemon arms the timer at every renewal of its lease, for a moment
// before any other site can conclude that the lease lapsed, and disarms
// it once its mount stopped admitting with nothing admitted left.
//
// A Kernel also keeps a record of its deadline in a file (Config's
// state directory, on tmpfs: /run), so that the daemon started after a
// killed one can say that its predecessor ended with the watchdog armed
// (Previous).
package watchdog
