package systemde2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

func TestMain(m *testing.M) { faultfs.Main(m) }

// The versions of the packages the tests install: the second upgrades
// the first in place.
const (
	v1 = "0.0.0+1.gtest"
	v2 = "0.0.0+2.gtest"
)

// Flink's units on the machine: stand-ins that use the mount as Flink's
// processes do. The JobManager writes below the mount when it starts
// (and fails on a mount still read-only), then keeps that file open; the
// TaskManager works in the mount.
const (
	jobManagerUnit = `[Unit]
Description=Flink JobManager (stand-in)

[Service]
ExecStart=/bin/sh -c 'mkdir -p /flink/ha && exec 3>>/flink/ha/jobmanager.log && date +%%s.%%N >&3 && exec sleep infinity'
`
	taskManagerUnit = `[Unit]
Description=Flink TaskManager (stand-in)

[Service]
WorkingDirectory=/flink
ExecStart=/bin/sleep infinity
`
)

// site is one machine of a site with ckptfs installed from its package
// and configured as docs/deploy.md says, and the ZooKeeper it uses.
type site struct {
	*machine
	zk      *zktest.Cluster
	nas     string // the host directory that is the machine's /mnt/nas
	pkgDir  string
	metrics string // the daemon's metrics address
}

// newSite boots a machine (its NAS the host directory nas, or a new one
// when nas is "") and installs the package v1.
func newSite(t *testing.T, nas string) *site {
	t.Helper()
	requireRoot(t)
	zk := zktest.StartCluster(t, 1)
	if nas == "" {
		nas = t.TempDir()
	}
	s := &site{zk: zk, nas: nas, pkgDir: t.TempDir(), metrics: freeAddr(t)}
	s.machine = newMachine(t, "ckptfs-"+strconv.Itoa(os.Getpid()%100000), nas+":/mnt/nas")
	deb := buildPackage(t, s.pkgDir, v1)
	s.put("/root/"+filepath.Base(deb), string(mustRead(t, deb)), 0o644)
	s.put("/etc/systemd/system/flink-jobmanager.service", fmt.Sprintf(jobManagerUnit), 0o644)
	s.put("/etc/systemd/system/flink-taskmanager.service", taskManagerUnit, 0o644)
	s.boot()

	// The operator's steps (docs/deploy.md): install, configure, copy
	// the drop-ins, check the configuration.
	out := s.must("apt-get install -y -q /root/" + filepath.Base(deb) + " 2>&1")
	t.Logf("apt-get install ./%s:\n%s", filepath.Base(deb), lastLines(out, 3))
	if got := strings.TrimSpace(s.must("ckptfs version")); !strings.Contains(got, v1) {
		t.Fatalf("ckptfs version: %q, want %s", got, v1)
	}
	s.writeConfig()
	s.must(`for role in jobmanager taskmanager; do
mkdir -p /etc/systemd/system/flink-$role.service.d
cp /usr/share/ckptfs/systemd/flink-$role.service.d/ckptfs.conf /etc/systemd/system/flink-$role.service.d/
done
systemctl daemon-reload`)
	t.Logf("ckptfs config check:\n%s", s.must("ckptfs config check --config /etc/ckptfs/ckptfs.yaml 2>&1"))
	return s
}

// writeConfig writes the site's /etc/ckptfs/ckptfs.yaml: the example's
// paths, this test's ZooKeeper and metrics address, and short timeouts.
func (s *site) writeConfig() {
	s.t.Helper()
	s.put("/etc/ckptfs/ckptfs.yaml", fmt.Sprintf(`# written by the systemd end-to-end test
site: dc1
zk: %s
path-root: /flink
cluster-id: /e2e
flink-session-timeout: 4s
wait: 6s
lease-duration: 4s
checkpoints-dir: [file:///flink/checkpoints]
backing: /mnt/nas
mountpoint: /flink
map: [file:///flink=/mnt/nas]
mode: replica
metrics-addr: %s
metrics-url: http://%s
`, s.zk.ConnectString(), s.metrics, s.metrics), 0o644)
}

// TestSystemdShort is make test's short form: install, readiness, the
// takeover gate, kill -9 of the daemon, stop with files held open.
func TestSystemdShort(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a machine")
	}
	s := newSite(t, "")
	s.startAndReady()
	s.takeoverGate()
	s.killDaemon()
	s.stopWithFilesOpen()
}

