package scenario

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"go.uber.org/goleak"
)

// binary is the ckptfs command built by TestMain.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	// Every ckptfs command of these tests, mounts and takeovers alike.
	mounttest.UseLease(mounttest.TestLease)
	if testing.Short() {
		// The tests that run the binary skip in -short mode: no build.
		goleak.VerifyTestMain(m)
		return
	}
	var err error
	if binary, err = mounttest.BuildCkptfs("ckptfs-scenario-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir := filepath.Dir(binary)
	// Fails the run when a goroutine outlives the tests.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// site is one data center's storage: its NAS (backing directory) and the
// ckptfs mount over it at the path Flink uses, served by a `ckptfs mount`
// daemon.
type site struct {
	name    string
	backing string
	mnt     string

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    []string // the daemon's log lines
}

const daemonReadyTimeout = 30 * time.Second

// startSite runs `ckptfs mount` for a site and returns once it serves.
func startSite(t *testing.T, name, root, mode string, args ...string) *site {
	t.Helper()
	mounttest.RequireFUSE(t)
	s := &site{
		name:    name,
		backing: filepath.Join(root, name, "nas"),
		mnt:     filepath.Join(root, name, "flink"),
		exited:  make(chan struct{}),
	}
	for _, d := range []string{s.backing, s.mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	argv := append([]string{"mount", "--mode", mode, "--site", name, "--log-level", "debug", "--log-format", "json",
		"--map", flinkStorage + "=" + s.backing}, args...)
	s.cmd = exec.Command(binary, append(argv, s.backing, s.mnt)...)
	s.cmd.ExtraFiles = []*os.File{readyW}
	s.cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.log = append(s.log, sc.Text())
			s.mu.Unlock()
		}
		s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })
	got := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(ready).ReadString('\n')
		if err == nil && line != "READY\n" {
			err = fmt.Errorf("unexpected readiness %q", line)
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s mount: %v\n%s", name, err, s.logTail(20))
		}
	case <-time.After(daemonReadyTimeout):
		t.Fatalf("%s mount not ready after %v\n%s", name, daemonReadyTimeout, s.logTail(20))
	}
	if mounttest.WantsLease(mode, args) {
		if err := mounttest.WaitWritable(s.mnt, daemonReadyTimeout); err != nil {
			t.Fatalf("%s mount: %v\n%s", name, err, s.logTail(20))
		}
	}
	return s
}

// kill loses the daemon as its site dies: SIGKILL. The mount point is
// left dead (ENOTCONN) until stop detaches it.
func (s *site) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-s.exited
}

// stop ends the daemon (SIGTERM: clean unmount) and detaches whatever is
// left at the mount point.
func (s *site) stop(t *testing.T) {
	select {
	case <-s.exited:
	default:
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("%s mount did not stop on SIGTERM; its log ends:\n%s", s.name, s.logTail(40))
			s.kill()
		}
	}
	if err := syscall.Unmount(s.mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("detach %s: %v", s.mnt, err)
	}
}

// logged counts the daemon's log lines that contain every one of subs.
func (s *site) logged(subs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
next:
	for _, l := range s.log {
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

func (s *site) logTail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := max(0, len(s.log)-n)
	return strings.Join(s.log[from:], "\n")
}

// writable reports whether the mount accepts writes (a primary mount).
func (s *site) writable() bool {
	probe := filepath.Join(s.mnt, ".scenario-probe")
	if err := os.Mkdir(probe, 0o755); err != nil {
		return false
	}
	os.Remove(probe)
	return true
}
