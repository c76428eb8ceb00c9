package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The lease (docs/design.md §5.10, §5.14).
//
// ZooKeeper tells whether Flink's JobManagers have sessions; it cannot
// tell a dead site from one that is alive but cut off from ZooKeeper.
// So the cluster has one lease node, <ckptfs>/<cluster>/lease, owned by
// one site at one epoch. Every daemon of the owning site renews it, and
// a mount writes only until D/2 after the start of its daemon's last
// renewal that applied. Only an activation changes the owner, and an
// activation first sees the lease unchanged for D, so that every holder
// of the old owner has stopped claiming (the proof is in the design).

// ErrLeaseRenewed: the lease changed after the takeover concluded that
// no holder claims it; nothing of the guarded write was applied.
var ErrLeaseRenewed = errors.New("zkbridge: the lease was renewed meanwhile")

// ErrLeaseHeld: another site's daemons kept renewing the lease until the
// takeover's wait ended: a mount there may write. Nothing was changed.
var ErrLeaseHeld = errors.New("zkbridge: another site still renews the lease")

// ErrNotHolder: this site does not hold the lease (another owner, another
// epoch, another active site, or a node missing): nothing was renewed.
var ErrNotHolder = errors.New("zkbridge: this site does not hold the lease")

// LeaseRule is the timing of the lease, all derived from one duration D:
// a holder renews every D/8; its mount's write deadline is D/2 after the
// start of its last renewal that applied; its watchdog fires at 3D/4;
// an observer concludes that no holder claims only once it saw the lease
// unchanged for D of its own clock. The gap between 3D/4 and D absorbs
// clock rates that differ from real time by less than a seventh.
type LeaseRule struct {
	Duration time.Duration
}

// MinLeaseDuration is the shortest lease: renewals every 100 ms.
const MinLeaseDuration = 800 * time.Millisecond

// DefaultLeaseDuration is lease-duration's default: a ZooKeeper leader
// election of a few seconds does not fence the active site, and an
// automatic takeover concludes well within Flink's default session
// timeout (60 s).
const DefaultLeaseDuration = 20 * time.Second

// Validate checks the duration.
func (r LeaseRule) Validate() error {
	if r.Duration < MinLeaseDuration {
		return fmt.Errorf("lease duration %v: at least %v", r.Duration, MinLeaseDuration)
	}
	return nil
}

// RenewEvery is how often a holder renews.
func (r LeaseRule) RenewEvery() time.Duration { return r.Duration / 8 }

// HolderLapse is how long after the start of its last renewal that
// applied a holder stops claiming: its mount's write deadline.
func (r LeaseRule) HolderLapse() time.Duration { return r.Duration / 2 }

// WatchdogAfter is how long after the start of that renewal the holder's
// watchdog kills a daemon that has not stopped admitting (design §5.14).
func (r LeaseRule) WatchdogAfter() time.Duration { return r.Duration * 3 / 4 }

// ObserverDead is how long an observer must see the lease unchanged
// before it concludes that no holder claims.
func (r LeaseRule) ObserverDead() time.Duration { return r.Duration }

