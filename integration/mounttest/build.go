package mounttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildCkptfs builds the ckptfs command into a new temporary directory
// whose name starts with prefix, for the tests that run the real binary
// (one build per test binary, in its TestMain). It returns the binary's
// path; the caller removes its directory (filepath.Dir) when done.
func BuildCkptfs(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	binary := filepath.Join(dir, "ckptfs")
	if out, err := exec.Command("go", "build", "-o", binary, "github.com/ckptfs/ckptfs/cmd/ckptfs").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("building ckptfs: %v\n%s", err, out)
	}
	return binary, nil
}
