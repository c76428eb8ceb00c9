//go:build linux

package realflink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// HarvestEnv names the directory TestHarvest writes its fixtures to, one
// subdirectory per release. A relative path is taken from the
// repository's top directory, so that
//
//	CKPTFS_HARVEST=integration/realflink/testdata go test -run TestHarvest ./integration/realflink/
//
// (make harvest) rewrites the committed fixtures.
const HarvestEnv = "CKPTFS_HARVEST"

// HarvestVersionsEnv, when set, names the releases TestHarvest runs,
// separated by spaces or commas (for example "1.4.2 1.13.6 1.14.6"), so
// that some fixtures are regenerated without the others. Each must be a
// release harvestReleases picks.
const HarvestVersionsEnv = "CKPTFS_HARVEST_VERSIONS"

// harvestRegenerate is the command recorded in every meta.json.
const harvestRegenerate = "make harvest (CKPTFS_HARVEST=integration/realflink/testdata go test -count=1 -run TestHarvest ./integration/realflink/); CKPTFS_HARVEST_VERSIONS=<release> harvests only that release"

// What the harvest runs: the failover test's settings, but a longer Flink
// ZooKeeper session so that the processes may stay stopped (SIGSTOP) for
// the dump without losing their sessions.
const (
	harvestPathRoot    = "/flink"
	harvestSession     = 15 * time.Second
	harvestInterval    = 400 * time.Millisecond
	harvestRetained    = 3
	harvestCheckpoints = 5 // completed checkpoints before the dump
	harvestStep        = 180 * time.Second
	harvestAddr        = "127.0.0.1"
	harvestCopyMax     = 128 << 10 // HA files (and blobs) up to this size are copied
	// harvestInline is the largest state chunk Flink keeps inline in
	// _metadata (and the HA file) instead of writing a file
	// (harvestInlineSetting spells it for each release). Flink's
	// default, 20 KiB, which the failover test keeps, puts all of this
	// job's state inline in 1.20.5: _metadata then references no file at
	// all, and nothing could be checked against the listing.
	harvestInline = "1kb"
	// harvestFixtureLimit bounds the whole fixture set of all releases.
	// Five releases take about 590 KB (100 to 125 KB each: the job graph
	// HA file alone is 31 to 49 KB, zk.json 11 to 16 KB); 500 KiB held
	// two.
	harvestFixtureLimit = 768 << 10
)

// TestHarvest runs each release make test runs for real
// (harvestReleases) as the failover test's DC1 does (three ZooKeeper
// servers, a ckptfs primary mount at Flink's storage path, a JobManager
// and a TaskManager with ZooKeeper HA, the state backend the harness
// gives the release: RocksDB incremental checkpoints, in 1.4 the
// filesystem backend), lets the job complete a few checkpoints, stops
// both Flink processes (alive, their ZooKeeper sessions open) and dumps
// what Flink wrote: every znode of its namespace, the HA files, the
// _metadata of every checkpoint, and a listing of every file.
// fixtures_test.go reads the result; testdata/README.md says what is in
// it.
func TestHarvest(t *testing.T) {
	out := os.Getenv(HarvestEnv)
	if out == "" {
		t.Skipf("%s is not set: TestHarvest runs real Flink and rewrites the fixtures of fixtures_test.go; run `make harvest` (%s=integration/realflink/testdata go test -run TestHarvest ./integration/realflink/)", HarvestEnv, HarvestEnv)
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(RepoRoot(), out)
	}
	releases, err := harvestReleases(t, os.Getenv(HarvestVersionsEnv))
	if err != nil {
		t.Fatal(err)
	}
	dists := make([]Dist, len(releases))
	for i, r := range releases {
		dists[i] = FindDist(t, r)
	}
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 3, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 2 * harvestSession })
	for _, d := range dists {
		t.Run(d.Version, func(t *testing.T) {
			harvestRelease(t, c, d, filepath.Join(out, d.Version))
		})
	}
	if t.Failed() {
		return
	}
	var total int64
	err = filepath.WalkDir(out, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fixtures in %s: %d bytes in all", out, total)
	if total > harvestFixtureLimit {
		t.Errorf("the fixtures take %d bytes, more than the %d they may", total, harvestFixtureLimit)
	}
}

