package daemon

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TakeoverMode says whether the daemon takes over by itself.
type TakeoverMode string

const (
	// TakeoverManual: only `ckptfs takeover` (the systemd gate) takes
	// over, as before.
	TakeoverManual TakeoverMode = "manual"
	// TakeoverAuto: the daemons of a standby site take over when the
	// lease expired and no JobManager of another site leads (design
	// §5.11).
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
	// Lease is the lease as this daemon observed it (with another site
	// active).
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
// session, another site is active, the lease expired (so every daemon
// that held it stopped claiming, design §5.10) or is missing (the
// takeover then observes it itself), and no JobManager of another site
// leads or locks any more; never after a takeover that refused a job,
// never before a first site was made active (the first start goes
// through `ckptfs takeover`).
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
	case zkbridge.LeaseFresh:
		return wait("the lease is fresh: a daemon of site " + o.ActiveSite + " may still claim it")
	case zkbridge.LeaseExpired, zkbridge.LeaseAbsent:
		what := "the lease expired"
		if o.Lease == zkbridge.LeaseAbsent {
			what = "there is no lease (the takeover observes it itself)"
		}
		if o.Leading {
			return wait(what + ", but a JobManager of another site still leads")
		}
		return TakeoverDecision{Run: true, Reason: what + " and no JobManager of site " + o.ActiveSite + " leads"}
	}
	return wait("the lease is " + string(o.Lease))
}

// HoldObservation is what the gate's rule looks at (takeover auto).
type HoldObservation struct {
	Site string
	Mode fusefs.Mode
	// ActiveSite is active-site as the loop last read it, and Lease the
	// lease as last observed (zero: unknown).
	ActiveSite string
	Lease      zkbridge.LeaseView
	// Refused: this site's automatic takeover refused.
	Refused bool
}

// DecideHold is the gate's rule with takeover auto (design §5.12), the
// one place it is written; true means the open waits, false admits it
// or, with an error, fails it:
//
//   - a primary admits;
//   - a fenced mount admits while another site is active and owns the
//     lease, seen fresh: this site lost a takeover that has decided, and
//     its mount answers as with takeover manual (listings filtered,
//     writes EROFS) instead of failing every open after hold-timeout;
//   - after this site's automatic takeover refused, an open fails (EIO);
//   - otherwise the open waits: a replica of a standby site, and a fenced
//     mount while a takeover towards its site may come.
func DecideHold(o HoldObservation) (bool, error) {
	switch {
	case o.Mode == fusefs.ModePrimary:
		return false, nil
	case o.Mode == fusefs.ModeFenced && o.ActiveSite != "" && o.ActiveSite != o.Site &&
		o.Lease.Owner == o.ActiveSite && o.Lease.State == zkbridge.LeaseFresh:
		return false, nil
	case o.Refused:
		return false, fmt.Errorf("the automatic takeover refused: %w", syscall.EIO)
	}
	return true, nil
}
