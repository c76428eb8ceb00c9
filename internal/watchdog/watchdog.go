package watchdog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Watchdog ends the process when it is armed and its deadline passes.
// The daemon takes it as an interface so that tests that run a daemon
// inside the test binary can record what it would do instead.
type Watchdog interface {
	// Arm sets the deadline d from now, replacing any earlier one.
	Arm(d time.Duration) error
	// Disarm clears the deadline.
	Disarm() error
}

// record is what a Kernel keeps in its file: who armed it, and until
// when (CLOCK_BOOTTIME nanoseconds, which count across process restarts
// until the next boot).
type record struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22), so that a reused pid is not taken for
	// the process that armed it.
	Start    uint64 `json:"start"`
	Armed    bool   `json:"armed"`
	Deadline int64  `json:"deadline_boottime_ns,omitempty"`
	// At is the wall time of the last change, for people.
	At time.Time `json:"at"`
}

// Kernel is the watchdog of this process. Its zero value is not usable:
// New makes one.
type Kernel struct {
	file string // "" keeps no record

	mu    sync.Mutex
	timer timerID // GUARDED_BY(mu); zero until the first Arm
	made  bool    // GUARDED_BY(mu)
}

// New returns the process's watchdog, which keeps its record in file
// ("" keeps none). Nothing is armed yet.
func New(file string) *Kernel { return &Kernel{file: file} }

// Arm makes the kernel send SIGKILL to this process d from now, counted
// on CLOCK_BOOTTIME, unless Arm or Disarm comes first. The record is
// written before the timer is set: a failing record never keeps the
// timer from being armed.
func (k *Kernel) Arm(d time.Duration) error {
	if d <= 0 {
		d = time.Nanosecond
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	if now, err := boottime(); err == nil {
		errs = append(errs, k.write(true, now+int64(d)))
	} else {
		errs = append(errs, err)
	}
	if !k.made {
		id, err := createKillTimer()
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("watchdog: timer_create: %w", err))...)
		}
		k.timer, k.made = id, true
	}
	if err := setTimer(k.timer, d); err != nil {
		errs = append(errs, fmt.Errorf("watchdog: timer_settime: %w", err))
	}
	return errors.Join(errs...)
}

// Disarm clears the timer, then the record.
func (k *Kernel) Disarm() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.made {
		if err := setTimer(k.timer, 0); err != nil {
			return fmt.Errorf("watchdog: timer_settime: %w", err)
		}
	}
	return k.write(false, 0)
}

func (k *Kernel) write(armed bool, deadline int64) error {
	if k.file == "" {
		return nil
	}
	pid := os.Getpid()
	start, _ := startTime(pid)
	data, err := json.Marshal(record{PID: pid, Start: start, Armed: armed, Deadline: deadline, At: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(k.file), 0o755); err != nil {
		return fmt.Errorf("watchdog record: %w", err)
	}
	tmp := k.file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("watchdog record: %w", err)
	}
	if err := os.Rename(tmp, k.file); err != nil {
		return fmt.Errorf("watchdog record: %w", err)
	}
	return nil
}

// Ended is what Previous found of the process that kept the record
// before this one.
type Ended struct {
	PID int
	// Fired: the process is gone, its watchdog was armed, and the
	// deadline has passed; Ago is how long ago the deadline was (the
	// process ended then at the latest: killed by its watchdog, or
	// earlier, by something else).
	Fired bool
	Ago   time.Duration
	At    time.Time
}

// maxRecord bounds the record file: it is a few dozen bytes.
const maxRecord = 4096

// Previous reads the record a previous process left in file, if any:
// whether it ended with its watchdog armed past the deadline. A record
// of a process that still runs (another daemon of the same mount point)
// or was disarmed reports nothing fired.
func Previous(file string) (Ended, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return Ended{}, nil
	}
	if err != nil {
		return Ended{}, err
	}
	defer f.Close()
	buf := make([]byte, maxRecord+1)
	n, err := f.Read(buf)
	if err != nil {
		return Ended{}, fmt.Errorf("watchdog record %s: %w", file, err)
	}
	if n > maxRecord {
		return Ended{}, fmt.Errorf("watchdog record %s: larger than %d bytes", file, maxRecord)
	}
	var r record
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return Ended{}, fmt.Errorf("watchdog record %s: %w", file, err)
	}
	e := Ended{PID: r.PID, At: r.At}
	if !r.Armed || r.PID == os.Getpid() {
		return e, nil
	}
	if start, err := startTime(r.PID); err == nil && start == r.Start {
		return e, nil // still running
	}
	now, err := boottime()
	if err != nil {
		return e, err
	}
	if now >= r.Deadline {
		e.Fired, e.Ago = true, time.Duration(now-r.Deadline)
	}
	return e, nil
}

// startTime is a process's start time in clock ticks since boot.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command (field 2) is in parentheses and may hold anything.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// Recorder is a Watchdog that only records what it was asked, for a
// daemon run inside a test binary, where a real one would kill the test.
// It remembers whether a real one would have fired.
type Recorder struct {
	mu       sync.Mutex
	armed    bool
	deadline time.Time
	arms     int
	fired    time.Time // GUARDED_BY(mu): when a real one would have fired first
}

// Arm records the deadline.
func (r *Recorder) Arm(d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check(time.Now())
	r.armed, r.deadline = true, time.Now().Add(d)
	r.arms++
	return nil
}

// Disarm records that it is clear.
func (r *Recorder) Disarm() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check(time.Now())
	r.armed = false
	return nil
}

// check notes a deadline that passed while armed. LOCKS_REQUIRED(r.mu)
func (r *Recorder) check(now time.Time) {
	if r.armed && now.After(r.deadline) && r.fired.IsZero() {
		r.fired = r.deadline
	}
}

// Fired says whether, and when, a real watchdog would have killed the
// process so far.
func (r *Recorder) Fired() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check(time.Now())
	return r.fired, !r.fired.IsZero()
}

// State says whether it is armed, until when, and how often Arm was
// called.
func (r *Recorder) State() (armed bool, deadline time.Time, arms int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.armed, r.deadline, r.arms
}

// Overdue reports whether it is armed with a deadline that has passed:
// a real watchdog would have killed the process.
func (r *Recorder) Overdue() bool {
	armed, deadline, _ := r.State()
	return armed && time.Now().After(deadline)
}

// Previous reads what the process before this one left in the record
// (package-level Previous); call it before the first Arm, which
// overwrites the record.
func (k *Kernel) Previous() (Ended, error) {
	if k.file == "" {
		return Ended{}, nil
	}
	return Previous(k.file)
}

// Previous reports nothing: a test process has no predecessor.
func (r *Recorder) Previous() (Ended, error) { return Ended{}, nil }
