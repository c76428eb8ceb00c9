package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// PerObjectOptions configure a PerObject simulator.
type PerObjectOptions struct {
	Options
	// Each copy or deletion waits a delay drawn uniformly from
	// [MinDelay, MaxDelay] after the scan that noticed the change.
	MinDelay, MaxDelay time.Duration
}

// PerObject simulates object-store replication: every entry that differs
// between source and destination is replicated on its own, after its own
// random delay, by a goroutine of its own. A copy writes the destination
// file in place (so a partially written file can be observed) and takes
// whatever the source holds when its delay expires; a deletion removes the
// destination entry when the source still lacks it at that time (a
// directory only once empty). Parent directories are created as needed.
// Pass is one scan that schedules this work; Run scans periodically until
// stopped; Sync drives it to convergence.
type PerObject struct {
	core
	min, max time.Duration

	mu      sync.Mutex
	pending map[string]chan struct{} // rel -> closed when its work is done
	lastErr error                    // last failure of a scheduled copy or deletion
}

// NewPerObject returns a PerObject simulator.
func NewPerObject(o PerObjectOptions) (*PerObject, error) {
	if o.MinDelay < 0 || o.MaxDelay < o.MinDelay {
		return nil, fmt.Errorf("replication: bad delay range [%v, %v]", o.MinDelay, o.MaxDelay)
	}
	p := &PerObject{min: o.MinDelay, max: o.MaxDelay, pending: map[string]chan struct{}{}}
	if err := p.init(o.Options); err != nil {
		return nil, err
	}
	return p, nil
}

// Pass implements Replicator: one scan, scheduling a copy or deletion for
// every entry that differs and has no work pending.
func (p *PerObject) Pass(ctx context.Context) error {
	_, err := p.scanOnce(ctx)
	return err
}

// Run implements Replicator: scan every interval until stopped.
func (p *PerObject) Run(ctx context.Context, interval time.Duration) error {
	return p.runLoop(ctx, interval, p.Pass)
}

// Sync scans and waits for the scheduled work, again and again, until a
// scan finds nothing to do: the destination then equals the source as of
// that scan. It is the "final full pass" of a test.
func (p *PerObject) Sync(ctx context.Context) error {
	for {
		p.mu.Lock()
		p.lastErr = nil
		p.mu.Unlock()
		n, err := p.scanOnce(ctx)
		if err != nil {
			return err
		}
		p.mu.Lock()
		waits := make([]chan struct{}, 0, len(p.pending))
		for _, ch := range p.pending {
			waits = append(waits, ch)
		}
		p.mu.Unlock()
		if n == 0 && len(waits) == 0 {
			return nil
		}
		for _, ch := range waits {
			select {
			case <-ch:
			case <-ctx.Done():
				p.mu.Lock()
				defer p.mu.Unlock()
				if p.lastErr != nil {
					return fmt.Errorf("%w (last replication error: %w)", ctx.Err(), p.lastErr)
				}
				return ctx.Err()
			case <-p.stopCtx.Done():
				return p.gate.err()
			}
		}
	}
}

// Pending returns the number of scheduled copies and deletions not done.
func (p *PerObject) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

func (p *PerObject) scanOnce(ctx context.Context) (int, error) {
	if !p.enter() {
		return 0, p.gate.err()
	}
	defer p.wg.Done()
	ctx, done := p.passCtx(ctx)
	defer done()
	n, err := p.scanSchedule(ctx)
	return n, p.finish(err)
}

func (p *PerObject) scanSchedule(ctx context.Context) (int, error) {
	src, names, err := scan(ctx, p.src, false)
	if err != nil {
		return 0, err
	}
	// The bucket itself.
	if _, err := os.Lstat(p.dst); errors.Is(err, os.ErrNotExist) {
		if err := p.mkdir(p.dst, 0o755); err != nil {
			return 0, err
		}
	}
	dst, dnames, err := scan(ctx, p.dst, true)
	if err != nil {
		return 0, err
	}
	var todo []string
	for _, rel := range names {
		if d, ok := dst[rel]; !ok || !src[rel].same(d) {
			todo = append(todo, rel)
		}
	}
	for _, rel := range dnames {
		if _, ok := src[rel]; !ok {
			todo = append(todo, rel)
		}
	}
	n := 0
	for _, rel := range todo {
		if !p.schedule(rel) {
			continue
		}
		n++
	}
	p.passes.Add(1)
	return n, nil
}

// schedule starts the goroutine replicating rel unless one is pending.
func (p *PerObject) schedule(rel string) bool {
	p.mu.Lock()
	if _, ok := p.pending[rel]; ok {
		p.mu.Unlock()
		return false
	}
	if !p.enter() {
		p.mu.Unlock()
		return false
	}
	ch := make(chan struct{})
	p.pending[rel] = ch
	p.mu.Unlock()
	delay := p.min
	if span := p.max - p.min; span > 0 {
		delay += time.Duration(p.int64n(int64(span) + 1))
	}
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.pending, rel)
			p.mu.Unlock()
			close(ch)
		}()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.stopCtx.Done():
			return
		}
		// Errors are retried by a later scan, as a replication
		// service would; a stopped simulator writes nothing more.
		if err := p.replicate(p.stopCtx, rel); err != nil && !errors.Is(err, ErrStopped) {
			p.mu.Lock()
			p.lastErr = fmt.Errorf("%s: %w", rel, err)
			p.mu.Unlock()
		}
	}()
	return true
}

// replicate makes destination entry rel match what the source holds now.
func (p *PerObject) replicate(ctx context.Context, rel string) error {
	abs := filepath.Join(p.dst, filepath.FromSlash(rel))
	sfi, serr := os.Lstat(filepath.Join(p.src, filepath.FromSlash(rel)))
	dfi, derr := os.Lstat(abs)
	if serr != nil {
		if !isVanished(serr) {
			return serr
		}
		if derr != nil {
			return nil
		}
		if err := p.remove(abs); err != nil {
			return err // a non-empty directory waits for its entries
		}
		p.deletions.Add(1)
		return nil
	}
	e, err := entryOf(sfi, filepath.Join(p.src, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	if err := p.mkdirAll(ctx, p.dst, parentOf(rel)); err != nil {
		return err
	}
	if derr == nil && (e.isDir() != dfi.IsDir() || e.isLink() || dfi.Mode()&os.ModeSymlink != 0) {
		// A different type (or a link to rewrite) is in the way.
		if err := p.removeTree(ctx, abs); err != nil {
			return err
		}
	}
	switch {
	case e.isDir():
		return p.mkdir(abs, e.mode.Perm())
	case e.isLink():
		if err := p.symlink(e.target, abs); err != nil {
			return err
		}
	case e.isRegular():
		err := p.copyFile(ctx, rel, abs, true)
		if errors.Is(err, errSkip) {
			p.skipped.Add(1)
			return nil // the torn copy stays until the next scan
		}
		if err != nil {
			return err
		}
	default:
		return nil
	}
	p.files.Add(1)
	return nil
}
