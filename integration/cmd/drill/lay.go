package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/zkbridge"
)

const (
	// activeSite and standbySite name the drill's two sites.
	activeSite  = "dc1"
	standbySite = "dc2"
	// flinkDir is where Flink's directories are on every site, as in
	// docs/deploy.md: the paths Flink stores are under it, written as
	// Flink writes them (file:/x for file:///x). flinkURI is the same as
	// Flink's configuration and ckptfs's settings spell it.
	flinkDir = "file:/flink"
	flinkURI = "file:///flink"
	// flinkSessionTimeout is the emulated JobManager's ZooKeeper session
	// timeout, and the configuration's flink-session-timeout.
	flinkSessionTimeout = 10 * time.Second
	// checkpoints are the checkpoints the job completes; retained of them
	// keep their pointers.
	checkpoints = 4
	retained    = 3
	// interval is the time between the checkpoints' trigger timestamps.
	interval = time.Minute
	// stateFile is what the drill records under -staging.
	stateFile = "drill.json"
)

// state is what a drill laid, in drill.json: -clean and -replace remove
// exactly this.
type state struct {
	Format    int       `json:"format"`
	LaidAt    time.Time `json:"laid_at"`
	ZK        string    `json:"zk"`
	PathRoot  string    `json:"path_root"`
	ClusterID string    `json:"cluster_id"`
	// Flink is the emulated release.
	Flink string `json:"flink"`
	// Znodes are the trees laid: Flink's namespace and ckptfs's znode of
	// the cluster. PathRootCreated: the path root did not exist before,
	// CkptfsRootCreated: neither did /ckptfs; -clean removes each when
	// nothing else is below it.
	Znodes            []string `json:"znodes"`
	PathRootCreated   bool     `json:"path_root_created"`
	CkptfsRootCreated bool     `json:"ckptfs_root_created"`
	// Dirs are the directories laid, relative to -staging;
	// StagingCreated: the drill created -staging itself.
	Dirs           []string `json:"dirs"`
	StagingCreated bool     `json:"staging_created"`
	JobID          string   `json:"job_id"`
}

// drill is a laid rehearsal and the commands that walk through it.
type drill struct {
	opts    options
	st      state
	layout  flinkemu.Layout
	ns      string // Flink's namespace
	ckptfsZ string // ckptfs's znode of the cluster
	primary string // dc1/nas
	replica string // dc2/nas
	config  string // dc2/ckptfs.yaml
	// pointers are the retained checkpoint ids, ascending; missing the
	// file of the newest that the replica lacks.
	pointers []int64
	missing  string
	steps    []step
}

// step is one command of the drill and what it shows.
type step struct {
	// name identifies the step for the test.
	name  string
	title string
	// cmd is a shell command line; exit its exit status.
	cmd  string
	exit int
	// shows are lines, or parts of lines, of what cmd prints.
	shows []string
	note  string
}

