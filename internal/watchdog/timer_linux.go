//go:build linux

package watchdog

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// timerID is a POSIX timer of this process.
type timerID int32

// sigevent is the kernel's struct sigevent on 64-bit Linux: a value, the
// signal, how to notify, and a union this code does not use.
type sigevent struct {
	value  uintptr
	signo  int32
	notify int32
	_      [12]int32
}

const sigevSignal = 0 // SIGEV_SIGNAL: send signo to the process

// createKillTimer makes a timer on CLOCK_BOOTTIME that sends SIGKILL to
// the process. CLOCK_BOOTTIME runs on while the machine is suspended,
// so it expires no later than the monotonic clock the daemon's own
// deadline is counted on.
func createKillTimer() (timerID, error) {
	ev := sigevent{signo: int32(unix.SIGKILL), notify: sigevSignal}
	var id int32
	_, _, e := unix.Syscall(unix.SYS_TIMER_CREATE, uintptr(unix.CLOCK_BOOTTIME), uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&id)))
	if e != 0 {
		return 0, e
	}
	return timerID(id), nil
}

// setTimer makes the timer expire d from now, once; 0 disarms it.
func setTimer(id timerID, d time.Duration) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	_, _, e := unix.Syscall6(unix.SYS_TIMER_SETTIME, uintptr(id), 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// boottime is CLOCK_BOOTTIME now, in nanoseconds.
func boottime() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, err
	}
	return ts.Nano(), nil
}
