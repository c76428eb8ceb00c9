//go:build linux

package realflink

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// CorpusEnv names the directory TestCorpus writes its entries to
// (<release>/<kind>/); a relative path is taken from the repository's top
// directory. make corpus sets it to the committed corpus,
// integration/flinkdata/corpus. CorpusVersionsEnv lists the releases
// (default: those marked test in flink/versions.tsv) and CorpusKindsEnv the
// kinds (default: all that the release can write).
const (
	CorpusEnv         = "CKPTFS_CORPUS"
	CorpusVersionsEnv = "CKPTFS_CORPUS_VERSIONS"
	CorpusKindsEnv    = "CKPTFS_CORPUS_KINDS"
)

const corpusRegenerate = "make corpus (CKPTFS_CORPUS=integration/flinkdata/corpus go test -count=1 -run TestCorpus ./integration/realflink/)"

// corpusKind is one kind of checkpoint the corpus holds: the settings
// and job options that make real Flink write it.
type corpusKind struct {
	name string
	// since is the oldest release that writes the kind (major, minor).
	since [2]int
	// settings are the kind's Flink settings ({root}: the storage root).
	settings func(d Dist) map[string]string
	args     []string
	// checkpoints to complete before the dump; savepoints to take
	// (CANONICAL, NATIVE) once they have.
	checkpoints int
	savepoints  []string
	// interval overrides corpusInterval; onlyNamed kinds run only when
	// CorpusKindsEnv names them (they are too large to commit).
	interval  time.Duration
	onlyNamed bool
}

