package manifest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBounded: a caller waits at most the timeout; the same work then
// fails at once until the work given up on ends, other work runs
// meanwhile, and Pending names what waits. Callers asking for work that
// runs, within its timeout, share it.
func TestBounded(t *testing.T) {
	b := NewBackingWaits(50 * time.Millisecond)
	release := make(chan struct{})
	hung := func(ctx context.Context) (int, error) { <-release; return 1, nil }
	ctx := context.Background()
	if _, err := Bounded(ctx, b, "a", hung); !errors.Is(err, ErrBackingTimeout) {
		t.Fatalf("hung work: %v, want ErrBackingTimeout", err)
	}
	if _, err := Bounded(ctx, b, "a", func(context.Context) (int, error) { t.Error("started again while the first waits"); return 0, nil }); !errors.Is(err, ErrBackingTimeout) {
		t.Errorf("the same work while the first waits: %v, want ErrBackingTimeout at once", err)
	}
	if n, err := Bounded(ctx, b, "b", func(context.Context) (int, error) { return 2, nil }); n != 2 || err != nil {
		t.Errorf("other work: %d, %v", n, err)
	}
	if p := b.Pending(time.Now()); len(p) != 1 || p[0].Key != "a" {
		t.Errorf("pending %+v, want a", p)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for len(b.Pending(time.Now())) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := Bounded(ctx, b, "a", func(context.Context) (int, error) { return 3, nil }); n != 3 || err != nil {
		t.Errorf("the work again once the first ended: %d, %v", n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Bounded(cctx, b, "c", func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Errorf("with the caller's context ended: %v", err)
	}

	// Two callers of the same work within its timeout: one run, one
	// result for both.
	long := NewBackingWaits(time.Minute)
	runs, gate := 0, make(chan struct{})
	work := func(context.Context) (int, error) { runs++; <-gate; return 7, nil }
	first := make(chan int)
	go func() { n, _ := Bounded(ctx, long, "k", work); first <- n }()
	for {
		long.mu.Lock()
		started := len(long.work) > 0
		long.mu.Unlock()
		if started {
			break
		}
		time.Sleep(time.Millisecond)
	}
	go func() { time.Sleep(20 * time.Millisecond); close(gate) }()
	if n, err := Bounded(ctx, long, "k", work); n != 7 || err != nil {
		t.Errorf("joining running work: %d, %v; want its result", n, err)
	}
	if n := <-first; n != 7 || runs != 1 {
		t.Errorf("the first caller got %d; the work ran %d times, want once", n, runs)
	}
}
