// Package logkeys is the vocabulary of ckptfs's structured logs.
//
// Operators grep, filter and alert on log attributes, so a concept has
// one key everywhere: a job is always "job" (Flink's job id, never the
// directory or "jobID"), a checkpoint always "checkpoint" (its numeric
// id, never "chk-N" or "chk"), a ZooKeeper path always "znode" (never
// "path"), a znode version always "version". Every key a log call in
// this module uses must be in Keys; the test of this package reads the
// source and fails on any other, so a new key is a decision made here,
// not a spelling made at a call site.
package logkeys
