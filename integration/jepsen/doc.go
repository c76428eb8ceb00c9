// Package jepsen is `make jepsen` (issue 29, item 5; design §6.13):
// randomized histories of faults over real ZooKeeper servers, the real
// ckptfs binary as mount daemons, writers and an emulated JobManager
// writing through the mounts, held to the model of design §5.14 by a
// checker. The package has only tests; TestJepsen runs when
// CKPTFS_JEPSEN_RUNS is set.
package jepsen
