package daemon

import (
	"fmt"
	"strconv"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// TakeoverMode says whether the daemon takes over by itself.
type TakeoverMode string

const (
	// TakeoverManual: only `ckptfs takeover` (the systemd gate) takes
	// over, as before.
	TakeoverManual TakeoverMode = "manual"
	// TakeoverAuto: the daemons of a standby site take over when the
	// active site's liveness lease expired and none of its JobManagers
	// leads any more (design §5.11).
	TakeoverAuto TakeoverMode = "auto"
)

// ParseTakeoverMode reads "auto" or "manual".
func ParseTakeoverMode(s string) (TakeoverMode, error) {
	switch m := TakeoverMode(s); m {
	case TakeoverManual, TakeoverAuto:
		return m, nil
	}
	return "", fmt.Errorf("takeover %q: want auto or manual", s)
}

// TakeoverObservation is everything the automatic takeover depends on,
// as seen on one pass.
type TakeoverObservation struct {
	Site string
	Mode TakeoverMode
	// Session, ActiveSite and Epoch are as in Observation.
	Session    Session
	ActiveSite string
	Epoch      int64
	// Lease is the active site's liveness lease as this daemon observed
	// it (with another site active).
	Lease zkbridge.LeaseState
	// Leading: a JobManager session that is not this site's leads or
	// locks (zkbridge.OtherSitesLeading).
	Leading bool
	// Refused: an earlier automatic takeover refused a job, and the
	// operator did not allow activating anyway; it stays refused.
	Refused bool
}

// TakeoverDecision says whether to run the takeover now, and why
// (also why not).
type TakeoverDecision struct {
	Run    bool
	Reason string
}

// DecideTakeover is the rule of the automatic takeover, the one place it
// is written: a daemon with TakeoverAuto runs the takeover when it has a
// session, another site is active, that site's lease expired (so every
// daemon there stopped claiming it, design §5.10) and no JobManager of
// another site leads or locks any more; never after a takeover that
// refused a job, never before a first site was made active (the first
// start goes through `ckptfs takeover`).
func DecideTakeover(o TakeoverObservation) TakeoverDecision {
	wait := func(why string) TakeoverDecision { return TakeoverDecision{Reason: why} }
	switch {
	case o.Mode != TakeoverAuto:
		return wait("takeover is manual")
	case o.Session != SessionUp:
		return wait("no ZooKeeper session")
	case o.ActiveSite == "":
		return wait("no site was ever made active: the first start goes through ckptfs takeover")
	case o.ActiveSite == o.Site:
		return wait("this site is active (epoch " + strconv.FormatInt(o.Epoch, 10) + ")")
	case o.Refused:
		return wait("an automatic takeover refused a job: it stays refused until the operator acts")
	}
	switch o.Lease {
	case zkbridge.LeaseAbsent:
		return wait("site " + o.ActiveSite + " holds no liveness lease: its death cannot be concluded")
	case zkbridge.LeaseFresh:
		return wait("site " + o.ActiveSite + "'s liveness lease is fresh")
	case zkbridge.LeaseRevoked:
		return wait("site " + o.ActiveSite + "'s liveness lease is revoked: waiting for it to renew")
	case zkbridge.LeaseExpired:
		if o.Leading {
			return wait("site " + o.ActiveSite + "'s lease expired, but a JobManager of another site still leads")
		}
		return TakeoverDecision{Run: true, Reason: "site " + o.ActiveSite + "'s lease expired and none of its JobManagers leads"}
	}
	return wait("site " + o.ActiveSite + "'s liveness lease is " + string(o.Lease))
}
