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

// TestLower: the goroutine's thread runs SCHED_IDLE, and ends with the
// goroutine rather than going back to the runtime's pool. The runtime
// never ends the main thread (it wedges it, which runs nothing else
// either), so several goroutines run at once and the ones on other
// threads must see their thread end.
func TestLower(t *testing.T) {
	type result struct {
		thread *Thread
		err    error
		policy uint32
	}
	const n = 4
	got := make(chan result, n)
	release := make(chan struct{})
	for range n {
		go func() {
			th, err := Lower()
			r := result{thread: th, err: err}
			if a, err := unix.SchedGetAttr(0, 0); err == nil {
				r.policy = a.Policy
			}
			got <- r
			<-release
		}()
	}
	var tids []int
	var threads []*Thread
	for range n {
		r := <-got
		threads = append(threads, r.thread)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.policy != unix.SCHED_IDLE {
			t.Errorf("thread %d: policy %d, want SCHED_IDLE (%d)", r.thread.TID(), r.policy, unix.SCHED_IDLE)
		}
		if r.thread.TID() != os.Getpid() {
			tids = append(tids, r.thread.TID())
		}
	}
	if len(tids) < n-1 {
		t.Fatalf("%d goroutines locked to threads %v: want %d distinct threads", n, tids, n)
	}
	if a, err := unix.SchedGetAttr(unix.Gettid(), 0); err != nil || a.Policy == unix.SCHED_IDLE {
		t.Errorf("the test's own thread: %+v, %v; want another policy", a, err)
	}
	// Restore, from this goroutine, brings the normal policy back.
	for _, th := range threads {
		if err := th.Restore(); err != nil {
			t.Fatal(err)
		}
		if a, err := unix.SchedGetAttr(th.TID(), 0); err != nil || a.Policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d after Restore: %+v, %v; want SCHED_NORMAL", th.TID(), a, err)
		}
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

// TestRelease: Release gives the thread the normal policy back and
// returns it to the runtime, so that it outlives the goroutine (a thread
// that ends kills the children it started with a parent-death signal).
// Several goroutines hold their threads at once, so that most are not
// the main thread, which the runtime never ends.
func TestRelease(t *testing.T) {
	type result struct {
		tid    int
		err    error
		policy uint32
	}
	const n = 4
	locked := make(chan struct{}, n)
	release := make(chan struct{})
	got := make(chan result, n)
	for range n {
		go func() {
			th, err := Lower()
			locked <- struct{}{}
			<-release
			if err == nil {
				err = th.Release()
			}
			r := result{tid: th.TID(), err: err}
			if a, err := unix.SchedGetAttr(0, 0); err == nil {
				r.policy = a.Policy
			}
			got <- r
		}()
	}
	for range n {
		<-locked
	}
	close(release)
	var tids []int
	for range n {
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d after Release: policy %d, want SCHED_NORMAL", r.tid, r.policy)
		}
		if r.tid != os.Getpid() {
			tids = append(tids, r.tid)
		}
	}
	if len(tids) < n-1 {
		t.Fatalf("%d goroutines locked to threads %v: want %d distinct threads", n, tids, n)
	}
	time.Sleep(300 * time.Millisecond) // the goroutines have ended
	for _, tid := range tids {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			t.Errorf("thread %d ended with its goroutine after Release: %v", tid, err)
		}
	}
}
