//go:build linux

package realflink

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Site is one data center as a host: a mount namespace of its own, so
// that both sites mount their storage at the same absolute path, as in a
// real deployment. Every process of the site (ckptfs daemons, Flink) runs
// inside it, entered with nsenter(1); the test itself stays outside and
// reaches the site's view of a path through Path.
//
// The namespace is held by a child that only sleeps. It and every process
// started in the site get SIGKILL when the test binary dies (Pdeathsig);
// t.Cleanup stops them in order. Once the last process of the namespace is
// gone, the kernel removes the namespace and every mount in it.
type Site struct {
	Name string
	// Addr is the site's address on its WAN (NewNetSite); "" when the
	// site shares the test's network.
	Addr string

	t      testing.TB
	holder *exec.Cmd
	logDir string
	net    bool // a network namespace of its own

	mu    sync.Mutex
	procs []*Process // GUARDED_BY(mu)
}

// NewSite makes a site's namespace. logDir receives the logs of the
// processes started in it.
func NewSite(t testing.TB, name, logDir string) *Site {
	t.Helper()
	return newSite(t, name, logDir, false)
}

func newSite(t testing.TB, name, logDir string, netns bool) *Site {
	t.Helper()
	RequireRoot(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("realflink: nsenter (util-linux) not found: %v", err)
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "infinity")
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on
	// /), so nothing mounted in the site propagates to the host.
	flags := uintptr(syscall.CLONE_NEWNS)
	if netns {
		flags |= syscall.CLONE_NEWNET
	}
	holder.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: flags,
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
	}
	if err := holder.Start(); err != nil {
		t.Fatalf("realflink: site %s: a mount namespace: %v", name, err)
	}
	s := &Site{Name: name, t: t, holder: holder, logDir: logDir, net: netns}
	t.Cleanup(s.close)
	return s
}

// PID is the process holding the site's namespace.
func (s *Site) PID() int { return s.holder.Process.Pid }

// Path is where the test reaches the site's view of an absolute path p
// (through /proc/<pid>/root, which resolves in the site's namespace).
func (s *Site) Path(p string) string {
	return fmt.Sprintf("/proc/%d/root%s", s.PID(), p)
}

// Command returns a command that runs argv inside the site. Start it with
// Start.
func (s *Site) Command(argv ...string) *exec.Cmd {
	return exec.Command("nsenter", append(s.Enter(), argv...)...)
}

// Enter is the arguments of nsenter(1) that enter the site's namespaces,
// up to and including "--".
func (s *Site) Enter() []string {
	args := []string{"--target", fmt.Sprint(s.PID()), "--mount"}
	if s.net {
		args = append(args, "--net")
	}
	return append(args, "--")
}

// Process is a process started in a site, with its output in a log file.
type Process struct {
	Name string
	Log  string // the file holding its stdout and stderr
	// FlinkLog is a Flink process's own log file (log.file).
	FlinkLog string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // set before exited is closed
	site   *Site

	// grace: how long Stop waits after SIGTERM before SIGKILL; 0 kills
	// at once.
	grace time.Duration

	mu    sync.Mutex
	lines []string // GUARDED_BY(mu): what it printed
}

// Start runs cmd (from Command) in the site as a named process whose
// output goes to <logDir>/<name>.log. grace is how long the cleanup
// waits after SIGTERM before SIGKILL (0: SIGKILL at once).
func (s *Site) Start(name string, cmd *exec.Cmd, grace time.Duration) (*Process, error) {
	logPath := filepath.Join(s.logDir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: s.Name + "/" + name, Log: logPath, cmd: cmd, exited: make(chan struct{}), site: s, grace: grace}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	pw.Close()
	// The copy keeps the log and the lines Count and Tail read.
	go func() {
		defer logf.Close()
		defer pr.Close()
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				io.WriteString(logf, line)
				p.record(strings.TrimRight(line, "\n"))
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

func (p *Process) record(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, line)
}

// Lines returns the lines the process printed so far.
func (p *Process) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// Count returns how many printed lines contain every one of subs.
func (p *Process) Count(subs ...string) int {
	n := 0
next:
	for _, l := range p.Lines() {
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// Tail returns the last n lines printed.
func (p *Process) Tail(n int) string {
	l := p.Lines()
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// PID is the process's id (nsenter execs the program, so it is the
// program's own).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit error, once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Signal sends sig to the process's group (a JVM's children too).
func (p *Process) Signal(sig syscall.Signal) {
	syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Kill sends SIGKILL to its group and waits until it is gone.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop ends the process: SIGTERM and, after its grace, SIGKILL.
func (p *Process) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	if p.grace > 0 {
		p.Signal(syscall.SIGTERM)
		p.Signal(syscall.SIGCONT)
		select {
		case <-p.exited:
			return
		case <-time.After(p.grace):
		}
	}
	p.Kill()
}

// close stops the site's processes, newest first, then the holder: the
// namespace and its mounts go with the last of them.
func (s *Site) close() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	s.holder.Process.Kill()
	if err := s.holder.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			s.t.Errorf("site %s: holder: %v", s.Name, err)
		}
	}
}

// RequireRoot skips (or, with CKPTFS_REQUIRE_FLINK=1, fails) a test that
// is not run as root: namespaces and mounts need it. It skips in -short
// mode.
func RequireRoot(t testing.TB) {
	t.Helper()
	skipShort(t)
	if os.Geteuid() != 0 {
		missing(t, "root (mount namespaces and FUSE mounts)")
	}
}
