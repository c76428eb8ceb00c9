//go:build linux

package idle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestThread: the goroutine's thread runs SCHED_IDLE, and ends with the
// goroutine rather than going back to the runtime's pool. The runtime
// never ends the main thread (it wedges it, which runs nothing else
// either), so several goroutines run at once and the ones on other
// threads must see their thread end.
func TestThread(t *testing.T) {
	type result struct {
		tid    int
		err    error
		policy uint32
	}
	const n = 4
	got := make(chan result, n)
	release := make(chan struct{})
	for range n {
		go func() {
			tid, err := Thread()
			r := result{tid: tid, err: err}
			if a, err := unix.SchedGetAttr(0, 0); err == nil {
				r.policy = a.Policy
			}
			got <- r
			<-release
		}()
	}
	var tids []int
	for range n {
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.policy != unix.SCHED_IDLE {
			t.Errorf("thread %d: policy %d, want SCHED_IDLE (%d)", r.tid, r.policy, unix.SCHED_IDLE)
		}
		if r.tid != os.Getpid() {
			tids = append(tids, r.tid)
		}
	}
	if len(tids) < n-1 {
		t.Fatalf("%d goroutines locked to threads %v: want %d distinct threads", n, tids, n)
	}
	if a, err := unix.SchedGetAttr(unix.Gettid(), 0); err != nil || a.Policy == unix.SCHED_IDLE {
		t.Errorf("the test's own thread: %+v, %v; want another policy", a, err)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for _, tid := range tids {
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		for {
			_, err := os.Stat(task)
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d outlived its goroutine: the runtime may run other goroutines at idle priority", tid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
