package zkbridge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestForEachJob: every call runs when none fails; the first failure
// names its job and cancels the calls still running, and the calls not
// started never start; an ended context is an error even when no call
// failed.
func TestForEachJob(t *testing.T) {
	var ran atomic.Int64
	if i, err := forEachJob(context.Background(), 100, func(context.Context, int) error { ran.Add(1); return nil }); i != -1 || err != nil || ran.Load() != 100 {
		t.Fatalf("all succeed: %d %v, %d ran", i, err, ran.Load())
	}

	boom := errors.New("boom")
	ran.Store(0)
	var canceled, failing atomic.Int64
	n := 4 * parallelJobs
	i, err := forEachJob(context.Background(), n, func(ctx context.Context, i int) error {
		if ran.Add(1) == parallelJobs {
			failing.Store(int64(i))
			return boom // the last of the first slots to start fails
		}
		<-ctx.Done() // the others wait until the failure cancels them
		canceled.Add(1)
		return ctx.Err()
	})
	if int64(i) != failing.Load() || !errors.Is(err, boom) {
		t.Fatalf("one fails: %d %v, want %d and boom", i, err, failing.Load())
	}
	if ran.Load() != parallelJobs || canceled.Load() != parallelJobs-1 {
		t.Errorf("after the failure: %d calls ran, %d canceled; want %d, all but the failed one canceled", ran.Load(), canceled.Load(), parallelJobs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran.Store(0)
	if i, err := forEachJob(ctx, n, func(context.Context, int) error { ran.Add(1); return nil }); i != -1 || !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %d %v after %d calls, want -1 and context.Canceled", i, err, ran.Load())
	}
}