// TestSystemd is make systemd-e2e's full run: the short form, then an
// upgrade in place, a hung NAS, and a reboot while ZooKeeper is down.
func TestSystemd(t *testing.T) {
	if os.Getenv("CKPTFS_SYSTEMD_E2E") != "1" {
		t.Skip("make systemd-e2e runs it (CKPTFS_SYSTEMD_E2E=1)")
	}
	mounttest.RequireFUSE(t)
	lower := t.TempDir()
	nas := t.TempDir()
	fault := faultfs.Mount(t, lower, nas)
	s := newSite(t, nas)
	s.startAndReady()
	s.takeoverGate()
	s.killDaemon()
	s.stopWithFilesOpen()
	s.upgradeInPlace()
	s.hungNAS(fault)
	s.rebootWithoutZooKeeper()
}

// startAndReady: systemctl enable --now ckptfs.service returns once the
// daemon serves (Type=notify), and the mount is there.
func (s *site) startAndReady() {
	s.t.Helper()
	start := time.Now()
	s.must("systemctl enable --now ckptfs.service 2>&1")
	took := time.Since(start)
	if st := s.show("ckptfs.service", "ActiveState"); st != "active" {
		s.t.Fatalf("ckptfs.service is %s after start\n%s", st, s.journal())
	}
	if fs := strings.TrimSpace(s.must("findmnt -n -o FSTYPE /flink")); fs != "fuse.ckptfs" {
		s.t.Fatalf("/flink is %q after start, want fuse.ckptfs", fs)
	}
	ready := usec(s.show("ckptfs.service", "ActiveEnterTimestampMonotonic")) - usec(s.show("ckptfs.service", "ExecMainStartTimestampMonotonic"))
	s.t.Logf("systemctl enable --now ckptfs.service: active (mounted) %v after the daemon started; the command took %v", ready, took.Round(time.Millisecond))
	s.t.Logf("ckptfs health: %s", s.must("ckptfs health --config /etc/ckptfs/ckptfs.yaml"))
}

// takeoverGate: starting Flink runs the takeover, which makes this site
// active; the JobManager starts only once the mount turned read-write
// (its first write would fail before), and the takeover unit stays
// active while Flink runs.
func (s *site) takeoverGate() {
	s.t.Helper()
	start := time.Now()
	out, err := s.run("systemctl start flink-jobmanager.service flink-taskmanager.service 2>&1")
	if err != nil {
		s.t.Fatalf("starting Flink: %v\n%s\n%s", err, out, s.journal())
	}
	s.t.Logf("systemctl start flink-jobmanager flink-taskmanager: %v", time.Since(start).Round(time.Millisecond))
	for _, u := range []string{"ckptfs-takeover.service", "flink-jobmanager.service", "flink-taskmanager.service"} {
		if st := s.show(u, "ActiveState"); st != "active" {
			s.t.Fatalf("%s is %s after Flink's start\n%s", u, st, s.journal())
		}
	}
	if data := s.must("cat /flink/ha/jobmanager.log"); strings.TrimSpace(data) == "" {
		s.t.Fatal("the JobManager wrote nothing through the mount")
	}
	// The promotion comes before the JobManager's start.
	// The daemon's own time of it (time=...), not the journal's.
	line := s.must(`journalctl -u ckptfs.service -o cat --no-pager | grep -m1 'mode changed.*to=primary' || true`)
	f := strings.Fields(line)
	var promoted time.Time
	if len(f) > 0 {
		promoted, _ = time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time="))
	}
	if promoted.IsZero() {
		s.t.Fatalf("no promotion in ckptfs.service's journal: %q\n%s", line, s.journal())
	}
	started, err := time.Parse("Mon 2006-01-02 15:04:05.000000 MST", s.show("flink-jobmanager.service", "ExecMainStartTimestamp --timestamp=us+utc"))
	if err != nil {
		s.t.Fatal(err)
	}
	lead := started.Sub(promoted)
	if lead < 0 {
		s.t.Fatalf("the JobManager started %v before the mount turned read-write\n%s", -lead, s.must("journalctl -o short-precise --no-pager -n 60 -u ckptfs.service -u ckptfs-takeover.service -u flink-jobmanager.service"))
	}
	s.t.Logf("the JobManager started %v after the mount turned read-write", lead.Round(time.Millisecond))
	s.t.Logf("takeover's journal:\n%s", lastLines(s.must("journalctl -u ckptfs-takeover.service -o cat --no-pager"), 8))
}

