//go:build !linux

package replication

import (
	"os"
	"path/filepath"
	"syscall"
)

func openBeneath(root, rel string) (*os.File, error) {
	return os.OpenFile(filepath.Join(root, filepath.FromSlash(rel)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

func isNotDirOrLoop(error) bool { return false }

func exchange(a, b string) error { return errNoExchange }
