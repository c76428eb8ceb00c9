//go:build linux

package wan

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Host is a network host of a WAN and nothing more: a network namespace
// of its own (held by a child that only sleeps), attached to the WAN. A
// ZooKeeper server placed on it (zktest.Config.Place) binds Addr and
// reaches the other hosts only through the WAN's rules.
type Host struct {
	Name string
	Addr string

	holder *exec.Cmd
}

// NewHost makes a host named name on w. A cleanup on t removes it; the
// holder gets SIGKILL when the test binary dies (Pdeathsig), and the
// kernel removes the namespace with its last process.
func NewHost(t testing.TB, w *WAN, name string) *Host {
	t.Helper()
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("wan: nsenter (util-linux) not found: %v", err)
	}
	holder := exec.Command("sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNET,
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
	}
	if err := holder.Start(); err != nil {
		t.Fatalf("wan: host %s: a network namespace: %v", name, err)
	}
	h := &Host{Name: name, holder: holder}
	t.Cleanup(func() {
		holder.Process.Kill()
		if err := holder.Wait(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Errorf("wan: host %s: holder: %v", name, err)
			}
		}
	})
	addr, err := w.Attach(name, holder.Process.Pid)
	if err != nil {
		t.Fatalf("wan: host %s on the WAN: %v", name, err)
	}
	h.Addr = addr
	return h
}

// PID is the process holding the host's namespace.
func (h *Host) PID() int { return h.holder.Process.Pid }

// Enter is the arguments of nsenter(1) that enter the host's network
// namespace, up to and including "--".
func (h *Host) Enter() []string {
	return []string{"--target", fmt.Sprint(h.PID()), "--net", "--"}
}

// Do runs f in the network namespace of process pid, on an OS thread of
// its own: sockets f opens belong to that namespace and keep working
// afterwards, from any goroutine (a listener of the host, a dial from
// it).
func Do(pid int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left locked when entering or leaving fails:
		// the runtime then ends it rather than reuse it elsewhere.
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %d: %w", pid, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
