//go:build linux

package idle

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thread is an OS thread that Lower gave the SCHED_IDLE policy.
type Thread struct{ tid int }

// Lower locks the calling goroutine to its OS thread and gives that
// thread the SCHED_IDLE policy, until Release. The caller must not call
// runtime.UnlockOSThread itself: a thread of idle priority must not go
// back to the runtime's pool. A goroutine that ends without Release ends
// its thread, and with it any child process the thread once started with
// a parent-death signal (os/exec's Pdeathsig): so callers Release.
// On error the thread keeps its policy, and stays locked all the same.
func Lower() (*Thread, error) {
	runtime.LockOSThread()
	t := &Thread{tid: unix.Gettid()}
	if err := t.set(unix.SCHED_IDLE); err != nil {
		return t, err
	}
	return t, nil
}

// Restore gives the thread the normal policy back, from any goroutine:
// for work that someone now waits for, such as what is left at shutdown.
func (t *Thread) Restore() error { return t.set(unix.SCHED_NORMAL) }

// Release gives the thread the normal policy back and returns it to the
// runtime. It must be called by the goroutine that called Lower; if the
// policy cannot be restored the thread stays locked and ends with the
// goroutine.
func (t *Thread) Release() error {
	if err := t.Restore(); err != nil {
		return err
	}
	runtime.UnlockOSThread()
	return nil
}

// TID is the thread's id.
func (t *Thread) TID() int { return t.tid }

func (t *Thread) set(policy uint32) error {
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: policy}
	if err := unix.SchedSetAttr(t.tid, &attr, 0); err != nil {
		return fmt.Errorf("idle: scheduling policy %d for thread %d: %w", policy, t.tid, err)
	}
	return nil
}
