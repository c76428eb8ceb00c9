package metrics

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// ZooKeeper is the daemon's ZooKeeper side as metrics see it. The daemon
// connects in the background, so the bridge and the publisher are set
// when they exist; until then the session reads as disconnected.
type ZooKeeper struct {
	bridge    atomic.Pointer[zkbridge.Bridge]
	publisher atomic.Pointer[zkbridge.Publisher]
	sweeper   atomic.Pointer[zkbridge.Sweeper]
	duty      atomic.Pointer[zkbridge.Duty]
	active    atomic.Pointer[ActiveSite]
	// Lag computes the lag behind Flink's pointers (nil: not exported).
	Lag *LagTracker
	// Failover reports the lease and the automatic takeover (nil: not
	// exported).
	Failover func() Failover
}

// ActiveSite is what ZooKeeper's active-site and epoch nodes said when
// last read.
type ActiveSite struct {
	Site  string `json:"site"`
	Epoch int64  `json:"epoch"`
	// Read is when they were read.
	Read time.Time `json:"read"`
}

// SetBridge sets the daemon's connection.
func (z *ZooKeeper) SetBridge(b *zkbridge.Bridge) { z.bridge.Store(b) }

// SetPublisher sets the daemon's marker publisher.
func (z *ZooKeeper) SetPublisher(p *zkbridge.Publisher) { z.publisher.Store(p) }

// SetSweeper sets the daemon's sweeper of stray pointers.
func (z *ZooKeeper) SetSweeper(s *zkbridge.Sweeper) { z.sweeper.Store(s) }

// SetDuty sets the daemon's site duty.
func (z *ZooKeeper) SetDuty(d *zkbridge.Duty) { z.duty.Store(d) }

// Duty reports whether this daemon holds its site's duty and who holds
// it ("" unknown or none); ok is false before the daemon connected.
func (z *ZooKeeper) Duty() (held bool, holder string, ok bool) {
	d := z.duty.Load()
	if d == nil {
		return false, "", false
	}
	return d.Held(), d.Holder(), true
}

// SetActiveSite records what active-site and epoch say.
func (z *ZooKeeper) SetActiveSite(site string, epoch int64) {
	z.active.Store(&ActiveSite{Site: site, Epoch: epoch, Read: time.Now()})
}

// ActiveSite returns what SetActiveSite recorded last.
func (z *ZooKeeper) ActiveSite() (ActiveSite, bool) {
	if a := z.active.Load(); a != nil {
		return *a, true
	}
	return ActiveSite{}, false
}

// Session is the bridge's session, or disconnected before there is one.
func (z *ZooKeeper) Session() zkbridge.Session {
	if b := z.bridge.Load(); b != nil {
		return b.Session()
	}
	return zkbridge.Session{State: zkbridge.SessionDisconnected}
}

// errNoBridge is a lag computation before the daemon connected.
var errNoBridge = errors.New("no ZooKeeper connection yet")

// Status reads the status report through the bridge, once there is one.
// When its context ends it returns the context's error; the bridge's
// connection stays.
func (z *ZooKeeper) Status(ctx context.Context) (*zkbridge.StatusReport, error) {
	b := z.bridge.Load()
	if b == nil {
		return nil, errNoBridge
	}
	return b.Status(ctx)
}

// JobLag is one job's position behind Flink's pointers.
type JobLag struct {
	JobID string `json:"job_id"`
	// Pointer is ZooKeeper's newest pointer (what Flink would restore);
	// CompletePointer the newest pointer complete here at L2.
	Pointer         *int64 `json:"flink_pointer"`
	CompletePointer *int64 `json:"complete_pointer"`
	// LagCheckpoints is Pointer - CompletePointer; LagSeconds the time
	// between their checkpoints (Flink's checkpoint timestamps from the
	// HA files, or the znodes' creation times when one is unreadable
	// here). Both are nil while no pointer is complete here.
	LagCheckpoints *int64   `json:"lag_checkpoints"`
	LagSeconds     *float64 `json:"lag_seconds"`
}

// LagSnapshot is the last lag computation.
type LagSnapshot struct {
	// Updated is when the last successful computation ended (zero: none
	// yet); Jobs is its result.
	Updated time.Time `json:"updated"`
	Jobs    []JobLag  `json:"jobs"`
	// Failures counts failed computations; LastError is the last one's
	// error ("" after a success).
	Failures  uint64 `json:"failures"`
	LastError string `json:"last_error,omitempty"`
	// Idle: this daemon does not hold its site's duty, and the holder
	// computes the site's lag (design §5.5.3); Jobs is empty.
	Idle bool `json:"idle,omitempty"`
}

// StatusFunc reads a status report (zkbridge.Bridge.Status).
type StatusFunc func(ctx context.Context) (*zkbridge.StatusReport, error)

// LagTracker computes the lag behind Flink's pointers in the background:
// every interval, and soon after Trigger (bursts coalesce). Its cost is
// one status read per pass: a few ZooKeeper reads per job and the
// verification of the pointers' HA files, incremental through the
// verifier's cache.
type LagTracker struct {
	status   StatusFunc
	interval time.Duration
	now      func() time.Time
	trigger  chan struct{}

	mu   sync.Mutex
	snap LagSnapshot // GUARDED_BY(mu)
}

// NewLagTracker returns a tracker that reads status every interval.
func NewLagTracker(status StatusFunc, interval time.Duration) *LagTracker {
	return &LagTracker{status: status, interval: interval, now: time.Now, trigger: make(chan struct{}, 1)}
}

// Interval is the period of the computation.
func (l *LagTracker) Interval() time.Duration { return l.interval }

// Trigger asks for a computation soon. It never blocks.
func (l *LagTracker) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Run computes now, then every interval and after every Trigger, until
// ctx ends.
func (l *LagTracker) Run(ctx context.Context) {
	l.mu.Lock()
	l.snap.Idle = false
	l.mu.Unlock()
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		l.Update(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.trigger:
		}
	}
}

// Update computes the lag once.
func (l *LagTracker) Update(ctx context.Context) error {
	rep, err := l.status(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			l.snap.Failures++
			l.snap.LastError = err.Error()
		}
		return err
	}
	jobs := make([]JobLag, 0, len(rep.Jobs))
	for _, j := range rep.Jobs {
		jobs = append(jobs, JobLag{
			JobID: j.JobID, Pointer: j.Newest, CompletePointer: j.NewestComplete,
			LagCheckpoints: j.LagCheckpoints, LagSeconds: j.LagSeconds,
		})
	}
	l.snap.Jobs, l.snap.Updated, l.snap.LastError = jobs, l.now(), ""
	return nil
}

// Idle forgets the last computation: this daemon stopped holding its
// site's duty, so its lag series go (another daemon's are the site's).
// Failures stay counted.
func (l *LagTracker) Idle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap = LagSnapshot{Failures: l.snap.Failures, Idle: true}
}

// Snapshot returns the last computation.
func (l *LagTracker) Snapshot() LagSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.snap
	s.Jobs = append([]JobLag(nil), s.Jobs...)
	return s
}
