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
// running, each completes only once DC2 holds it; with replication cut,
// strict fails the checkpoint's HA file close after the timeout (no
// pointer), and sync lets it complete after the timeout, then without
// waiting until DC2 acknowledges again.
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
			dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, func(c *Config) {
				c.Replication, c.SyncTimeout = mode, timeout
			})
			// DC2 reads DC1's Flink paths from its own NAS (both sites
			// mount at one path in a deployment; here they differ).
			startSiteDaemon(t, c, "dc2", nas2, fusefs.ModeReplica, func(c *Config) {
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
			rctx, stopRepl := context.WithCancel(ctx)
			replDone := make(chan struct{})
			go func() { defer close(replDone); repl.Run(rctx, 50*time.Millisecond) }()

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
			for range 2 {
				cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				if err != nil {
					t.Fatalf("with replication running: %v", err)
				}
				rel, err := filepath.Rel(dc1.mnt, cp.HAFile)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(nas2, rel)); err != nil {
					t.Errorf("checkpoint %d completed while DC2 lacks its HA file: %v", cp.ID, err)
				}
			}

			// Replication cut.
			stopRepl()
			<-replDone
			start := time.Now()
			cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
			took := time.Since(start)
			switch mode {
			case ReplicationStrict:
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("strict, DC2 cut off: %v, want EIO (completed: %v)", err, cp != nil)
				}
			case ReplicationSync:
				if err != nil {
					t.Fatalf("sync, DC2 cut off: %v", err)
				}
				if took < timeout {
					t.Errorf("sync, DC2 cut off: completed after %v, before the timeout", took)
				}
				start = time.Now()
				if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil || time.Since(start) > timeout/2 {
					t.Errorf("sync, degraded: %v after %v; want at once", err, time.Since(start))
				}
			}
			if took > timeout+5*time.Second {
				t.Errorf("DC2 cut off: the close was held %v, the timeout is %v", took, timeout)
			}
		})
	}
}
