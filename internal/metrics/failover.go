package metrics

import (
	"fmt"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Failover is the daemon's liveness lease and automatic takeover as
// metrics and health see them (the daemon fills it, design §5.10-5.12).
type Failover struct {
	// Takeover is "auto" or "manual".
	Takeover string `json:"takeover"`
	// LeaseDuration is D.
	LeaseDuration zkbridge.Duration `json:"lease_duration"`
	// Claiming: this daemon holds the lease (its last renewal that
	// applied started less than D/2 ago: its mount's write deadline is
	// ahead); LastRenewal is when that renewal started.
	Claiming    bool       `json:"claiming"`
	LastRenewal *time.Time `json:"last_renewal,omitempty"`
	// WriteDeadline is the mount's write deadline (nil before the first
	// renewal, or once the claim ended).
	WriteDeadline *time.Time `json:"write_deadline,omitempty"`
	// WatchdogArmed: the kernel would kill the daemon if it stopped
	// running (design §5.14). PreviousWatchdog is set when the daemon
	// before this one, on the same mount point, ended with its watchdog
	// armed past its deadline.
	WatchdogArmed    bool            `json:"watchdog_armed"`
	PreviousWatchdog *watchdog.Ended `json:"previous_watchdog,omitempty"`
	// Overrun is how long past its write deadline the daemon last went
	// without running (it fenced late; the mount refused changes
	// meanwhile).
	Overrun zkbridge.Duration `json:"overrun,omitempty"`
	// Renewals and RenewalFailures count this daemon's renewals.
	Renewals        uint64 `json:"renewals"`
	RenewalFailures uint64 `json:"renewal_failures"`
	// Observed is the lease as this daemon saw it last, when its site
	// did not hold it.
	Observed *zkbridge.LeaseView `json:"observed_lease,omitempty"`
	// Holding: the mount holds Flink's opens until the takeover decided.
	Holding bool `json:"holding"`
	// Runs counts automatic takeovers by result (activated, refused,
	// jobmanager-alive, lease-held, lost-race, failed); Refused is the refusal that
	// keeps this site from taking over by itself ("" none).
	Runs    map[string]uint64 `json:"runs,omitempty"`
	Refused string            `json:"refused,omitempty"`
	// Rollbacks are the rollback windows, in checkpoint ids, of the
	// jobs of the last automatic takeover this daemon activated.
	Rollbacks map[string]int64 `json:"rollbacks,omitempty"`
	// Sync is what synchronous replication did (zero in async mode).
	Sync SyncState `json:"sync"`
	// Steps are the automatic takeover's steps, oldest first (the last
	// ones).
	Steps []Step `json:"steps,omitempty"`
	// StandbyJobManagers are leader sessions of this site's JobManagers
	// (site-jobmanagers) seen while another site is active.
	StandbyJobManagers []string `json:"standby_jobmanagers,omitempty"`
}

// SyncState is what the mount's synchronous replication did (design
// §4.8): the closes of HA files it held, by how they ended, and how long
// it held them.
type SyncState struct {
	Mode     string `json:"mode"`
	Degraded bool   `json:"degraded"`
	// Acknowledged, TimedOut and Failed count the held closes another
	// site acknowledged, that waited out the timeout (sync lets them
	// end), and that failed (strict after its timeout, or fenced).
	Acknowledged uint64  `json:"acknowledged"`
	TimedOut     uint64  `json:"timed_out"`
	Failed       uint64  `json:"failed"`
	HeldSeconds  float64 `json:"held_seconds"`
}

// Step is one step of the automatic takeover.
type Step struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// failoverProblems are the health failures of f.
func failoverProblems(f Failover) []string {
	var out []string
	if len(f.StandbyJobManagers) > 0 && f.Takeover != "auto" {
		out = append(out, fmt.Sprintf("a JobManager of this site leads while another site is active (%s): with takeover manual no JobManager may run on a standby site (docs/deploy.md)",
			strings.Join(f.StandbyJobManagers, "; ")))
	}
	if f.Refused != "" {
		out = append(out, "automatic takeover refused: "+f.Refused)
	}
	if p := f.PreviousWatchdog; p != nil {
		out = append(out, fmt.Sprintf("the previous daemon of this mount (pid %d) ended with its watchdog armed, %v past its deadline: it had stopped running (stopped, frozen or starved) with its mount writable, and was killed (design §5.14)",
			p.PID, p.Ago.Round(time.Second)))
	}
	return out
}