// lay lays the drill out and returns it.
func lay(ctx context.Context, o options, log *slog.Logger) (*drill, error) {
	layout, _ := layoutOf(o.flink)
	d := &drill{
		opts: o, layout: layout,
		ns:      strings.TrimRight(o.pathRoot, "/") + "/" + o.clusterID,
		ckptfsZ: zkbridge.DefaultConfig().CkptfsRoot + "/" + o.clusterID,
		primary: filepath.Join(o.staging, activeSite, "nas"),
		replica: filepath.Join(o.staging, standbySite, "nas"),
		config:  filepath.Join(o.staging, standbySite, "ckptfs.yaml"),
	}
	servers, _ := zkbridge.ParseServers(o.zk)
	// Everything is checked before anything is changed: a refusal
	// leaves the directory and ZooKeeper as they were.
	prev, missing, err := inspectStaging(o)
	if err != nil {
		return nil, err
	}
	conn, err := connect(ctx, servers, log)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var existing []string
	for _, z := range []string{d.ns, d.ckptfsZ} {
		ok, _, err := conn.Exists(z)
		if err != nil {
			return nil, fmt.Errorf("ZooKeeper %s: %w", z, err)
		}
		if ok && !o.replace {
			return nil, fmt.Errorf("%s already exists in ZooKeeper: choose another -cluster-id or -path-root, or -replace to delete it first", z)
		}
		if ok {
			existing = append(existing, z)
		}
	}
	created := missing
	if prev != nil {
		log.Info("removing the previous drill", "staging", o.staging)
		if err := removeLaid(ctx, o.staging, *prev, prev.ZK, log, io.Discard); err != nil {
			return nil, err
		}
		created = prev.StagingCreated
	}
	for _, z := range existing {
		log.Info("deleting", "znode", z)
		if err := deleteTree(conn, z); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.staging, 0o755); err != nil {
		return nil, err
	}
	rootExists, _, err := conn.Exists(o.pathRoot)
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper %s: %w", o.pathRoot, err)
	}
	ckptfsRoot := zkbridge.DefaultConfig().CkptfsRoot
	ckptfsExists, _, err := conn.Exists(ckptfsRoot)
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper %s: %w", ckptfsRoot, err)
	}
	// Recorded before anything is laid, so that -clean finds a drill
	// that failed halfway.
	d.st = state{
		Format: 1, LaidAt: time.Now().UTC().Truncate(time.Second), ZK: o.zk, PathRoot: o.pathRoot, ClusterID: o.clusterID, Flink: o.flink,
		Znodes: []string{d.ns, d.ckptfsZ}, PathRootCreated: !rootExists, CkptfsRootCreated: !ckptfsExists,
		Dirs: []string{activeSite, standbySite}, StagingCreated: created,
	}
	if err := writeState(o.staging, d.st); err != nil {
		return nil, err
	}
	if err := d.layFlink(ctx, servers, log); err != nil {
		return nil, err
	}
	if err := writeState(o.staging, d.st); err != nil {
		return nil, err
	}
	log.Info("replicating to the standby site, but one file", "from", d.primary, "to", d.replica, "missing", d.missing)
	if err := replicate(d.primary, d.replica, d.missing); err != nil {
		return nil, err
	}
	if err := d.writeConfig(); err != nil {
		return nil, err
	}
	d.steps = d.plan()
	return d, nil
}

// layFlink runs an emulated JobManager on the active site: it submits
// one job, completes its checkpoints into the primary NAS and is lost,
// its session closed, as when its site dies.
func (d *drill) layFlink(ctx context.Context, servers []string, log *slog.Logger) error {
	cfg := flinkemu.DefaultConfig()
	cfg.Servers, cfg.SessionTimeout = servers, flinkSessionTimeout
	cfg.Layout, cfg.Release = d.layout, d.opts.flink
	cfg.PathRoot, cfg.ClusterID = d.opts.pathRoot, d.opts.clusterID
	cfg.Storage, cfg.FlinkStorage = d.primary, flinkDir
	cfg.Host = "jm-" + activeSite + ":6123"
	cfg.Retained = retained
	cfg.MetadataInProgress = d.layout >= flinkemu.Flink1_17
	cfg.Logger = log
	if err := os.MkdirAll(d.primary, 0o755); err != nil {
		return err
	}
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("the emulated JobManager: %w", err)
	}
	defer jm.Close()
	d.st.JobID = flinkemu.NewJobID()
	if err := jm.SubmitJob(d.st.JobID); err != nil {
		return fmt.Errorf("submitting job %s: %w", d.st.JobID, err)
	}
	start := time.Now().Add(-checkpoints * interval).Truncate(time.Second)
	var last *flinkemu.Checkpoint
	for i := range checkpoints {
		spec := flinkemu.CheckpointSpec{SharedSizes: []int{4096, 8192}, KeepShared: 1, Timestamp: start.Add(time.Duration(i) * interval)}
		if last, err = jm.CompleteCheckpoint(d.st.JobID, spec); err != nil {
			return fmt.Errorf("checkpoint %d of job %s: %w", i+1, d.st.JobID, err)
		}
		log.Info("checkpoint complete on the active site", "job", d.st.JobID, "checkpoint", last.ID)
	}
	for _, cp := range jm.Checkpoints(d.st.JobID) {
		d.pointers = append(d.pointers, cp.ID)
	}
	if len(last.NewSharedFiles) == 0 {
		return errors.New("the newest checkpoint wrote no shared file")
	}
	d.missing = last.NewSharedFiles[0]
	log.Info("the active site is lost: closing its JobManager's session")
	return nil
}

