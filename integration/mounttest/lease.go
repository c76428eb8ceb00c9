package mounttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// TestLease is the lease-duration of the ckptfs commands tests start
// (design §5.10): short, so that a configured primary writes soon after
// its start and a takeover waits little, and long enough that a loaded
// test machine renews in time (every TestLease/8, with TestLease/2 to
// spare).
const TestLease = 4 * time.Second

// LeaseEnv is the environment variable every ckptfs command reads
// lease-duration from.
const LeaseEnv = "CKPTFS_LEASE_DURATION"

// UseLease makes every ckptfs command the test binary starts use d as
// its lease (call it from TestMain, before any test runs).
func UseLease(d time.Duration) { os.Setenv(LeaseEnv, d.String()) }

// WantsLease reports whether a `ckptfs mount` with args is a primary
// that writes only once it holds its site's lease (with --zk).
func WantsLease(mode string, args []string) bool {
	return mode == "primary" && slices.ContainsFunc(args, func(a string) bool { return a == "--zk" || len(a) > 5 && a[:5] == "--zk=" })
}

// WaitWritable waits until a file can be created in the mount at mnt
// (and removes it): a primary with ZooKeeper writes only once its site
// holds the lease, D after its start in a cluster no site was activated
// in.
func WaitWritable(mnt string, within time.Duration) error {
	probe := filepath.Join(mnt, fmt.Sprintf("ckptfs-writable-probe-%d", os.Getpid()))
	deadline := time.Now().Add(within)
	for {
		err := os.WriteFile(probe, nil, 0o644)
		if err == nil {
			return os.Remove(probe)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mount at %s is not writable %v after it served: %w", mnt, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
