package systemde2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireEnv makes a missing tool a failure instead of a skip (CI sets it).
const requireEnv = "CKPTFS_REQUIRE_SYSTEMD"

// suite is the Debian release the machines run, and the packages
// debootstrap adds to its minimal base: systemd as init, FUSE's
// configuration and the tools the checks use.
const (
	suite    = "bookworm"
	mirror   = "http://deb.debian.org/debian"
	packages = "systemd,systemd-sysv,dbus,fuse3,procps,iproute2,util-linux"
)

// need finds a program or skips (fails with CKPTFS_REQUIRE_SYSTEMD=1).
func need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s is required (%s=1): %v; make deps installs it", name, requireEnv, err)
	}
	t.Skipf("SKIPPING: %s not found (set %s=1 to fail instead): %v", name, requireEnv, err)
	return ""
}

// requireRoot skips (or fails) without root and /dev/fuse.
func requireRoot(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	}
	if why == "" {
		return
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("booting a machine needs root and /dev/fuse (%s=1): %s", requireEnv, why)
	}
	t.Skipf("SKIPPING: booting a machine needs root and /dev/fuse: %s", why)
}

// rootFS returns the cached Debian root file system, made by debootstrap
// the first time (a few minutes, from Debian's packages). Concurrent
// callers (other test binaries) wait on a lock.
func rootFS(t testing.TB) string {
	t.Helper()
	debootstrap := need(t, "debootstrap")
	cache := os.Getenv("CKPTFS_CACHE")
	if cache == "" {
		cache = "/var/cache/ckptfs"
	}
	dir := filepath.Join(cache, "systemd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, suite)
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/lib/systemd/systemd")); err == nil {
		return root
	}
	tmp := root + ".tmp"
	os.RemoveAll(tmp)
	t.Logf("debootstrap %s into %s (once; a few minutes)", suite, root)
	start := time.Now()
	cmd := exec.Command(debootstrap, "--variant=minbase", "--include="+packages, suite, tmp, mirror)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("debootstrap: %v\n%s", err, tail(out, 40))
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
	t.Logf("debootstrap done in %v", time.Since(start).Round(time.Second))
	return root
}

// buildPackage builds ckptfs (static, as make deb does) and its Debian
// package with version v into dir, and returns the package's path.
func buildPackage(t testing.TB, dir, v string) string {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ckptfs-"+v)
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+v, "-o", bin, "./cmd/ckptfs")
	build.Dir, build.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	deb := exec.Command("bash", filepath.Join(repo, "deploy/package/build.sh"), "deb", dir, bin)
	deb.Env = append(os.Environ(), "CKPTFS_PACKAGE_VERSION="+v)
	out, err := deb.Output()
	if err != nil {
		t.Fatalf("build.sh deb: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// machine is a Debian booted by systemd-nspawn -b.
type machine struct {
	t     testing.TB
	name  string
	dir   string   // upper, work and merged directories
	lower string   // the cached root file system
	binds []string // --bind= arguments
	cmd   *exec.Cmd
	init  int // the machine's PID 1, as the host numbers it
	done  chan error
	log   *os.File
}

// newMachine prepares a machine over the cached root file system;
// binds are nspawn's --bind= values (host:machine).
func newMachine(t testing.TB, name string, binds ...string) *machine {
	t.Helper()
	requireRoot(t)
	need(t, "systemd-nspawn")
	need(t, "nsenter")
	need(t, "unshare")
	m := &machine{t: t, name: name, dir: t.TempDir(), lower: rootFS(t), binds: binds}
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(m.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { m.poweroff() })
	return m
}

// path is where a file of the machine is, seen from the host while it
// runs or after (the overlay's upper directory holds what it wrote).
func (m *machine) upper(p string) string { return filepath.Join(m.dir, "upper", p) }

// put writes a file into the machine's root before it boots (or while
// it runs: the overlay shows it).
func (m *machine) put(p, content string, mode os.FileMode) {
	m.t.Helper()
	full := m.upper(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		m.t.Fatal(err)
	}
}

// boot starts the machine and waits until systemd finished booting. It
// runs nspawn in a mount namespace of its own, with the overlay root and
// a tmpfs where nspawn keeps its propagation directory (this host's /run
// is no tmpfs), so that nothing outlives it.
func (m *machine) boot() {
	m.t.Helper()
	if m.cmd != nil {
		m.t.Fatal("machine already runs")
	}
	merged := filepath.Join(m.dir, "merged")
	args := []string{"--quiet", "--register=no", "--keep-unit", "--boot", "--console=read-only",
		"--machine=" + m.name, "--directory=" + merged, "--bind=/dev/fuse", "--property=DeviceAllow=/dev/fuse rwm"}
	for _, b := range m.binds {
		args = append(args, "--bind="+b)
	}
	script := fmt.Sprintf(`set -e
mkdir -p /run/systemd/nspawn
mount -t tmpfs tmpfs /run/systemd/nspawn
mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s
exec systemd-nspawn "$@"`, m.lower, filepath.Join(m.dir, "upper"), filepath.Join(m.dir, "work"), merged)
	m.cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "nspawn"}, args...)...)
	var err error
	if m.log == nil {
		if m.log, err = os.Create(filepath.Join(m.dir, "console.log")); err != nil {
			m.t.Fatal(err)
		}
	}
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(m.cmd, m.done)
	deadline := time.Now().Add(60 * time.Second)
	for m.init = 0; m.init == 0; m.init = containerInit(m.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			m.t.Fatalf("machine %s: no PID 1 after 60s\n%s", m.name, m.console())
		}
		select {
		case err := <-m.done:
			m.done <- err
			m.t.Fatalf("machine %s: nspawn ended: %v\n%s", m.name, err, m.console())
		case <-time.After(50 * time.Millisecond):
		}
	}
	// is-system-running --wait returns once the boot ended; it fails
	// until PID 1 accepts connections.
	for {
		out, _ := m.run("systemctl is-system-running --wait")
		state := strings.TrimSpace(out)
		if state == "running" || state == "degraded" {
			if state == "degraded" {
				failed, _ := m.run("systemctl --failed --no-legend")
				m.t.Logf("machine %s booted degraded: %s", m.name, failed)
			}
			break
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("machine %s did not boot within 60s: %q\n%s", m.name, state, m.console())
		}
		time.Sleep(200 * time.Millisecond)
	}
	m.t.Logf("machine %s booted in %v", m.name, time.Since(start).Round(time.Millisecond))
}