func corpusKinds() []corpusKind {
	pick := func(d Dist, old, current string, since [2]int) string {
		if d.AtLeast(since[0], since[1]) {
			return current
		}
		return old
	}
	backend := func(kind string) func(d Dist) map[string]string {
		return func(d Dist) map[string]string {
			return map[string]string{pick(d, "state.backend", "state.backend.type", [2]int{1, 17}): kind}
		}
	}
	with := func(base func(d Dist) map[string]string, more func(d Dist) map[string]string) func(d Dist) map[string]string {
		return func(d Dist) map[string]string {
			s := base(d)
			for k, v := range more(d) {
				s[k] = v
			}
			return s
		}
	}
	incremental := func(on bool) func(d Dist) map[string]string {
		return func(d Dist) map[string]string {
			return map[string]string{pick(d, "state.backend.incremental", "execution.checkpointing.incremental", [2]int{2, 0}): strconv.FormatBool(on)}
		}
	}
	rocksIncr := with(backend("rocksdb"), incremental(true))
	// The state.changelog.* names are 1.20's (StateChangelogOptions);
	// 1.15-1.19 know only state.backend.changelog.* and ignore them.
	changelog := with(backend("hashmap"), func(d Dist) map[string]string {
		return map[string]string{
			pick(d, "state.backend.changelog.enabled", "state.changelog.enabled", [2]int{1, 20}): "true",
			pick(d, "state.backend.changelog.storage", "state.changelog.storage", [2]int{1, 20}): "filesystem",
			"dstl.dfs.base-path": "file://{root}/changelog",
			pick(d, "state.backend.changelog.periodic-materialize.interval", "state.changelog.periodic-materialize.interval", [2]int{1, 20}): "2 s",
		}
	})
	return []corpusKind{
		{name: "hashmap", since: [2]int{1, 15}, settings: backend("hashmap"), checkpoints: 3, savepoints: []string{"CANONICAL"}},
		{name: "rocksdb-full", since: [2]int{1, 15}, settings: with(backend("rocksdb"), incremental(false)), checkpoints: 3},
		{name: "rocksdb-incremental", since: [2]int{1, 15}, settings: rocksIncr, checkpoints: 7, savepoints: []string{"CANONICAL", "NATIVE"}},
		{name: "changelog", since: [2]int{1, 15}, settings: changelog, checkpoints: 6},
		// Snappy-framed DSTL files (StateChangeFsUploader): their length
		// is not their handle's size, which counts uncompressed bytes.
		{name: "changelog-compressed", since: [2]int{1, 15}, settings: with(changelog, func(d Dist) map[string]string {
			return map[string]string{"dstl.dfs.compression.enabled": "true"}
		}), checkpoints: 6},
		// The same with 1 KiB values: DSTL files of several 64 KiB
		// chunks.
		{name: "changelog-compressed-chunks", since: [2]int{1, 15}, settings: with(changelog, func(d Dist) map[string]string {
			return map[string]string{"dstl.dfs.compression.enabled": "true"}
		}), args: []string{"--payload", "1024"}, checkpoints: 4},
		// The in-memory changelog storage (flink-runtime's
		// InMemoryStateChangelogStorageFactory): the changes ride inline in
		// _metadata, as InMemoryChangelogStateHandle (tag 9).
		{name: "changelog-memory", since: [2]int{1, 15}, settings: with(changelog, func(d Dist) map[string]string {
			return map[string]string{pick(d, "state.backend.changelog.storage", "state.changelog.storage", [2]int{1, 20}): "memory"}
		}), checkpoints: 6},
		{name: "file-merging", since: [2]int{1, 20}, settings: with(rocksIncr, func(d Dist) map[string]string {
			return map[string]string{"execution.checkpointing.file-merging.enabled": "true"}
		}), checkpoints: 5},
		{name: "file-merging-across", since: [2]int{1, 20}, settings: with(rocksIncr, func(d Dist) map[string]string {
			return map[string]string{"execution.checkpointing.file-merging.enabled": "true", "execution.checkpointing.file-merging.across-checkpoint-boundary": "true"}
		}), checkpoints: 5},
		{name: "unaligned", since: [2]int{1, 15}, settings: with(backend("hashmap"), func(d Dist) map[string]string {
			return map[string]string{pick(d, "execution.checkpointing.unaligned", "execution.checkpointing.unaligned.enabled", [2]int{1, 20}): "true"}
		}), args: []string{"--slow-ms", "8"}, checkpoints: 4},
		{name: "finished-broadcast", since: [2]int{1, 15}, settings: rocksIncr, args: []string{"--broadcast", "8"}, checkpoints: 4},
		{name: "forst", since: [2]int{2, 0}, settings: backend("forst"), checkpoints: 5, savepoints: []string{"NATIVE"}},
		// ForSt keeps the state of synchronous state APIs (the seqjob's)
		// local unless told otherwise; then its primary directory is the
		// checkpoint directory (state.backend.forst.primary-dir's default).
		{name: "forst-remote", since: [2]int{2, 0}, settings: with(backend("forst"), func(d Dist) map[string]string {
			return map[string]string{"state.backend.forst.sync.enforce-local": "false"}
		}), checkpoints: 5},
		// For the benchmarks (BenchmarkVerifyRealCheckpoint): a RocksDB
		// incremental checkpoint with more than 1,000 shared files. FIFO
		// compaction never merges SST files, and each of 8 subtasks
		// flushes one per checkpoint.
		{name: "rocksdb-many", since: [2]int{1, 15}, settings: with(rocksIncr, func(d Dist) map[string]string {
			return map[string]string{"state.backend.rocksdb.compaction.style": "FIFO", "taskmanager.numberOfTaskSlots": "8"}
		}), args: []string{"--parallelism", "8", "--keys", "512"}, checkpoints: 140, interval: 250 * time.Millisecond, onlyNamed: true},
	}
}

// TestCorpus runs real Flink once per release and kind (corpusKinds) and
// writes what it wrote: every checkpoint, savepoint, changelog and HA
// file of the storage, with corpus.json saying how it was made. The
// corpus is read by the tests that walk real Flink data
// (flinkdata.Corpus); flinkdata/corpus/README.md describes it.
func TestCorpus(t *testing.T) {
	out := os.Getenv(CorpusEnv)
	if out == "" {
		t.Skipf("%s is not set: TestCorpus runs real Flink and rewrites the corpus; run `make corpus`", CorpusEnv)
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(RepoRoot(), out)
	}
	var releases []Release
	if v := os.Getenv(CorpusVersionsEnv); v != "" {
		all, err := Releases()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if slices.Contains(strings.Fields(v), r.Version) {
				releases = append(releases, r)
			}
		}
	} else {
		releases = TestReleases(t)
	}
	kinds := corpusKinds()
	if v := os.Getenv(CorpusKindsEnv); v != "" {
		kinds = slices.DeleteFunc(kinds, func(k corpusKind) bool { return !slices.Contains(strings.Fields(v), k.name) })
	} else {
		kinds = slices.DeleteFunc(kinds, func(k corpusKind) bool { return k.onlyNamed })
	}
	spa := os.Getenv(CorpusKindsEnv) == "" || slices.Contains(strings.Fields(os.Getenv(CorpusKindsEnv)), "spa")
	RequireRoot(t)
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 2 * harvestSession })
	for _, r := range releases {
		d := FindDist(t, r)
		for _, k := range kinds {
			if !d.AtLeast(k.since[0], k.since[1]) {
				continue
			}
			t.Run(d.Version+"/"+k.name, func(t *testing.T) {
				corpusRun(t, c, d, k, filepath.Join(out, d.Version, k.name))
			})
		}
		if spa {
			t.Run(d.Version+"/spa", func(t *testing.T) { corpusSPA(t, d, filepath.Join(out, d.Version, "spa")) })
		}
	}
}