// killDaemon: kill -9 of the daemon; systemd restarts it, the new daemon
// mounts again in seconds, and Flink's units, stopped with the dead
// mount, start again.
func (s *site) killDaemon() {
	s.t.Helper()
	old := s.show("ckptfs.service", "MainPID")
	jm := s.show("flink-jobmanager.service", "MainPID")
	start := time.Now()
	s.must("kill -9 " + old)
	back := s.waitFor(30*time.Second, "ckptfs.service running again with a new daemon", func() bool {
		pid := s.show("ckptfs.service", "MainPID")
		return pid != "0" && pid != old && s.show("ckptfs.service", "ActiveState") == "active"
	})
	if _, err := s.run("stat -f /flink >/dev/null && ls /flink >/dev/null"); err != nil {
		s.t.Fatalf("/flink does not answer after the restart: %v", err)
	}
	s.t.Logf("kill -9 of the daemon: ckptfs.service active again with a new daemon after %v (NRestarts=%s)", back.Round(time.Millisecond), s.show("ckptfs.service", "NRestarts"))
	follow := s.waitFor(60*time.Second, "Flink's units running again", func() bool {
		pid := s.show("flink-jobmanager.service", "MainPID")
		return pid != "0" && pid != jm && s.show("flink-jobmanager.service", "ActiveState") == "active" &&
			s.show("flink-taskmanager.service", "ActiveState") == "active"
	})
	s.t.Logf("Flink's units restarted %v after the kill (a new JobManager process, after a new takeover)", (time.Since(start)).Round(time.Millisecond))
	_ = follow
}

// stopWithFilesOpen: a process outside Flink's units holds a file and a
// working directory on the mount; systemctl stop ends the service
// cleanly (inactive, not failed), and stops Flink's units first.
func (s *site) stopWithFilesOpen() {
	s.t.Helper()
	s.must("systemd-run --unit=holder --property=WorkingDirectory=/flink /bin/sh -c 'exec 3</flink/ha/jobmanager.log; exec sleep infinity'")
	start := time.Now()
	out, err := s.run("systemctl stop ckptfs.service 2>&1")
	took := time.Since(start)
	if err != nil {
		s.t.Fatalf("systemctl stop ckptfs.service: %v\n%s\n%s", err, out, s.journal())
	}
	if st, res := s.show("ckptfs.service", "ActiveState"), s.show("ckptfs.service", "Result"); st != "inactive" || res != "success" {
		s.t.Fatalf("ckptfs.service is %s (%s) after a stop with files open, want inactive (success)\n%s", st, res, s.journal())
	}
	for _, u := range []string{"flink-jobmanager.service", "flink-taskmanager.service"} {
		if st := s.show(u, "ActiveState"); st != "inactive" {
			s.t.Errorf("%s is %s after ckptfs.service stopped, want inactive", u, st)
		}
	}
	if out, _ := s.run("findmnt -n /flink"); strings.TrimSpace(out) != "" {
		s.t.Errorf("/flink is still mounted after the stop: %s", out)
	}
	s.t.Logf("systemctl stop ckptfs.service with a file and a working directory open on the mount: %v, inactive (success); the daemon said: %s",
		took.Round(time.Millisecond), lastLines(s.must("journalctl -u ckptfs.service -o cat --no-pager | grep -i -e detach -e 'not cleanly' -e 'still serves' || true"), 3))
	s.must("systemctl stop holder.service")
}