// LeaseRecord is the lease node's data. Its Site and Epoch are written
// by activations only and copied by renewals; the rest is for people and
// for the sweeper (Judged).
type LeaseRecord struct {
	// Site owns the lease since the activation at Epoch ("" for a lease
	// a takeover created to observe it: nobody renews it).
	Site  string `json:"site"`
	Epoch int64  `json:"epoch"`
	// Judged is the zxid up to which the activation judged every
	// pointer, the sweeper judging those created after (design §5.5.2):
	// a takeover's lock node's; 0 for a self-activation, which judges
	// none.
	Judged int64 `json:"judged_after_zxid,omitempty"`
	// Granted says by whom and when (the activator's clock).
	GrantedBy string    `json:"granted_by,omitempty"`
	GrantedAt time.Time `json:"granted_at,omitempty"`
	// Renewed, Host and PID name the last renewal (the renewer's clock),
	// and Duration its lease-duration.
	Renewed  time.Time `json:"renewed,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Duration Duration  `json:"duration,omitempty"`
}

// maxLeaseRecord bounds what is decoded of the lease node: a record is
// a few hundred bytes.
const maxLeaseRecord = 64 << 10

func decodeLease(data []byte) (LeaseRecord, error) {
	var r LeaseRecord
	if len(data) > maxLeaseRecord {
		return r, fmt.Errorf("lease node: %d bytes, at most %d", len(data), maxLeaseRecord)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("lease node: %w", err)
	}
	return r, nil
}

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func (p ckptfsPaths) lease() string { return join(p.base, "lease") }

// State is what one read of ckptfs's own nodes found: the epoch,
// active-site and the lease, with the versions a renewal or an
// activation checks. Its zero value is "nothing read".
type State struct {
	// Epoch is the epoch's value (0 when the node is missing:
	// EpochExists tells).
	Epoch       int64
	EpochExists bool
	// ActiveSite is active-site's value ("" when missing).
	ActiveSite string
	// Lease is the lease's record, nil when the node is missing or its
	// data does not decode (LeaseErr says why).
	Lease    *LeaseRecord
	LeaseErr error
	// Start is when the read began, Returned when its last reply came
	// (this daemon's clock, with its monotonic reading).
	Start, Returned time.Time

	paths         ckptfsPaths
	epochVersion  int32
	activeVersion int32 // -1: missing
	leaseExists   bool
	leaseVersion  int32
	leaseMzxid    int64
}

// Holds reports whether site holds the lease in this state: active-site
// names it, and the lease is its own at the current epoch.
func (s State) Holds(site string) bool {
	return site != "" && s.EpochExists && s.ActiveSite == site && s.activeVersion >= 0 &&
		s.Lease != nil && s.Lease.Site == site && s.Lease.Epoch == s.Epoch
}

// MakeState is a state as if read with an epoch (negative: missing),
// active-site ("": missing) and the lease (nil: missing), for the pure
// rules' tests.
func MakeState(epoch int64, active string, lease *LeaseRecord) State {
	st := State{Epoch: max(epoch, 0), EpochExists: epoch >= 0, ActiveSite: active, Lease: lease, activeVersion: -1}
	if active != "" {
		st.activeVersion = 0
	}
	st.leaseExists = lease != nil
	return st
}

// LeaseExists reports whether the lease node was there (decodable or not).
func (s State) LeaseExists() bool { return s.leaseExists }

// ReadState reads the epoch, active-site and the lease, the three at
// once.
func (b *Bridge) ReadState(ctx context.Context) (State, error) {
	st := State{Start: time.Now()}
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return st, err
	}
	st.paths = paths
	var (
		wg                sync.WaitGroup
		ep                epochState
		epErr, aErr, lErr error
		activeStat        *zk.Stat
		leaseData         []byte
		leaseStat         *zk.Stat
	)
	wg.Add(3)
	go func() { defer wg.Done(); ep, epErr = b.readEpoch(ctx, paths) }()
	go func() { defer wg.Done(); st.ActiveSite, activeStat, aErr = b.readActiveSite(ctx, paths) }()
	go func() {
		defer wg.Done()
		leaseData, leaseStat, lErr = b.zk.get(ctx, paths.lease())
		if errors.Is(lErr, zk.ErrNoNode) {
			leaseStat, lErr = nil, nil
		}
	}()
	wg.Wait()
	st.Returned = time.Now()
	if err := errors.Join(epErr, aErr, lErr); err != nil {
		return st, err
	}
	st.Epoch, st.EpochExists, st.epochVersion = ep.value, ep.exists, ep.version
	st.activeVersion = -1
	if activeStat != nil {
		st.activeVersion = activeStat.Version
	}
	if leaseStat != nil {
		st.leaseExists, st.leaseVersion, st.leaseMzxid = true, leaseStat.Version, leaseStat.Mzxid
		rec, err := decodeLease(leaseData)
		if err != nil {
			st.LeaseErr = err
		} else {
			st.Lease = &rec
		}
	}
	return st, nil
}

// LeaseHolder renews this site's lease and keeps when its claim ends.
// Its methods may be called concurrently.
type LeaseHolder struct {
	b    *Bridge
	rule LeaseRule

	mu sync.Mutex
	// lastOK is when the last renewal that applied started (zero: none,
	// or the claim ended). GUARDED_BY(mu)
	lastOK time.Time
}

// NewLeaseHolder returns a holder for this site.
func (b *Bridge) NewLeaseHolder(rule LeaseRule) (*LeaseHolder, error) {
	if err := b.requireSite("a lease"); err != nil {
		return nil, err
	}
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	return &LeaseHolder{b: b, rule: rule}, nil
}

// Rule is the holder's rule.
func (h *LeaseHolder) Rule() LeaseRule { return h.rule }

// Due reports whether a renewal is due at now: none counted yet, or the
// last one started RenewEvery ago.
func (h *LeaseHolder) Due(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOK.IsZero() || now.Sub(h.lastOK) >= h.rule.RenewEvery()
}

// Renew renews the lease in state st, which must hold it for this site:
// one multi that checks the epoch's and active-site's versions read in
// st and sets the lease at any version, so that the site's daemons never
// conflict. When it applies, the claim counts from st.Start. When st
// does not hold it for this site, the claim ends at once (ErrNotHolder).
// A renewal whose outcome is not known (no reply before ctx ended, or a
// lost reply) does not count.
func (h *LeaseHolder) Renew(ctx context.Context, st State) error {
	b := h.b
	if !st.Holds(b.cfg.Site) {
		h.End()
		return fmt.Errorf("%w: %s", ErrNotHolder, st.Why(b.cfg.Site))
	}
	rec := *st.Lease
	host, _ := os.Hostname()
	rec.Renewed, rec.Host, rec.PID, rec.Duration = st.Start.UTC(), host, os.Getpid(), Duration(h.rule.Duration)
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// The multi takes no context: run it beside the caller, who waits at
	// most until ctx ends. A reply that comes later is not counted.
	done := make(chan error, 1)
	go func() {
		_, err := b.zk.multi(
			&zk.CheckVersionRequest{Path: st.paths.epoch(), Version: st.epochVersion},
			&zk.CheckVersionRequest{Path: st.paths.activeSite(), Version: st.activeVersion},
			&zk.SetDataRequest{Path: st.paths.lease(), Data: data, Version: -1},
		)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			// An activation, or a hand, changed what st read.
			h.End()
			return fmt.Errorf("%w: the epoch, active-site or the lease changed since read: %w", ErrNotHolder, err)
		}
		return fmt.Errorf("renew %s: %w", st.paths.lease(), err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.Start.After(h.lastOK) {
		h.lastOK = st.Start
	}
	return nil
}

// End ends the claim now: a read showed that this site does not hold
// the lease.
func (h *LeaseHolder) End() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastOK = time.Time{}
}

// Deadline is when the claim ends: HolderLapse after the start of the
// last renewal that applied; zero when there is none.
func (h *LeaseHolder) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastOK.IsZero() {
		return time.Time{}
	}
	return h.lastOK.Add(h.rule.HolderLapse())
}

// LastRenewal is when the last renewal that applied started (zero: none).
func (h *LeaseHolder) LastRenewal() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOK
}

// Why says in words why st does not hold the lease for site ("it does"
// when it does).
func (st State) Why(site string) string {
	switch {
	case !st.EpochExists:
		return "the epoch is missing"
	case st.activeVersion < 0:
		return "active-site is missing"
	case st.ActiveSite != site:
		return "site " + st.ActiveSite + " is active (epoch " + strconv.FormatInt(st.Epoch, 10) + ")"
	case !st.leaseExists:
		return "the lease is missing"
	case st.Lease == nil:
		return "the lease does not decode: " + st.LeaseErr.Error()
	case st.Lease.Site != site:
		owner := st.Lease.Site
		if owner == "" {
			owner = "nobody (a takeover observes it)"
		}
		return fmt.Sprintf("the lease belongs to %s at epoch %d", owner, st.Lease.Epoch)
	case st.Lease.Epoch != st.Epoch:
		return fmt.Sprintf("the lease was granted at epoch %d, the epoch is %d", st.Lease.Epoch, st.Epoch)
	}
	return "it does"
}

// LeaseState is what an observer concludes about the lease.
type LeaseState string

const (
	// LeaseAbsent: there is no lease node (or none was read yet).
	LeaseAbsent LeaseState = "absent"
	// LeaseFresh: it changed less than ObserverDead ago (of the
	// observer's clock, since the observer first saw its current
	// version).
	LeaseFresh LeaseState = "fresh"
	// LeaseExpired: unchanged for ObserverDead: no holder claims.
	LeaseExpired LeaseState = "expired"
)

// LeaseView is one observation of the lease.
type LeaseView struct {
	// Owner and Epoch are whose lease it is.
	Owner string     `json:"owner"`
	Epoch int64      `json:"epoch"`
	State LeaseState `json:"state"`
	// Unchanged is how long the observer has seen its current version.
	Unchanged Duration `json:"unchanged"`
	// Renewed is the holder's own time of its last renewal (for people:
	// the rule never compares clocks of two machines).
	Renewed time.Time `json:"renewed,omitempty"`
	// ExpiresIn, for a fresh lease, is when a read that starts then
	// would find it expired if it stays unchanged.
	ExpiresIn  Duration `json:"expires_in,omitempty"`
	guardValid bool
	guard      LeaseGuard
}

// Guard is the guard of a takeover's writes, valid for an expired lease.
func (v LeaseView) Guard() (LeaseGuard, bool) { return v.guard, v.guardValid }

// LeaseObserver watches the lease. It is not safe for concurrent use.
type LeaseObserver struct {
	rule LeaseRule
	// seen is the node's mzxid seen last (0: absent) and since when.
	seen   int64
	seenAt time.Time
}

// NewLeaseObserver returns an observer with rule's D.
func NewLeaseObserver(rule LeaseRule) (*LeaseObserver, error) {
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	return &LeaseObserver{rule: rule}, nil
}

// See takes the lease as read in st. The clock starts when a read that
// began after the change returned it: a version is "unchanged for d"
// only when a read that started d after the observer first saw it
// returned it still. The observer waits D or the D the lease's last
// renewer wrote, whichever is longer: a holder with a longer lease
// claims longer.
func (o *LeaseObserver) See(st State) LeaseView {
	if !st.leaseExists {
		o.seen, o.seenAt = 0, time.Time{}
		return LeaseView{State: LeaseAbsent}
	}
	v := LeaseView{}
	dead := o.rule.ObserverDead()
	if st.Lease != nil {
		v.Owner, v.Epoch, v.Renewed = st.Lease.Site, st.Lease.Epoch, st.Lease.Renewed
		dead = max(dead, time.Duration(st.Lease.Duration))
	}
	if st.leaseMzxid != o.seen || o.seenAt.IsZero() {
		o.seen, o.seenAt = st.leaseMzxid, st.Returned
	}
	unchanged := max(0, st.Start.Sub(o.seenAt))
	v.Unchanged = Duration(unchanged.Round(time.Millisecond))
	if unchanged >= dead {
		v.State = LeaseExpired
		v.guard, v.guardValid = LeaseGuard{Owner: v.Owner, node: st.paths.lease(), version: st.leaseVersion}, true
		return v
	}
	v.State = LeaseFresh
	v.ExpiresIn = Duration(max(time.Millisecond, o.seenAt.Add(dead).Sub(time.Now())))
	return v
}

// LeaseGuard guards a takeover's writes against a lease that changed
// after the takeover concluded that no holder claims it: the
// retractions check the node's version, the activation writes the new
// owner at that version.
type LeaseGuard struct {
	// Owner is whose lease it was ("" nobody's).
	Owner   string
	node    string
	version int32
}

// check is the guard of a retraction.
func (g *LeaseGuard) check() txOp {
	return txOp{name: "lease", op: &zk.CheckVersionRequest{Path: g.node, Version: g.version}, fence: ErrLeaseRenewed}
}

// grant is the guard of an activation: the lease, owned by rec.Site.
func (g *LeaseGuard) grant(rec LeaseRecord) txOp {
	data, _ := json.Marshal(rec)
	return txOp{name: "lease", op: &zk.SetDataRequest{Path: g.node, Data: data, Version: g.version}, fence: ErrLeaseRenewed}
}

// ensureLease creates the lease, owned by nobody, where it is missing,
// so that a takeover has a version to observe and to guard: nobody
// renews a lease nobody owns.
func (b *Bridge) ensureLease(ctx context.Context, paths ckptfsPaths, epoch int64) error {
	host, _ := os.Hostname()
	data, err := json.Marshal(LeaseRecord{Epoch: epoch, GrantedBy: fmt.Sprintf("created unowned by %s's takeover (%s pid %d)", b.cfg.Site, host, os.Getpid()), GrantedAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	return b.zk.createIfAbsent(ctx, paths.lease(), data)
}

// waitLease observes the lease until it is expired, owned by this site
// at the current epoch, or deadline passes; it creates it (unowned) when
// it is missing. It returns the guard of the takeover's writes (nil: this
// site owns it, nothing to guard) or ErrLeaseHeld.
func (b *Bridge) waitLease(ctx context.Context, o *LeaseObserver, deadline time.Time, j *journal) (*LeaseGuard, error) {
	logged := ""
	for {
		st, err := b.ReadState(ctx)
		if err != nil {
			return nil, err
		}
		if st.Holds(b.cfg.Site) {
			return nil, nil
		}
		if !st.leaseExists {
			if err := b.ensureLease(ctx, st.paths, st.Epoch); err != nil {
				return nil, err
			}
			continue
		}
		v := o.See(st)
		if v.State == LeaseExpired {
			g, _ := v.Guard()
			return &g, nil
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, fmt.Errorf("%w: %s", ErrLeaseHeld, describeLease(v))
		}
		if s := describeLease(v); v.Owner != logged {
			logged = v.Owner
			b.log.Info("waiting until no other site's daemon claims the lease", "detail", s, "remaining", remaining.Round(time.Second).String())
			j.waiting(ctx, fmt.Sprintf("the lease (%s) to stay unchanged for %v, at most until %s", s, o.rule.ObserverDead(), deadline.UTC().Format(time.RFC3339)))
		}
		t := time.NewTimer(min(remaining, time.Duration(v.ExpiresIn), o.rule.RenewEvery()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// describeLease says whose lease it is and how long it looked unchanged.
func describeLease(v LeaseView) string {
	owner := v.Owner
	if owner == "" {
		owner = "nobody"
	}
	return fmt.Sprintf("owned by %s at epoch %d, unchanged for %v", owner, v.Epoch, time.Duration(v.Unchanged))
}

// LeaseInfo is the lease as `ckptfs status` shows it. Its times are for
// people: the rule compares no clocks of two machines.
type LeaseInfo struct {
	LeaseRecord
	// Modified is ZooKeeper's time of the node's last change.
	Modified time.Time `json:"modified"`
}

// String says it in one line.
func (l LeaseInfo) String() string {
	owner := l.Site
	if owner == "" {
		owner = "nobody (created by a takeover to observe it)"
	}
	s := fmt.Sprintf("owned by %s since epoch %d (%s, %s)", owner, l.Epoch, l.GrantedBy, l.GrantedAt.Format(time.RFC3339))
	if !l.Renewed.IsZero() {
		s += fmt.Sprintf("; renewed %s (renewer's clock) by %s pid %d with a lease of %v", l.Renewed.Format(time.RFC3339Nano), l.Host, l.PID, time.Duration(l.Duration))
	}
	return s + "; ZooKeeper changed it " + l.Modified.Format(time.RFC3339Nano)
}

// readLease reads the lease for status (nil: none).
func (b *Bridge) readLease(ctx context.Context, paths ckptfsPaths) (*LeaseInfo, error) {
	data, stat, err := b.zk.get(ctx, paths.lease())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, derr := decodeLease(data)
	if derr != nil {
		b.log.Warn("undecodable lease node", "znode", paths.lease(), "err", derr)
		rec = LeaseRecord{GrantedBy: "undecodable: " + strings.TrimSpace(derr.Error())}
	}
	return &LeaseInfo{LeaseRecord: rec, Modified: time.UnixMilli(stat.Mtime).UTC()}, nil
}