// spaReleases: Maven Central has no flink-state-processor-api of these
// releases; the corpus uses the newest one published of the same minor
// line (checked 2026-12-04).
var spaReleases = map[string]string{"1.19.3": "1.19.1", "1.20.5": "1.20.0", "2.0.2": "2.0.0", "2.1.3": "2.1.0", "2.2.1": "2.2.0"}

// corpusSPA writes a savepoint with the State Processor API
// (spa/SpaWriter.java: SavepointWriter, keyed state for the seqjob's
// state operator) in an embedded MiniCluster of the release, with the
// flink-state-processor-api jar Maven's own client fetches.
func corpusSPA(t *testing.T, d Dist, outDir string) {
	ver := d.Version
	if v, ok := spaReleases[ver]; ok {
		ver = v
	}
	artifact := "org.apache.flink:flink-state-processor-api:" + ver
	if b, err := exec.Command("mvn", "-q", "-B", "dependency:get", "-Dartifact="+artifact, "-Dtransitive=false").CombinedOutput(); err != nil {
		t.Fatalf("mvn dependency:get %s: %v\n%s", artifact, err, tail(string(b), 20))
	}
	home, _ := os.UserHomeDir()
	jar := filepath.Join(home, ".m2", "repository", "org", "apache", "flink", "flink-state-processor-api", ver, "flink-state-processor-api-"+ver+".jar")
	tmp := t.TempDir()
	root := filepath.Join(tmp, "flink")
	classes := filepath.Join(tmp, "classes")
	release := "8"
	if d.AtLeast(2, 0) {
		release = "11"
	}
	cp := filepath.Join(d.Home, "lib", "*") + ":" + jar
	src := filepath.Join(RepoRoot(), "integration", "realflink", "spa", "src", "ckptfs", "spa", "SpaWriter.java")
	if b, err := exec.Command("javac", "--release", release, "-nowarn", "-cp", cp, "-d", classes, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, b)
	}
	dir := filepath.Join(root, "savepoints", "spa")
	args := []string{"file://" + dir, "16", harvestInlineKey(d) + "=0"}
	java := append(append([]string{}, jvmModuleFlags...), "-Xmx512m", "-cp", classes+":"+cp, "ckptfs.spa.SpaWriter")
	if b, err := exec.Command(d.Java, append(java, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("SpaWriter: %v\n%s", err, tail(string(b), 30))
	}
	if err := corpusCopy(root, filepath.Join(outDir+".new", "storage")); err != nil {
		t.Fatal(err)
	}
	javaVersion, _ := exec.Command(d.Java, "-version").CombinedOutput()
	ph := strings.NewReplacer(root, "{root}", tmp, "{tmp}")
	for i := range args {
		args[i] = ph.Replace(args[i])
	}
	e := flinkdata.Entry{
		Release: d.Version, FlinkVersion: d.Version + " (flink-state-processor-api " + ver + ")", Kind: "spa", Made: time.Now().UTC().Format("2006-01-02"),
		Regenerate: corpusRegenerate, Settings: map[string]string{harvestInlineKey(d): "0"},
		JobArgs: append([]string{"ckptfs.spa.SpaWriter"}, args...), Java: firstLine(string(javaVersion)),
		StorageRootURI: "file:" + root, Savepoints: []flinkdata.Savepoint{{Dir: "savepoints/spa", Format: "SPA"}},
		Dump: "SavepointWriter in an embedded MiniCluster (java -cp lib/*:flink-state-processor-api.jar), its savepoint directory copied after the job ended",
	}
	if err := corpusFinish(outDir, &e); err != nil {
		t.Fatal(err)
	}
	t.Logf("Flink %s spa (%s): metadata versions %v", d.Version, ver, e.MetadataVersions)
}

