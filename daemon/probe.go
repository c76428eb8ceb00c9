package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
)

// backingProbe times a statfs(2) of the backing directory every
// interval, so that health knows whether the NAS answers even when no
// verification is waiting on it (a primary's catalog reads little; NFS
// sends statfs to the server). On a primary it also reports a NAS that is
// full or read-only, which fails Flink's writes and not the catalog's
// reads. It writes nothing: a fenced primary must not, and a replica
// cannot. A probe still waiting is not started again.
type backingProbe struct {
	backing string
	timeout time.Duration

	mu sync.Mutex
	// started: GUARDED_BY(mu). When the probe in flight started; zero
	// when none is.
	started time.Time
	// last: GUARDED_BY(mu). The last probe that ended: how long it took
	// and what it failed with.
	last    time.Duration
	lastErr error
}

func (p *backingProbe) run(ctx context.Context, interval time.Duration, mode func() fusefs.Mode) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		p.mu.Lock()
		busy := !p.started.IsZero()
		if !busy {
			p.started = time.Now()
		}
		p.mu.Unlock()
		if !busy {
			go p.probe(mode() == fusefs.ModePrimary)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probe makes one probe; it may wait on the NAS as long as the NAS lets
// it.
func (p *backingProbe) probe(primary bool) {
	var st unix.Statfs_t
	err := unix.Statfs(p.backing, &st)
	switch {
	case err != nil:
		err = &os.PathError{Op: "statfs", Path: p.backing, Err: err}
	case primary && st.Flags&unix.ST_RDONLY != 0:
		err = fmt.Errorf("%s is read-only: Flink cannot write checkpoints", p.backing)
	case primary && st.Bavail == 0 && st.Blocks > 0:
		err = fmt.Errorf("%s is full: Flink's writes fail with ENOSPC", p.backing)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.lastErr = time.Since(p.started), err
	p.started = time.Time{}
}

// Duration is how long the last probe took, or the one in flight has
// been waiting if that is longer.
func (p *backingProbe) Duration() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started.IsZero() {
		return max(p.last, time.Since(p.started))
	}
	return p.last
}

// problem is the health check: nil while the NAS answers probes.
func (p *backingProbe) problem() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started.IsZero() {
		if waited := time.Since(p.started); waited > p.timeout {
			return fmt.Errorf("backing file system not answering: a probe of %s has waited %s (since %s)",
				p.backing, waited.Round(time.Second), p.started.UTC().Format(time.RFC3339))
		}
	}
	if p.lastErr != nil {
		return fmt.Errorf("backing file system failing: %w", p.lastErr)
	}
	return nil
}
