package fusefs

import (
	"fmt"
	"testing"
	"time"
)

func TestLatencyBucketPlacement(t *testing.T) {
	var l latencies
	// A request lands in the first bucket whose bound is at least its
	// duration.
	for _, c := range []struct {
		took   time.Duration
		bucket int
	}{
		{0, 0},
		{10 * time.Microsecond, 0},
		{10*time.Microsecond + 1, 1},
		{30 * time.Microsecond, 2},
		{700 * time.Microsecond, 6},
		{3 * time.Millisecond, 8},
		{time.Hour, len(latencyBounds)},
	} {
		before := l[opRead].buckets[c.bucket].Load()
		l.record(opRead, c.took)
		if got := l[opRead].buckets[c.bucket].Load() - before; got != 1 {
			t.Errorf("%v: bucket %d (≤%v) got %d, want 1", c.took, c.bucket, bound(c.bucket), got)
		}
	}
	if sum := time.Duration(l[opRead].sumNanos.Load()); sum < time.Hour {
		t.Errorf("sum %v lacks the hour-long request", sum)
	}
	// observe measures from start to now.
	l.observe(opWrite, time.Now().Add(-time.Hour))
	if got := l[opWrite].buckets[len(latencyBounds)].Load(); got != 1 {
		t.Errorf("a request started an hour ago: +Inf bucket holds %d, want 1", got)
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
