package mounttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"go.uber.org/goleak"
)

// daemonEnv carries a daemonSpec to a test binary re-executed by
// StartDaemon.
const daemonEnv = "CKPTFS_MOUNTTEST_DAEMON"

const readyLine = "ckptfs-mounttest-daemon-ready"

type daemonSpec struct {
	Backing    string `json:"backing"`
	MountPoint string `json:"mountpoint"`
	Mode       string `json:"mode"`
}

// Main is the TestMain of packages that use StartDaemon: in a daemon
// child it mounts and serves until SIGTERM instead of running tests.
// Otherwise it runs the tests and fails the run when a goroutine
// outlives them (goleak.VerifyTestMain with opts).
func Main(m *testing.M, opts ...goleak.Option) {
	if spec := os.Getenv(daemonEnv); spec != "" {
		os.Exit(runDaemon(spec))
	}
	goleak.VerifyTestMain(m, opts...)
}

func runDaemon(specJSON string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var spec daemonSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		log.Error("bad daemon spec", "err", err)
		return 2
	}
	mode, err := fusefs.ParseMode(spec.Mode)
	if err != nil {
		log.Error("bad daemon spec", "err", err)
		return 2
	}
	cfg := fusefs.DefaultConfig()
	cfg.Backing, cfg.MountPoint, cfg.Mode = spec.Backing, spec.MountPoint, mode
	cfg.Visibility = fusefs.AllVisible{}
	cfg.Logger = log
	srv, err := fusefs.Mount(cfg)
	if err != nil {
		log.Error("mount failed", "err", err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		for srv.Unmount() != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}()
	fmt.Println(readyLine)
	srv.Wait()
	return 0
}

// Daemon is a mount served by a child process (a re-executed test
// binary whose TestMain calls Main), for tests that kill the daemon or
// must not share a process with the FUSE server.
type Daemon struct {
	Orig, Mnt string

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
}

const daemonStartTimeout = 10 * time.Second

// StartDaemon mounts orig at mnt in a child process and returns once the
// mount serves. t.Cleanup stops the child and detaches a mount it left.
func StartDaemon(t testing.TB, orig, mnt string, mode fusefs.Mode) *Daemon {
	t.Helper()
	RequireFUSE(t)
	spec, err := json.Marshal(daemonSpec{Backing: orig, MountPoint: mnt, Mode: mode.String()})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), daemonEnv+"="+string(spec))
	logw := &testWriter{t: t}
	t.Cleanup(logw.close)
	cmd.Stderr = logw
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Orig: orig, Mnt: mnt, cmd: cmd, exited: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != readyLine+"\n" {
			err = fmt.Errorf("unexpected daemon output %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("daemon cleanup: %v", err)
		}
	})
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("daemon did not start: %v", err)
		}
	case <-time.After(daemonStartTimeout):
		t.Fatalf("daemon not ready after %v", daemonStartTimeout)
	}
	return d
}

// Kill sends SIGKILL and waits until the child is gone; its mount stays
// behind, dead.
func (d *Daemon) Kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// Stop sends SIGSTOP and returns once the child is stopped: it stays
// alive but answers no request, so everything that reaches its mount
// waits.
func (d *Daemon) Stop() error {
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid)
	deadline := time.Now().Add(daemonStartTimeout)
	for {
		data, err := os.ReadFile(stat)
		if err != nil {
			return err
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) && data[i+2] == 'T' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon %d not stopped after %v", d.cmd.Process.Pid, daemonStartTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Continue sends SIGCONT to a stopped child.
func (d *Daemon) Continue() { d.cmd.Process.Signal(syscall.SIGCONT) }

// Exited reports whether the child has exited.
func (d *Daemon) Exited() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

// stop ends a child still running (SIGTERM unmounts cleanly) and detaches
// a dead mount it may have left.
func (d *Daemon) stop() error {
	if !d.Exited() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		d.Continue() // a stopped child acts on SIGTERM only once continued
		select {
		case <-d.exited:
		case <-time.After(unmountPatience):
			d.Kill()
		}
	}
	// statfs, not stat: the kernel may answer stat from cached
	// attributes even when the daemon is gone.
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(d.Mnt, &sfs); isDeadMount(err) {
		if err := syscall.Unmount(d.Mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("detach dead mount %s: %w", d.Mnt, err)
		}
	}
	return nil
}
