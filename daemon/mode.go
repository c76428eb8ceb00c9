package daemon

import (
	"strconv"

	"github.com/ckptfs/ckptfs/fusefs"
)

// Session is what the mode follower knows of ZooKeeper on one pass.
type Session int

const (
	// SessionOff: the daemon runs without ZooKeeper.
	SessionOff Session = iota
	// SessionUp: active-site was read on this pass.
	SessionUp
	// SessionLost: there is no session, or reading active-site failed.
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

// Observation is everything the mount's mode depends on, as seen on one
// pass of the mode follower.
type Observation struct {
	// Site is this site's name.
	Site string
	// Mode is the mount's mode now.
	Mode fusefs.Mode
	// Session is the ZooKeeper side of this pass; ActiveSite and Epoch
	// are what active-site held (with SessionUp; "" when no site ever
	// took over).
	Session    Session
	ActiveSite string
	Epoch      int64
	// Lease makes a primary without a ZooKeeper session read-only.
	Lease bool
	// LeaseLapsed: this site's liveness lease is configured, active-site
	// named this site when last read, and the daemon's holder no longer
	// claims it (no successful renewal for half the lease, or revoked;
	// design §5.10).
	LeaseLapsed bool
	// BackingReplaced reports that the backing directory is no longer
	// the one the primary mount was pinned to (the NAS went away and a
	// directory of another file system is at its path).
	BackingReplaced bool
}

// Decision is the mode the mount must have and why; Mode equal to the
// observed mode means nothing changes, and Reason is then empty.
type Decision struct {
	Mode   fusefs.Mode
	Reason string
}

// Decide is the promotion and fencing rule, the one place it is written:
//
//   - a primary whose backing was replaced is fenced, and no mount is
//     promoted onto a replaced backing: its writes would not reach the
//     NAS;
//   - a primary fences itself when its liveness lease lapsed: another
//     site may conclude that this one is dead and take over (§5.10);
//   - a primary fences itself when active-site names another site, or,
//     with Lease, when it has no ZooKeeper session (it cannot know that
//     no other site took over);
//   - a replica or a fenced mount of the site active-site names becomes
//     primary (promotion, also after a lease fence once the session is
//     back), unless its liveness lease lapsed, and so does a mount
//     fenced while no site ever took over (only a lease fences then: it
//     began as a primary);
//   - otherwise the mode stays: without ZooKeeper, without a session
//     (and no lease), or while no site ever took over, the configured
//     mode holds.
//
// With ZooKeeper, the follower applies a promotion only once this site's
// writer node is held, and keeps it held while the mount is primary
// (design §5.13); that is ordering against takeovers, not a choice of
// mode.
func Decide(o Observation) Decision {
	keep := Decision{Mode: o.Mode}
	if o.BackingReplaced {
		if o.Mode == fusefs.ModePrimary {
			return Decision{Mode: fusefs.ModeFenced, Reason: "the backing directory was replaced"}
		}
		return keep
	}
	if o.LeaseLapsed && o.Mode == fusefs.ModePrimary {
		return Decision{Mode: fusefs.ModeFenced, Reason: "this site's liveness lease lapsed"}
	}
	switch o.Session {
	case SessionLost:
		if o.Lease && o.Mode == fusefs.ModePrimary {
			return Decision{Mode: fusefs.ModeFenced, Reason: "no ZooKeeper session (lease)"}
		}
	case SessionUp:
		epoch := " (epoch " + strconv.FormatInt(o.Epoch, 10) + ")"
		switch {
		case o.ActiveSite == "" && o.Mode == fusefs.ModeFenced && !o.LeaseLapsed:
			// Only a lease fences while no site is active (a replaced
			// backing is handled above): the session is back, and
			// nobody took over.
			return Decision{Mode: fusefs.ModePrimary, Reason: "ZooKeeper session back, no site took over"}
		case o.ActiveSite == "":
		case o.ActiveSite == o.Site && o.Mode != fusefs.ModePrimary && !o.LeaseLapsed:
			return Decision{Mode: fusefs.ModePrimary, Reason: "this site is active" + epoch}
		case o.ActiveSite != o.Site && o.Mode == fusefs.ModePrimary:
			return Decision{Mode: fusefs.ModeFenced, Reason: "site " + o.ActiveSite + " is active" + epoch}
		}
	}
	return keep
}
