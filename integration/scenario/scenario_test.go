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
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Server indexes per site.
var (
	dc1Servers = []int{0, 1}
	survivors  = []int{2, 3, 4} // DC2 and DC3
)

const (
	site          = "dc2"
	flinkStorage  = "file:/flink"
	flinkSession  = 4 * time.Second
	retained      = 3
	minLossAfter  = 3 // checkpoints completed before DC1 can be lost
	maxLossAfter  = 9
	maxLossDelay  = 250 * time.Millisecond
	chunkSize     = 8 << 10
	takeoverWait  = 10 * time.Second
	stepTimeout   = 60 * time.Second
	seedEnvVar    = "CKPTFS_SCENARIO_SEED"
	clusterPrefix = "scenario-"
)

var kinds = []string{"snapshot", "filelevel", "perobject"}

// TestIntegration_Failover runs the DR scenario with ckptfs's takeover,
// once per replication family, and checks design §6 (1)-(3).
func TestIntegration_Failover(t *testing.T) {
	c := startEnsemble(t)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { runScenario(t, c, kind, true, seedFor(t)) })
	}
}

// TestIntegration_Baseline runs the same scenario without ckptfs and
// checks that restoring from ZooKeeper's pointers as they are fails
// exactly when ZooKeeper is ahead of the replica.
func TestIntegration_Baseline(t *testing.T) {
	c := startEnsemble(t)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { runScenario(t, c, kind, false, seedFor(t)) })
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

// world is one run's sites.
type world struct {
	dc1, dc2   string // backing directories (Flink storage on each site)
	clusterID  string
	job        string
	pointerDir string
	hashes     map[string][sha256.Size]byte // DC1-relative path -> content hash, as written
	resolver   *manifest.Resolver           // Flink paths -> DC2's backing directory
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
	// LossToRestore is the time from DC1's loss to the verified restore.
	LossToRestore time.Duration
}

