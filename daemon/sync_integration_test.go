package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestIntegration_SyncMode: a JobManager writes checkpoints through DC1's
// primary mount in strict and sync mode (design §4.8). With replication
// running, each completes only once DC2 holds it. DC2 stops confirming
// twice, the replication cut and then DC2's daemon stopped: strict fails
// the checkpoint's HA file close after the timeout (no pointer), sync
// lets it complete after the timeout, degraded (ckptfs_sync_degraded 1,
// what CkptfsSyncDegraded fires on), then without waiting; neither holds
// Flink longer than the timeout. Once DC2 confirms again, strict's
// checkpoints complete and sync is no longer degraded.
func TestIntegration_SyncMode(t *testing.T) {
	mounttest.RequireFUSE(t)
	for _, mode := range []ReplicationMode{ReplicationStrict, ReplicationSync} {
		t.Run(string(mode), func(t *testing.T) {
			const timeout = 2 * time.Second
			c := zktest.StartCluster(t, 1)
			top := t.TempDir()
			nas1, nas2 := filepath.Join(top, "dc1"), filepath.Join(top, "dc2")
			for _, d := range []string{nas1, nas2} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			b, err := zkbridge.New(ctx, testBridgeConfig(t, c, "dc1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{}); err != nil || !rep.Activated {
				t.Fatalf("first takeover: %+v %v", rep, err)
			}
			metrics := freeAddr(t)
			dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, func(c *Config) {
				c.Replication, c.SyncTimeout, c.MetricsAddr = mode, timeout, metrics
			})
			// DC2 reads DC1's Flink paths from its own NAS (both sites
			// mount at one path in a deployment; here they differ).
			dc2 := startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, func(c *Config) {
				res, err := manifest.NewResolver([]manifest.Mapping{
					{Prefix: "file://" + c.MountPoint, Dir: nas2}, {Prefix: "file://" + dc1.mnt, Dir: nas2}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				c.Resolver = res
			})
			for deadline := time.Now().Add(10 * time.Second); os.WriteFile(filepath.Join(dc1.mnt, "probe"), nil, 0o644) != nil; {
				if time.Now().After(deadline) {
					t.Fatal("dc1's mount did not become primary")
				}
				time.Sleep(50 * time.Millisecond)
			}
			repl, err := replication.NewFileLevel(replication.Options{Source: nas1, Dest: nas2})
			if err != nil {
				t.Fatal(err)
			}
			stopRepl := func() {}
			startRepl := func() {
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); repl.Run(rctx, 50*time.Millisecond) }()
				stopRepl = func() { cancel(); <-done }
			}
			startRepl()

			fcfg := flinkemu.DefaultConfig()
			fcfg.Servers, fcfg.Layout, fcfg.Storage, fcfg.FlinkStorage = c.Servers(), flinkemu.Flink1_20, dc1.mnt, "file://"+dc1.mnt
			jm, err := flinkemu.Start(ctx, fcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer jm.Close()
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}

			// Replicated: DC2 holds each checkpoint when Flink completes it.
			replicated := func(what string) {
				t.Helper()
				cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				rel, err := filepath.Rel(dc1.mnt, cp.HAFile)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(nas2, rel)); err != nil {
					t.Errorf("%s: checkpoint %d completed while DC2 lacks its HA file: %v", what, cp.ID, err)
				}
			}
			for range 2 {
				replicated("with replication running")
			}
			degraded := func() float64 {
				t.Helper()
				m, err := scrapeSeries(metrics)
				if err != nil {
					t.Fatal(err)
				}
				d, ok := sum(m, "ckptfs_sync_degraded")
				if !ok {
					t.Fatal("no ckptfs_sync_degraded in /metrics")
				}
				return d
			}

			// DC2 stops confirming: Flink is held the timeout, no longer.
			unconfirmed := func(what string) {
				t.Helper()
				start := time.Now()
				cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				took := time.Since(start)
				switch mode {
				case ReplicationStrict:
					if !errors.Is(err, syscall.EIO) {
						t.Fatalf("strict, %s: %v, want EIO (completed: %v)", what, err, cp != nil)
					}
				case ReplicationSync:
					if err != nil {
						t.Fatalf("sync, %s: %v", what, err)
					}
					if took < timeout {
						t.Errorf("sync, %s: completed after %v, before the timeout", what, took)
					}
					if d := degraded(); d != 1 {
						t.Errorf("sync, %s: ckptfs_sync_degraded %v, want 1", what, d)
					}
					start = time.Now()
					if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil || time.Since(start) > timeout/2 {
						t.Errorf("sync, %s, degraded: %v after %v; want at once", what, err, time.Since(start))
					}
				}
				if took > timeout+5*time.Second {
					t.Errorf("%s: the close was held %v, the timeout is %v", what, took, timeout)
				}
			}
			stopRepl()
			unconfirmed("replication cut")

			// DC2 confirms again: strict's checkpoints complete, sync is
			// no longer degraded. A checkpoint degraded sync let through
			// may be acknowledged first.
			startRepl()
			if mode == ReplicationSync {
				// Degraded, this one completes at once; DC2's
				// acknowledgement of it ends the degraded state.
				if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
					t.Fatalf("sync, replication back: %v", err)
				}
				for deadline := time.Now().Add(10 * time.Second); degraded() != 0; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("sync, replication back: still degraded after 10s")
					}
				}
			}
			replicated("replication back")
			replicated("replication back")

			dc2.end(t)
			unconfirmed("DC2's daemon stopped")
			stopRepl()
		})
	}
}
