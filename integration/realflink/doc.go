// Package realflink runs real Apache Flink in the tests: the failover of
// seed-problem.md with real JobManager and TaskManager processes writing
// and restoring through ckptfs mounts. The Flink emulator (flinkemu) is
// our reading of Flink's sources; only a real Flink can show where that
// reading is wrong.
//
// What it provides:
//
//   - Releases and FindDist: the version table flink/versions.tsv and the
//     distributions flink/fetch.sh unpacked into the cache (PyPI's
//     apache-flink-libraries packages carry a whole distribution).
//   - Site: a data center as a host, a mount namespace of its own, so that
//     both sites mount their storage at the same absolute path as Flink
//     expects. Every process of a site runs inside it (nsenter), and the
//     namespace, its mounts and its processes go away on every exit path:
//     t.Cleanup stops them, and Pdeathsig kills them when the test binary
//     dies first.
//   - Cluster: a standalone Flink session cluster with ZooKeeper HA in a
//     site, started the way bin/jobmanager.sh and bin/taskmanager.sh
//     start-foreground do (Flink's BashJavaUtils computes the memory
//     flags), since the packages carry no scripts.
//   - REST: Flink's REST API, one witness of what Flink restored.
//   - JobJar and Report: the test job (job/), deterministic and stateful,
//     and its report of what it restored; StateBefore recomputes the state
//     any checkpoint must hold, so a restore is checked exactly.
//
// Tests need root, FUSE, ZooKeeper, a JDK and the distributions; with
// CKPTFS_REQUIRE_FLINK=1 (make test) they fail instead of skipping when
// one is missing. In -short mode (make unit) they skip; the fixture tests,
// which read harvested files, still run.
package realflink
