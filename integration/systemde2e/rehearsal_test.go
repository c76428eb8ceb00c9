package systemde2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// flinkConf is the Flink configuration of docs/deploy.md §1, on the
// drill's namespace and this test's ZooKeeper.
const flinkConf = `high-availability:
  type: zookeeper
  storageDir: file:///flink/ha
  cluster-id: /drill
  zookeeper:
    quorum: %ZK%
    path.root: /ckptfs-drill
    client:
      session-timeout: 10000
execution:
  checkpointing:
    dir: file:///flink/checkpoints
    num-retained: 3
    externalized-checkpoint-retention: RETAIN_ON_CANCELLATION
restart-strategy:
  type: exponential-delay
`

// TestRehearsal walks a newcomer's route on the standby site of make
// dr-rehearsal's layout: the package installed with apt-get, the
// configuration derived from Flink's as docs/deploy.md §5 says, the
// units of §6, and the failover of the runbook with systemd: DC1 is lost
// with its newest checkpoint not fully replicated; starting Flink's units
// on DC2 takes over (the newest pointer retracted, DC2 active, the mount
// read-write before the JobManager starts), Flink's recovery restores the
// checkpoint before it; once the missing file arrives, restore-pruned
// puts the pointer back. Every step must work as written; the test logs
// what each printed.
func TestRehearsal(t *testing.T) {
	if os.Getenv("CKPTFS_SYSTEMD_E2E") != "1" {
		t.Skip("make systemd-e2e runs it (CKPTFS_SYSTEMD_E2E=1)")
	}
	requireRoot(t)
	zk := zktest.StartCluster(t, 1)
	drill := filepath.Join(t.TempDir(), "drill")
	if out, err := exec.Command("go", "build", "-o", drill, "../cmd/drill").CombinedOutput(); err != nil {
		t.Fatalf("go build drill: %v\n%s", err, out)
	}
	staging := filepath.Join(t.TempDir(), "staging")
	out, err := exec.Command(drill, "-zk", zk.ConnectString(), "-staging", staging, "-ckptfs", "ckptfs").CombinedOutput()
	if err != nil {
		t.Fatalf("drill: %v\n%s", err, out)
	}
	t.Logf("make dr-rehearsal laid:\n%s", lastLines(strings.SplitN(string(out), "DC1 is lost", 2)[0], 8))
	job := ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "Flink" && f[1] == "job" {
			job = f[2]
		}
	}
	if job == "" {
		t.Fatalf("no job in the drill's output:\n%s", out)
	}

	s := &site{zk: zk, nas: filepath.Join(staging, "dc2", "nas"), pkgDir: t.TempDir(), metrics: freeAddr(t)}
	s.machine = newMachine(t, "ckptfs-dc2-"+strconv.Itoa(os.Getpid()%100000), s.nas+":/mnt/nas")
	deb := buildPackage(t, s.pkgDir, v1)
	s.put("/root/"+filepath.Base(deb), string(mustRead(t, deb)), 0o644)
	s.put("/etc/systemd/system/flink-jobmanager.service", jobManagerUnit, 0o644)
	s.put("/etc/systemd/system/flink-taskmanager.service", taskManagerUnit, 0o644)
	s.put("/opt/flink/conf/config.yaml", strings.ReplaceAll(flinkConf, "%ZK%", zk.ConnectString()), 0o644)
	s.boot()

	step := func(what, script string, want int) string {
		t.Helper()
		out, err := s.run(script)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s\n$ %s\nexit status %d\n%s", what, script, code, indent(out))
		if code != want {
			t.Fatalf("%s: exit status %d, want %d\n%s", what, code, want, s.journal())
		}
		return out
	}
	// docs/deploy.md §4-§6, as written.
	step("§4 install", "apt install -y -q ./root/"+filepath.Base(deb)+" 2>&1 | tail -2 && ckptfs version", 0)
	step("§5 the configuration from Flink's", `ckptfs config from-flink --site dc2 --backing /mnt/nas /opt/flink/conf > /etc/ckptfs/ckptfs.yaml
cat >> /etc/ckptfs/ckptfs.yaml <<'EOF'
metrics-addr: `+s.metrics+`
metrics-url: http://`+s.metrics+`
EOF
ckptfs config check --config /etc/ckptfs/ckptfs.yaml 2>&1 | grep -v '^  '`, 0)
	step("§6 the units", `mkdir -p /etc/systemd/system/flink-jobmanager.service.d /etc/systemd/system/flink-taskmanager.service.d
cp /usr/share/ckptfs/systemd/flink-jobmanager.service.d/ckptfs.conf /etc/systemd/system/flink-jobmanager.service.d/
cp /usr/share/ckptfs/systemd/flink-taskmanager.service.d/ckptfs.conf /etc/systemd/system/flink-taskmanager.service.d/
systemctl daemon-reload
systemctl enable --now ckptfs.service 2>&1`, 0)
	// §8: what to check on the standby.
	step("§8 the mount", "findmnt -n /flink", 0)
	if got := step("§8 what Flink sees", "ls /flink/checkpoints/"+job, 0); strings.Contains(got, "chk-4") || !strings.Contains(got, "chk-3") {
		t.Fatalf("the replica mount shows %q, want chk-2 and chk-3 without chk-4", got)
	}
	step("§8 status", "ckptfs status --config /etc/ckptfs/ckptfs.yaml", 0)
	step("§8 health", "ckptfs health --config /etc/ckptfs/ckptfs.yaml", 0)
	step("§8 verify", "ckptfs verify --config /etc/ckptfs/ckptfs.yaml /mnt/nas/checkpoints", 1)
	step("runbook: what a takeover would do", "ckptfs takeover --dry-run --config /etc/ckptfs/ckptfs.yaml", 0)
	// The failover: start Flink on DC2.
	step("runbook: start Flink on DC2", "systemctl start flink-jobmanager flink-taskmanager", 0)
	if got := step("the takeover's report", "journalctl -u ckptfs-takeover -o cat --no-pager", 0); !strings.Contains(got, "retracted: 4") {
		t.Fatalf("the takeover did not retract checkpoint 4:\n%s", got)
	}
	step("after the takeover", "ckptfs status --config /etc/ckptfs/ckptfs.yaml; systemctl is-active ckptfs-takeover flink-jobmanager flink-taskmanager", 0)
	rec := exec.Command(drill, "-recover", "-staging", staging, "-zk", zk.ConnectString())
	recOut, err := rec.CombinedOutput()
	t.Logf("Flink's recovery on DC2 (drill -recover): %v\n%s", err, indent(string(recOut)))
	if err != nil {
		t.Fatalf("Flink's recovery after the takeover fails: %v", err)
	}
	// The missing file arrives; the operator puts the pointer back.
	missing := strings.TrimSpace(step("the file the replication had not copied", "ckptfs verify --config /etc/ckptfs/ckptfs.yaml /mnt/nas/checkpoints/"+job+"/chk-4 | sed -n 's|.*missing: file:/flink/||p'", 0))
	if missing == "" {
		t.Fatal("verify named no missing file")
	}
	src, dst := filepath.Join(staging, "dc1", "nas", missing), filepath.Join(staging, "dc2", "nas", missing)
	if err := os.WriteFile(dst, mustRead(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
	step("runbook: restore-pruned, dry run", "ckptfs restore-pruned --dry-run --config /etc/ckptfs/ckptfs.yaml", 0)
	step("runbook: restore-pruned", "ckptfs restore-pruned --config /etc/ckptfs/ckptfs.yaml", 0)
	step("after restore-pruned", "ckptfs status --config /etc/ckptfs/ckptfs.yaml", 0)
	// The daemon's sweeper leaves what restore-pruned put back (design
	// §5.5.2): past its grace (Flink's session timeout, 10 s here) the
	// pointer is still there and nothing was retracted.
	time.Sleep(15 * time.Second)
	if got := step("the sweeper left it", "ckptfs status --config /etc/ckptfs/ckptfs.yaml | grep -E '^  4 '", 0); !strings.Contains(got, "yes") {
		t.Fatalf("pointer 4 after the sweeper's grace: %q", got)
	}
	resp, err := http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `ckptfs_sweep_actions_total{action="retract"`) {
			t.Logf("the daemon's metrics: %s", line)
			if !strings.HasSuffix(line, " 0") {
				t.Errorf("the sweeper retracted a pointer: %s", line)
			}
		}
	}
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "| " + strings.ReplaceAll(s, "\n", "\n| ")
}
