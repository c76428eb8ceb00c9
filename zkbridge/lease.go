package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The liveness lease of a site's ckptfs daemons (docs/design.md §5.10).
//
// ZooKeeper tells whether Flink's JobManagers have sessions; it cannot
// tell a dead site from one that is alive but cut off from ZooKeeper.
// The active site's daemons therefore renew a lease node of their own,
// <ckptfs>/<cluster>/leases/<site>, and stop claiming the site (their
// primary mounts fence themselves) when they could not renew it for a
// while. An automatic takeover on another site may run only once it saw
// that node unchanged for long enough that every holder has stopped
// claiming, and its writes are guarded by the node's version (LeaseGuard).

// ErrLeaseRenewed: the active site's lease was renewed, or revoked by
// another takeover, after this takeover concluded that the site was dead;
// nothing of the guarded write was applied.
var ErrLeaseRenewed = errors.New("zkbridge: the active site's lease was renewed meanwhile")

// ErrLeaseRevoked: a takeover by another site revoked this site's lease;
// it may be renewed only after this site is made active again.
var ErrLeaseRevoked = errors.New("zkbridge: the lease was revoked by a takeover")

// LeaseRule is the timing of the lease, all derived from one duration D:
// a holder renews every D/8 and stops claiming D/2 after the start of
// its last successful renewal; an observer concludes that the holder's
// site is dead only once it saw the lease unchanged for D of its own
// clock. The gap between D/2 and D absorbs clock rate differences of up
// to a third (design §5.10 has the proof).
type LeaseRule struct {
	Duration time.Duration
}

// MinLeaseDuration is the shortest lease: renewals every 100 ms.
const MinLeaseDuration = 800 * time.Millisecond

// Validate checks the duration.
func (r LeaseRule) Validate() error {
	if r.Duration < MinLeaseDuration {
		return fmt.Errorf("lease duration %v: at least %v", r.Duration, MinLeaseDuration)
	}
	return nil
}

// RenewEvery is how often a holder renews.
func (r LeaseRule) RenewEvery() time.Duration { return r.Duration / 8 }

// HolderLapse is how long after the start of its last successful
// renewal a holder stops claiming.
func (r LeaseRule) HolderLapse() time.Duration { return r.Duration / 2 }

// ObserverDead is how long an observer must see the lease unchanged
// before it concludes that the holder is dead.
func (r LeaseRule) ObserverDead() time.Duration { return r.Duration }

// leaseRecord is the lease node's data. Only its version matters to the
// rule; the rest is for people.
type leaseRecord struct {
	Site     string    `json:"site"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Renewed  time.Time `json:"renewed"`
	Duration Duration  `json:"duration"`
	// Epoch is the epoch under which the holder renewed (active-site
	// named its site at it, or 0 before any takeover).
	Epoch int64 `json:"epoch"`
	// RevokedBy and RevokedEpoch are set by the takeover that revoked
	// the lease: the site it activated and the epoch it set.
	RevokedBy    string     `json:"revoked_by,omitempty"`
	RevokedEpoch int64      `json:"revoked_epoch,omitempty"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

func decodeLease(data []byte) (leaseRecord, error) {
	var r leaseRecord
	if len(data) == 0 {
		return r, nil
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("lease node: %w", err)
	}
	return r, nil
}

// leases is the parent of the sites' lease nodes; lease one site's.
func (p ckptfsPaths) leases() string           { return join(p.base, "leases") }
func (p ckptfsPaths) lease(site string) string { return join(p.base, "leases", site) }

// LeaseHolder renews this site's lease. Its methods may be called
// concurrently.
type LeaseHolder struct {
	b    *Bridge
	rule LeaseRule
	now  func() time.Time

	mu sync.Mutex
	// lastOK is when the last successful renewal started (zero: none);
	// revoked is the revocation seen last (nil: none). GUARDED_BY(mu).
	lastOK  time.Time
	revoked *leaseRecord
}

// NewLeaseHolder returns a holder of this site's lease.
func (b *Bridge) NewLeaseHolder(rule LeaseRule) (*LeaseHolder, error) {
	if err := b.requireSite("a lease"); err != nil {
		return nil, err
	}
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	return &LeaseHolder{b: b, rule: rule, now: time.Now}, nil
}

// Rule is the holder's rule.
func (h *LeaseHolder) Rule() LeaseRule { return h.rule }

// Renew renews the lease once, by compare-and-set, under epoch (the
// epoch at which active-site names this site, 0 when no site ever took
// over). A renewal counts only when its own write applied; it then
// counts from the moment Renew started, before the write could apply.
// A lease revoked at an epoch not older than epoch is not renewed:
// ErrLeaseRevoked.
func (h *LeaseHolder) Renew(ctx context.Context, epoch int64) error {
	start := h.now()
	b := h.b
	paths, err := b.clusterPaths(ctx)
	if err != nil {
		return err
	}
	node := paths.lease(b.cfg.Site)
	host, _ := os.Hostname()
	rec := leaseRecord{Site: b.cfg.Site, Host: host, PID: os.Getpid(), Renewed: start.UTC(), Duration: Duration(h.rule.Duration), Epoch: epoch}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	// Two tries: another daemon of this site may renew between our read
	// and our write.
	for try := 0; try < 2; try++ {
		old, stat, err := b.zk.get(ctx, node)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			if err := b.zk.ensure(ctx, paths.leases()); err != nil {
				return err
			}
			err = b.zk.create(ctx, node, data)
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			if err != nil {
				return err
			}
			h.renewed(start, nil)
			return nil
		case err != nil:
			return err
		}
		prev, derr := decodeLease(old)
		if derr != nil {
			b.log.Warn("overwriting an undecodable lease node", "znode", node, "err", derr)
		}
		if prev.RevokedBy != "" && prev.RevokedEpoch >= epoch {
			h.renewed(time.Time{}, &prev)
			return fmt.Errorf("%w: site %s took over at epoch %d", ErrLeaseRevoked, prev.RevokedBy, prev.RevokedEpoch)
		}
		_, err = b.zk.set(ctx, node, data, stat.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return err
		}
		h.renewed(start, nil)
		return nil
	}
	return fmt.Errorf("renew %s: it kept changing", node)
}