// upgradeInPlace: apt-get installs a newer package over the running
// one; the operator's configuration is kept, the running daemon is left
// alone (the upgrade says so), and the next start runs the new version.
func (s *site) upgradeInPlace() {
	s.t.Helper()
	s.must("systemctl start ckptfs.service")
	pid := s.show("ckptfs.service", "MainPID")
	conf := s.must("cat /etc/ckptfs/ckptfs.yaml")
	deb := buildPackage(s.t, s.pkgDir, v2)
	s.put("/root/"+filepath.Base(deb), string(mustRead(s.t, deb)), 0o644)
	out := s.must("apt-get install -y -q /root/" + filepath.Base(deb) + " 2>&1")
	s.t.Logf("apt-get install ./%s over %s:\n%s", filepath.Base(deb), v1, lastLines(out, 4))
	if got := s.must("dpkg-query -W -f '${Version}' ckptfs"); got != v2 {
		s.t.Fatalf("installed version %q after the upgrade, want %s", got, v2)
	}
	if got := s.must("cat /etc/ckptfs/ckptfs.yaml"); got != conf {
		s.t.Fatalf("the upgrade changed /etc/ckptfs/ckptfs.yaml:\n%s", got)
	}
	if now := s.show("ckptfs.service", "MainPID"); now != pid {
		s.t.Fatalf("the upgrade restarted the daemon (%s -> %s), which stops Flink", pid, now)
	}
	if !strings.Contains(out, "restart it when Flink") {
		s.t.Errorf("the upgrade did not say that the running daemon is the old one:\n%s", out)
	}
	s.must("systemctl restart ckptfs.service")
	if got := s.must("ckptfs version"); !strings.Contains(got, v2) {
		s.t.Fatalf("ckptfs version after the upgrade: %q", got)
	}
}

// hungNAS: every operation on the NAS hangs (a hard NFS mount whose
// server is gone) while a reader waits on the mount; systemctl stop still
// ends the daemon within its stop timeout, leaving no process behind.
func (s *site) hungNAS(fault *faultfs.FS) {
	s.t.Helper()
	s.must("systemctl start ckptfs.service && mkdir -p /mnt/nas/checkpoints/job")
	fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Hang: true})
	s.must("systemd-run --unit=reader /bin/ls -l /flink/checkpoints/job")
	s.waitFor(20*time.Second, "requests waiting on the NAS", func() bool { return fault.Hung() >= 1 })
	time.Sleep(time.Second)
	start := time.Now()
	out, err := s.runFor(90*time.Second, "systemctl stop ckptfs.service 2>&1")
	took := time.Since(start)
	s.t.Logf("systemctl stop ckptfs.service on a hung NAS: %v (%v): %s", took.Round(time.Millisecond), err, out)
	left, _ := s.run("pgrep -a -x ckptfs; systemctl show -P MainPID ckptfs.service")
	if strings.TrimSpace(left) != "0" {
		s.t.Errorf("after the stop on a hung NAS, ckptfs processes remain: %s\n%s", left, s.journal())
	}
	if st := s.show("ckptfs.service", "ActiveState"); st != "inactive" && st != "failed" {
		s.t.Errorf("ckptfs.service is %s after the stop", st)
	}
	s.t.Logf("the daemon said: %s", lastLines(s.must("journalctl -u ckptfs.service -o cat --no-pager -n 30"), 8))
	fault.Clear()
	s.run("systemctl stop reader.service; systemctl reset-failed reader.service")
}

// rebootWithoutZooKeeper: with ckptfs.service enabled, the machine boots
// while ZooKeeper is down: the mount comes up after the network, read-
// only, and connects once ZooKeeper is back.
func (s *site) rebootWithoutZooKeeper() {
	s.t.Helper()
	s.must("systemctl enable ckptfs.service")
	s.poweroff()
	if err := s.zk.Stop(0); err != nil {
		s.t.Fatal(err)
	}
	s.boot()
	s.waitFor(60*time.Second, "ckptfs.service active after the boot", func() bool { return s.show("ckptfs.service", "ActiveState") == "active" })
	net := usec(s.show("network-online.target", "ActiveEnterTimestampMonotonic"))
	started := usec(s.show("ckptfs.service", "ExecMainStartTimestampMonotonic"))
	if started < net {
		s.t.Errorf("ckptfs.service started %v before network-online.target", net-started)
	}
	h, _ := s.run("ckptfs health --config /etc/ckptfs/ckptfs.yaml")
	s.t.Logf("booted with ZooKeeper down: ckptfs.service active, health says: %s", strings.TrimSpace(h))
	if err := s.zk.Start(0); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(60*time.Second, "the daemon connected to ZooKeeper", func() bool {
		_, err := s.run("ckptfs health --config /etc/ckptfs/ckptfs.yaml")
		return err == nil
	})
	s.t.Logf("ZooKeeper back: %s", s.must("ckptfs health --config /etc/ckptfs/ckptfs.yaml"))
}

// usec parses a systemd monotonic timestamp (microseconds).
func usec(v string) time.Duration {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return time.Duration(n) * time.Microsecond
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func lastLines(s string, n int) string {
	return string(tail([]byte(strings.TrimRight(s, "\n")), n))
}
