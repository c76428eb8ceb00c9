// Package systemde2e proves the package and the units of deploy/ under a
// real systemd: a Debian root file system (debootstrap from Debian's
// packages, cached in $CKPTFS_CACHE/systemd, outside the work tree),
// booted with systemd-nspawn -b and given /dev/fuse, with ckptfs
// installed from the .deb that make deb builds, as an operator installs
// it (apt-get install ./ckptfs_*.deb).
//
// Why a booted systemd and not systemd-analyze alone: what broke the units
// before (a Conflicts= on the mount the service itself creates, a mount
// unit that never noticed its FUSE daemon died, a stop with a file open
// that left the unit failed, Flink started on a mount still read-only)
// is in how systemd runs units, which verify does not see.
//
// Each test boots its own machine: an overlay on the cached root file
// system, so every boot starts from a clean Debian and a reboot keeps what
// the machine wrote. The machine shares the host's network, where the
// test's ZooKeeper listens on loopback; its NAS (/mnt/nas) is a directory
// of the test, or a faultfs mount when the NAS must hang. Flink's units
// are stand-ins that hold files open on the mount as Flink's processes
// do: the JobManager writes below it at its start (which fails on a mount
// still read-only), the TaskManager works in it.
//
// TestSystemdShort is make test's short form (install, readiness, the
// takeover gate, kill -9, stop with files open); TestSystemd, which make
// systemd-e2e runs (CKPTFS_SYSTEMD_E2E=1), adds the upgrade in place, a
// hung NAS and the reboot order with the network and ZooKeeper;
// TestRehearsal walks a newcomer's route on the standby site of make
// dr-rehearsal's layout: docs/deploy.md's steps as written, then the
// runbook's failover with systemd and restore-pruned.
package systemde2e
