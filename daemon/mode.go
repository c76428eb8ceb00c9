package daemon

import (
	"strconv"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Session is what the loop knows of ZooKeeper on one pass.
type Session int

const (
	// SessionOff: the daemon runs without ZooKeeper.
	SessionOff Session = iota
	// SessionUp: the pass read ckptfs's nodes (Observation.State).
	SessionUp
	// SessionLost: there is no session, or the read failed or did not
	// come back within the pass.
	SessionLost
)

func (s Session) String() string {
	switch s {
	case SessionOff:
		return "off"
	case SessionUp:
		return "up"
	case SessionLost:
		return "lost"
	}
	return "Session(" + strconv.Itoa(int(s)) + ")"
}

// Observation is everything the daemon's rules depend on, as seen on one
// pass of its loop (design §5.14): it is read once and every rule gets
// the same.
type Observation struct {
	// Site is this site's name; Configured the mode the mount was
	// configured with (replica or primary).
	Site       string
	Configured fusefs.Mode
	// Mode is the mount's mode now.
	Mode fusefs.Mode
	// Now is when the pass began.
	Now time.Time
	// Session is the ZooKeeper side of this pass; State is what it read
	// (with SessionUp).
	Session Session
	State   zkbridge.State
	// Deadline is the mount's write deadline: D/2 after the start of the
	// last renewal of the lease that applied (zero: none, or the claim
	// ended).
	Deadline time.Time
	// RenewalDue: no renewal counted for D/8.
	RenewalDue bool
	// Lease is the lease as this daemon's observer sees it, when this
	// site does not hold it (with SessionUp).
	Lease zkbridge.LeaseView
	// BackingReplaced reports that the backing directory is no longer
	// the one the primary mount was pinned to (the NAS went away and a
	// directory of another file system is at its path).
	BackingReplaced bool
	// Busy: an activation or an automatic takeover of this daemon runs.
	Busy bool
}

// Writable reports whether the mount may admit changes now: without
// ZooKeeper the configured mode decides; with it only a write deadline
// in the future does (design §5.14).
func (o Observation) Writable() bool {
	if o.BackingReplaced {
		return false
	}
	if o.Session == SessionOff {
		return o.Configured == fusefs.ModePrimary
	}
	return o.Now.Before(o.Deadline)
}

// Decision is the mode the mount must have and why; Mode equal to the
// observed mode means nothing changes, and Reason is then empty.
type Decision struct {
	Mode   fusefs.Mode
	Reason string
}

// Decide is the promotion and fencing rule, the one place it is written
// (design §5.14): a mount is primary exactly while it may write.
//
//   - a primary whose backing was replaced is fenced, and no mount is
//     promoted onto a replaced backing: its writes would not reach the
//     NAS;
//   - without ZooKeeper the configured mode holds;
//   - with ZooKeeper a mount whose write deadline is ahead (its daemon's
//     renewal of the lease applied less than D/2 ago) is primary, and a
//     primary whose deadline passed, or whose daemon learned that its
//     site does not hold the lease, is fenced. Nothing else promotes:
//     not the configured mode, not active-site alone, not a session.
func Decide(o Observation) Decision {
	keep := Decision{Mode: o.Mode}
	switch {
	case o.BackingReplaced:
		if o.Mode == fusefs.ModePrimary {
			return Decision{Mode: fusefs.ModeFenced, Reason: "the backing directory was replaced"}
		}
		return keep
	case o.Session == SessionOff:
		return keep
	case o.Writable():
		if o.Mode != fusefs.ModePrimary {
			return Decision{Mode: fusefs.ModePrimary, Reason: "this site holds the lease (epoch " + strconv.FormatInt(o.State.Epoch, 10) + ")"}
		}
		return keep
	case o.Mode == fusefs.ModePrimary:
		why := "the write deadline passed: no renewal of the lease applied for half a lease"
		if o.Deadline.IsZero() {
			why = "this site does not hold the lease"
			if o.Session == SessionUp {
				why += ": " + o.State.Why(o.Site)
			}
		}
		return Decision{Mode: fusefs.ModeFenced, Reason: why}
	}
	return keep
}

// DecideRenew is the holder's rule (design §5.10): renew when this pass
// read that the site holds the lease and no renewal counted for D/8.
func DecideRenew(o Observation) bool {
	return o.Session == SessionUp && o.RenewalDue && o.State.Holds(o.Site)
}

// DecideActivate says whether the daemon activates its own site, and
// why (design §5.14): only with a session, no activation of its own
// running and the site not holding the lease, when active-site names
// this site but nobody owns the lease (Adopt), or when the mount is
// configured primary and no site was ever activated (Bootstrap). A
// configured primary never activates a cluster that had an active site.
func DecideActivate(o Observation) (zkbridge.SelfActivation, bool) {
	if o.Session != SessionUp || o.Busy || o.State.Holds(o.Site) {
		return "", false
	}
	if zkbridge.Adopt.Applies(o.State, o.Site) {
		return zkbridge.Adopt, true
	}
	if o.Configured == fusefs.ModePrimary && zkbridge.Bootstrap.Applies(o.State, o.Site) {
		return zkbridge.Bootstrap, true
	}
	return "", false
}
