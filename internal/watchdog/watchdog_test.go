package watchdog_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/freezer"
	"github.com/ckptfs/ckptfs/internal/watchdog"
)

// The child: with childEnv set, the test binary arms a watchdog of
// childArm, re-arms it every childRearm if set, prints a numbered line
// every 20 ms, and exits after 5 s.
const (
	childEnv   = "CKPTFS_WATCHDOG_CHILD"
	childArm   = 600 * time.Millisecond
	childRearm = "CKPTFS_WATCHDOG_REARM"
	childFile  = "CKPTFS_WATCHDOG_FILE"
	childOff   = "CKPTFS_WATCHDOG_DISARM"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		child()
		return
	}
	os.Exit(m.Run())
}

func child() {
	w := watchdog.New(os.Getenv(childFile))
	if err := w.Arm(childArm); err != nil {
		fmt.Println("arm:", err)
		os.Exit(3)
	}
	if os.Getenv(childOff) == "1" {
		if err := w.Disarm(); err != nil {
			fmt.Println("disarm:", err)
			os.Exit(3)
		}
	}
	rearm := os.Getenv(childRearm) == "1"
	start := time.Now()
	for i := 0; time.Since(start) < 5*time.Second; i++ {
		fmt.Println(i)
		if rearm && i%5 == 0 {
			w.Arm(childArm)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Exit(0)
}

type proc struct {
	cmd   *exec.Cmd
	lines chan int
	done  chan struct{}
	state *os.ProcessState
}

func start(t *testing.T, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan int, 1000), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
				p.lines <- n
			} else {
				t.Logf("child: %s", sc.Text())
			}
		}
		p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
	// Wait until it runs.
	select {
	case <-p.lines:
	case <-time.After(10 * time.Second):
		t.Fatal("the child printed nothing")
	}
	return p
}

// killed waits for the child's end and says whether SIGKILL ended it.
func (p *proc) killed(t *testing.T, within time.Duration) bool {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		return false
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// printedAfter drains what the child printed and says whether it printed
// anything after mark.
func (p *proc) drain() int {
	n := 0
	for {
		select {
		case <-p.lines:
			n++
		default:
			return n
		}
	}
}

func TestWatchdogKillsStoppedAndFrozen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and waits for their watchdogs")
	}
	t.Run("running", func(t *testing.T) {
		// Nobody re-arms it: it fires although the process runs.
		p := start(t)
		if !p.killed(t, 3*time.Second) {
			t.Fatal("an armed watchdog did not kill its process within 3 s")
		}
	})
	t.Run("rearmed", func(t *testing.T) {
		p := start(t, childRearm+"=1")
		if p.killed(t, 3*time.Second) {
			t.Fatal("a watchdog re-armed in time killed its process")
		}
	})
	t.Run("disarmed", func(t *testing.T) {
		p := start(t, childOff+"=1")
		if p.killed(t, 3*time.Second) {
			t.Fatal("a disarmed watchdog killed its process")
		}
	})
	t.Run("stopped", func(t *testing.T) {
		p := start(t, childRearm+"=1")
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if !p.killed(t, 3*time.Second) {
			t.Fatal("a stopped process outlived its watchdog by 3 s")
		}
	})
	for _, kind := range freezer.Available() {
		t.Run("frozen-"+string(kind), func(t *testing.T) {
			g := freezer.New(t, "watchdog", kind)
			p := start(t, childRearm+"=1")
			if err := g.Add(p.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			if err := g.Freeze(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			p.drain()
			if kind == freezer.V2 {
				// Killed while frozen.
				if !p.killed(t, 3*time.Second) {
					t.Fatal("a process frozen (cgroup v2) outlived its watchdog by 3 s")
				}
				return
			}
			time.Sleep(2 * childArm)
			if err := g.Thaw(); err != nil {
				t.Fatal(err)
			}
			if !p.killed(t, 3*time.Second) {
				t.Fatal("a process frozen (cgroup v1) past its watchdog was not killed as it thawed")
			}
			if n := p.drain(); n > 0 {
				t.Fatalf("the process ran after its thaw (%d lines) before the watchdog ended it", n)
			}
		})
	}
}

func TestPrevious(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process and waits for its watchdog")
	}
	file := filepath.Join(t.TempDir(), "mnt.watchdog")
	if e, err := watchdog.Previous(file); err != nil || e.Fired {
		t.Fatalf("no record: %+v, %v", e, err)
	}
	p := start(t, childFile+"="+file)
	if e, err := watchdog.Previous(file); err != nil || e.Fired {
		t.Fatalf("record of a live process: %+v, %v", e, err)
	}
	if !p.killed(t, 3*time.Second) {
		t.Fatal("not killed")
	}
	e, err := watchdog.Previous(file)
	if err != nil || !e.Fired || e.PID != p.cmd.Process.Pid || e.Ago < 0 {
		t.Fatalf("after the watchdog fired: %+v, %v", e, err)
	}

	// A disarmed record reports nothing.
	p = start(t, childFile+"="+file, childOff+"=1")
	p.cmd.Process.Kill()
	<-p.done
	if e, err := watchdog.Previous(file); err != nil || e.Fired {
		t.Fatalf("disarmed record: %+v, %v", e, err)
	}

	// A record too large or not JSON is an error, not a crash.
	os.WriteFile(file, make([]byte, 10000), 0o644)
	if _, err := watchdog.Previous(file); err == nil {
		t.Fatal("a 10000-byte record was read")
	}
}
