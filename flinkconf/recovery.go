package flinkconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The options that decide whether Flink itself destroys a job's
// checkpoints after a failover (issue 16): a job that reaches FAILED, its
// restart strategy exhausted, loses its pointers, HA files, counter and
// job graph in every Flink release, and with a retention other than
// RETAIN_ON_CANCELLATION its checkpoint data too. Keys and defaults of
// Flink 1.20's CheckpointingOptions and RestartStrategyOptions.
var (
	CheckpointRetention = Option{Key: "execution.checkpointing.externalized-checkpoint-retention",
		Default: "NO_EXTERNALIZED_CHECKPOINTS"}
	RestartStrategy      = Option{Key: "restart-strategy.type", Deprecated: []string{"restart-strategy"}}
	FixedDelayAttempts   = Option{Key: "restart-strategy.fixed-delay.attempts", Default: "1"}
	FailureRateFailures  = Option{Key: "restart-strategy.failure-rate.max-failures-per-interval", Default: "1"}
	ExponentialResetsMax = Option{Key: "restart-strategy.exponential-delay.attempts-before-reset-backoff",
		Default: strconv.Itoa(math.MaxInt32)}
)

// RecoveryWarnings names, with the Flink key to set, each setting that
// lets Flink delete what ckptfs keeps for a failover: a retention other
// than RETAIN_ON_CANCELLATION, and a restart strategy that ends in FAILED
// after a bounded number of failures (none, a fixed delay with fewer than
// 2147483647 attempts, a failure rate, an exponential delay with bounded
// attempts). Unset, Flink restarts a checkpointing job without bound.
func (c *Config) RecoveryWarnings() []string {
	var out []string
	get := func(o Option) (string, string) {
		if v, ok := c.Lookup(o); ok {
			return strings.Trim(v.Value, `"'[] `), fmt.Sprintf("%s (line %d)", v.Key, v.Line)
		}
		return o.Default, "Flink's default"
	}
	if ret, where := get(CheckpointRetention); !strings.EqualFold(ret, "RETAIN_ON_CANCELLATION") {
		out = append(out, fmt.Sprintf("checkpoint retention is %s, from %s: a job that reaches FAILED after a failover has its checkpoint data deleted by Flink; set %s: RETAIN_ON_CANCELLATION",
			ret, where, CheckpointRetention.Key))
	}
	typ, where := get(RestartStrategy)
	bounded := func(o Option) (string, bool) {
		v, w := get(o)
		n, err := strconv.ParseInt(v, 10, 64)
		return fmt.Sprintf("%s %s from %s", o.Key, v, w), err != nil || n < math.MaxInt32
	}
	fix := fmt.Sprintf("set %s: exponential-delay (its attempts unbounded), or fixed-delay with %s: %d", RestartStrategy.Key, FixedDelayAttempts.Key, math.MaxInt32)
	const harm = "a checkpoint that fails to restore makes the job FAILED, and Flink then deletes its pointers, HA files and job graph"
	switch t := strings.ToLower(typ); t {
	case "":
	case "none", "off", "disable":
		out = append(out, fmt.Sprintf("restart strategy %s, from %s: %s at the first failure; %s", typ, where, harm, fix))
	case "fixed-delay", "fixeddelay":
		if what, ok := bounded(FixedDelayAttempts); ok {
			out = append(out, fmt.Sprintf("restart strategy fixed-delay with %s: %s; %s", what, harm, fix))
		}
	case "failure-rate", "failurerate":
		v, w := get(FailureRateFailures)
		out = append(out, fmt.Sprintf("restart strategy failure-rate (%s %s from %s): %s once failures come faster; %s", FailureRateFailures.Key, v, w, harm, fix))
	case "exponential-delay", "exponentialdelay":
		if what, ok := bounded(ExponentialResetsMax); ok {
			out = append(out, fmt.Sprintf("restart strategy exponential-delay with %s: %s; %s", what, harm, fix))
		}
	default:
		out = append(out, fmt.Sprintf("restart strategy %q, from %s, is not one ckptfs knows: make sure it never ends in FAILED (%s)", typ, where, fix))
	}
	return out
}

// The options that synchronous replication meets (design §4.8): Flink's
// checkpoint timeout, and how many failed checkpoints a job tolerates
// before it restarts (Flink 1.20's CheckpointingOptions).
var (
	CheckpointTimeout          = Option{Key: "execution.checkpointing.timeout", Default: "10 min"}
	TolerableFailedCheckpoints = Option{Key: "execution.checkpointing.tolerable-failed-checkpoints", Default: "0"}
)

// SyncWarnings names what a primary mount's replication mode (sync or
// strict, holding each checkpoint's completion up to syncTimeout) needs
// of Flink: a checkpoint timeout longer than syncTimeout, or Flink
// expires the checkpoint first; and with strict, failed checkpoints
// tolerated, or the first checkpoint strict fails restarts the job.
func (c *Config) SyncWarnings(mode string, syncTimeout time.Duration) []string {
	var out []string
	get := func(o Option) (string, string) {
		if v, ok := c.Lookup(o); ok {
			return strings.Trim(v.Value, `"' `), fmt.Sprintf("%s (line %d)", v.Key, v.Line)
		}
		return o.Default, "Flink's default"
	}
	v, where := get(CheckpointTimeout)
	if d, err := ParseDuration(v); err == nil && d <= syncTimeout {
		out = append(out, fmt.Sprintf("checkpoint timeout %s, from %s, is not longer than sync-timeout %v: Flink expires a checkpoint replication-mode %s still holds; set %s above it",
			v, where, syncTimeout, mode, CheckpointTimeout.Key))
	}
	if mode == "strict" {
		v, where = get(TolerableFailedCheckpoints)
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n <= 0 {
			out = append(out, fmt.Sprintf("%s is %s, from %s: the first checkpoint replication-mode strict fails (no other site held it within sync-timeout) restarts the job; set it to the checkpoints an outage of the other site may fail",
				TolerableFailedCheckpoints.Key, v, where))
		}
	}
	return out
}