func runScenario(t *testing.T, c *zktest.Cluster, kind string, takeover bool, seed uint64) (out outcome) {
	t.Logf("seed %d (replay: %s=%d go test -run '%s' ./integration/scenario/)", seed, seedEnvVar, seed, t.Name())
	rng := rand.New(rand.NewPCG(seed, 0x5ce7a210))
	ctx, cancel := context.WithTimeout(context.Background(), 2*stepTimeout)
	defer cancel()

	root := t.TempDir()
	w := &world{
		dc1:       filepath.Join(root, "dc1", "nas"),
		dc2:       filepath.Join(root, "dc2", "nas"),
		clusterID: fmt.Sprintf("%s%s-%d", clusterPrefix, kind, seed),
		hashes:    map[string][sha256.Size]byte{},
	}
	for _, d := range []string{w.dc1, w.dc2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	w.resolver, err = manifest.NewResolver([]manifest.Mapping{{Prefix: flinkStorage, Dir: w.dc2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// DC1's ZooKeeper servers come back for the next subtest.
	t.Cleanup(func() { restartDC1(t, c) })

	// 1. The JobManager in DC1.
	cfg := flinkemu.DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.SessionTimeout = flinkSession
	cfg.Layout = flinkemu.Flink1_20
	cfg.ClusterID = w.clusterID
	cfg.Storage = w.dc1
	cfg.FlinkStorage = flinkStorage
	cfg.Retained = retained
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			jm.Close()
		}
	}()
	w.job = flinkemu.NewJobID()
	if err := jm.SubmitJob(w.job); err != nil {
		t.Fatal(err)
	}

	// 2. Checkpoints while the replication runs, then the loss.
	var writing sync.Mutex // held while a checkpoint is written (Snapshot's freeze)
	repl, interval := newReplicator(t, kind, w, rng.Uint64(), &writing)
	replDone := make(chan error, 1)
	go func() { replDone <- repl.Run(ctx, interval) }()

	lossAfter := minLossAfter + rng.IntN(maxLossAfter-minLossAfter+1)
	lossDelay := time.Duration(rng.Int64N(int64(maxLossDelay)))
	t.Logf("%s replication every %v; DC1 lost %v after checkpoint %d", kind, interval, lossDelay, lossAfter)
	for i := 1; i <= lossAfter; i++ {
		sizes := []int{4<<10 + rng.IntN(60<<10), 4<<10 + rng.IntN(60<<10), 1 + rng.IntN(4<<10)}
		writing.Lock()
		cp, err := jm.CompleteCheckpoint(w.job, flinkemu.CheckpointSpec{StateSizes: sizes})
		if err == nil {
			err = w.record(cp)
		}
		writing.Unlock()
		if err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		w.pointerDir = path.Dir(cp.Znode)
		if i < lossAfter {
			time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		}
	}
	time.Sleep(lossDelay)

	// Lose DC1: replication stops where it is, the JobManager's session
	// ends, DC1's ZooKeeper servers go.
	lostAt := time.Now()
	repl.Stop()
	if err := <-replDone; err != nil {
		t.Fatalf("replication: %v", err)
	}
	jm.Close()
	closed = true
	for _, i := range dc1Servers {
		if err := c.Stop(i); err != nil {
			t.Fatalf("stop zk%d: %v", i, err)
		}
	}
	if _, err := c.WaitLeader(stepTimeout); err != nil {
		t.Fatalf("no leader among the survivors: %v", err)
	}
	t.Logf("replication stats at loss: %+v", repl.Stats())

	zc := zktest.Connect(t, c.Servers(survivors...))

	// 3. What DC2 holds at the instant of loss.
	verifier, err := manifest.NewVerifier(manifest.Config{Resolver: w.resolver, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	loss := w.observe(ctx, t, zc.Conn, verifier)
	t.Logf("at loss: ZooKeeper pointers %v, newest L2-complete on DC2: %d", loss.ids, loss.optimal)
	for _, id := range loss.ids {
		t.Logf("  pointer %d on DC2: %v", id, loss.verdicts[id].Verdict)
	}

	out.Ahead = len(loss.ids) > 0 && loss.newest() > loss.optimal
	out.Refused = loss.optimal < 0

	// Without ckptfs: restore from ZooKeeper as it is.
	w.checkBaseline(t, zc.Conn, loss)
	if !takeover {
		return out
	}

	// 4. Takeover for DC2, through the survivors only.
	filesBefore := treeHashes(t, w.dc2)
	rep := w.takeover(ctx, t, c, verifier)
	t.Logf("takeover: %s", rep.Decision)

	// 5 and 6. Check the invariants.
	w.checkAfterTakeover(ctx, t, zc.Conn, verifier, loss, rep)
	out.LossToRestore = time.Since(lostAt)
	if diff := diffTrees(filesBefore, treeHashes(t, w.dc2)); diff != "" {
		t.Errorf("invariant 3: the takeover changed DC2's files: %s", diff)
	}
	return out
}

// newReplicator makes the simulator of one replication family copying
// DC1's backing directory to DC2's.
func newReplicator(t *testing.T, kind string, w *world, seed uint64, writing *sync.Mutex) (replication.Replicator, time.Duration) {
	t.Helper()
	o := replication.Options{
		Source: w.dc1, Dest: w.dc2, ChunkSize: chunkSize,
		Rand: rand.New(rand.NewPCG(seed, 1)),
	}
	var (
		r        replication.Replicator
		err      error
		interval time.Duration
	)
	switch kind {
	case "snapshot":
		r, err = replication.NewSnapshot(replication.SnapshotOptions{Options: o, Freeze: func() func() {
			writing.Lock()
			return writing.Unlock
		}})
		interval = 150 * time.Millisecond
	case "filelevel":
		r, err = replication.NewFileLevel(o)
		interval = 100 * time.Millisecond
	case "perobject":
		r, err = replication.NewPerObject(replication.PerObjectOptions{Options: o, MinDelay: 10 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
		interval = 50 * time.Millisecond
	default:
		t.Fatalf("unknown replication kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r, interval
}

// record remembers the content of every file of a checkpoint as written
// in DC1 (state files are random, so their hashes are the reference).
func (w *world) record(cp *flinkemu.Checkpoint) error {
	files := append([]string{cp.Metadata, cp.HAFile}, cp.StateFiles...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(w.dc1, f)
		if err != nil {
			return err
		}
		w.hashes[filepath.ToSlash(rel)] = sha256.Sum256(data)
	}
	return nil
}

// pointerIDs lists the job's pointer znodes, ascending; with locksOnly,
// only those Flink 1.15+ recovers (with a locks child).
func (w *world) pointerIDs(conn *zk.Conn, locksOnly bool) ([]int64, error) {
	names, _, err := conn.Children(w.pointerDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", w.pointerDir, err)
	}
	var ids []int64
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 64)
		if err != nil || len(n) != 19 {
			continue
		}
		if locksOnly {
			ok, _, err := conn.Exists(w.pointerDir + "/" + n + "/locks")
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (w *world) znode(id int64) string { return fmt.Sprintf("%s/%019d", w.pointerDir, id) }

// observe records the pointers and their verdicts on DC2.
func (w *world) observe(ctx context.Context, t *testing.T, conn *zk.Conn, v *manifest.Verifier) *atLoss {
	t.Helper()
	ids, err := w.pointerIDs(conn, false)
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
		if pv.HAFileReadable && pv.Verdict.Complete && pv.Verdict.Level >= manifest.L2 {
			l.optimal = id
		}
	}
	return l
}

// restoreError is a failed Flink-like restore.
type restoreError struct {
	ID    int64  // the pointer being read
	Stage string // "ha": reading a retained pointer's HA file; "state": the restored checkpoint's files
	Err   error
}

func (e *restoreError) Error() string {
	return fmt.Sprintf("restore, pointer %d (%s): %v", e.ID, e.Stage, e.Err)
}
func (e *restoreError) Unwrap() error { return e.Err }

var (
	errShort    = errors.New("file shorter than recorded")
	errMismatch = errors.New("content differs from what DC1 wrote")
)

// restore does what a Flink 1.15+ JobManager does on DC2 when it starts
// with ZooKeeper HA: read every retained pointer (with locks) and its HA
// file (one unreadable HA file fails the recovery), then restore the
// newest: open and read its _metadata and every state file the HA file
// references. It also checks every byte read against what DC1 wrote.
func (w *world) restore(conn *zk.Conn) (int64, error) {
	ids, err := w.pointerIDs(conn, true)
	if err != nil {
		return -1, err
	}
	if len(ids) == 0 {
		return -1, errors.New("restore: no checkpoint pointer: the job starts empty")
	}
	ccs := map[int64]*flinkha.CompletedCheckpoint{}
	for _, id := range ids {
		cc, err := w.readHA(conn, id)
		if err != nil {
			return -1, &restoreError{ID: id, Stage: "ha", Err: err}
		}
		ccs[id] = cc
	}
	newest := ids[len(ids)-1]
	cc := ccs[newest]
	refs := cc.Files
	if cc.Metadata != nil {
		refs = append([]flinkha.FileRef{*cc.Metadata}, refs...)
	}
	if len(refs) < 2 {
		return -1, &restoreError{ID: newest, Stage: "state", Err: fmt.Errorf("HA file references only %d files", len(refs))}
	}
	for _, ref := range refs {
		if err := w.readFile(ref.Path, ref.Size); err != nil {
			return -1, &restoreError{ID: newest, Stage: "state", Err: err}
		}
	}
	return newest, nil
}

func (w *world) readHA(conn *zk.Conn, id int64) (*flinkha.CompletedCheckpoint, error) {
	data, _, err := conn.Get(w.znode(id))
	if err != nil {
		return nil, err
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		return nil, err
	}
	local, err := w.resolver.Local(h.URI)
	if err != nil {
		return nil, err
	}
	ha, err := w.readVerified(local, h.Size)
	if err != nil {
		return nil, err
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(ha)
	if err != nil {
		return nil, err
	}
	if cc.CheckpointID != id || cc.JobID != w.job {
		return nil, fmt.Errorf("HA file %s holds checkpoint %d of job %s", local, cc.CheckpointID, cc.JobID)
	}
	return cc, nil
}

func (w *world) readFile(flinkPath string, size int64) error {
	local, err := w.resolver.Local(flinkPath)
	if err != nil {
		return err
	}
	_, err = w.readVerified(local, size)
	return err
}

// readVerified reads a DC2 file whole, as Flink's input streams do, and
// compares it with DC1's original.
func (w *world) readVerified(local string, size int64) ([]byte, error) {
	data, err := os.ReadFile(local)
	if err != nil {
		return nil, err
	}
	if size >= 0 && int64(len(data)) < size {
		return nil, fmt.Errorf("%s: %w: %d of %d bytes", local, errShort, len(data), size)
	}
	rel, err := filepath.Rel(w.dc2, local)
	if err != nil {
		return nil, err
	}
	want, ok := w.hashes[filepath.ToSlash(rel)]
	if !ok {
		return nil, fmt.Errorf("%s: not a file DC1 wrote", local)
	}
	if sha256.Sum256(data) != want {
		return nil, fmt.Errorf("%s: %w", local, errMismatch)
	}
	return data, nil
}

// checkBaseline restores from ZooKeeper's pointers as they are (no
// ckptfs): it must fail with a missing or short file exactly when
// ZooKeeper's newest pointer is ahead of DC2's newest L2-complete one.
func (w *world) checkBaseline(t *testing.T, conn *zk.Conn, l *atLoss) {
	t.Helper()
	ahead := l.newest() > l.optimal
	id, err := w.restore(conn)
	t.Logf("baseline restore (no ckptfs): ZooKeeper ahead of DC2: %v; restored %d, error: %v", ahead, id, err)
	if ahead {
		if err == nil {
			t.Fatalf("baseline: ZooKeeper's newest pointer %d is ahead of DC2's newest L2-complete %d, yet the restore succeeded", l.newest(), l.optimal)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errShort) {
			t.Fatalf("baseline: the restore failed, but not on a missing or short file: %v", err)
		}
		return
	}
	if err == nil {
		if id != l.newest() {
			t.Fatalf("baseline restored %d, want ZooKeeper's newest %d", id, l.newest())
		}
		return
	}
	// Not ahead: the newest checkpoint is whole on DC2; only an older
	// retained pointer whose HA file DC2 lacks can fail the recovery.
	var re *restoreError
	if !errors.As(err, &re) || re.Stage != "ha" || re.ID == l.newest() || l.verdicts[re.ID].HAFileReadable {
		t.Fatalf("baseline: ZooKeeper is not ahead of DC2, yet the restore failed: %v", err)
	}
	if _, err := w.readHA(conn, l.newest()); err != nil {
		t.Fatalf("baseline: newest pointer %d is L2-complete on DC2 but its HA file does not read: %v", l.newest(), err)
	}
}

func (w *world) takeover(ctx context.Context, t *testing.T, c *zktest.Cluster, v *manifest.Verifier) *zkbridge.TakeoverReport {
	t.Helper()
	cfg := zkbridge.DefaultConfig()
	cfg.Servers = c.Servers(survivors...)
	cfg.SessionTimeout = 5 * time.Second
	cfg.ClusterID = w.clusterID
	cfg.Site = site
	cfg.FlinkSessionTimeout = flinkSession
	cfg.LivenessMargin = time.Second
	cfg.LivenessPoll = 100 * time.Millisecond
	cfg.LockWait = 5 * time.Second
	cfg.CheckpointsDirs = []string{flinkStorage + "/checkpoints"}
	b, err := zkbridge.New(ctx, cfg, zkbridge.NewSiteVerifier(v))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	rep, err := b.Takeover(tctx, zkbridge.TakeoverOptions{Wait: takeoverWait})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return rep
}

// checkAfterTakeover checks design §6 (1)-(3) after the takeover.
func (w *world) checkAfterTakeover(ctx context.Context, t *testing.T, conn *zk.Conn, v *manifest.Verifier, l *atLoss, rep *zkbridge.TakeoverReport) {
	t.Helper()
	after, err := w.pointerIDs(conn, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after takeover: pointers %v", after)

	if l.optimal < 0 {
		// Nothing restorable by ZooKeeper failover: change nothing, refuse.
		if !rep.Refused() {
			t.Errorf("invariant 3: DC2 holds no L2-complete pointer, yet the takeover did not refuse: %s", rep.Decision)
		}
		if rep.Activated {
			t.Errorf("a refused takeover activated %s", site)
		}
		if !slices.Equal(after, l.ids) {
			t.Errorf("invariant 3: a refused takeover changed the pointers: %v -> %v", l.ids, after)
		}
		return
	}

	if rep.Refused() {
		t.Fatalf("takeover refused although pointer %d is L2-complete on DC2: %s", l.optimal, rep.Decision)
	}
	if !rep.Activated || rep.ActiveSite != site {
		t.Errorf("takeover did not make %s active: activated %v, active site %q", site, rep.Activated, rep.ActiveSite)
	}

	// Invariant 2: the newest pointer is L2-complete here and optimal.
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
		if id == after[len(after)-1] && !(pv.HAFileReadable && pv.Verdict.Complete && pv.Verdict.Level >= manifest.L2) {
			t.Errorf("invariant 2: newest pointer %d after takeover is not L2-complete on DC2: %v", id, pv.Verdict)
		}
		if !pv.HAFileReadable {
			t.Errorf("pointer %d kept although its HA file is unreadable on DC2 (Flink's recovery would fail)", id)
		}
	}

	// Invariant 3: exactly the pointers above the optimal one or with an
	// unreadable HA file are retracted, each with a backup of its bytes.
	var wantKept []int64
	for _, id := range l.ids {
		retract := id > l.optimal || !l.verdicts[id].HAFileReadable
		if !retract {
			wantKept = append(wantKept, id)
		}
	}
	if !slices.Equal(after, wantKept) {
		t.Errorf("pointers after takeover %v, want %v", after, wantKept)
	}
	for _, id := range l.ids {
		if slices.Contains(after, id) {
			continue
		}
		w.checkBackup(t, conn, id, l.pointers[id])
	}

	// Invariant 1: the restore through the remaining pointers reads every
	// file, every byte as DC1 wrote it.
	id, err := w.restore(conn)
	if err != nil {
		t.Fatalf("invariant 1: restore after takeover failed: %v", err)
	}
	if id != l.optimal {
		t.Errorf("restore after takeover used checkpoint %d, want %d", id, l.optimal)
	}
	t.Logf("restored checkpoint %d from DC2 after takeover (RPO loss: %d checkpoints)", id, l.newest()-id)
}

func (w *world) checkBackup(t *testing.T, conn *zk.Conn, id int64, original []byte) {
	t.Helper()
	p := fmt.Sprintf("/ckptfs/%s/pruned/%s/%019d", w.clusterID, w.job, id)
	data, _, err := conn.Get(p)
	if err != nil {
		t.Errorf("invariant 3: pointer %d retracted without backup at %s: %v", id, p, err)
		return
	}
	var b zkbridge.Backup
	if err := json.Unmarshal(data, &b); err != nil {
		t.Errorf("backup %s: %v", p, err)
		return
	}
	if b.Znode != w.znode(id) || string(b.Data) != string(original) || !b.HadLocks || b.CheckpointID != id {
		t.Errorf("invariant 3: backup %s does not hold pointer %d as it was (znode %s, had locks %v, %d bytes, want %d)",
			p, id, b.Znode, b.HadLocks, len(b.Data), len(original))
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
