// Package metrics exports what a ckptfs mount daemon knows to Prometheus
// and answers health checks.
//
// The domain packages stay free of Prometheus: manifest, fusefs and
// zkbridge keep plain counters and snapshots (Catalog.Stats and Jobs,
// Server.Stats, Latencies and IncompleteLookups, Bridge.Session,
// Publisher.Stats, Bridge.Status). This package reads them when it is
// scraped (one Collector, no gauges updated from many places), so a
// metric can never drift from the state it describes, and nothing is
// computed for nobody.
//
// The one thing too costly to compute at scrape time is the lag behind
// Flink's pointers: it needs ZooKeeper reads and the verification of HA
// files. A LagTracker computes it in the background (every interval, and
// soon after a checkpoint changes visibility) and the scrape reads its
// last result, with the time it was computed.
//
// Names follow Prometheus conventions: the ckptfs_ prefix, base units
// (_seconds), _total for counters, _info for build information. Jobs are
// labelled job_id, not job: Prometheus adds its own job label to every
// scraped series. Families lists every name this package exports; the
// Grafana dashboard, the alert rules and docs/metrics.md are tested
// against it (package deploy), so renaming a metric breaks that test
// rather than a dashboard.
//
// A one-shot command cannot be scraped: takeover and restore-pruned add
// what they did to counters in a file for node_exporter's textfile
// collector (RecordTakeover).
package metrics
