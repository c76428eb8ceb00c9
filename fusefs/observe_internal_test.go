package fusefs

import (
	"fmt"
	"testing"
	"time"
)

func TestLatencyBucketPlacement(t *testing.T) {
	var l latencies
	// observe measures from start to now: a start d ago lands in the
	// first bucket whose bound is at least d (each case leaves a margin
	// for the time the test itself takes).
	for _, c := range []struct {
		ago    time.Duration
		bucket int
	}{
		{30 * time.Microsecond, 2},
		{700 * time.Microsecond, 6},
		{3 * time.Millisecond, 8},
		{time.Hour, len(latencyBounds)},
	} {
		l.observe(opRead, time.Now().Add(-c.ago))
		if got := l[opRead].buckets[c.bucket].Load(); got != 1 {
			t.Errorf("%v ago: bucket %d (≤%v) holds %d, want 1", c.ago, c.bucket, bound(c.bucket), got)
		}
	}
	if sum := time.Duration(l[opRead].sumNanos.Load()); sum < time.Hour {
		t.Errorf("sum %v lacks the hour-long request", sum)
	}
}

func bound(i int) any {
	if i == len(latencyBounds) {
		return "+Inf"
	}
	return latencyBounds[i]
}

func TestDirCounterIsBounded(t *testing.T) {
	var c dirCounter
	for i := range maxCountedDirs + 10 {
		c.add(fmt.Sprint("job-", i))
	}
	c.add("job-0")
	got := c.snapshot()
	if len(got) != maxCountedDirs+1 || got[OtherDirs] != 10 || got["job-0"] != 2 {
		t.Errorf("%d keys, %d under %q, job-0 %d; want %d, 10, 2", len(got), got[OtherDirs], OtherDirs, got["job-0"], maxCountedDirs+1)
	}
}

// BenchmarkObserve is what timing costs one request: a time.Now pair,
// the bucket search and two atomic adds.
func BenchmarkObserve(b *testing.B) {
	var l latencies
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.observe(opLookup, time.Now())
		}
	})
}