func (h *LeaseHolder) renewed(start time.Time, revoked *leaseRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = revoked
	if !start.IsZero() {
		h.lastOK = start
	}
}

// Claiming reports whether the holder may still claim its site at now:
// less than HolderLapse has passed since the start of its last
// successful renewal. A holder that never renewed does not claim.
func (h *LeaseHolder) Claiming(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.lastOK.IsZero() && h.revoked == nil && now.Sub(h.lastOK) < h.rule.HolderLapse()
}

// LastRenewal is when the last successful renewal started (zero: none).
func (h *LeaseHolder) LastRenewal() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastOK
}

// LeaseState is what an observer concludes about a site's lease.
type LeaseState string

const (
	// LeaseAbsent: the site never held a lease (an older ckptfs, or no
	// lease configured there): its death cannot be concluded.
	LeaseAbsent LeaseState = "absent"
	// LeaseFresh: it changed less than ObserverDead ago (of the
	// observer's clock, since the observer first saw its current
	// version).
	LeaseFresh LeaseState = "fresh"
	// LeaseExpired: unchanged for ObserverDead: every holder has stopped
	// claiming.
	LeaseExpired LeaseState = "expired"
	// LeaseRevoked: a takeover revoked it.
	LeaseRevoked LeaseState = "revoked"
)

// LeaseView is one observation of a site's lease.
type LeaseView struct {
	Site  string     `json:"site"`
	State LeaseState `json:"state"`
	// Unchanged is how long the observer has seen its current version.
	Unchanged Duration `json:"unchanged"`
	// Renewed is the holder's own time of its last renewal (for people:
	// the rule never compares clocks of two machines).
	Renewed   time.Time `json:"renewed,omitempty"`
	RevokedBy string    `json:"revoked_by,omitempty"`
	// ExpiresIn, for a fresh lease, is when a read that starts then
	// would find it expired if it stays unchanged: an observer reads
	// again at that moment rather than at its next period.
	ExpiresIn  Duration `json:"expires_in,omitempty"`
	guardValid bool
	guard      LeaseGuard
}

// Guard is the guard of a takeover's writes, valid for an expired lease.
func (v LeaseView) Guard() (LeaseGuard, bool) { return v.guard, v.guardValid }

// LeaseObserver watches another site's lease. It is not safe for
// concurrent use.
type LeaseObserver struct {
	b    *Bridge
	rule LeaseRule
	now  func() time.Time
	// seen is the node's mzxid seen last (0: absent) and since when.
	site   string
	seen   int64
	seenAt time.Time
}

// NewLeaseObserver returns an observer of site's lease.
func (b *Bridge) NewLeaseObserver(rule LeaseRule, site string) (*LeaseObserver, error) {
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	return &LeaseObserver{b: b, rule: rule, now: time.Now, site: site}, nil
}

// Site is the site observed.
func (o *LeaseObserver) Site() string { return o.site }

