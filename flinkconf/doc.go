// Package flinkconf reads Flink's own configuration file the way Flink
// reads it, so that ckptfs can be configured from what Flink already
// says: the ZooKeeper quorum, path root and cluster id of its high
// availability, its session timeout, and where it writes checkpoints and
// HA files.
//
// # Why read it like Flink, not like YAML
//
// Flink has two file formats, and they disagree on the same bytes.
// flink-conf.yaml (up to Flink 1.19, removed in 2.0) is not parsed as
// YAML: each line is cut at the first "#", then split at the first ": ",
// and key and value are trimmed; quotes stay part of the value and a line
// without ": " is skipped with a warning (GlobalConfiguration
// .loadLegacyYAMLResource). config.yaml (Flink 1.19 and later) is standard
// YAML 1.2; nested mappings are flattened into dotted keys, so nested and
// flat spellings of a key are the same key, and a repeated key in one
// mapping is an error (GlobalConfiguration.loadYAMLResource and flatten,
// YamlParserUtils). In both, a key given twice keeps its last value.
// A directory is looked up as Flink does: flink-conf.yaml if it exists,
// else config.yaml.
//
// Options are looked up by their current key, then by their deprecated
// keys in Flink's order (Configuration.applyWithOption), and fall back to
// Flink's default. The keys, deprecated keys and defaults are those of
// Flink 1.20 (HighAvailabilityOptions, CheckpointingOptions), which still
// accept every older spelling; Flink 1.16's sources show the keys renamed
// since (high-availability, now high-availability.type, and
// state.checkpoints.dir, now execution.checkpointing.dir). Durations are read as Flink's
// TimeUtils.parseDuration reads them: a bare number is milliseconds. The
// ZooKeeper namespace is joined as ZooKeeperUtils.generateZookeeperPath
// joins it: slashes around path.root and cluster-id do not matter.
//
// Every value remembers the key and line it came from, so that what is
// derived can say why.
package flinkconf
