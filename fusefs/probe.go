package fusefs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// probeEnv names the directory a probe child asks statfs of (ServeProbe).
const probeEnv = "CKPTFS_STATFS_PROBE"

// probeServed is set by ServeProbe: only a binary that serves the child
// half may start one.
var probeServed bool

// ServeProbe is the child half of Probe. A binary that calls Probe calls
// ServeProbe first thing in main: when the process was started as a
// probe child it asks statfs of the directory, prints the errno (0 for
// none) and exits; otherwise it returns at once.
func ServeProbe() {
	probeServed = true
	dir, ok := os.LookupEnv(probeEnv)
	if !ok {
		return
	}
	var st syscall.Statfs_t
	errno := syscall.Errno(0)
	if err := syscall.Statfs(dir, &st); err != nil && !errors.As(err, &errno) {
		errno = syscall.EIO
	}
	fmt.Println(int(errno))
	os.Exit(0)
}

// Probe checks that dir is a ckptfs mount and that its daemon answers
// within timeout. It asks with statfs, which the kernel always passes to
// the daemon (a stat may be answered from the attribute cache).
//
// The statfs runs in a child process (this binary again, see
// ServeProbe), not in a thread of the caller: once a FUSE daemon has
// read a request, the kernel waits for its answer uninterruptibly, even
// through SIGKILL, and a process with a thread in that wait cannot exit.
// So a daemon that read the probe and then hung would keep the caller
// from ever exiting. The caller gives up on the child after timeout and
// leaves it to end when the daemon answers or its connection is aborted.
func Probe(dir string, timeout time.Duration) error {
	if !probeServed {
		return errors.New("fusefs.Probe: this binary does not call fusefs.ServeProbe")
	}
	dir = filepath.Clean(dir)
	mounted, err := IsMounted(dir)
	if err != nil {
		return fmt.Errorf("mount %s: %v", dir, err)
	}
	if !mounted {
		return fmt.Errorf("mount %s: not mounted (no fuse.%s mount there)", dir, Name)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("mount %s: probe: %v", dir, err)
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), probeEnv+"="+dir)
	var out bytes.Buffer
	child.Stdout = &out
	if err := child.Start(); err != nil {
		return fmt.Errorf("mount %s: probe: %v", dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("mount %s: probe: %v", dir, err)
		}
	case <-t.C:
		child.Process.Kill() // takes effect once the daemon answers
		return fmt.Errorf("mount %s: statfs did not answer within %v (daemon hung?)", dir, timeout)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		return fmt.Errorf("mount %s: probe: unexpected answer %q", dir, out.String())
	}
	switch errno := syscall.Errno(n); {
	case errno == syscall.ENOTCONN:
		return fmt.Errorf("mount %s: the daemon is gone (ENOTCONN)", dir)
	case errno != 0:
		return fmt.Errorf("mount %s: statfs: %v", dir, errno)
	}
	return nil
}
