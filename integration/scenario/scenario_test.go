package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Server indexes per site.
var (
	dc1Servers = []int{0, 1}
	survivors  = []int{2, 3, 4} // DC2 and DC3
)

const (
	flinkStorage  = "file:/flink"
	flinkSession  = 4 * time.Second
	retained      = 3
	minLossAfter  = 3 // checkpoints completed before DC1 can be lost
	maxLossAfter  = 8
	maxLossDelay  = 250 * time.Millisecond
	chunkSize     = 8 << 10
	poll          = 100 * time.Millisecond
	stepTimeout   = 60 * time.Second
	seedEnvVar    = "CKPTFS_SCENARIO_SEED"
	clusterPrefix = "scenario-"
	afterTakeover = 2 // checkpoints DC2 completes after its restore
)

var kinds = []string{"snapshot", "filelevel", "perobject"}

// TestIntegration_Failover runs the two-site scenario through real mounts
// once per replication family, each with another Flink layout, and checks
// docs/design.md §6 on each run. With CKPTFS_SCENARIO_SEED it replays a
// chaos run exactly (layout and moments drawn from the seed).
func TestIntegration_Failover(t *testing.T) {
	c := startEnsemble(t)
	layouts := map[string]flinkemu.Layout{"snapshot": flinkemu.Flink1_20, "filelevel": flinkemu.Flink1_14, "perobject": flinkemu.Flink1_13}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			r := newRun(kind, seedFor(t))
			if os.Getenv(seedEnvVar) == "" {
				r.layout = layouts[kind]
			}
			runScenario(t, c, r)
		})
	}
}

func startEnsemble(t *testing.T) *zktest.Cluster {
	t.Helper()
	return zktest.StartCluster(t, 5, func(cfg *zktest.Config) {
		cfg.MaxSessionTimeout = 5 * time.Second
	})
}

// seedFor returns the subtest's seed: CKPTFS_SCENARIO_SEED if set, else a
// fixed value derived from the test name.
func seedFor(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv(seedEnvVar); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnvVar, s, err)
		}
		return n
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, t.Name())
	return h.Sum64() % 1_000_000
}

// run is one scenario's parameters, all drawn from its seed.
type run struct {
	kind   string
	seed   uint64
	layout flinkemu.Layout
	// lossAfter checkpoints complete in DC1; then DC1 is lost lossDelay
	// later or, with midCheckpoint, while it writes the next one, before
	// its step number lossStep.
	lossAfter     int
	lossDelay     time.Duration
	midCheckpoint bool
	lossStep      int
	// expire: the JobManager's session ends by expiring (DC1 cut off),
	// not by closing.
	expire bool
	// lagLast: the replication falls behind before DC1's last checkpoint
	// and copies nothing more (the demo uses it to show the user's case).
	lagLast bool
	rng     *rand.Rand
	// story narrates the run (make demo); nil in tests. Lines said with
	// later go to the end of the story.
	story io.Writer
	start time.Time
	later []string
}

// scenarioLayouts are the layouts a seed draws from: every emulated
// layout but 1.4's, whose checkpoints have no _metadata for the
// scenario's checks (replicated, sealed) to wait on. They are the list
// from before the emulator had 1.4, so a seed replays the same run.
var scenarioLayouts = slices.DeleteFunc(flinkemu.Layouts(), func(l flinkemu.Layout) bool { return l == flinkemu.Flink1_4 })

func newRun(kind string, seed uint64) *run {
	rng := rand.New(rand.NewPCG(seed, 0x5ce7a210))
	r := &run{kind: kind, seed: seed, rng: rng}
	r.layout = scenarioLayouts[rng.IntN(len(scenarioLayouts))]
	r.lossAfter = minLossAfter + rng.IntN(maxLossAfter-minLossAfter+1)
	r.lossDelay = time.Duration(rng.Int64N(int64(maxLossDelay)))
	r.midCheckpoint = rng.IntN(2) == 0
	r.lossStep = rng.IntN(12)
	r.expire = rng.IntN(3) == 0
	return r
}