// harvestReleases are the releases make test runs real Flink of, in
// tests of every kind (use test), in its cold failover (cold) or in tests
// of their own (tried): one release of each ZooKeeper layout family that
// runs here. only, when not empty, narrows them to the releases it names
// (HarvestVersionsEnv); naming another release is an error.
func harvestReleases(t testing.TB, only string) ([]Release, error) {
	t.Helper()
	all := releasesFor(t, "test", "cold", "tried")
	names := strings.FieldsFunc(only, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if len(names) == 0 {
		return all, nil
	}
	var out []Release
	for _, n := range names {
		i := slices.IndexFunc(all, func(r Release) bool { return r.Version == n })
		if i < 0 {
			var have []string
			for _, r := range all {
				have = append(have, r.Version)
			}
			return nil, fmt.Errorf("%s names Flink %s, which is not a release the harvest runs (use test, cold or tried in flink/versions.tsv: %s)", HarvestVersionsEnv, n, strings.Join(have, " "))
		}
		if !slices.ContainsFunc(out, func(r Release) bool { return r.Version == n }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

func harvestRelease(t *testing.T, c *zktest.Cluster, d Dist, outDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*harvestStep)
	defer cancel()
	tmp := t.TempDir()
	root := filepath.Join(tmp, "flink")
	backing := filepath.Join(tmp, "dc1", "nas")
	clusterID := "/harvest-" + strings.ReplaceAll(d.Version, ".", "_")
	uri := "file:" + root
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	site := NewSite(t, "dc1", filepath.Join(tmp, "dc1", "log"))
	mount, err := site.StartMount("ckptfs", binary, "primary", backing, root,
		"--zk", c.ConnectString(), "--cluster-id", clusterID, "--path-root", harvestPathRoot,
		"--map", uri+"="+backing, "--poll", "100ms")
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, harvestAddr, 2)
	cfg := ClusterConfig{
		Dist: d, Dir: filepath.Join(tmp, "dc1"), Addr: harvestAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: harvestPathRoot, ClusterID: clusterID, SessionTimeout: harvestSession,
		CheckpointsDir: filepath.Join(root, "checkpoints"), HADir: filepath.Join(root, "ha"),
		Interval: harvestInterval, Retained: harvestRetained,
		Extra: map[string]string{harvestInlineKey(d): harvestInlineSetting(d)},
	}
	fl, jm, tm := startCluster(t, site, cfg)
	var overview *Overview
	waitUntil(t, harvestStep, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		overview = o
		return err == nil && o.TaskManagers >= 1
	}, jm, tm)
	// The failover test's job; for 1.4-1.13 its --interval is the
	// failover test's interval, which harvestInterval equals.
	args := jobArgs(d, filepath.Join(tmp, "report.txt"))
	job, err := fl.REST.Submit(ctx, JobJar(t, d), args)
	if err != nil {
		t.Fatalf("submit the job: %v", err)
	}
	t.Logf("Flink %s: job %s submitted", d.Version, job)
	var cps *Checkpoints
	waitUntil(t, harvestStep, fmt.Sprintf("%d completed checkpoints", harvestCheckpoints), func() bool {
		cps, err = fl.REST.Checkpoints(ctx, job)
		return err == nil && cps.Counts.Completed >= harvestCheckpoints
	}, jm, tm)

	// A crash-consistent point: both processes stopped, alive, with their
	// sessions (and so their ephemeral nodes) open.
	jm.Signal(syscall.SIGSTOP)
	tm.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	resume := func() { jm.Signal(syscall.SIGCONT); tm.Signal(syscall.SIGCONT) }
	defer resume()
	ph := harvestPlaceholders{job: job, cluster: strings.Trim(clusterID, "/"), root: root, tmp: tmp}
	zc := zktest.Connect(t, c.Servers())
	ns := harvestPathRoot + clusterID
	dump, err := dumpZK(zc.Conn, ns, ph)
	if err != nil {
		t.Fatalf("dump ZooKeeper: %v", err)
	}
	files, copies, err := dumpFiles(backing, ph)
	if err != nil {
		t.Fatalf("dump the storage: %v", err)
	}
	outside, _, err := zc.Children(harvestPathRoot)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(outside)
	held := time.Since(frozen)
	resume()
	t.Logf("dumped %d znodes and %d files (%d copied) in %v with Flink stopped", len(dump.Nodes), len(files.Entries), len(copies), held.Round(time.Millisecond))
	if held > harvestSession/2 {
		t.Errorf("the dump held Flink stopped for %v, too close to its session timeout %v", held, harvestSession)
	}

	// The storage root as Flink wrote it: every pointer's HA file must lie
	// below it, else fixtures_test.go cannot map them.
	var pointers []int64
	for _, n := range dump.Nodes {
		id, ok := fixturePointerID(ns, ph.apply(n.Path), job)
		if !ok {
			continue
		}
		pointers = append(pointers, id)
		h, err := flinkha.DecodeStateHandle(n.Data)
		if err != nil {
			t.Errorf("pointer %d: %v", id, err)
			continue
		}
		if p, err := h.Path(); err != nil || !strings.HasPrefix(p, uri+"/") {
			t.Errorf("pointer %d names %s (%v), not a file below %s", id, h.URI, err, uri)
		}
	}
	if len(pointers) == 0 {
		t.Errorf("no checkpoint pointer in ZooKeeper under %s", ns)
	}
	srvr, _ := c.FourLetterWord(0, "srvr")
	zkVersion, _, _ := strings.Cut(strings.TrimPrefix(firstLine(srvr), "Zookeeper version: "), ",")
	javaVersion, _ := exec.Command(d.Java, "-version").CombinedOutput()
	settings := map[string]string{}
	for k, v := range cfg.Settings() {
		settings[k] = ph.replace(v)
	}
	var history []fixtureRESTCheckpoint
	for _, h := range cps.History {
		history = append(history, fixtureRESTCheckpoint{ID: h.ID, Status: h.Status, ExternalPath: ph.replace(h.ExternalPath), StateSize: h.StateSize, CheckpointedSize: h.CheckpointedSize})
	}
	meta := fixtureMeta{
		Release:        d.Version,
		FlinkVersion:   overview.Version,
		Harvested:      time.Now().UTC().Format("2006-01-02"),
		Regenerate:     harvestRegenerate,
		Placeholders:   ph.describe(),
		JobID:          job,
		ClusterID:      clusterID,
		PathRoot:       harvestPathRoot,
		Namespace:      ns,
		StorageRoot:    root,
		StorageRootURI: uri,
		TempDir:        tmp,
		Settings:       settings,
		JobArgs:        strings.Split(ph.replace(strings.Join(args, "\x00")), "\x00"),
		Pointers:       pointers,
		Completed:      cps.Counts.Completed,
		RESTHistory:    history,
		OutsideNS:      outside,
		Dump: fmt.Sprintf("JobManager and TaskManager stopped with SIGSTOP (alive, ZooKeeper sessions open) for %v while ZooKeeper and the backing directory of the ckptfs primary mount were read; "+
			"the mount's own %s is left out", held.Round(time.Millisecond), ".ckptfs"),
		ZooKeeper: strings.TrimSpace(zkVersion),
		Java:      firstLine(string(javaVersion)),
		Mount:     "ckptfs mount --mode primary at the storage root, its backing directory read",
	}
	if err := writeFixture(outDir, meta, dump, files, copies); err != nil {
		t.Fatal(err)
	}
	t.Logf("Flink %s: fixture written to %s (pointers %v)", d.Version, outDir, pointers)
	jm.Stop()
	tm.Stop()
	mount.Stop()
}

// harvestInlineKey is the inline threshold's key in the release's own
// spelling, as each distribution's classes hold it:
//
//   - 1.4: FsStateBackendFactory.MEMORY_THRESHOLD_CONF_KEY,
//     "state.backend.fs.memory-threshold", read with
//     Configuration.getInteger (flink-runtime_2.11-1.4.2.jar); 1.5 to 1.12
//     moved it to CheckpointingOptions.FS_SMALL_FILE_THRESHOLD under the
//     same key (aixuebo/flink-1.6: flink-runtime/.../filesystem/
//     FsStateBackendFactory.java reads CheckpointingOptions;
//     flink-dist_2.11-1.12.5.jar's CheckpointingOptions has only that key);
//   - 1.13 to 1.20: FS_SMALL_FILE_THRESHOLD is
//     "state.storage.fs.memory-threshold", with
//     "state.backend.fs.memory-threshold" as its deprecated key (the
//     CheckpointingOptions of flink-dist 1.13.6, 1.14.6 and 1.15.4; 1.20
//     renamed it execution.checkpointing.data-inline-threshold and still
//     reads this one);
//   - 2.x: "execution.checkpointing.data-inline-threshold" (2.x removed
//     the 1.x names).
func harvestInlineKey(d Dist) string {
	switch {
	case d.AtLeast(2, 0):
		return "execution.checkpointing.data-inline-threshold"
	case d.AtLeast(1, 13):
		return "state.storage.fs.memory-threshold"
	}
	return "state.backend.fs.memory-threshold"
}

// harvestInlineSetting is harvestInline as the release reads it: Flink
// 1.4 reads the threshold with Configuration.getInteger, a number of
// bytes ("1kb" is no integer), the releases from 1.13 on as a MemorySize
// (CheckpointingOptions.FS_SMALL_FILE_THRESHOLD is a
// ConfigOption<MemorySize>).
func harvestInlineSetting(d Dist) string {
	if !d.AtLeast(1, 13) {
		return "1024"
	}
	return harvestInline
}

// dumpZK reads every znode at and below ns, with its ZooKeeper times and
// transaction ids.
func dumpZK(conn *zk.Conn, ns string, ph harvestPlaceholders) (*fixtureZK, error) {
	d := &fixtureZK{Namespace: ph.replace(ns)}
	sessions := map[int64]string{}
	var walk func(p string) error
	walk = func(p string) error {
		data, stat, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", p, err)
		}
		n := fixtureZNode{Path: ph.replace(p), Data: data, Size: len(data), Version: stat.Version, NumChildren: stat.NumChildren,
			Ctime: stat.Ctime, Mtime: stat.Mtime, Czxid: stat.Czxid, Mzxid: stat.Mzxid, Pzxid: stat.Pzxid}
		switch owner := stat.EphemeralOwner; {
		case owner == 0:
			n.Kind = "persistent"
		case uint64(owner) == 1<<63:
			n.Kind = "container"
		case uint64(owner)>>56 == 0xff:
			n.Kind = "ttl"
		default:
			n.Kind, n.Ephemeral = "ephemeral", true
			if sessions[owner] == "" {
				sessions[owner] = fmt.Sprintf("session-%d", len(sessions)+1)
				d.Sessions = append(d.Sessions, sessions[owner])
			}
			n.Session = sessions[owner]
		}
		n.Sequential = zkSequential(p)
		if fixturePrintable(data) {
			n.Text = string(data)
		}
		d.Nodes = append(d.Nodes, n)
		kids, _, err := conn.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("children of %s: %w", p, err)
		}
		slices.Sort(kids)
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		return nil
	}
	return d, walk(ns)
}