const (
	corpusStep     = 180 * time.Second
	corpusInterval = 700 * time.Millisecond
	corpusRetained = 3
	corpusAddr     = "127.0.0.1"
	corpusPathRoot = "/flink"
)

func corpusRun(t *testing.T, c *zktest.Cluster, d Dist, k corpusKind, outDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*corpusStep)
	defer cancel()
	tmp := t.TempDir()
	root := filepath.Join(tmp, "flink")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	clusterID := "/corpus-" + strings.ReplaceAll(d.Version, ".", "_") + "-" + k.name
	site := NewSite(t, "dc1", filepath.Join(tmp, "log"))
	ports := freePorts(t, corpusAddr, 2)
	extra := map[string]string{harvestInlineKey(d): "0"}
	for key, v := range k.settings(d) {
		extra[key] = strings.ReplaceAll(v, "{root}", root)
	}
	cfg := ClusterConfig{
		Dist: d, Dir: filepath.Join(tmp, "dc1"), Addr: corpusAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: corpusPathRoot, ClusterID: clusterID, SessionTimeout: harvestSession,
		CheckpointsDir: filepath.Join(root, "checkpoints"), HADir: filepath.Join(root, "ha"),
		Interval: cmp.Or(k.interval, corpusInterval), Retained: corpusRetained, Extra: extra,
	}
	fl, jm, tm := startCluster(t, site, cfg)
	var overview *Overview
	waitUntil(t, corpusStep, "the TaskManager to register", func() bool {
		o, err := fl.REST.Overview(ctx)
		overview = o
		return err == nil && o.TaskManagers >= 1
	}, jm, tm)
	args := append([]string{"--report", filepath.Join(tmp, "report.txt"), "--rate", "200", "--keys", "16", "--parallelism", "2"}, k.args...)
	job, err := fl.REST.Submit(ctx, JobJar(t, d), args)
	if err != nil {
		t.Fatalf("submit the job: %v", err)
	}
	waitUntil(t, corpusStep, fmt.Sprintf("%d completed checkpoints", k.checkpoints), func() bool {
		cps, err := fl.REST.Checkpoints(ctx, job)
		return err == nil && cps.Counts.Completed >= k.checkpoints
	}, jm, tm)
	var savepoints []flinkdata.Savepoint
	for _, format := range k.savepoints {
		loc, err := corpusSavepoint(ctx, fl.REST, job, "file://"+filepath.Join(root, "savepoints"), format)
		if err != nil {
			t.Fatalf("%s savepoint: %v", format, err)
		}
		rel, err := filepath.Rel(root, strings.TrimPrefix(strings.TrimPrefix(loc, "file:"), "//"))
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s savepoint at %s, not below %s", format, loc, root)
		}
		savepoints = append(savepoints, flinkdata.Savepoint{Dir: filepath.ToSlash(rel), Format: format})
	}
	// Two more checkpoints after the savepoints, so that shared files
	// are subsumed past them.
	if len(savepoints) > 0 {
		cps, _ := fl.REST.Checkpoints(ctx, job)
		n := cps.Counts.Completed + 2
		waitUntil(t, corpusStep, "two more checkpoints", func() bool {
			cps, err := fl.REST.Checkpoints(ctx, job)
			return err == nil && cps.Counts.Completed >= n
		}, jm, tm)
	}

	// A quiet moment: both processes stopped with no checkpoint in
	// flight (every chk-N is one ZooKeeper points at).
	zc := zktest.Connect(t, c.Servers())
	ns := corpusPathRoot + clusterID
	jobDir := filepath.Join(root, "checkpoints", job)
	var pointers []flinkdata.Checkpoint
	var held time.Duration
	for attempt := 0; ; attempt++ {
		jm.Signal(syscall.SIGSTOP)
		tm.Signal(syscall.SIGSTOP)
		frozen := time.Now()
		pointers, err = corpusPointers(zc.Conn, ns, job, root)
		if err != nil {
			t.Fatal(err)
		}
		quiet := len(pointers) > 0
		chks, _ := filepath.Glob(filepath.Join(jobDir, "chk-*"))
		for _, chk := range chks {
			quiet = quiet && slices.ContainsFunc(pointers, func(p flinkdata.Checkpoint) bool { return p.Dir == corpusRel(root, chk) })
		}
		if quiet {
			err = corpusCopy(root, filepath.Join(outDir+".new", "storage"))
			held = time.Since(frozen)
			break
		}
		jm.Signal(syscall.SIGCONT)
		tm.Signal(syscall.SIGCONT)
		if attempt == 40 {
			var dirs []string
			for _, chk := range chks {
				dirs = append(dirs, corpusRel(root, chk))
			}
			t.Fatalf("no moment without a checkpoint in flight in %d attempts: ZooKeeper points at %v, the job directory holds %v", attempt, pointers, dirs)
		}
		time.Sleep(time.Duration(100+37*attempt%300) * time.Millisecond)
	}
	jm.Signal(syscall.SIGCONT)
	tm.Signal(syscall.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	javaVersion, _ := exec.Command(d.Java, "-version").CombinedOutput()
	// Paths of this machine become placeholders ({root}, {tmp}) but in
	// the storage root, which the files themselves name.
	ph := strings.NewReplacer(root, "{root}", tmp, "{tmp}")
	settings := map[string]string{}
	for key, v := range cfg.Settings() {
		settings[key] = ph.Replace(v)
	}
	for i := range args {
		args[i] = ph.Replace(args[i])
	}
	e := flinkdata.Entry{
		Release: d.Version, FlinkVersion: overview.Version, Kind: k.name, Made: time.Now().UTC().Format("2006-01-02"),
		Regenerate: corpusRegenerate, Settings: settings, JobArgs: args, Java: firstLine(string(javaVersion)), JobID: job,
		StorageRootURI: "file:" + root, Checkpoints: pointers, Savepoints: savepoints,
		Dump: fmt.Sprintf("JobManager and TaskManager stopped with SIGSTOP for %v at a moment when every chk-N directory was one ZooKeeper pointed at; the storage below the root copied, but HA blobs and job graphs", held.Round(time.Millisecond)),
	}
	if err := corpusFinish(outDir, &e); err != nil {
		t.Fatal(err)
	}
	t.Logf("Flink %s %s: %d checkpoints %v, %d savepoints, %d unreferenced files, metadata versions %v", d.Version, k.name,
		len(pointers), pointers, len(savepoints), len(e.Unreferenced), e.MetadataVersions)
	jm.Stop()
	tm.Stop()
}

