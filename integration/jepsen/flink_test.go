package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/realflink"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// Real Flink in a run (runConfig.flink): DC1's JobManager and
// TaskManager are a real distribution's (integration/realflink), with
// ZooKeeper HA on the run's ensemble and checkpoints and HA files
// written through DC1's first mount; after the run, real Flink on the
// active site recovers the job from ZooKeeper and must restore a
// checkpoint that site holds, and run.
//
// Flink names its files by one path in every site. Each Flink process
// runs in a mount namespace of its own site (realflink.Site) in which
// that path is a symbolic link to the site's first mount point as the
// test process sees it (/proc/<pid>/root/...): a daemon that the
// harness restarts mounts again there, which a bind mount made earlier
// would not show.
const (
	flinkInterval    = time.Second // checkpoint interval
	flinkKeys        = 16
	flinkPayload     = 4096 // bytes per key: state files, not inline state
	flinkRate        = 200  // records a second
	flinkParallelism = 1
	flinkUp          = 90 * time.Second // a cluster up and its job running
	flinkRestoreWait = 90 * time.Second // the end's restore
)

// flinkDist is a release's distribution and the test job built for it,
// found by TestJepsen before the runs.
type flinkDist struct {
	dist realflink.Dist
	jar  string
}

var flinkDists = map[string]flinkDist{}

// flinkWorld is real Flink's part of a run.
type flinkWorld struct {
	w    *world
	d    flinkDist
	path string // Flink's storage, the same path in every site
	// ports: per site, the RPC and REST ports of its first cluster and
	// of the one started after the run.
	ports map[string][]int
	dc1   *flinkCluster
	end   *flinkCluster
}