// containerInit finds the machine's PID 1 among nspawn's descendants: the
// process whose innermost PID is 1.
func containerInit(nspawn int) int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	queue := []int{nspawn}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil && pid != nspawn {
			for _, line := range strings.Split(string(status), "\n") {
				if f := strings.Fields(line); len(f) > 2 && f[0] == "NSpid:" && f[len(f)-1] == "1" {
					return pid
				}
			}
		}
		queue = append(queue, children[pid]...)
	}
	return 0
}

// run runs a shell script inside the machine, in all its namespaces, and
// returns its standard output and error together.
func (m *machine) run(script string) (string, error) {
	return m.runFor(2*time.Minute, script)
}

func (m *machine) runFor(limit time.Duration, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(m.init), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--root", "--wd",
		"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
		"/bin/sh", "-c", script)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (after %v)", ctx.Err(), limit)
	}
	return string(out), err
}

// must runs a script that must succeed, and returns its output.
func (m *machine) must(script string) string {
	m.t.Helper()
	out, err := m.run(script)
	if err != nil {
		m.t.Fatalf("machine %s: %s: %v\n%s\n--- journal:\n%s", m.name, script, err, out, m.journal())
	}
	return out
}

// journal is the tail of the machine's journal, for failures.
func (m *machine) journal() string {
	out, _ := m.runFor(20*time.Second, "journalctl -b --no-pager -n 150 -o short-monotonic")
	return out
}

// show is one property of a unit (systemctl show -P).
func (m *machine) show(unit, prop string) string {
	m.t.Helper()
	return strings.TrimSpace(m.must("systemctl show -P " + prop + " " + unit))
}

// waitFor polls cond until it holds or limit passes.
func (m *machine) waitFor(limit time.Duration, what string, cond func() bool) time.Duration {
	m.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			m.t.Fatalf("machine %s: %s: not within %v\n--- journal:\n%s", m.name, what, limit, m.journal())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// poweroff shuts the machine down (systemctl poweroff), killing nspawn
// if it does not end within a minute.
func (m *machine) poweroff() {
	if m.cmd == nil {
		return
	}
	m.run("systemctl --no-block poweroff")
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		m.t.Errorf("machine %s did not power off within 60s; killing it", m.name)
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
	m.cmd, m.init = nil, 0
}

func (m *machine) console() string {
	data, _ := os.ReadFile(filepath.Join(m.dir, "console.log"))
	return string(tail(data, 60))
}

// tail is the last n lines of out.
func tail(out []byte, n int) []byte {
	lines := bytes.Split(out, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