func (r *run) String() string {
	loss := fmt.Sprintf("%v after checkpoint %d", r.lossDelay.Round(time.Millisecond), r.lossAfter)
	if r.midCheckpoint {
		loss = fmt.Sprintf("during checkpoint %d (before its write step %d)", r.lossAfter+1, r.lossStep)
	}
	end := "closes"
	if r.expire {
		end = "expires (DC1 cut off)"
	}
	return fmt.Sprintf("%s replication, Flink %s layout, DC1 lost %s, JobManager session %s", r.kind, r.layout, loss, end)
}

// say narrates: to the test log, and in the demo to the terminal.
func (r *run) say(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	if r.story != nil {
		if r.start.IsZero() {
			r.start = time.Now()
		}
		fmt.Fprintf(r.story, "[%6.2fs] %s\n", time.Since(r.start).Seconds(), msg)
	}
}

// sayLater narrates at the end of the story (the demo's contrast).
func (r *run) sayLater(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log(msg)
	r.later = append(r.later, msg)
}

// world is one run's two sites.
type world struct {
	dc1, dc2  *site
	clusterID string
	job       string
	emu       flinkemu.Config // DC1's JobManager
	// lowestRetained is the oldest checkpoint a JobManager still retains:
	// older ones are subsumed and may vanish from a site at any time.
	mu             sync.Mutex
	lowestRetained int64
}

func (w *world) retain(cps []*flinkemu.Checkpoint) {
	if len(cps) == 0 {
		return
	}
	w.mu.Lock()
	w.lowestRetained = max(w.lowestRetained, cps[0].ID)
	w.mu.Unlock()
}

func (w *world) subsumed(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return id < w.lowestRetained
}

// atLoss is what DC2 holds at the instant DC1 is lost.
type atLoss struct {
	pointers map[int64][]byte                   // id -> znode bytes
	verdicts map[int64]*manifest.PointerVerdict // on DC2
	ids      []int64                            // ascending
	optimal  int64                              // newest L2-complete pointer, -1 if none
}

func (l *atLoss) newest() int64 { return l.ids[len(l.ids)-1] }

// outcome is what one run measured, for the chaos table.
type outcome struct {
	// Ahead: ZooKeeper's newest pointer was ahead of DC2's newest
	// L2-complete checkpoint at the loss (the baseline must fail then).
	Ahead bool
	// Refused: DC2 held no L2-complete pointer, so takeover refused.
	Refused bool
	// LossToRestore is the time from DC1's loss to the verified restore
	// through DC2's mount.
	LossToRestore time.Duration
	Restored      int64
	Optimal       int64
}

var errSiteLost = errors.New("DC1 is lost")

