package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// errRecoveryFails is a recovery that Flink would retry forever.
var errRecoveryFails = errors.New("the recovery fails")

// recoverJob does what a Flink JobManager started on the standby site
// would do now for the drill's job (flinkemu.Restore: every retained
// pointer's HA file, then every file of the newest checkpoint, each byte
// checked), once, reading only, and prints the outcome on w.
func recoverJob(ctx context.Context, o options, w io.Writer, log *slog.Logger) error {
	st, err := readState(o.staging)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no drill under %s (no %s)", o.staging, stateFile)
	}
	if err != nil {
		return err
	}
	if err := st.check(); err != nil {
		return err
	}
	if st.JobID == "" {
		return fmt.Errorf("%s: the drill was not laid completely: -clean, then lay it again", filepath.Join(o.staging, stateFile))
	}
	addr := st.ZK
	if o.zk != "" {
		addr = o.zk
	}
	servers, err := zkbridge.ParseServers(addr)
	if err != nil {
		return fmt.Errorf("ZooKeeper %q: %w", addr, err)
	}
	layout, err := layoutOf(st.Flink)
	if err != nil {
		return err
	}
	conn, err := connect(ctx, servers, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg := flinkemu.DefaultConfig()
	cfg.Servers, cfg.Layout, cfg.Release = servers, layout, st.Flink
	cfg.PathRoot, cfg.ClusterID = st.PathRoot, st.ClusterID
	cfg.Storage, cfg.FlinkStorage = filepath.Join(o.staging, standbySite, "nas"), flinkDir
	res, err := flinkemu.Restore(conn, cfg, st.JobID, flinkemu.RestoreOptions{Attempts: 1})
	var re *flinkemu.RestoreError
	if errors.As(err, &re) {
		fmt.Fprintf(w, "Flink's recovery on %s fails: %v\n", standbySite, re.Unwrap())
		fmt.Fprintln(w, "Flink retries the same checkpoint and never falls back to an older one (FLINK-22502).")
		return errRecoveryFails
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Flink's recovery on %s restores checkpoint %d of job %s\n", standbySite, res.CheckpointID, st.JobID)
	fmt.Fprintf(w, "(retained pointers %s; %d files, %d bytes read and checked)\n", joinIDs(res.Retained), res.Files, res.Bytes)
	return nil
}