// writeConfig writes the standby site's configuration, as `ckptfs config
// from-flink --site dc2 --backing <replica>` would for the drill's Flink.
func (d *drill) writeConfig() error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ckptfs settings of the DR rehearsal's standby site, laid by drill\n")
	fmt.Fprintf(&b, "# on %s. Not for production: remove with drill -clean.\n", d.st.LaidAt.Format(time.RFC3339))
	fmt.Fprintf(&b, "site: %s\n", standbySite)
	fmt.Fprintf(&b, "zk: %s\n", yamlString(d.opts.zk))
	fmt.Fprintf(&b, "path-root: %s\n", yamlString(d.opts.pathRoot))
	fmt.Fprintf(&b, "cluster-id: %s\n", yamlString("/"+d.opts.clusterID))
	fmt.Fprintf(&b, "flink-session-timeout: %s\n", flinkSessionTimeout)
	if d.layout == flinkemu.Flink1_14 {
		fmt.Fprintf(&b, "# Without live locks ZooKeeper cannot tell 1.14 from 1.15+.\n")
		fmt.Fprintf(&b, "flink-version: %s\n", yamlString(d.opts.flink))
	}
	fmt.Fprintf(&b, "checkpoints-dir: [%s]\n", yamlString(flinkURI+"/checkpoints"))
	fmt.Fprintf(&b, "# Flink stored paths under %s; on this site they are in the replica.\n", flinkURI)
	fmt.Fprintf(&b, "map: [%s]\n", yamlString(flinkURI+"="+d.replica))
	return os.WriteFile(d.config, []byte(b.String()), 0o644)
}

// yamlString quotes s for YAML (a JSON string is a YAML one).
func yamlString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// layoutOf finds the emulated layout of a Flink release, 1.11 or later
// (the emulator writes _metadata version 3 and up, which 1.11 introduced).
func layoutOf(release string) (flinkemu.Layout, error) {
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err == nil && (major == 1 && minor >= 11 || major == 2) {
		for _, l := range flinkemu.Layouts() {
			cfg := flinkemu.DefaultConfig()
			cfg.Servers, cfg.Storage = []string{"localhost:2181"}, "/"
			cfg.Layout, cfg.Release = l, release
			if cfg.Validate() == nil {
				return l, nil
			}
		}
	}
	return 0, fmt.Errorf("-flink %q: want a release from 1.11 to 2.x as MAJOR.MINOR", release)
}

// inspectStaging checks that -staging is absent (missing), empty, or,
// with -replace, holds a previous drill and nothing else (prev). It
// changes nothing.
func inspectStaging(o options) (prev *state, missing bool, err error) {
	entries, err := os.ReadDir(o.staging)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	case len(entries) == 0:
		return nil, false, nil
	}
	st, err := readState(o.staging)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("%s is not empty and holds no drill (%s): give an empty or new directory", o.staging, stateFile)
	}
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		if e.Name() != stateFile && !slices.Contains(st.Dirs, e.Name()) {
			return nil, false, fmt.Errorf("%s holds %s, which the drill did not lay: give an empty or new directory", o.staging, e.Name())
		}
	}
	if !o.replace {
		return nil, false, fmt.Errorf("%s holds the drill laid at %s (namespace %s/%s): -clean removes it, -replace lays a new one instead",
			o.staging, st.LaidAt.Format(time.RFC3339), st.PathRoot, st.ClusterID)
	}
	if err := st.check(); err != nil {
		return nil, false, err
	}
	return &st, false, nil
}

func writeState(dir string, st state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+stateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

func readState(dir string) (state, error) {
	var st state
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	if st.Format != 1 {
		return st, fmt.Errorf("%s: format %d, want 1", filepath.Join(dir, stateFile), st.Format)
	}
	return st, nil
}

// replicate copies the tree src to dst, as a replication that has not
// yet copied skip.
func replicate(src, dst, skip string) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			return os.MkdirAll(target, info.Mode().Perm())
		case path == skip:
			return nil
		case !info.Mode().IsRegular():
			return fmt.Errorf("%s: not a regular file", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(target, info.ModTime(), info.ModTime())
	})
}
