package mounttest

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Ckptfs is a `ckptfs mount` process: the real binary (BuildCkptfs),
// started by StartCkptfs.
type Ckptfs struct {
	Mnt string
	// Started is when the process was started, Ready when it said the
	// mount serves (CKPTFS_READY_FD).
	Started, Ready time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    []string // GUARDED_BY(mu)
}

// StartCkptfs runs `binary mount args... backing mnt` and returns once
// the daemon reported the mount serving through CKPTFS_READY_FD, or
// fails the test after within. t.Cleanup stops it with SIGTERM (as
// systemctl stop does) and detaches whatever is left at mnt.
func StartCkptfs(t testing.TB, binary, backing, mnt string, within time.Duration, args ...string) *Ckptfs {
	t.Helper()
	RequireFUSE(t)
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	d := &Ckptfs{Mnt: mnt, exited: make(chan struct{})}
	d.cmd = exec.Command(binary, append(append([]string{"mount"}, args...), backing, mnt)...)
	d.cmd.ExtraFiles = []*os.File{readyW}
	d.cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.Started = time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.log = append(d.log, sc.Text())
			d.mu.Unlock()
		}
		d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.Stop(t) })
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		d.Ready = time.Now()
		if line != "READY\n" {
			t.Fatalf("ckptfs mount did not become ready (%q)\n%s", line, d.Tail(30))
		}
	case <-time.After(within):
		t.Fatalf("ckptfs mount not ready after %v\n%s", within, d.Tail(30))
	}
	return d
}

// FreeAddr is a loopback HOST:PORT nothing listens on now, for
// metrics-addr.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Pid is the daemon's process id.
func (d *Ckptfs) Pid() int { return d.cmd.Process.Pid }

// Tail is the last n lines of the daemon's log.
func (d *Ckptfs) Tail(n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.log[max(0, len(d.log)-n):], "\n")
}

// Lines are the daemon's log lines so far.
func (d *Ckptfs) Lines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.log...)
}

// Kill loses the daemon as its machine dies: SIGKILL. The mount point is
// left dead (ENOTCONN) until Stop detaches it.
func (d *Ckptfs) Kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Stop ends the daemon with SIGTERM (a clean unmount) and detaches
// whatever is left at its mount point; again, it does nothing.
func (d *Ckptfs) Stop(t testing.TB) {
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(ckptfsStopPatience):
			t.Errorf("ckptfs mount did not stop within %v of SIGTERM\n%s", ckptfsStopPatience, d.Tail(30))
			d.cmd.Process.Kill()
			<-d.exited
		}
	}
	if err := syscall.Unmount(d.Mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("detach %s: %v", d.Mnt, err)
	}
}

// ckptfsStopPatience is how long a daemon may take to stop: a pass over a
// slow NAS in flight ends first.
const ckptfsStopPatience = time.Minute
