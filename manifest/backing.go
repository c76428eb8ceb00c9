package manifest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// ErrBackingTimeout: the backing file system did not answer in time.
var ErrBackingTimeout = errors.New("the backing file system did not answer")

// BackingWaits bounds how long callers wait for work on the backing file
// system. A hung NAS (a hard NFS mount whose server is gone) blocks a
// system call for as long as it is gone, and no context ends it, so
// callers stop waiting instead: after the timeout they get
// ErrBackingTimeout and the work goes on alone. Until it ends, the same
// work (by key) fails at once rather than starting again, so a hung NAS
// holds at most one goroutine per key.
type BackingWaits struct {
	timeout time.Duration

	mu   sync.Mutex
	work map[string]*backingWork // GUARDED_BY(mu): started and not ended
}

type backingWork struct {
	start time.Time
	done  chan struct{} // closed when it ends
}

// PendingWork is work waiting on the backing file system longer than
// the timeout.
type PendingWork struct {
	Key   string
	Since time.Time
}

// NewBackingWaits returns waits bounded by timeout, which must be
// positive.
func NewBackingWaits(timeout time.Duration) *BackingWaits {
	return &BackingWaits{timeout: timeout, work: map[string]*backingWork{}}
}

// Timeout is how long a caller waits.
func (b *BackingWaits) Timeout() time.Duration { return b.timeout }

// Bounded runs fn as the work of key and waits for it at most the
// timeout. Work given up on goes on with its context ended, and its
// result is dropped. fn must not touch state the caller reads after
// giving up.
func Bounded[T any](ctx context.Context, b *BackingWaits, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	b.mu.Lock()
	if w := b.work[key]; w != nil {
		b.mu.Unlock()
		return zero, fmt.Errorf("%w since %s (waiting for it)", ErrBackingTimeout, w.start.UTC().Format(time.RFC3339))
	}
	w := &backingWork{start: time.Now(), done: make(chan struct{})}
	b.work[key] = w
	b.mu.Unlock()

	wctx, cancel := context.WithCancel(ctx)
	var res T
	var err error
	go func() {
		defer cancel()
		res, err = fn(wctx)
		b.mu.Lock()
		delete(b.work, key)
		b.mu.Unlock()
		close(w.done)
	}()
	t := time.NewTimer(b.timeout)
	defer t.Stop()
	select {
	case <-w.done:
		return res, err
	case <-t.C:
		cancel()
		return zero, fmt.Errorf("%w within %v", ErrBackingTimeout, b.timeout)
	case <-ctx.Done():
		cancel()
		return zero, ctx.Err()
	}
}

// Pending lists the work older than the timeout at now, oldest first.
func (b *BackingWaits) Pending(now time.Time) []PendingWork {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PendingWork
	for key, w := range b.work {
		if now.Sub(w.start) >= b.timeout {
			out = append(out, PendingWork{Key: key, Since: w.start})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}
