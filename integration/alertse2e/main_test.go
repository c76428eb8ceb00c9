package alertse2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// requireEnv makes a missing Prometheus, promtool or node exporter a
// failure instead of a skip (make test sets it; make deps installs them).
const requireEnv = "CKPTFS_REQUIRE_PROMETHEUS"

// fullEnv selects the full form (make alerts-e2e).
const fullEnv = "CKPTFS_ALERTS_E2E"

func TestMain(m *testing.M) {
	// Every ckptfs command of these tests, mounts and takeovers alike.
	mounttest.UseLease(mounttest.TestLease)
	// faultfs serves its NAS from this binary re-executed (it exits
	// there); the ckptfs binary is built by the first test that needs it.
	faultfs.Main(m, goleak.Cleanup(func(code int) {
		if dir := builtDir(); dir != "" {
			os.RemoveAll(dir)
		}
		os.Exit(code)
	}))
}

var (
	buildOnce sync.Once
	binary    string // the ckptfs command, built once
	buildErr  error
)

// ckptfsBinary builds the ckptfs command once for every test.
func ckptfsBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { binary, buildErr = mounttest.BuildCkptfs("ckptfs-alertse2e-") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

func builtDir() string {
	if binary == "" {
		return ""
	}
	return filepath.Dir(binary)
}

// need finds a program or skips the test, loudly (fails with
// CKPTFS_REQUIRE_PROMETHEUS=1).
func need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s is required (%s=1): %v; make deps installs it", name, requireEnv, err)
	}
	t.Skipf("SKIPPING: %s not found (make deps installs it; set %s=1 to fail instead): %v", name, requireEnv, err)
	return ""
}
