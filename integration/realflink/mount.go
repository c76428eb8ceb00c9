//go:build linux

package realflink

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// mountReady bounds how long a ckptfs mount daemon may take to serve.
const mountReady = 30 * time.Second

// StartMount runs `ckptfs mount` in the site over backing at mnt (both
// paths as the site sees them) and returns once it serves (its READY
// line on CKPTFS_READY_FD). args are extra flags.
func (s *Site) StartMount(name, binary, mode, backing, mnt string, args ...string) (*Process, error) {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	argv := append([]string{binary, "mount", "--mode", mode, "--site", s.Name, "--log-level", "debug", "--log-format", "json"}, args...)
	cmd := s.Command(append(argv, backing, mnt)...)
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	p, err := s.Start(name, cmd, 20*time.Second)
	readyW.Close()
	if err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("%s: %w\n%s", p.Name, err, p.Tail(20))
		}
	case <-time.After(mountReady):
		return nil, fmt.Errorf("%s not ready after %v\n%s", p.Name, mountReady, p.Tail(20))
	}
	if mounttest.WantsLease(mode, args) {
		// The site's Flink writes through it at once.
		if err := mounttest.WaitWritable(s.Path(mnt), mountReady); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", p.Name, err, p.Tail(20))
		}
	}
	return p, nil
}

// Bind mounts dir (a host path) at mnt inside the site only: each site
// gets its own directory at the same path (a plain replica directory
// where ckptfs is absent, a machine's local disk).
func (s *Site) Bind(dir, mnt string) error {
	for _, d := range []string{dir, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	out, err := s.Command("mount", "--bind", filepath.Clean(dir), filepath.Clean(mnt)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("site %s: mount --bind %s %s: %w: %s", s.Name, dir, mnt, err, out)
	}
	return nil
}