// Observe reads the lease. The clock starts when a read that began
// after the change returned it: a version is "unchanged for d" only when
// a read that started d after the observer first saw it still returns
// it.
func (o *LeaseObserver) Observe(ctx context.Context) (LeaseView, error) {
	start := o.now()
	paths, err := o.b.clusterPaths(ctx)
	if err != nil {
		return LeaseView{}, err
	}
	node := paths.lease(o.site)
	data, stat, err := o.b.zk.get(ctx, node)
	if errors.Is(err, zk.ErrNoNode) {
		o.seen, o.seenAt = 0, time.Time{}
		return LeaseView{Site: o.site, State: LeaseAbsent}, nil
	}
	if err != nil {
		return LeaseView{}, err
	}
	rec, derr := decodeLease(data)
	v := LeaseView{Site: o.site, Renewed: rec.Renewed, RevokedBy: rec.RevokedBy}
	if derr != nil {
		o.b.log.Warn("undecodable lease node", "znode", node, "err", derr)
	}
	if stat.Mzxid != o.seen {
		// First seen now: count from after the read returned.
		o.seen, o.seenAt = stat.Mzxid, o.now()
	}
	unchanged := start.Sub(o.seenAt)
	if unchanged < 0 {
		unchanged = 0
	}
	v.Unchanged = Duration(unchanged.Round(time.Millisecond))
	switch {
	case rec.RevokedBy != "":
		v.State = LeaseRevoked
	case unchanged >= o.rule.ObserverDead():
		v.State = LeaseExpired
		v.guard, v.guardValid = LeaseGuard{Site: o.site, node: node, version: stat.Version, record: rec}, true
	default:
		v.State = LeaseFresh
		v.ExpiresIn = Duration(max(time.Millisecond, o.seenAt.Add(o.rule.ObserverDead()).Sub(o.now())))
	}
	return v, nil
}

// LeaseGuard guards a takeover's writes against a lease that was renewed
// after the takeover concluded its holder dead: the retractions check
// the node's version, the activation revokes the lease by compare-and-set
// at that version, so that no later renewal succeeds.
type LeaseGuard struct {
	// Site is the site whose lease it is.
	Site    string
	node    string
	version int32
	record  leaseRecord
}

// check is the guard of a retraction.
func (g *LeaseGuard) check() txOp {
	return txOp{name: "lease of " + g.Site, op: &zk.CheckVersionRequest{Path: g.node, Version: g.version}, fence: ErrLeaseRenewed}
}

// revoke is the guard of an activation: by site, at epoch.
func (g *LeaseGuard) revoke(site string, epoch int64) txOp {
	rec := g.record
	now := time.Now().UTC()
	rec.RevokedBy, rec.RevokedEpoch, rec.RevokedAt = site, epoch, &now
	data, _ := json.Marshal(rec)
	return txOp{name: "lease of " + g.Site, op: &zk.SetDataRequest{Path: g.node, Data: data, Version: g.version}, fence: ErrLeaseRenewed}
}

// LeaseInfo is one site's lease as `ckptfs status` shows it. Its times
// are for people: the rule compares no clocks of two machines.
type LeaseInfo struct {
	Site string `json:"site"`
	// Renewed is the holder's own time of its last renewal, by Host and
	// PID; Modified is ZooKeeper's time of the node's last change.
	Renewed  time.Time `json:"renewed"`
	Modified time.Time `json:"modified"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Duration Duration  `json:"duration"`
	Epoch    int64     `json:"epoch"`
	// RevokedBy, RevokedEpoch and RevokedAt (the revoking daemon's
	// clock) name the takeover that revoked it.
	RevokedBy    string     `json:"revoked_by,omitempty"`
	RevokedEpoch int64      `json:"revoked_epoch,omitempty"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// String says it in one line.
func (l LeaseInfo) String() string {
	s := fmt.Sprintf("site %s: lease of %v, renewed %s (holder's clock) by %s pid %d at epoch %d; ZooKeeper changed it %s",
		l.Site, time.Duration(l.Duration), l.Renewed.Format(time.RFC3339Nano), l.Host, l.PID, l.Epoch, l.Modified.Format(time.RFC3339Nano))
	if l.RevokedBy != "" {
		s += fmt.Sprintf("; revoked by site %s's takeover (epoch %d)", l.RevokedBy, l.RevokedEpoch)
		if l.RevokedAt != nil {
			s += " at " + l.RevokedAt.Format(time.RFC3339Nano)
		}
	}
	return s
}

// readLeases reads every site's lease.
func (b *Bridge) readLeases(ctx context.Context, paths ckptfsPaths) ([]LeaseInfo, error) {
	sites, _, err := b.zk.children(ctx, paths.leases())
	if errors.Is(err, zk.ErrNoNode) {
		return []LeaseInfo{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []LeaseInfo{}
	for _, site := range sites {
		data, stat, err := b.zk.get(ctx, paths.lease(site))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, derr := decodeLease(data)
		if derr != nil {
			b.log.Warn("undecodable lease node", "znode", paths.lease(site), "err", derr)
		}
		out = append(out, LeaseInfo{Site: site, Renewed: rec.Renewed, Modified: time.UnixMilli(stat.Mtime).UTC(), Host: rec.Host, PID: rec.PID,
			Duration: rec.Duration, Epoch: rec.Epoch, RevokedBy: rec.RevokedBy, RevokedEpoch: rec.RevokedEpoch, RevokedAt: rec.RevokedAt})
	}
	return out, nil
}