func runScenario(t *testing.T, c *zktest.Cluster, r *run) (out outcome) {
	t.Logf("seed %d (replay: %s=%d go test -run '%s' ./integration/scenario/)", r.seed, seedEnvVar, r.seed, t.Name())
	r.say(t, "run: %s", r)
	ctx, cancel := context.WithTimeout(context.Background(), 3*stepTimeout)
	defer cancel()
	root := t.TempDir()
	w := &world{clusterID: fmt.Sprintf("%s%s-%d", clusterPrefix, r.kind, r.seed)}
	// DC1's ZooKeeper servers come back for the next run.
	t.Cleanup(func() { restartDC1(t, c) })

	// Both sites mount their NAS where Flink expects its storage.
	common := []string{"--zk", c.ConnectString(), "--cluster-id", w.clusterID, "--poll", poll.String()}
	w.dc1 = startSite(t, "dc1", root, "primary", common...)
	w.dc2 = startSite(t, "dc2", root, "replica", append(common, "--metrics-addr", "127.0.0.1:0", "--lag-interval", "200ms")...)
	metricsAddr := w.dc2.metricsAddr(t)
	r.say(t, "DC1: ckptfs mount (primary, sealing) of its NAS at Flink's path; DC2: ckptfs mount (replica) of the replicated NAS")

	// 1. The JobManager in DC1 writes through DC1's mount.
	var (
		armed   bool // the checkpoint DC1 is lost in is being written
		stepped int
	)
	w.emu = flinkemu.DefaultConfig()
	w.emu.Layout = r.layout
	w.emu.ClusterID = w.clusterID
	w.emu.SessionTimeout = flinkSession
	w.emu.Storage = w.dc1.mnt
	w.emu.FlinkStorage = flinkStorage
	w.emu.Retained = retained
	w.emu.MetadataInProgress = r.layout >= flinkemu.Flink1_17
	w.emu.BeforeStep = func(s flinkemu.Step) error {
		if !armed {
			return nil
		}
		if stepped++; stepped > r.lossStep {
			r.say(t, "DC1 dies before %s", s)
			return errSiteLost
		}
		return nil
	}
	var proxies []*zktest.Proxy
	if r.expire {
		for _, addr := range c.Servers() {
			p := zktest.NewProxy(t, addr)
			proxies = append(proxies, p)
			w.emu.Servers = append(w.emu.Servers, p.Addr())
		}
	} else {
		w.emu.Servers = c.Servers()
	}
	jm, err := flinkemu.Start(ctx, w.emu)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	w.job = flinkemu.NewJobID()
	if err := jm.SubmitJob(w.job); err != nil {
		t.Fatal(err)
	}

	// 2. Checkpoints while the replication runs, then the loss.
	var writing sync.Mutex // held while a checkpoint is written (Snapshot's freeze)
	repl, interval := newReplicator(t, r, w, &writing)
	replDone := make(chan error, 1)
	go func() { replDone <- repl.Run(ctx, interval) }()
	var stopOnce sync.Once
	stopReplication := func() {
		stopOnce.Do(func() {
			repl.Stop()
			if err := <-replDone; err != nil {
				t.Errorf("replication: %v", err)
			}
		})
	}
	markers := watchMarkers(ctx, t, c, w)
	peakLag := sampleLag(ctx, metricsAddr, w.job)

	checkpoint := func(jm *flinkemu.JobManager, where string) (*flinkemu.Checkpoint, error) {
		spec := flinkemu.CheckpointSpec{
			StateSizes:  []int{4<<10 + r.rng.IntN(60<<10), 1 + r.rng.IntN(4<<10)},
			SharedSizes: make([]int, 1+r.rng.IntN(3)),
			KeepShared:  r.rng.IntN(4),
		}
		for i := range spec.SharedSizes {
			spec.SharedSizes[i] = 1<<10 + r.rng.IntN(64<<10)
		}
		writing.Lock()
		cp, err := jm.CompleteCheckpoint(w.job, spec)
		writing.Unlock()
		if err == nil {
			w.retain(jm.Checkpoints(w.job))
			r.say(t, "%s: Flink completed checkpoint %d (%d files, %d of them shared/ files reused from earlier checkpoints)",
				where, cp.ID, len(cp.Files()), len(cp.SharedFiles)-len(cp.NewSharedFiles))
		}
		return cp, err
	}
	var prev *flinkemu.Checkpoint
	for i := 1; i <= r.lossAfter; i++ {
		if i == r.lossAfter && r.lagLast {
			w.waitReplicated(t, prev)
			stopReplication()
			r.say(t, "DC2 holds checkpoint %d; then the replication link falls behind: nothing more reaches DC2", prev.ID)
		}
		cp, err := checkpoint(jm, "DC1")
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		prev = cp
		if i < r.lossAfter {
			time.Sleep(time.Duration(50+r.rng.IntN(200)) * time.Millisecond)
		}
	}
	if r.midCheckpoint {
		armed = true
		if _, err := checkpoint(jm, "DC1"); err != nil && !errors.Is(err, errSiteLost) {
			t.Fatalf("checkpoint in which DC1 is lost: %v", err)
		}
	} else {
		time.Sleep(r.lossDelay)
	}

	// Lose DC1: replication stops where it is, the mount daemon dies, the
	// JobManager's session ends, DC1's ZooKeeper servers go.
	lostAt := time.Now()
	stopReplication()
	markers.siteLost("dc1")
	w.dc1.kill()
	if r.expire {
		for _, p := range proxies {
			p.Block()
		}
	} else {
		jm.Close()
	}
	for _, i := range dc1Servers {
		if err := c.Stop(i); err != nil {
			t.Fatalf("stop zk%d: %v", i, err)
		}
	}
	if _, err := c.WaitLeader(stepTimeout); err != nil {
		t.Fatalf("no leader among the survivors: %v", err)
	}
	r.say(t, "DC1 LOST: replication stopped mid-pass (%+v), DC1's mount and ZooKeeper servers gone", repl.Stats())
	r.say(t, "  while DC1 wrote, DC2's %s peaked at %v checkpoints", metrics.LagCheckpoints, peakLag())

	zc := zktest.Connect(t, c.Servers(survivors...))
	w.emu.Servers = c.Servers(survivors...)

	// 3. What DC2 holds at the instant of loss.
	verifier := newVerifier(t, w.dc2.backing, false)
	loss := w.observe(ctx, t, zc.Conn, verifier)
	for _, id := range loss.ids {
		r.say(t, "  ZooKeeper points at checkpoint %d; on DC2 it is %v", id, loss.verdicts[id].Verdict)
	}
	r.say(t, "  DC2's NAS holds %v; DC2's ckptfs mount shows Flink %v", w.chkDirs(t, w.dc2.backing), w.chkDirs(t, w.dc2.mnt))
	out.Ahead = len(loss.ids) > 0 && loss.newest() > loss.optimal
	out.Refused = loss.optimal < 0
	out.Optimal = loss.optimal

	// Without ckptfs: Flink restores from ZooKeeper as it is, from the
	// plain replicated directory.
	w.checkBaseline(t, r, zc.Conn, loss)

	// What the operator sees on DC2's dashboard: the lag behind Flink.
	if out.Ahead && !out.Refused {
		v := w.waitLag(t, metricsAddr, "a lag behind ZooKeeper", func(v float64) bool { return v > 0 })
		r.say(t, "DC2's metrics: %s %v checkpoints behind Flink's newest pointer", metrics.LagCheckpoints, v)
	}

	// 4. ckptfs takeover on DC2, through the surviving servers.
	filesBefore := treeHashes(t, w.dc2.backing)
	rep, code := w.takeover(t, c)
	r.say(t, "ckptfs takeover on DC2 (exit %d): %s", code, rep.Decision)
	for _, j := range rep.Jobs {
		r.say(t, "  job %s: %s; kept pointers %v, retracted %v (backed up under /ckptfs/%s/pruned)", j.JobID, j.Status, j.Kept, j.Retracted, w.clusterID)
	}
	if diff := diffTrees(filesBefore, treeHashes(t, w.dc2.backing)); diff != "" {
		t.Errorf("invariant 3: the takeover changed DC2's files: %s", diff)
	}
	w.checkPointers(ctx, t, zc.Conn, verifier, loss, rep, code)
	if out.Refused {
		markers.check(t)
		return out
	}

	// 5. Flink on DC2 restores through DC2's mount and checks every byte.
	emu2 := w.emu
	emu2.Storage, emu2.Host, emu2.BeforeStep = w.dc2.mnt, "jm-dc2:6123", nil
	jm2, err := flinkemu.Start(ctx, emu2)
	if err != nil {
		t.Fatal(err)
	}
	defer jm2.Close()
	res, err := jm2.Recover(w.job, flinkemu.RestoreOptions{Attempts: 20, Backoff: 250 * time.Millisecond})
	if err != nil {
		t.Fatalf("invariant 1: the restore through DC2's mount failed after the takeover: %v", err)
	}
	out.LossToRestore = time.Since(lostAt)
	out.Restored = res.CheckpointID
	r.say(t, "DC2: Flink restored checkpoint %d through the mount: %d files, %d bytes, every byte as DC1 wrote it (%d failed attempts first); RPO: %d checkpoints behind ZooKeeper's newest, the newest DC2 held",
		res.CheckpointID, res.Files, res.Bytes, len(res.Failed), loss.newest()-res.CheckpointID)
	if res.CheckpointID != loss.optimal {
		t.Errorf("invariant 2: restored checkpoint %d, the newest complete on DC2 at the loss was %d", res.CheckpointID, loss.optimal)
	}
	for _, f := range res.Failed {
		t.Logf("  failed restore attempt: %v", f)
	}
	if n := w.dc2.logged("Flink asked for incomplete"); n > 0 {
		t.Errorf("invariant 1: Flink on DC2 reached for an incomplete checkpoint %d times", n)
	}

	// 6. DC2's mount was promoted by the takeover: Flink checkpoints there.
	waitFor(t, "DC2's mount to be promoted", func() bool { return w.dc2.writable() })
	var last *flinkemu.Checkpoint
	for range afterTakeover {
		if last, err = checkpoint(jm2, "DC2"); err != nil {
			t.Fatalf("checkpoint on DC2 after the takeover: %v", err)
		}
	}
	got, err := flinkemu.Restore(zc.Conn, emu2, w.job, flinkemu.RestoreOptions{})
	if err != nil || got.CheckpointID != last.ID {
		t.Fatalf("restore of DC2's own checkpoint %d: %v (%+v)", last.ID, err, got)
	}
	sealed := manifest.SealedPath(w.dc2.backing, filepath.Join("checkpoints", w.job, "chk-"+strconv.FormatInt(last.ID, 10)))
	waitFor(t, "DC2 to seal checkpoint "+strconv.FormatInt(last.ID, 10), func() bool { _, err := os.Stat(sealed); return err == nil })
	markers.waitFor(t, "dc2", last.ID)
	w.waitLag(t, metricsAddr, "the lag to fall to zero", func(v float64) bool { return v == 0 })
	r.say(t, "DC2's metrics: %s 0 after the takeover", metrics.LagCheckpoints)
	r.say(t, "DC2: the promoted mount sealed checkpoint %d, and DC2's marker names it", last.ID)
	markers.check(t)
	return out
}

