package metrics

import (
	"fmt"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// Failover is the daemon's liveness lease and automatic takeover as
// metrics and health see them (the daemon fills it, design §5.10-5.12).
type Failover struct {
	// Takeover is "auto" or "manual".
	Takeover string `json:"takeover"`
	// LeaseDuration is D (zero: no liveness lease).
	LeaseDuration zkbridge.Duration `json:"lease_duration"`
	// Claiming: this daemon's holder claims its site (renewed less than
	// D/2 ago); LastRenewal is when its last successful renewal started.
	Claiming    bool       `json:"claiming"`
	LastRenewal *time.Time `json:"last_renewal,omitempty"`
	// Renewals and RenewalFailures count this daemon's renewals.
	Renewals        uint64 `json:"renewals"`
	RenewalFailures uint64 `json:"renewal_failures"`
	// Observed is the active site's lease as this daemon saw it last
	// (another site active).
	Observed *zkbridge.LeaseView `json:"observed_lease,omitempty"`
	// Holding: the mount holds Flink's opens until the takeover decided.
	Holding bool `json:"holding"`
	// Runs counts automatic takeovers by result (activated, refused,
	// jobmanager-alive, writer-alive, lost-race, failed); Refused is the refusal that
	// keeps this site from taking over by itself ("" none).
	Runs    map[string]uint64 `json:"runs,omitempty"`
	Refused string            `json:"refused,omitempty"`
	// Steps are the automatic takeover's steps, oldest first (the last
	// ones).
	Steps []Step `json:"steps,omitempty"`
	// StandbyJobManagers are leader sessions of this site's JobManagers
	// (site-jobmanagers) seen while another site is active.
	StandbyJobManagers []string `json:"standby_jobmanagers,omitempty"`
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
	return out
}
