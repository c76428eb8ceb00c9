package zkbridge

import (
	"context"
	"sync"
)

// parallelJobs bounds how many jobs ckptfs reads or takes over at once.
// Each job costs a few ZooKeeper round trips, one after another; across
// jobs go-zookeeper pipelines the requests on its one connection, so over
// a WAN the work for many jobs takes about as long as that for one
// instead of the sum of their round trips. A platform runs hundreds of
// jobs: at 32 a takeover of 500 took 16 waves of a job's round trips
// (issue 32); at 256 it takes two. ZooKeeper queues what one session
// sends beyond its own limit (globalOutstandingLimit) instead of
// failing it.
const parallelJobs = 256

// forEachJob runs f(ctx, 0), ..., f(ctx, n-1), at most parallelJobs at
// once. The first call to fail cancels the context the others get (calls
// not started then never start), and forEachJob returns its index and
// error; -1 and nil when every call succeeded, -1 and ctx's error when ctx
// ended before every call ran. Each f writes only what belongs to its i:
// callers merge the results in index order, so what they build does not
// depend on the order the calls finished in.
func forEachJob(ctx context.Context, n int, f func(ctx context.Context, i int) error) (int, error) {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		failed  = -1  // GUARDED_BY(mu)
		first   error // GUARDED_BY(mu)
		skipped bool  // GUARDED_BY(mu)
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, parallelJobs)
	for i := range n {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-jctx.Done():
				mu.Lock()
				skipped = true
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			if jctx.Err() != nil { // a slot freed by a canceled call
				mu.Lock()
				skipped = true
				mu.Unlock()
				return
			}
			if err := f(jctx, i); err != nil {
				mu.Lock()
				if failed < 0 {
					failed, first = i, err
				}
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	if failed < 0 && skipped {
		return -1, ctx.Err()
	}
	return failed, first
}