// chkDirs lists the job's checkpoint directories under a site's root.
func (w *world) chkDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "checkpoints", w.job))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var ids []int
	for _, e := range entries {
		if id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "chk-")); err == nil && strings.HasPrefix(e.Name(), "chk-") {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "chk-" + strconv.Itoa(id)
	}
	return out
}

// waitReplicated waits until DC2 holds a checkpoint of DC1 completely.
func (w *world) waitReplicated(t *testing.T, cp *flinkemu.Checkpoint) {
	t.Helper()
	v := newVerifier(t, w.dc2.backing, false)
	onDC2 := func(local string) string {
		rel, err := filepath.Rel(w.dc1.mnt, local)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(w.dc2.backing, rel)
	}
	waitFor(t, fmt.Sprintf("checkpoint %d to reach DC2", cp.ID), func() bool {
		_, err := os.Stat(onDC2(cp.HAFile))
		return err == nil && v.VerifyDir(context.Background(), onDC2(cp.Dir)).Complete
	})
}

// newVerifier checks checkpoints on a site's backing directory, with its
// sealed manifests (L3) when sealed is set.
func newVerifier(t *testing.T, backing string, sealed bool) *manifest.Verifier {
	t.Helper()
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: flinkStorage, Dir: backing}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := manifest.DefaultVerifierConfig()
	cfg.Resolver = res
	if sealed {
		cfg.SealedRoot = backing
	}
	v, err := manifest.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newReplicator makes the simulator of one replication family copying
