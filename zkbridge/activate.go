package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SelfActivation is why a daemon activates its own site without a
// takeover (design §5.14).
type SelfActivation string

const (
	// Adopt: active-site names this site, but nobody owns the lease (the
	// cluster ran a release without it, or someone deleted it).
	Adopt SelfActivation = "adopt"
	// Bootstrap: the mount is configured primary and no site was ever
	// activated (no epoch above 0, no active-site).
	Bootstrap SelfActivation = "bootstrap"
)

// ErrNotApplicable: the case a self-activation was asked for no longer
// holds under the takeover lock; nothing was written.
var ErrNotApplicable = errors.New("zkbridge: the activation no longer applies")

// Applies reports whether st is a state in which a daemon of this site
// activates it for why.
func (why SelfActivation) Applies(st State, site string) bool {
	unowned := !st.leaseExists || (st.Lease != nil && st.Lease.Site == "")
	switch why {
	case Adopt:
		return unowned && st.ActiveSite == site
	case Bootstrap:
		return unowned && st.ActiveSite == "" && st.Epoch <= 0
	}
	return false
}

// ActivateSelf activates this site for why, without judging Flink's
// pointers: it takes the takeover lock, checks the case again under it,
// waits (at most wait) until the lease was unchanged for D, creating it
// unowned where it is missing, and activates as a takeover does. It
// returns the new epoch.
func (b *Bridge) ActivateSelf(ctx context.Context, why SelfActivation, wait time.Duration) (int64, error) {
	if err := b.requireSite("activate"); err != nil {
		return 0, err
	}
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return 0, err
	}
	if err := b.zk.ensure(ctx, paths.takeover()); err != nil {
		return 0, err
	}
	if err := b.zk.createIfAbsent(ctx, paths.epoch(), []byte("0")); err != nil {
		return 0, err
	}
	lock, err := b.acquireLock(ctx, paths, string(why), b.cfg.LockWait)
	if err != nil {
		return 0, err
	}
	defer b.releaseLock(lock)
	st, err := b.ReadState(ctx)
	if err != nil {
		return 0, err
	}
	if !why.Applies(st, b.cfg.Site) {
		return 0, fmt.Errorf("%w: %s (%s)", ErrNotApplicable, why, st.Why(b.cfg.Site))
	}
	o, err := NewLeaseObserver(LeaseRule{Duration: b.cfg.LeaseDuration})
	if err != nil {
		return 0, err
	}
	if lock.lease, err = b.waitLease(ctx, o, time.Now().Add(wait), nil); err != nil {
		return 0, err
	}
	if lock.lease == nil {
		return st.Epoch, nil // held meanwhile: nothing to do
	}
	ep, err := b.readEpoch(ctx, paths)
	if err != nil {
		return 0, err
	}
	active, activeStat, err := b.readActiveSite(ctx, paths)
	if err != nil {
		return 0, err
	}
	if ep.version != st.epochVersion || active != st.ActiveSite {
		return 0, fmt.Errorf("%w: %s", ErrEpochChanged, "the epoch or active-site changed while the lease was observed")
	}
	// It judged no pointer: the sweeper judges them all (design §5.5.2).
	if err := b.activate(ctx, paths, lock, ep, activeStat, 0, nil); err != nil {
		return 0, err
	}
	b.log.Warn("site activated by its own daemon", "reason", string(why), "epoch", ep.value+1)
	return ep.value + 1, nil
}
