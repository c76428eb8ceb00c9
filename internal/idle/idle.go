//go:build linux

package idle

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thread locks the calling goroutine to its OS thread for the rest of
// its life and gives that thread the SCHED_IDLE policy. It returns the
// thread's id. The caller must not call runtime.UnlockOSThread: the
// thread is to end with the goroutine. On error the thread keeps its
// policy, and stays locked all the same.
func Thread() (tid int, err error) {
	runtime.LockOSThread()
	tid = unix.Gettid()
	if os.Getenv("CKPTFS_EXPERIMENT_NO_IDLE") != "" {
		return tid, nil
	}
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return tid, fmt.Errorf("idle: SCHED_IDLE for thread %d: %w", tid, err)
	}
	return tid, nil
}
