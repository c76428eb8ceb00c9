// Package deploy holds what an operator installs besides the binary: the
// systemd units in systemd/, the example configuration ckptfs.yaml, the
// Prometheus alert rules in prometheus/ and the Grafana dashboard in
// grafana/. It has no code; its tests install the units with `make
// install` into a staging root and check them, and hold the rules, the
// dashboard and docs/metrics.md to the metrics ckptfs exports
// (metrics.Families).
//
// # Why a test for text files
//
// The units are where ckptfs meets systemd and Flink, and a mistake there
// is silent until a failover: a misspelt key is only a warning in the
// journal, a mount unit whose name does not match its Where= is refused
// at boot, and a JobManager that does not Require the takeover starts on
// pointers its site cannot restore. So the test runs `systemd-analyze
// verify` on the installed units, with a stand-in JobManager and
// TaskManager carrying the drop-ins, in a root of their own (--root): the
// commands the units run need not be installed on the machine, and no
// running systemd is needed. Verify must print nothing. The test also
// runs every ExecStart= against the installed binary, checks the example
// configuration with `ckptfs config check`, and checks that the paths the
// units name agree with the configuration and that the takeover gates the
// JobManager.
//
// CKPTFS_REQUIRE_SYSTEMD=1 (set by `make test`) turns a missing
// systemd-analyze or make into a failure instead of a skip.
package deploy
