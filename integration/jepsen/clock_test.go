package jepsen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Clock steps move CLOCK_REALTIME of the whole machine, forward or back
// by minutes, for a few seconds. ckptfs compares durations on monotonic
// clocks only, so nothing of it should notice. Before a step the harness
// saves CLOCK_REALTIME's offset against CLOCK_MONOTONIC, and restores
// the clock from it (monotonic now plus that offset) when the step ends,
// when the run ends, failed or not, and, from stepFile, when the next
// test binary starts after one killed during a step.

// stepFile holds the offset of a step in progress (on tmpfs: it does
// not outlive the machine, whose clock a reboot sets anyway).
const stepFile = "/run/ckptfs-jepsen-clock-step"

type stepRecord struct {
	PID    int   `json:"pid"`
	Offset int64 `json:"offset_ns"` // CLOCK_REALTIME - CLOCK_MONOTONIC before the step
}

// clockStepper steps CLOCK_REALTIME and puts it back.
type clockStepper struct {
	mu      sync.Mutex
	stepped bool  // GUARDED_BY(mu)
	offset  int64 // GUARDED_BY(mu)
}

func clockNow(id int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// realtimeOffset is CLOCK_REALTIME - CLOCK_MONOTONIC, read with the
// monotonic clock on both sides of the real one.
func realtimeOffset() int64 {
	a := clockNow(unix.CLOCK_MONOTONIC)
	r := clockNow(unix.CLOCK_REALTIME)
	b := clockNow(unix.CLOCK_MONOTONIC)
	return r - (a+b)/2
}

func setRealtime(ns int64) error {
	ts := unix.NsecToTimespec(ns)
	return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
}

// step moves CLOCK_REALTIME by delta; restore undoes it.
func (c *clockStepper) step(delta time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stepped {
		return errors.New("the clock is stepped already")
	}
	off := realtimeOffset()
	data, _ := json.Marshal(stepRecord{PID: os.Getpid(), Offset: off})
	if err := os.WriteFile(stepFile, data, 0o644); err != nil {
		return fmt.Errorf("recording the clock's offset: %w", err)
	}
	if err := setRealtime(clockNow(unix.CLOCK_MONOTONIC) + off + int64(delta)); err != nil {
		os.Remove(stepFile)
		return fmt.Errorf("stepping CLOCK_REALTIME: %w", err)
	}
	c.stepped, c.offset = true, off
	return nil
}

// restore puts CLOCK_REALTIME back where it was before the step, if any.
func (c *clockStepper) restore() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stepped {
		return nil
	}
	if err := setRealtime(clockNow(unix.CLOCK_MONOTONIC) + c.offset); err != nil {
		return fmt.Errorf("restoring CLOCK_REALTIME: %w", err)
	}
	c.stepped = false
	os.Remove(stepFile)
	return nil
}

// restoreCrashedStep undoes a step that a test binary left behind when
// it was killed (its pid is gone).
func restoreCrashedStep() {
	data, err := os.ReadFile(stepFile)
	if err != nil {
		return
	}
	var r stepRecord
	if json.Unmarshal(data, &r) != nil {
		os.Remove(stepFile)
		return
	}
	if r.PID != os.Getpid() && syscall.Kill(r.PID, 0) == nil {
		return // still stepping: its own restore comes
	}
	if err := setRealtime(clockNow(unix.CLOCK_MONOTONIC) + r.Offset); err != nil {
		fmt.Fprintln(os.Stderr, "jepsen: restoring the clock a killed run left stepped:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "jepsen: restored CLOCK_REALTIME, stepped by a run killed during a step (pid %d)\n", r.PID)
	os.Remove(stepFile)
}