// DC1's NAS to DC2's.
func newReplicator(t *testing.T, r *run, w *world, writing *sync.Mutex) (replication.Replicator, time.Duration) {
	t.Helper()
	o := replication.Options{
		Source: w.dc1.backing, Dest: w.dc2.backing, ChunkSize: chunkSize,
		Rand: rand.New(rand.NewPCG(r.rng.Uint64(), 1)),
	}
	var (
		repl     replication.Replicator
		err      error
		interval time.Duration
	)
	switch r.kind {
	case "snapshot":
		repl, err = replication.NewSnapshot(replication.SnapshotOptions{Options: o, Freeze: func() func() {
			writing.Lock()
			return writing.Unlock
		}})
		interval = 150 * time.Millisecond
	case "filelevel":
		repl, err = replication.NewFileLevel(o)
		interval = 100 * time.Millisecond
	case "perobject":
		repl, err = replication.NewPerObject(replication.PerObjectOptions{Options: o, MinDelay: 10 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
		interval = 50 * time.Millisecond
	default:
		t.Fatalf("unknown replication kind %q", r.kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return repl, interval
}

// pointerIDs lists the job's pointers, ascending.
func (w *world) pointerIDs(conn *zk.Conn) ([]int64, string, error) {
	dir := w.pointerDir()
	if _, err := conn.Sync(dir); err != nil {
		return nil, dir, fmt.Errorf("sync %s: %w", dir, err)
	}
	names, _, err := conn.Children(dir)
	if err != nil {
		return nil, dir, fmt.Errorf("list %s: %w", dir, err)
	}
	var ids []int64
	for _, n := range names {
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && len(n) == 19 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, dir, nil
}

func (w *world) pointerDir() string { return w.emu.PointerDir(w.job) }

func (w *world) znode(id int64) string { return fmt.Sprintf("%s/%019d", w.pointerDir(), id) }

// observe records the pointers and their verdicts on DC2.
func (w *world) observe(ctx context.Context, t *testing.T, conn *zk.Conn, v *manifest.Verifier) *atLoss {
	t.Helper()
	ids, _, err := w.pointerIDs(conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Fatal("no pointer in ZooKeeper at the instant of loss")
	}
	l := &atLoss{pointers: map[int64][]byte{}, verdicts: map[int64]*manifest.PointerVerdict{}, ids: ids, optimal: -1}
	for _, id := range ids {
		data, _, err := conn.Get(w.znode(id))
		if err != nil {
			t.Fatal(err)
		}
		h, err := flinkha.DecodeStateHandle(data)
		if err != nil {
			t.Fatalf("pointer %d: %v", id, err)
		}
		l.pointers[id] = data
		pv := v.VerifyPointer(ctx, id, *h)
		l.verdicts[id] = pv
		if pv.L2Complete() {
			l.optimal = id
		}
	}
	return l
}

// checkBaseline restores from ZooKeeper's pointers as they are, from DC2's
// plain directory (no ckptfs): it must fail on a missing or short file,
// on every attempt, exactly when ZooKeeper's newest pointer is ahead of
// DC2's newest L2-complete one.
func (w *world) checkBaseline(t *testing.T, r *run, conn *zk.Conn, l *atLoss) {
	t.Helper()
	ahead := l.newest() > l.optimal
	cfg := w.emu
	cfg.Storage = w.dc2.backing
	res, err := flinkemu.Restore(conn, cfg, w.job, flinkemu.RestoreOptions{Attempts: 3, Backoff: 20 * time.Millisecond})
	if err != nil {
		var re *flinkemu.RestoreError
		errors.As(err, &re)
		r.sayLater(t, "WITHOUT ckptfs, Flink on DC2 follows ZooKeeper's newest pointer %d over the plain replica:", l.newest())
		for i, a := range re.Attempts {
			r.sayLater(t, "  restore attempt %d failed: %v", i+1, a)
		}
		r.sayLater(t, "  ... and Flink retries the same pointer forever: the job never comes back (seed-problem.md)")
	} else {
		r.sayLater(t, "WITHOUT ckptfs, Flink on DC2 restored checkpoint %d: ZooKeeper was not ahead of the replica this time", res.CheckpointID)
	}
	if ahead {
		if err == nil {
			t.Fatalf("baseline: ZooKeeper's newest pointer %d is ahead of DC2's newest L2-complete %d, yet the restore succeeded", l.newest(), l.optimal)
		}
		var re *flinkemu.RestoreError
		if !errors.As(err, &re) {
			t.Fatalf("baseline: %v", err)
		}
		for _, a := range re.Attempts {
			if !errors.Is(a, fs.ErrNotExist) && !errors.Is(a, flinkemu.ErrShort) && !errors.Is(a, flinkemu.ErrContent) {
				t.Fatalf("baseline: a restore attempt failed, but not on a missing or torn file: %v", a)
			}
		}
		return
	}
	if err == nil {
		if res.CheckpointID != l.newest() {
			t.Fatalf("baseline restored %d, want ZooKeeper's newest %d", res.CheckpointID, l.newest())
		}
		return
	}
	// Not ahead: the newest checkpoint is whole on DC2; only an older
	// retained pointer whose HA file DC2 lacks can fail the recovery.
	var pe *flinkemu.PointerError
	if !errors.As(err, &pe) || pe.Stage != "ha" || pe.ID == l.newest() || l.verdicts[pe.ID].HAFileReadable {
		t.Fatalf("baseline: ZooKeeper is not ahead of DC2, yet the restore failed: %v", err)
	}
}

// takeoverReport is the part of `ckptfs takeover -o json` the checks use.
type takeoverReport struct {
	Activated  bool   `json:"activated"`
	ActiveSite string `json:"active_site"`
	Decision   string `json:"decision"`
	Jobs       []struct {
		JobID     string  `json:"job_id"`
		Status    string  `json:"status"`
		Kept      []int64 `json:"kept"`
		Retracted []int64 `json:"retracted"`
	} `json:"jobs"`
}

// takeover runs `ckptfs takeover` for DC2 against the survivors, as an
// operator (or the ckptfs-takeover unit) does.
func (w *world) takeover(t *testing.T, c *zktest.Cluster) (*takeoverReport, int) {
	t.Helper()
	cmd := exec.Command(binary, "takeover", "--zk", c.ConnectString(survivors...), "--site", "dc2",
		"--cluster-id", w.clusterID, "--map", flinkStorage+"="+w.dc2.backing,
		"--checkpoints-dir", flinkStorage+"/checkpoints", "--flink-session-timeout", flinkSession.String(),
		"--wait", "30s", "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	var rep takeoverReport
	if err := json.Unmarshal(stdout, &rep); err != nil {
		t.Fatalf("takeover exit %d, output %q: %v\n%s", code, stdout, err, stderr.String())
	}
	return &rep, code
}

// checkPointers checks docs/design.md §6.2 and §6.3 on ZooKeeper after the
// takeover.
func (w *world) checkPointers(ctx context.Context, t *testing.T, conn *zk.Conn, v *manifest.Verifier, l *atLoss, rep *takeoverReport, code int) {
	t.Helper()
	after, _, err := w.pointerIDs(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after takeover: pointers %v", after)
	if l.optimal < 0 {
		// Nothing restorable by ZooKeeper failover: change nothing, refuse.
		if code != 4 || rep.Activated {
			t.Errorf("invariant 3: DC2 holds no L2-complete pointer, yet the takeover exited %d, activated %v: %s", code, rep.Activated, rep.Decision)
		}
		if !slices.Equal(after, l.ids) {
			t.Errorf("invariant 3: a refused takeover changed the pointers: %v -> %v", l.ids, after)
		}
		return
	}
	if code != 0 {
		t.Fatalf("takeover exited %d although pointer %d is L2-complete on DC2: %s", code, l.optimal, rep.Decision)
	}
	if !rep.Activated || rep.ActiveSite != "dc2" {
		t.Errorf("takeover did not make dc2 active: activated %v, active site %q", rep.Activated, rep.ActiveSite)
	}
	if len(after) == 0 {
		t.Fatalf("invariant 3: the job has no pointer left although %d was complete", l.optimal)
	}
	if newest := after[len(after)-1]; newest != l.optimal {
		t.Errorf("invariant 2: newest pointer after takeover is %d, the optimal one on DC2 was %d", newest, l.optimal)
	}
	for _, id := range after {
		data, _, err := conn.Get(w.znode(id))
		if err != nil {
			t.Fatal(err)
		}
		h, err := flinkha.DecodeStateHandle(data)
		if err != nil {
			t.Fatal(err)
		}
		pv := v.VerifyPointer(ctx, id, *h)
		if id == after[len(after)-1] && !pv.L2Complete() {
			t.Errorf("invariant 2: newest pointer %d after takeover is not L2-complete on DC2: %v", id, pv.Verdict)
		}
		if !pv.HAFileReadable {
			t.Errorf("pointer %d kept although its HA file is unreadable on DC2 (Flink's recovery would fail)", id)
		}
	}
	// Exactly the pointers above the optimal one or with an unreadable HA
	// file are retracted, each with a backup of its bytes.
	var wantKept []int64
	for _, id := range l.ids {
		if id <= l.optimal && l.verdicts[id].HAFileReadable {
			wantKept = append(wantKept, id)
		}
	}
	if !slices.Equal(after, wantKept) {
		t.Errorf("pointers after takeover %v, want %v", after, wantKept)
	}
	for _, id := range l.ids {
		if !slices.Contains(after, id) {
			w.checkBackup(t, conn, id, l.pointers[id])
		}
	}
}

func (w *world) checkBackup(t *testing.T, conn *zk.Conn, id int64, original []byte) {
	t.Helper()
	p := fmt.Sprintf("/ckptfs/%s/pruned/%s/%019d", w.clusterID, w.job, id)
	data, _, err := conn.Get(p)
	if err != nil {
		t.Errorf("invariant 3: pointer %d retracted without backup at %s: %v", id, p, err)
		return
	}
	var b struct {
		Znode        string `json:"znode"`
		Data         []byte `json:"data"`
		CheckpointID int64  `json:"checkpoint_id"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Errorf("backup %s: %v", p, err)
		return
	}
	if b.Znode != w.znode(id) || string(b.Data) != string(original) || b.CheckpointID != id {
		t.Errorf("invariant 3: backup %s does not hold pointer %d as it was (znode %s, %d bytes, want %d)",
			p, id, b.Znode, len(b.Data), len(original))
	}
}

// restartDC1 brings servers 0 and 1 back and waits for a leader.
func restartDC1(t *testing.T, c *zktest.Cluster) {
	for _, i := range dc1Servers {
		if c.Running(i) {
			continue
		}
		if err := c.Start(i); err != nil {
			t.Errorf("restart zk%d: %v", i, err)
		}
	}
	if _, err := c.WaitLeader(stepTimeout); err != nil {
		t.Errorf("no leader after restarting DC1's servers: %v", err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// treeHashes maps every entry below dir to its kind and content hash.
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(a, b map[string]string) string {
	var diffs []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if w != v {
			diffs = append(diffs, "changed "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	slices.Sort(diffs)
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}