func corpusRel(root, p string) string {
	rel, _ := filepath.Rel(root, p)
	return filepath.ToSlash(rel)
}

// corpusSavepoint triggers a savepoint of format (CANONICAL or NATIVE)
// and waits for its location.
func corpusSavepoint(ctx context.Context, r *REST, job, target, format string) (string, error) {
	body, _ := json.Marshal(map[string]any{"target-directory": target, "cancel-job": false, "formatType": format})
	var trig struct {
		RequestID string `json:"request-id"`
	}
	if err := r.do(ctx, http.MethodPost, "/jobs/"+job+"/savepoints", strings.NewReader(string(body)), "application/json", &trig); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(corpusStep); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var st struct {
			Status struct {
				ID string `json:"id"`
			} `json:"status"`
			Operation struct {
				Location     string `json:"location"`
				FailureCause any    `json:"failure-cause"`
			} `json:"operation"`
		}
		if err := r.Get(ctx, "/jobs/"+job+"/savepoints/"+trig.RequestID, &st); err != nil {
			return "", err
		}
		if st.Status.ID == "COMPLETED" {
			if st.Operation.Location == "" {
				return "", fmt.Errorf("failed: %v", st.Operation.FailureCause)
			}
			return st.Operation.Location, nil
		}
	}
	return "", fmt.Errorf("not completed in %v", corpusStep)
}