// zkSequential reports a name ending in ZooKeeper's %010d sequence suffix
// after the dash of the prefix every sequential node here has (Curator's
// "latch-", ckptfs's "lock-"). Names of hex ids (a job id, a UUID, a job's
// leader node job-<id>) are never sequential, even when their last ten
// hex digits happen to be decimal ones (about one job id in 300).
func zkSequential(p string) bool {
	name := p[strings.LastIndexByte(p, '/')+1:]
	if len(name) <= 10 || name[len(name)-11] != '-' {
		return false
	}
	for _, r := range name[len(name)-10:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func fixturePrintable(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// dumpFiles lists every file and directory below backing (but ckptfs's
// own .ckptfs) with its modification time and picks the files to copy: every _metadata, and the HA
// files (blobs too: a takeover checks their SHA-1) of at most harvestCopyMax bytes.
func dumpFiles(backing string, ph harvestPlaceholders) (*fixtureFiles, map[string][]byte, error) {
	l := &fixtureFiles{Root: phRoot}
	copies := map[string][]byte{} // fixture path -> content
	err := filepath.WalkDir(backing, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(backing, p)
		if err != nil || rel == "." {
			return err
		}
		if rel == ".ckptfs" {
			return filepath.SkipDir
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		ent := fixtureFile{Path: ph.replace(filepath.ToSlash(rel)), Mtime: fi.ModTime().UnixNano()}
		switch {
		case e.IsDir():
			ent.Dir = true
		case !fi.Mode().IsRegular():
			ent.Other = fi.Mode().Type().String()
		default:
			ent.Size = fi.Size()
			base := filepath.Base(p)
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if base == "_metadata" || top == "ha" && fi.Size() <= harvestCopyMax {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if int64(len(data)) != fi.Size() {
					return fmt.Errorf("%s changed while it was read (%d bytes, listed %d)", p, len(data), fi.Size())
				}
				ent.Copied = true
				copies[ent.Path] = data
			}
		}
		l.Entries = append(l.Entries, ent)
		return nil
	})
	return l, copies, err
}

// writeFixture replaces outDir by the fixture: meta.json, zk.json,
// files.json and the copied files under storage/.
func writeFixture(outDir string, meta fixtureMeta, dump *fixtureZK, files *fixtureFiles, copies map[string][]byte) error {
	if _, err := os.Stat(outDir); err == nil {
		if _, err := os.Stat(filepath.Join(outDir, "meta.json")); err != nil {
			return fmt.Errorf("%s exists and holds no meta.json: not replacing it", outDir)
		}
		if err := os.RemoveAll(outDir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for name, v := range map[string]any{"meta.json": meta, "zk.json": dump, "files.json": files} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(outDir, name), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	for rel, data := range copies {
		dst := filepath.Join(outDir, fixtureStorage, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestZkSequential(t *testing.T) {
	for p, want := range map[string]bool{
		"/flink/c/leader/_c_4f1e2a4b-1c2d-4e5f-8a9b-0a1b2c3d4e5f-latch-0000000003":                   true,
		"/flink/c/jobs/j/checkpoints/0000000000000000004/locks/4f1e2a4b-1c2d-4e5f-8a9b-ab0123456789": false,
		"/flink/c/jobs/j/checkpoints/0000000000000000004/locks/4f1e2a4b-1c2d-4e5f-8a9b-0a1b2c3d4e5f": false,
		"/flink/c/jobs/j/checkpoints/0000000000000000004":                                            false,
		"/flink/c/checkpoint-counter": false,
	} {
		if got := zkSequential(p); got != want {
			t.Errorf("zkSequential(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestZKSequential: sequential names have the prefix's dash before the ten
// digits; ids whose last ten hex digits are decimal are not sequential.
func TestZKSequential(t *testing.T) {
	for p, want := range map[string]bool{
		"/flink/c/leaderlatch/_c_123e4567-e89b-12d3-a456-426614174000-latch-0000000003": true,
		"/ckptfs/c/takeover/_c_0a1b-lock-0000000001":                                    true,
		"/flink/c/execution-plans/3f1b2c4d5e6f7a8b9c0d1f1234567890":                     false,
		"/flink/c/leader/job-3f1b2c4d5e6f7a8b9c0d1f1234567890":                          false,
		"/flink/c/jobs/j/checkpoints/1/locks/123e4567-e89b-12d3-a456-421234567890":      false,
		"/flink/c/jobs/j/checkpoints/0000000000000000001":                               false,
	} {
		if got := zkSequential(p); got != want {
			t.Errorf("zkSequential(%s) = %v, want %v", p, got, want)
		}
	}
}
