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
// ErrBackingTimeout and the work goes on alone. Work is named by a key:
// a caller asking for work already running joins it (its result is
// theirs too) until the timeout counted from its start, so a hung NAS
// holds at most one goroutine per key, and work given up on makes the
// next callers fail at once until it ends.
type BackingWaits struct {
	timeout time.Duration

	mu   sync.Mutex
	work map[string]*backingWork // GUARDED_BY(mu): started and not ended
}

type backingWork struct {
	start time.Time
	done  chan struct{} // closed when it ends, after res and err are set
	res   any
	err   error
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

// Bounded runs fn as the work of key, or joins key's work if it runs,
// and waits for it at most the timeout from its start. The work runs
// with the context of the caller that started it, ended when that caller
// stops waiting; its result is dropped if nobody waits any more. fn must
// not touch state the caller reads after giving up.
func Bounded[T any](ctx context.Context, b *BackingWaits, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	b.mu.Lock()
	w, joined := b.work[key]
	if !joined {
		w = &backingWork{start: time.Now(), done: make(chan struct{})}
		b.work[key] = w
	}
	b.mu.Unlock()

	stop := func() {}
	if !joined {
		wctx, cancel := context.WithCancel(ctx)
		stop = cancel
		go func() {
			defer cancel()
			res, err := fn(wctx)
			b.mu.Lock()
			w.res, w.err = res, err
			delete(b.work, key)
			b.mu.Unlock()
			close(w.done)
		}()
	}
	t := time.NewTimer(time.Until(w.start.Add(b.timeout)))
	defer t.Stop()
	select {
	case <-w.done:
		res, _ := w.res.(T)
		return res, w.err
	case <-t.C:
		stop()
		if joined {
			return zero, fmt.Errorf("%w since %s (waiting for it)", ErrBackingTimeout, w.start.UTC().Format(time.RFC3339))
		}
		return zero, fmt.Errorf("%w within %v", ErrBackingTimeout, b.timeout)
	case <-ctx.Done():
		stop()
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