// corpusPointers reads the job's checkpoint pointers and the HA files
// they name, below root.
func corpusPointers(conn *zk.Conn, ns, job, root string) ([]flinkdata.Checkpoint, error) {
	dir := ns + "/jobs/" + job + "/checkpoints"
	kids, _, err := conn.Children(dir)
	if err == zk.ErrNoNode {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []flinkdata.Checkpoint
	for _, name := range kids {
		id, ok := fixturePointerID(ns, dir+"/"+name, job)
		if !ok {
			continue
		}
		// A pointer without its locks child is marked for deletion
		// (1.15+, ZooKeeperStateHandleStore): Flink is subsuming it, its
		// HA file may be gone already, and Flink reads it no more.
		locks, _, err := conn.Children(dir + "/" + name)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(locks, "locks") {
			continue
		}
		data, _, err := conn.Get(dir + "/" + name)
		if err != nil {
			return nil, err
		}
		h, err := flinkha.DecodeStateHandle(data)
		if err != nil {
			return nil, fmt.Errorf("pointer %d: %w", id, err)
		}
		ha, err := h.Path()
		if err != nil {
			return nil, err
		}
		ha = strings.TrimPrefix(strings.TrimPrefix(ha, "file:"), "//")
		rel, err := filepath.Rel(root, ha)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("pointer %d names %s, not below %s", id, h.URI, root)
		}
		out = append(out, flinkdata.Checkpoint{ID: id, Dir: fmt.Sprintf("checkpoints/%s/chk-%d", job, id), HAFile: filepath.ToSlash(rel)})
	}
	slices.SortFunc(out, func(a, b flinkdata.Checkpoint) int { return int(a.ID - b.ID) })
	return out, nil
}

// corpusCopy copies every file below root to dst, but the HA directory's
// blobs and job graphs (only its completedCheckpoint files are kept). An
// empty directory (file merging's managed directories must exist) gets
// the file flinkdata.KeepFile, since git keeps no empty directory.
func corpusCopy(root, dst string) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := corpusRel(root, p)
		if e.IsDir() {
			if strings.HasPrefix(rel, "ha/") || rel == "ha" {
				return nil
			}
			kids, err := os.ReadDir(p)
			if err != nil || len(kids) > 0 {
				return err
			}
			to := filepath.Join(dst, filepath.FromSlash(rel))
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(to, flinkdata.KeepFile), nil, 0o644)
		}
		if strings.HasPrefix(rel, "ha/") && !strings.HasPrefix(filepath.Base(p), "completedCheckpoint") {
			return nil
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}

// corpusFinish completes entry e in outDir.new (its storage copied
// there): the metadata versions, the unreferenced files, corpus.json;
// then it replaces outDir.
func corpusFinish(outDir string, e *flinkdata.Entry) error {
	tmp := outDir + ".new"
	storage := filepath.Join(tmp, "storage")
	e.Dir = tmp
	refs, versions, err := corpusReferences(e)
	if err != nil {
		return err
	}
	e.MetadataVersions = versions
	err = filepath.WalkDir(storage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := corpusRel(storage, p)
		if !refs[rel] && filepath.Base(p) != "_metadata" && filepath.Base(p) != flinkdata.KeepFile && !strings.HasPrefix(rel, "ha/") {
			e.Unreferenced = append(e.Unreferenced, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "corpus.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(outDir); err != nil {
		return err
	}
	return os.Rename(tmp, outDir)
}

// corpusReferences lists the files (relative to the storage copy) that
// the entry's checkpoints and savepoints reference, and the versions of
// their _metadata.
func corpusReferences(e *flinkdata.Entry) (map[string]bool, []int32, error) {
	refs := map[string]bool{}
	var versions []int32
	for _, dir := range e.States() {
		m, err := metadata.DecodeFile(filepath.Join(e.Storage(), filepath.FromSlash(dir), "_metadata"), metadata.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
		if !slices.Contains(versions, m.Version) {
			versions = append(versions, m.Version)
		}
		for _, r := range m.References(e.StorageRootURI + "/" + dir) {
			p := strings.TrimPrefix(r.Resolved, "file:")
			p = strings.TrimPrefix(p, "//")
			rel, err := filepath.Rel(e.StorageRoot(), p)
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, nil, fmt.Errorf("%s references %s, outside the storage root", dir, r.Resolved)
			}
			refs[filepath.ToSlash(rel)] = true
		}
	}
	slices.Sort(versions)
	return refs, versions, nil
}