func newFlinkWorld(w *world) *flinkWorld {
	d, ok := flinkDists[w.cfg.flink]
	if !ok {
		w.t.Fatalf("Flink %s was not looked for before the runs", w.cfg.flink)
	}
	fw := &flinkWorld{w: w, d: d, path: filepath.Join(w.dir, "storage", "flink"), ports: map[string][]int{}}
	w.storage = "file:" + fw.path
	if err := os.MkdirAll(filepath.Dir(fw.path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	for _, s := range w.sites {
		view := fw.view(s.name)
		if err := os.MkdirAll(view, 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.Symlink(fmt.Sprintf("/proc/%d/root%s", os.Getpid(), s.slots[0].mnt), filepath.Join(view, filepath.Base(fw.path))); err != nil {
			w.t.Fatal(err)
		}
		ports, err := zktest.FreePorts("127.0.0.1", 4)
		if err != nil {
			w.t.Fatal(err)
		}
		fw.ports[s.name] = ports
	}
	return fw
}

// view is the directory a site's namespaces see at Flink's storage's
// parent: a link to the site's first mount.
func (fw *flinkWorld) view(site string) string { return filepath.Join(fw.w.dir, site, "view") }

// local is the site's local disk (the job's report) at local().
func (fw *flinkWorld) local(site, name string) string { return filepath.Join(fw.w.dir, site, name) }

// reportPath is the job's report file as Flink's TaskManagers see it:
// each cluster's own local disk.
func (fw *flinkWorld) reportPath() string { return filepath.Join(fw.w.dir, "local", "report.txt") }

// addresses are the site's JobManagers as Flink publishes them
// (--site-jobmanagers).
func (fw *flinkWorld) addresses(site string) []string {
	var out []string
	for _, p := range fw.ports[site] {
		out = append(out, "127.0.0.1:"+strconv.Itoa(p))
	}
	return out
}

// flinkCluster is one site's Flink session cluster in a namespace of its
// own; its JobManager and TaskManager are in the site's freezer group
// and, while keep is set, started again a second after they end, as
// their supervisor would.
type flinkCluster struct {
	fw    *flinkWorld
	site  *site
	name  string
	ns    *realflink.Site
	cl    *realflink.Cluster
	local string
	keep  bool

	mu       sync.Mutex
	jm, tm   *realflink.Process // GUARDED_BY(mu)
	stopping bool               // GUARDED_BY(mu)
	starts   int                // GUARDED_BY(mu)
	done     chan struct{}
}

// startCluster starts a Flink cluster of site s: ports are its RPC and
// REST ports, zk its connect string, local its local disk.
func (fw *flinkWorld) startCluster(s *site, name string, ports []int, zk, local string, keep bool) (*flinkCluster, error) {
	w := fw.w
	ns := realflink.NewSite(w.t, name, filepath.Join(w.dir, s.name, name+"-log"))
	// The site's cleanup kills its processes: thawed first (the v1
	// freezer lets SIGKILL act only as a group thaws).
	w.t.Cleanup(func() {
		for _, x := range w.sites {
			w.thaw(x)
		}
	})
	if err := ns.Bind(fw.view(s.name), filepath.Dir(fw.path)); err != nil {
		return nil, err
	}
	if err := ns.Bind(local, filepath.Dir(fw.reportPath())); err != nil {
		return nil, err
	}
	cfg := realflink.ClusterConfig{
		Dist: fw.d.dist, Dir: filepath.Join(w.dir, s.name, name), Addr: "127.0.0.1", RPCPort: ports[0], RESTPort: ports[1],
		ZK: zk, PathRoot: w.emu.PathRoot, ClusterID: "/" + w.cid, SessionTimeout: w.cfg.grace,
		CheckpointsDir: filepath.Join(fw.path, "checkpoints"), HADir: filepath.Join(fw.path, "ha"),
		Interval: flinkInterval, Retained: 3,
		Extra: map[string]string{
			// A failing job (a fenced mount, a dead daemon) restarts
			// less often on two cores; a checkpoint stuck behind a
			// stopped daemon gives way.
			"restart-strategy.fixed-delay.delay": "2 s",
			"execution.checkpointing.timeout":    "30 s",
		},
	}
	cl, err := realflink.NewCluster(ns, cfg)
	if err != nil {
		return nil, err
	}
	fc := &flinkCluster{fw: fw, site: s, name: name, ns: ns, cl: cl, local: local, keep: keep, done: make(chan struct{})}
	if err := fc.start(true, true); err != nil {
		return nil, err
	}
	go fc.keeper()
	return fc, nil
}

// start starts the JobManager and, or, the TaskManager.
func (fc *flinkCluster) start(jm, tm bool) error {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	w := fc.fw.w
	if fc.stopping {
		return errors.New("stopping")
	}
	fc.starts++
	if jm {
		p, err := fc.cl.StartJobManager(fmt.Sprintf("jobmanager-%d", fc.starts))
		if err != nil {
			return err
		}
		if err := fc.site.addProcess(p.PID()); err != nil {
			w.logf("%s's JobManager: adding to the freezer group: %v", fc.name, err)
		}
		fc.jm = p
		w.logf("%s: Flink's JobManager started (pid %d)", fc.name, p.PID())
	}
	if tm {
		p, err := fc.cl.StartTaskManager(fmt.Sprintf("taskmanager-%d", fc.starts))
		if err != nil {
			return err
		}
		if err := fc.site.addProcess(p.PID()); err != nil {
			w.logf("%s's TaskManager: adding to the freezer group: %v", fc.name, err)
		}
		fc.tm = p
		w.logf("%s: Flink's TaskManager started (pid %d)", fc.name, p.PID())
	}
	return nil
}

// keeper starts a JobManager or TaskManager that ended again, a second
// later and once its site is not frozen, until stop.
func (fc *flinkCluster) keeper() {
	defer close(fc.done)
	w := fc.fw.w
	for {
		fc.mu.Lock()
		jm, tm := fc.jm, fc.tm
		fc.mu.Unlock()
		var which string
		select {
		case <-jm.Exited():
			which = "JobManager"
		case <-tm.Exited():
			which = "TaskManager"
		case <-w.ctx.Done():
			return
		}
		fc.mu.Lock()
		stopping := fc.stopping
		fc.mu.Unlock()
		if stopping || !fc.keep {
			if !stopping {
				w.logf("%s: Flink's %s ended: %v", fc.name, which, errOf(jm, tm, which))
			}
			return
		}
		w.logf("%s: Flink's %s ended (%v); starting it again in 1s", fc.name, which, errOf(jm, tm, which))
		time.Sleep(time.Second)
		for fc.site.isFrozen() && w.ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		fc.mu.Lock()
		stopping = fc.stopping
		fc.mu.Unlock()
		if stopping || w.ctx.Err() != nil {
			return
		}
		if err := fc.start(which == "JobManager", which == "TaskManager"); err != nil {
			w.logf("%s: starting Flink's %s again: %v", fc.name, which, err)
			return
		}
	}
}

func errOf(jm, tm *realflink.Process, which string) error {
	if which == "JobManager" {
		return jm.Err()
	}
	return tm.Err()
}

// killJM kills the JobManager (SIGKILL); the keeper starts it again.
func (fc *flinkCluster) killJM() {
	fc.mu.Lock()
	jm := fc.jm
	fc.mu.Unlock()
	jm.Signal(syscall.SIGKILL)
	fc.fw.w.logf("%s: Flink's JobManager killed (pid %d)", fc.name, jm.PID())
}

// stop kills both processes and waits for them and the keeper.
func (fc *flinkCluster) stop() {
	fc.mu.Lock()
	fc.stopping = true
	jm, tm := fc.jm, fc.tm
	fc.mu.Unlock()
	jm.Kill()
	tm.Kill()
	<-fc.done
	fc.fw.w.logf("%s: Flink stopped", fc.name)
}

// jobManager is the current JobManager process.
func (fc *flinkCluster) jobManager() *realflink.Process {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.jm
}

// startDC1 starts DC1's Flink through its own proxies to ZooKeeper (the
// J fault blocks them), submits the test job with the run's job id, and
// waits until it runs and completed a checkpoint.
func (fw *flinkWorld) startDC1() error {
	w := fw.w
	for _, addr := range w.cluster.Servers() {
		w.jmProxy = append(w.jmProxy, zktest.NewProxy(w.t, addr))
	}
	s := w.sites[0]
	local := fw.local("dc1", "local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	fc, err := fw.startCluster(s, "dc1-flink", fw.ports["dc1"][:2], proxyAddrs(w.jmProxy), local, true)
	if err != nil {
		return err
	}
	fw.dc1 = fc
	ctx, cancel := context.WithTimeout(w.ctx, flinkUp)
	defer cancel()
	if err := waitFor(ctx, "DC1's TaskManager to register", func() bool {
		o, err := fc.cl.REST.Overview(ctx)
		return err == nil && o.TaskManagers >= 1
	}); err != nil {
		return err
	}
	args := []string{"--report", fw.reportPath(), "--rate", strconv.Itoa(flinkRate), "--keys", strconv.Itoa(flinkKeys),
		"--payload", strconv.Itoa(flinkPayload), "--parallelism", strconv.Itoa(flinkParallelism), "--name", "jepsen"}
	id, err := fc.cl.REST.SubmitAs(ctx, fw.d.jar, args, w.job)
	if err != nil {
		return fmt.Errorf("submitting the job to DC1's Flink: %w", err)
	}
	if id != w.job {
		return fmt.Errorf("DC1's Flink runs the job as %s, not %s", id, w.job)
	}
	var first int64
	if err := waitFor(ctx, "DC1's job to run and complete a checkpoint", func() bool {
		cp, err := fc.cl.REST.Checkpoints(ctx, w.job)
		if err != nil || cp.Latest.Completed == nil {
			return false
		}
		first = cp.Latest.Completed.ID
		return true
	}); err != nil {
		return err
	}
	w.logf("DC1's real Flink %s runs job %s: checkpoint %d completed through %s", fw.d.dist.Version, w.job, first, s.slots[0].id)
	return nil
}

// waitFor polls cond every 200 ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// atEnd starts real Flink on site, the active one, once the run healed
// and every check of ZooKeeper's pointers was made: it must recover the
// job, restore the newest pointer (which the last check judged complete
// there) and run with exactly that checkpoint's state.
func (fw *flinkWorld) atEnd(site string, newest int64) {
	w := fw.w
	fe := &flinkEnd{site: site, newest: newest, restored: -1}
	defer func() {
		w.h.mu.Lock()
		w.h.flinkEnd = fe
		w.h.mu.Unlock()
	}()
	if newest < 0 {
		fe.note = "no pointer to restore"
		return
	}
	s := w.sites[0]
	if site == "dc2" {
		s = w.sites[1]
	}
	local := fw.local(site, "local-end")
	if err := os.MkdirAll(local, 0o755); err != nil {
		fe.note = err.Error()
		return
	}
	start := now()
	fc, err := fw.startCluster(s, site+"-flink-end", fw.ports[site][2:], w.cluster.ConnectString(), local, false)
	if err != nil {
		fe.note = "starting Flink: " + err.Error()
		return
	}
	fw.end = fc
	defer fc.stop()
	ctx, cancel := context.WithTimeout(w.ctx, flinkRestoreWait)
	defer cancel()
	jm := fc.jobManager()
	var restored int64 = -1
	err = waitFor(ctx, "the job to restore a checkpoint and run", func() bool {
		select {
		case <-jm.Exited():
			return true
		default:
		}
		cp, err := fc.cl.REST.Checkpoints(ctx, w.job)
		if err != nil || cp.Latest.Restored == nil {
			return false
		}
		restored = cp.Latest.Restored.ID
		jobs, err := fc.cl.REST.Jobs(ctx)
		if err != nil {
			return false
		}
		for _, j := range jobs {
			if j.ID == w.job && j.Status == "RUNNING" {
				return true
			}
		}
		return false
	})
	select {
	case <-jm.Exited():
		fe.err = fmt.Sprintf("its JobManager exited (%v): %s", jm.Err(), flinkCause(jm.FlinkLog))
		return
	default:
	}
	if err != nil {
		fe.err = fmt.Sprintf("%v after %v (restored %d); its JobManager's log: %s", err, flinkRestoreWait, restored, flinkCause(jm.FlinkLog))
		if ex, xerr := fc.cl.REST.Exceptions(context.Background(), w.job); xerr == nil && len(ex) > 0 {
			fe.err += "; the job's newest exception: " + firstLine(ex[0].Stacktrace)
		}
		return
	}
	fe.restored = restored
	w.logf("%s: real Flink restored checkpoint %d and runs, %v after it started", site, restored, now().sub(start).Round(time.Millisecond))
	// What the job says it found: every key's state exactly that of
	// the checkpoint, recomputed from what DC1's job had processed at
	// its snapshot.
	dc1, err := realflink.ReadReport(filepath.Join(fw.local("dc1", "local"), "report.txt"))
	if err != nil {
		fe.note = "DC1's report: " + err.Error()
		return
	}
	next, ok := dc1.NextRecord(restored)
	if !ok {
		fe.note = fmt.Sprintf("DC1's job reported no snapshot of checkpoint %d", restored)
		return
	}
	var rep *realflink.Report
	if err := waitFor(ctx, "the job to report every key", func() bool {
		rep, err = realflink.ReadReport(filepath.Join(local, "report.txt"))
		return err == nil && len(rep.Keys) >= flinkKeys
	}); err != nil {
		fe.err = fmt.Sprintf("the job restored checkpoint %d but did not process every key: %v", restored, err)
		return
	}
	for _, got := range rep.Restores {
		if got != restored && got != -1 {
			fe.stateErr = fmt.Sprintf("the job says it restored checkpoint %d, REST says %d", got, restored)
			return
		}
	}
	if err := rep.CheckRestore(flinkKeys, next); err != nil {
		fe.stateErr = err.Error()
		return
	}
	w.logf("%s: the job restored exactly checkpoint %d's state (%d keys, records below %d)", site, restored, flinkKeys, next)
}

// flinkCause is the first error a Flink process logged, with the
// innermost cause that follows it.
func flinkCause(log string) string {
	data, err := os.ReadFile(log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		// Curator logs a refused SASL login as an error; ZooKeeper
		// here has no authentication and Flink goes on.
		if !strings.Contains(l, " ERROR ") || strings.Contains(l, "Authentication failed") {
			continue
		}
		return realflink.Cause(lines, i)
	}
	return "no error logged"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// findFlink finds, before the runs, the distribution and the built job
// of every release the runs draw (it fails or skips the test as
// realflink does when one is missing).
func findFlink(t *testing.T, cfgs []*runConfig) {
	var want []string
	for _, c := range cfgs {
		if c.flink != "" {
			want = append(want, c.flink)
		}
	}
	if len(want) == 0 {
		return
	}
	rs, err := realflink.Releases()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		for _, v := range want {
			if r.Version == v {
				if _, ok := flinkDists[v]; !ok {
					d := realflink.FindDist(t, r)
					flinkDists[v] = flinkDist{dist: d, jar: realflink.JobJar(t, d)}
				}
			}
		}
	}
	for _, v := range want {
		if _, ok := flinkDists[v]; !ok {
			t.Fatal(errors.New("Flink " + v + " is not in flink/versions.tsv"))
		}
	}
}
