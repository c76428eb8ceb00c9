package zkbridge

import "sync"

// parallelJobs bounds how many jobs ckptfs reads or takes over at once.
// Each job costs a few ZooKeeper round trips, one after another; across
// jobs go-zookeeper pipelines the requests on its one connection, so over
// a WAN the work for many jobs takes about as long as that for one
// instead of the sum of their round trips.
const parallelJobs = 32

// forEachJob runs f(0), ..., f(n-1), at most parallelJobs at once, and
// returns the error of the lowest i that failed. Each f writes only what
// belongs to its i: callers merge the results in index order, so what
// they build does not depend on the order the calls finished in.
func forEachJob(n int, f func(i int) error) error {
	errs := make([]error, n)
	sem := make(chan struct{}, parallelJobs)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
