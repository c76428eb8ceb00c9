package scenario

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	daemon  *mounttest.Ckptfs
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
	}
	for _, d := range []string{s.backing, s.mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argv := append([]string{"--mode", mode, "--site", name, "--log-level", "debug", "--log-format", "json",
		"--map", flinkStorage + "=" + s.backing}, args...)
	s.daemon = mounttest.StartCkptfs(t, binary, s.backing, s.mnt, daemonReadyTimeout, argv...)
	if mounttest.WantsLease(mode, args) {
		if err := mounttest.WaitWritable(s.mnt, daemonReadyTimeout); err != nil {
			t.Fatalf("%s mount: %v\n%s", name, err, s.daemon.Tail(20))
		}
	}
	return s
}

// kill loses the daemon as its site dies: SIGKILL. The mount point is
// left dead (ENOTCONN) until the test's cleanup detaches it.
func (s *site) kill() { s.daemon.Kill() }

// logged counts the daemon's log lines that contain every one of subs.
func (s *site) logged(subs ...string) int {
	n := 0
next:
	for _, l := range s.daemon.Lines() {
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				continue next
			}
		}
		n++
	}
	return n
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
