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

// Lower locks the calling goroutine to its OS thread for the rest of its
// life and gives that thread the SCHED_IDLE policy. The caller must not
// call runtime.UnlockOSThread: the thread is to end with the goroutine.
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

// TID is the thread's id.
func (t *Thread) TID() int { return t.tid }

func (t *Thread) set(policy uint32) error {
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: policy}
	if err := unix.SchedSetAttr(t.tid, &attr, 0); err != nil {
		return fmt.Errorf("idle: scheduling policy %d for thread %d: %w", policy, t.tid, err)
	}
	return nil
}
