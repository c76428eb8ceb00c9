//go:build linux

package realflink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/wan"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// The partition tests' timing: DC1's mount fences itself at its write
// deadline, half a lease (standbyLease, 6 s) after its daemon's last
// renewal of the lease, before any takeover can see the lease unchanged
// for a whole lease (design §5.14). ckptfs's own ZooKeeper session is
// mountSession.
const (
	mountSession = 2 * time.Second
	lagAlarm     = 2 // checkpoints DC2 may be behind before its health fails
)

// zkSites places the five ZooKeeper servers: two in DC2, the tie-breaker
// in DC3, two in DC1. DC1's have the highest ids, which ZooKeeper's
// election prefers among equals, so that the leader is in DC1 when DC1
// is cut off.
var zkSites = []string{"dc2", "dc2", "dc3", "dc1", "dc1"}

// fault is how DC1 is cut off from DC2 and DC3 in a partition run.
type fault string

const (
	faultBoth   fault = "partition" // both ways
	faultOneWay fault = "one-way"   // DC1's packets to the others are lost, theirs reach DC1
	faultFlap   fault = "flapping"  // the link goes down and up every few seconds, then stays down
	faultLoss   fault = "loss"      // 60% of DC1's packets lost both ways, then a partition
)

var faults = []fault{faultBoth, faultOneWay, faultFlap, faultLoss}

// netWorld is a partition run: three sites that are network hosts on a
// WAN, five ZooKeeper servers among them, DC1 and DC2 with their NAS,
// mount and Flink.
type netWorld struct {
	*world
	wan   *wan.WAN
	dc3   *Site
	zk    *zktest.Cluster
	fault fault
	// metrics is DC2's mount's metrics address.
	metrics string
	// fl is each site's Flink (configured; started when the run says).
	fl map[string]*Cluster
	// out is what the run measured, for make chaos-net.
	out *netOutcome
}

// netOutcome is what a partition run measured.
type netOutcome struct {
	Fault                fault
	LeaderInDC1          bool
	CutToFence           time.Duration // DC1's cut to its mount's fence
	FenceBeforeTakeover  bool
	Takeover             time.Duration // ckptfs takeover on DC2
	WritesAfterFence     int           // files DC1's NAS got after the fence
	WritesAfterFenceDC2  int           // of those, on DC2's NAS
	PointersAfterFence   int           // pointers DC1 created after the fence (of what it wrote before)
	Restored, Optimal    int64
	Refused              bool
	ReturnedStayedFenced bool
	StraysSwept          int    // pointers DC1's returning JobManager added that DC2's daemon retracted
	OldDirectionAlarm    string // DC2's health once the replication ran DC1 to DC2 again
	Restarts             int    // DC2's job's restarts with DC1 back (checkRestarts)
	RestartCause         string
	Lost                 bool // got as far as cutting DC1 off
}

// newNetWorld builds the sites, the ensemble and both mounts; DC1's is
// the primary with a lease, DC2's a replica serving metrics.
func newNetWorld(t *testing.T, r *run, pr partitionRun, out *netOutcome) *netWorld {
	f := pr.fault
	t.Helper()
	root := t.TempDir()
	w := &netWorld{
		world: &world{
			r: r, root: root, flink: filepath.Join(root, "storage", "flink"),
			clusterID: fmt.Sprintf("/netpart-%s-%d", strings.ReplaceAll(r.dist.Version, ".", "_"), r.seed),
			backing:   map[string]string{}, local: map[string]string{}, mounts: map[string]*Process{},
		},
		fault: f, out: out,
	}
	out.Fault = f
	// say's clock starts with the world; the first cleanup registered
	// runs last.
	r.start = time.Now()
	t.Cleanup(func() { t.Logf("[%6.1fs] torn down", time.Since(r.start).Seconds()) })
	if keep := os.Getenv("CKPTFS_REALFLINK_KEEP"); keep != "" {
		// Registered after t.TempDir's removal, so it runs before it.
		t.Cleanup(func() {
			if t.Failed() {
				exec.Command("cp", "-r", root, keep).Run()
			}
		})
	}
	w.wan = NewWAN(t)
	w.dc1 = NewNetSite(t, "dc1", filepath.Join(root, "dc1", "log"), w.wan)
	w.dc2 = NewNetSite(t, "dc2", filepath.Join(root, "dc2", "log"), w.wan)
	w.dc3 = NewNetSite(t, "dc3", filepath.Join(root, "dc3", "log"), w.wan)
	sites := map[string]*Site{"dc1": w.dc1, "dc2": w.dc2, "dc3": w.dc3}
	w.zk = zktest.StartCluster(t, 5, func(cfg *zktest.Config) {
		cfg.MaxSessionTimeout = 5 * time.Second
		cfg.Place = func(i int) zktest.Host {
			s := sites[zkSites[i]]
			return zktest.Host{Addr: s.Addr, Enter: append([]string{"nsenter"}, s.Enter()...)}
		}
	})
	for _, s := range []*Site{w.dc1, w.dc2} {
		w.backing[s.Name] = filepath.Join(root, s.Name, "nas")
		w.local[s.Name] = filepath.Join(root, s.Name, "local")
		if err := os.MkdirAll(w.backing[s.Name], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := s.Bind(w.local[s.Name], filepath.Join(root, "local")); err != nil {
			t.Fatal(err)
		}
	}
	w.fl = map[string]*Cluster{"dc1": w.flinkOn(t, w.dc1), "dc2": w.flinkOn(t, w.dc2)}
	args := func(site string) []string {
		a := []string{"--zk", w.zk.ConnectString(), "--cluster-id", w.clusterID, "--path-root", pathRoot,
			"--map", w.uri() + "=" + w.backing[site], "--poll", "100ms",
			"--zk-session-timeout", mountSession.String(), "--flink-session-timeout", flinkSession.String()}
		if pr.auto {
			// Both sites' daemons: the same settings, their own
			// JobManagers' addresses.
			cfg := w.fl[site].Config
			a = append(a, "--takeover", "auto", "--lease-duration", standbyLease.String(), "--hold-timeout", "90s",
				"--site-jobmanagers", fmt.Sprintf("%s:%d", cfg.Addr, cfg.RPCPort),
				"--site-jobmanagers", fmt.Sprintf("%s:%d", cfg.Addr, cfg.RESTPort))
		}
		return a
	}
	var err error
	if w.mounts["dc1"], err = w.dc1.StartMount("ckptfs", binary, "primary", w.backing["dc1"], w.flink, args("dc1")...); err != nil {
		t.Fatal(err)
	}
	w.metrics = fmt.Sprintf("%s:%d", w.dc2.Addr, freePorts(t, "127.0.0.1", 1)[0])
	if w.mounts["dc2"], err = w.dc2.StartMount("ckptfs", binary, "replica", w.backing["dc2"], w.flink,
		append(args("dc2"), "--metrics-addr", w.metrics, "--lag-interval", "300ms")...); err != nil {
		t.Fatal(err)
	}
	if pr.auto {
		// The first start goes through ckptfs takeover (the systemd
		// gate): DC1 is the active site, and holds its lease.
		if code, said := w.takeoverOn(t, w.dc1, 60*time.Second); code != 0 {
			t.Fatalf("DC1's first takeover exited %d:\n%s", code, said)
		}
	}
	w.say(t, "sites, ZooKeeper and mounts ready")
	return w
}

// flinkOn configures a site's Flink on its own address; every process
// binds all of its namespace's addresses, so that what Flink reaches at
// localhost (1.20's jar upload to the blob server) is there too.
func (w *netWorld) flinkOn(t *testing.T, s *Site) *Cluster {
	t.Helper()
	ports := freePorts(t, "127.0.0.1", 2)
	cfg := ClusterConfig{
		Dist: w.r.dist, Dir: filepath.Join(w.root, s.Name), Addr: s.Addr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: w.zk.ConnectString(), PathRoot: pathRoot, ClusterID: w.clusterID, SessionTimeout: flinkSession,
		CheckpointsDir: filepath.Join(w.flink, "checkpoints"), HADir: filepath.Join(w.flink, "ha"),
		Interval: interval, Retained: retained,
		Extra: map[string]string{"jobmanager.bind-host": "0.0.0.0", "taskmanager.bind-host": "0.0.0.0", "rest.bind-address": "0.0.0.0"},
	}
	fl, err := NewCluster(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// others are the sites DC1 is cut off from.
var others = []string{"dc2", "dc3"}

// leaderToDC1 restarts ZooKeeper leaders until one of DC1's servers
// leads, so that DC1 takes the leader with it when it is cut off.
func (w *netWorld) leaderToDC1(t *testing.T) {
	t.Helper()
	for range 6 {
		l, err := w.zk.WaitLeader(stepTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if zkSites[l] == "dc1" {
			w.out.LeaderInDC1 = true
			w.say(t, "ZooKeeper's leader is server %d, in DC1", l)
			return
		}
		if err := w.zk.Stop(l); err != nil {
			t.Fatal(err)
		}
		if _, err := w.zk.WaitLeader(stepTimeout); err != nil {
			t.Fatal(err)
		}
		if err := w.zk.Start(l); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("no ZooKeeper leader in DC1 after six elections")
}

// servingLeader waits until one of the servers idx leads and the others
// of them serve (the survivors' quorum), and returns the leader.
func (w *netWorld) servingLeader(t *testing.T, idx ...int) int {
	t.Helper()
	leader, _ := w.servingLeaderSince(t, idx...)
	return leader
}

// servingLeaderSince is servingLeader, and also when it last saw none of
// the servers lead: the leader was elected after that.
func (w *netWorld) servingLeaderSince(t *testing.T, idx ...int) (int, time.Time) {
	t.Helper()
	leader, none, ok := w.servingLeaderWithin(stepTimeout, idx...)
	if !ok {
		t.Fatalf("timed out after %v waiting for servers %v to form a quorum", stepTimeout, idx)
	}
	return leader, none
}

// servingLeaderWithin is servingLeaderSince waiting at most timeout; ok
// is false when no server of idx led by then.
func (w *netWorld) servingLeaderWithin(timeout time.Duration, idx ...int) (leader int, none time.Time, ok bool) {
	none = time.Now()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		at := time.Now()
		leader = -1
		known := true
		for _, i := range idx {
			m, err := w.zk.Mode(i)
			if err != nil {
				known = false // unknown: neither led nor none did
				break
			}
			if m == zktest.ModeLeader {
				leader = i
			}
		}
		if !known {
			continue
		}
		if leader >= 0 {
			return leader, none, true
		}
		none = at
	}
	return -1, none, false
}

// takeoverOn runs `ckptfs takeover` in a site, against every server.
func (w *netWorld) takeoverOn(t *testing.T, s *Site, wait time.Duration) (int, string) {
	t.Helper()
	cmd := s.Command(binary, "takeover", "--zk", w.zk.ConnectString(), "--site", s.Name,
		"--cluster-id", w.clusterID, "--path-root", pathRoot, "--map", w.uri()+"="+w.backing[s.Name],
		"--checkpoints-dir", w.uri()+"/checkpoints", "--flink-session-timeout", flinkSession.String(),
		"--wait", wait.String())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return 0, string(out)
}

// activeSite reads active-site ("" when no site took over).
func (w *netWorld) activeSite(t *testing.T, conn interface {
	Get(string) ([]byte, *zk.Stat, error)
}) string {
	t.Helper()
	data, _, err := conn.Get("/ckptfs/" + strings.Trim(w.clusterID, "/") + "/active-site")
	if err != nil {
		return ""
	}
	return string(data)
}

// lagHealthy runs `ckptfs health --max-lag` against DC2's mount.
func (w *netWorld) lagHealthy() (bool, string) {
	out, err := w.dc2.Command(binary, "health", "--metrics-url", "http://"+w.metrics, "--max-lag", strconv.Itoa(lagAlarm), "--mountpoint", w.flink).CombinedOutput()
	return err == nil, strings.TrimSpace(string(out))
}

// logEvent is a line of a mount's JSON log.
type logEvent struct {
	Time   time.Time `json:"time"`
	Msg    string    `json:"msg"`
	Reason string    `json:"reason"`
}

// refusedAuto returns the line of a mount's log that says its automatic
// takeover was refused, "" when none does.
func refusedAuto(p *Process) string {
	for _, l := range p.Lines() {
		var e logEvent
		if json.Unmarshal([]byte(l), &e) == nil && strings.HasPrefix(e.Msg, "automatic takeover refused: ") {
			return l
		}
	}
	return ""
}

// events returns what a mount logged with msg after since.
func events(p *Process, msg string, since time.Time) []logEvent {
	var out []logEvent
	for _, l := range p.Lines() {
		if !strings.Contains(l, msg) {
			continue
		}
		var e logEvent
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == msg && e.Time.After(since) {
			out = append(out, e)
		}
	}
	return out
}

const (
	logFenced   = "fencing the mount: read-only"
	logPromoted = "promoting the mount to primary"
	logSwept    = "stray pointer retracted: written after this site's takeover, not held here"
	// logFenceDone: fusefs.Server.SetMode returned, every writer opened
	// before was released; until then a write in flight may still land.
	logFenceDone = "fence complete: nothing written through the mount reaches the backing directory any more"
)

// changedSince lists the files below dir modified after t, but for
// ckptfs's own directory.
func changedSince(dir string, t time.Time) map[string]os.FileInfo {
	out := map[string]os.FileInfo{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(dir, p); strings.HasPrefix(rel, ".ckptfs/") {
			// ckptfs's seals of what was written before (the recorder
			// outlives the fence), not Flink's writes.
			return nil
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().After(t) {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = fi
		}
		return nil
	})
	return out
}

// cut cuts DC1 off from DC2 and DC3 the run's way; the flapping link
// goes up and down every two seconds while the takeover runs (stop with
// the returned function, which leaves it down).
func (w *netWorld) cut(t *testing.T) (stop func()) {
	t.Helper()
	dc1 := []string{"dc1"}
	switch w.fault {
	case faultBoth:
		w.wan.Cut(dc1, others, false)
	case faultOneWay:
		w.wan.Cut(dc1, others, true)
	case faultLoss:
		w.wan.SetLoss(dc1, others, 0.6)
		time.Sleep(3 * time.Second)
		w.wan.SetLoss(dc1, others, 0)
		w.wan.Cut(dc1, others, false)
	case faultFlap:
		done, finished := make(chan struct{}), make(chan struct{})
		w.wan.Cut(dc1, others, false)
		go func() {
			defer close(finished)
			down := true
			for {
				select {
				case <-done:
					w.wan.Cut(dc1, others, false)
					return
				case <-time.After(2 * time.Second):
				}
				if down = !down; down {
					w.wan.Cut(dc1, others, false)
				} else {
					w.wan.Heal(dc1, others)
				}
			}
		}()
		var once sync.Once
		return func() { once.Do(func() { close(done); <-finished }) }
	}
	return func() {}
}

// TestIntegration_NetworkPartitions runs, with real ZooKeeper servers
// placed two in DC1, two in DC2 and one in DC3, real Flink and real
// mounts on sites that are network hosts, the partitions of issue 18 in
// one sequence:
//
//  1. DC1 cut off from DC2 only (DC3 sees both): DC1 keeps the quorum
//     with DC3, no takeover may happen on DC2 (exit 5, the JobManager is
//     alive), DC2's lag alarm rises while the replication is cut and
//     clears after;
//  2. DC1 cut off from DC2 and DC3 while its JobManager, TaskManager and
//     mount keep running, with ZooKeeper's leader in DC1: DC2 and DC3
//     keep a quorum, DC1's mount fences itself by its lease before DC2's
//     takeover activates DC2, nothing DC1 writes after the fence reaches
//     DC2's NAS or a pointer, DC2's Flink restores the newest checkpoint
//     DC2 holds;
//  3. DC1 comes back: its mount stays fenced and lists only what its NAS
//     holds completely, its JobManager rejoins Flink's leader election
//     and can write no pointer (every pointer stays one DC2 holds), and
//     the job keeps running on DC2.
func TestIntegration_NetworkPartitions(t *testing.T) {
	releases := TestReleases(t)
	mounttest.RequireFUSE(t)
	d := FindDist(t, releases[len(releases)-1])
	r := newRun(t, d, true)
	runPartition(t, r, partitionRun{fault: faultBoth, dc2Only: true})
}

// partitionRun is what a partition run does besides its run's release
// and replication.
type partitionRun struct {
	fault fault
	// dc2Only: first cut DC1 from DC2 alone (situation 1).
	dc2Only bool
	// moment: how long after DC2 holds a complete checkpoint (and the
	// leader is in DC1) DC1 is cut off.
	moment time.Duration
	// auto: both daemons run takeover auto with a liveness lease; DC2
	// takes over by itself, no command is run.
	auto bool
}

// runPartition is one partition run.
func runPartition(t *testing.T, r *run, pr partitionRun) netOutcome {
	out := &netOutcome{}
	return *runPartitionInto(t, r, pr, out)
}

// runPartitionInto keeps what it measured in out as it goes, so that a
// run that fails still tells how far it got (chaos-net).
func runPartitionInto(t *testing.T, r *run, pr partitionRun, out *netOutcome) *netOutcome {
	f, dc2Only := pr.fault, pr.dc2Only
	t.Logf("seed %d (replay: %s=%d go test -run '%s' ./integration/realflink/)", r.seed, seedEnvVar, r.seed, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 8*stepTimeout)
	defer cancel()
	w := newNetWorld(t, r, pr, out)
	defer w.say(t, "run over: tearing down")
	w.say(t, "run: Flink %s, %s replication, DC1 cut off by %s; sites dc1 %s, dc2 %s, dc3 %s", r.dist.Version, r.kind, f, w.dc1.Addr, w.dc2.Addr, w.dc3.Addr)

	// A primary writes once its site holds the lease: Flink starts then.
	waitUntil(t, stepTimeout, "DC1's mount to be writable", func() bool {
		return os.WriteFile(w.dc1.Path(filepath.Join(w.flink, "probe")), nil, 0o644) == nil
	}, w.mounts["dc1"])
	fl1 := w.fl["dc1"]
	jm1, tm1 := w.startFlink(t, fl1, "dc1")
	w.say(t, "DC1's Flink up")
	jar := JobJar(t, r.dist)
	var err error
	w.job, err = fl1.REST.Submit(ctx, jar, []string{"--report", w.reportPath(), "--rate", strconv.Itoa(rate),
		"--keys", strconv.Itoa(keys), "--payload", strconv.Itoa(payload), "--parallelism", strconv.Itoa(parallelism)})
	if err != nil {
		t.Fatalf("submit the job to DC1: %v", err)
	}
	waitJob(ctx, t, fl1, w.job, "RUNNING")
	w.say(t, "DC1: job %s running", w.job)

	// The replication runs over the link from DC1 to DC2: it stops when
	// the link is cut.
	var (
		repl     func()
		replStop func()
	)
	repl = func() {
		rp, every := w.replicator(t, jm1, tm1)
		done := make(chan error, 1)
		go func() { done <- rp.Run(ctx, every) }()
		var once sync.Once
		replStop = func() {
			once.Do(func() {
				rp.Stop()
				if err := <-done; err != nil {
					t.Errorf("replication: %v", err)
				}
			})
		}
	}
	repl()
	defer func() { replStop() }()

	zc := zktest.Connect(t, w.zk.Servers())
	v2 := newVerifier(t, w.uri(), w.backing["dc2"])
	first := w.waitComplete(ctx, t, zc.Conn, v2)
	w.say(t, "DC2 holds checkpoint %d completely", first)
	w.leaderToDC1(t)

	if dc2Only {
		// 1. DC1 and DC2 lose each other; DC3 sees both.
		phase1 := time.Now()
		w.wan.Cut([]string{"dc1"}, []string{"dc2"}, false)
		replStop()
		w.say(t, "1. DC1 and DC2 cut from each other; DC3 sees both")
		w.servingLeader(t, 2, 3, 4)
		ids, _ := w.pointerIDs(zc.Conn)
		var said string
		waitUntil(t, stepTimeout, "DC2's lag alarm", func() bool {
			ok, out := w.lagHealthy()
			said = out
			return !ok && strings.Contains(out, "job "+w.job)
		}, w.mounts["dc2"])
		w.say(t, "   DC2's health: %s", firstLine(said))
		code, said := w.takeoverOn(t, w.dc2, flinkSession+2*time.Second)
		w.say(t, "   takeover on DC2: exit %d: %s", code, firstLine(said))
		if code != 5 {
			t.Fatalf("takeover on DC2 while DC1 keeps the quorum with DC3 exited %d, want 5 (JobManager alive):\n%s", code, said)
		}
		if pr.auto {
			if site := w.activeSite(t, zc.Conn); site != "dc1" {
				t.Fatalf("with DC1 cut from DC2 only, %q became active (automatic takeover)", site)
			}
		}
		waitUntil(t, stepTimeout, "DC1's Flink to go on checkpointing", func() bool {
			now, _ := w.pointerIDs(zc.Conn)
			return len(now) > 0 && len(ids) > 0 && now[len(now)-1] > ids[len(ids)-1]+1
		}, jm1, tm1)
		// DC1's mount may fence itself while its connection moves from
		// a DC2 server to another (its lease), never for longer.
		if err := os.WriteFile(w.dc1.Path(filepath.Join(w.flink, "probe")), nil, 0o644); err != nil {
			t.Errorf("DC1's mount while DC1 keeps the quorum: %v", err)
		}
		w.say(t, "   DC1's mount fenced itself %d times meanwhile (its connection moving)", len(events(w.mounts["dc1"], logFenced, phase1)))
		w.wan.Heal([]string{"dc1"}, []string{"dc2"})
		repl()
		waitUntil(t, stepTimeout, "DC2's lag alarm to clear", func() bool { ok, _ := w.lagHealthy(); return ok }, w.mounts["dc2"])
		w.say(t, "   healed: DC2's lag alarm cleared")
		w.leaderToDC1(t)
	}

	// 2. DC1 cut off from DC2 and DC3, alive.
	time.Sleep(pr.moment)
	w.say(t, "2. DC1 cut off from DC2 and DC3 (%s), alive", f)
	cutAt := time.Now()
	out.Lost = true
	stopFault := w.cut(t)
	defer stopFault()
	replStop()
	var survivors int
	var noLeader time.Time
	if f == faultFlap {
		// ZooKeeper's elections may not settle while the link flaps
		// (each return of DC1's servers restarts them, with backoff):
		// then the link stays down, as it does later anyway.
		var ok bool
		if survivors, noLeader, ok = w.servingLeaderWithin(3*flinkSession, 0, 1, 2); !ok {
			stopFault()
			w.say(t, "   no quorum of DC2 and DC3 while the link flaps: the link stops flapping and stays down")
		}
	}
	if noLeader.IsZero() || survivors < 0 {
		survivors, noLeader = w.servingLeaderSince(t, 0, 1, 2)
	}
	w.say(t, "   ZooKeeper: server %d leads DC2 and DC3 (%v after the cut)", survivors, time.Since(cutAt).Round(time.Millisecond))
	var fenceAt time.Time
	var reason string
	waitUntil(t, 4*flinkSession, "DC1's mount to fence itself", func() bool {
		if ev := events(w.mounts["dc1"], logFenced, cutAt); len(ev) > 0 {
			fenceAt, reason = ev[0].Time, ev[0].Reason
		}
		return !fenceAt.IsZero()
	}, w.mounts["dc1"])
	out.CutToFence = fenceAt.Sub(cutAt)
	w.say(t, "   DC1's mount fenced itself %v after the cut: %s", out.CutToFence.Round(time.Millisecond), reason)
	// The fence comes half a lease after DC1's last renewal at the latest
	// (plus a pass), so within half a lease of the cut. Until issue 29 it
	// had to come before Flink's sessions expired (the rule of --lease);
	// now what counts is that it comes before DC2's activation, checked
	// below (design §5.14).
	if bound := cutAt.Add(standbyLease/2 + 2*time.Second); (f == faultBoth || f == faultOneWay) && !fenceAt.Before(bound) {
		t.Errorf("DC1's mount fenced itself %v after the cut: later than half a lease (%v) and a pass", out.CutToFence, standbyLease/2)
	}
	zc2 := zktest.Connect(t, w.zk.Servers(0, 1, 2))
	takeoverStart := time.Now()
	wait := 60 * time.Second
	if f == faultFlap {
		wait = 3 * flinkSession
	}
	var code int
	var said string
	if pr.auto {
		// No command: DC2's daemon takes over once DC1's lease expired
		// and no DC1 JobManager leads, or refuses a job DC2 cannot
		// restore and stays standby.
		code, said = 4, "automatic takeover: DC2 not active after 2m"
		deadline := time.Now().Add(2 * time.Minute)
		// While the link flaps DC1's JobManager comes back each time
		// it is up, and the daemon waits (as a manual takeover exits
		// 5): as in the manual case, the link stays down after a while.
		flapUntil := time.Now().Add(3 * flinkSession)
		for time.Now().Before(deadline) {
			if f == faultFlap && time.Now().After(flapUntil) {
				flapUntil = deadline
				stopFault()
				w.say(t, "   the link stops flapping and stays down")
			}
			if w.activeSite(t, zc.Conn) == "dc2" {
				code, said = 0, "automatic takeover: DC2 active"
				break
			}
			// A daemon that refused stays standby (no more tries).
			if l := refusedAuto(w.mounts["dc2"]); l != "" {
				code, said = 4, l
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	} else {
		code, said = w.takeoverOn(t, w.dc2, wait)
	}
	if code == 5 && f == faultFlap {
		// The runbook: DC1's JobManager came back each time the link
		// did; once the link stays down, run the takeover again.
		w.say(t, "   takeover on DC2 while the link flaps: exit 5 (a JobManager is alive); the link stays down now")
		stopFault()
		code, said = w.takeoverOn(t, w.dc2, 60*time.Second)
	}
	out.Takeover = time.Since(takeoverStart)
	stopFault()
	w.say(t, "   takeover on DC2: exit %d in %v\n%s", code, out.Takeover.Round(time.Millisecond), said)
	loss := w.observe(ctx, t, zc2.Conn, v2)
	out.Optimal, out.Restored, out.Refused = loss.optimal, -1, loss.optimal < 0
	if loss.optimal < 0 {
		if code != 4 {
			t.Fatalf("no pointer is complete on DC2, yet takeover exited %d", code)
		}
		return out
	}
	if code != 0 {
		t.Fatalf("takeover exited %d", code)
	}
	_, stat, err := zc2.Conn.Get("/ckptfs/" + strings.Trim(w.clusterID, "/") + "/active-site")
	if err != nil {
		t.Fatal(err)
	}
	activated := time.UnixMilli(stat.Mtime)
	// DC1's mount must be fenced when DC2 becomes active: its last fence
	// before then was not followed by a promotion (a flapping link
	// fences and promotes it again and again while no site is active).
	for _, e := range events(w.mounts["dc1"], logFenced, cutAt) {
		if e.Time.Before(activated) {
			fenceAt = e.Time
		}
	}
	out.FenceBeforeTakeover = fenceAt.Before(activated)
	for _, e := range events(w.mounts["dc1"], logPromoted, fenceAt) {
		if e.Time.Before(activated) {
			out.FenceBeforeTakeover = false
		}
	}
	// The fence is complete once the writers opened before it are cut
	// off and released (a write in flight may land until then), which
	// must also come before the activation.
	fenceDone := fenceAt
	if ev := events(w.mounts["dc1"], logFenceDone, fenceAt.Add(-time.Nanosecond)); len(ev) > 0 {
		fenceDone = ev[0].Time
	} else {
		t.Errorf("DC1's mount never said its fence was complete (%q)", logFenceDone)
	}
	if !fenceDone.Before(activated) {
		out.FenceBeforeTakeover = false
	}
	w.say(t, "   DC2 active at %s, DC1 fenced at %s (complete %v later)", activated.Format("15:04:05.000"), fenceAt.Format("15:04:05.000"), fenceDone.Sub(fenceAt).Round(time.Millisecond))
	if !out.FenceBeforeTakeover {
		t.Errorf("DC2 became active (%v) while DC1's mount was not fenced (fenced %v, complete %v, then %+v)", activated, fenceAt, fenceDone, events(w.mounts["dc1"], logPromoted, fenceAt))
	}
	fenceAt = fenceDone
	// What DC1 wrote after its fence: nothing reached its NAS, so nothing
	// can reach DC2's NAS or a pointer.
	after := changedSince(w.backing["dc1"], fenceAt)
	out.WritesAfterFence = len(after)
	for rel, fi := range after {
		if got, err := os.Stat(filepath.Join(w.backing["dc2"], rel)); err == nil && got.Size() == fi.Size() {
			out.WritesAfterFenceDC2++
		}
	}
	if len(after) > 0 {
		t.Errorf("after DC1's fence: %d files written on DC1's NAS (%v), %d of them on DC2's", len(after), slices.Sorted(maps.Keys(after)), out.WritesAfterFenceDC2)
	}
	// DC1's JobManager may still add a pointer after the fence: a create
	// sent before it, held up by a lossy link, is committed later through
	// the old quorum (real Flink 1.20.5 in make chaos-net). The fence
	// cannot stop that; what matters is that the pointer names an HA file
	// DC1's NAS held before the fence. The takeover judges it like any
	// other.
	for _, id := range loss.ids {
		data, st, err := zc2.Conn.Get(fmt.Sprintf("%s/%019d", w.pointerDir(), id))
		if err != nil || !time.UnixMilli(st.Ctime).After(fenceAt) {
			continue
		}
		out.PointersAfterFence++
		if err := w.writtenBefore(data, fenceAt); err != nil {
			t.Errorf("pointer %d, created %v after DC1's fence: %v", id, time.UnixMilli(st.Ctime).Sub(fenceAt), err)
		}
	}

	// DC2's Flink restores the newest checkpoint DC2 holds.
	rep1 := w.report("dc1")
	fl2 := w.fl["dc2"]
	jm2, _ := w.startFlink(t, fl2, "dc2")
	w.say(t, "   DC2's Flink up")
	restored := waitRestored(ctx, t, fl2, w.job)
	out.Restored = restored.ID
	w.say(t, "   DC2's Flink restored checkpoint %d (the newest complete on DC2: %d)", restored.ID, loss.optimal)
	if restored.ID != loss.optimal {
		t.Errorf("DC2's Flink restored checkpoint %d, the newest complete on DC2 was %d", restored.ID, loss.optimal)
	}
	w.checkRestore(ctx, t, fl2, rep1, loss.optimal)

	// 3. DC1 comes back.
	healAt := time.Now()
	w.wan.Heal([]string{"dc1"}, others)
	w.say(t, "3. DC1 back")
	deadline := time.Now().Add(3 * flinkSession)
	for time.Now().Before(deadline) {
		// EROFS at once, as with takeover manual: with takeover auto a
		// fenced mount is not held while DC2 is alive (daemon.DecideHold).
		if err := os.WriteFile(w.dc1.Path(filepath.Join(w.flink, "probe")), nil, 0o644); !errors.Is(err, syscall.EROFS) {
			t.Fatalf("DC1's mount after DC1 came back: a write got %v, want EROFS (fenced)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ev := events(w.mounts["dc1"], logPromoted, healAt); len(ev) > 0 {
		t.Errorf("DC1's mount promoted itself after DC1 came back: %+v", ev)
	}
	out.ReturnedStayedFenced = true
	// A fenced mount lists only what its NAS holds completely.
	raw := chkDirs(filepath.Join(w.backing["dc1"], "checkpoints", w.job))
	listAt := time.Now()
	if _, err := os.ReadDir(w.dc1.Path(filepath.Join(w.flink, "checkpoints", w.job))); err != nil || time.Since(listAt) > 10*time.Second {
		t.Errorf("listing DC1's fenced mount: %v after %v, want it at once, filtered as a replica's", err, time.Since(listAt))
	}
	seen := chkDirs(w.dc1.Path(filepath.Join(w.flink, "checkpoints", w.job)))
	for _, d := range raw {
		_, err := os.Stat(filepath.Join(w.backing["dc1"], "checkpoints", w.job, d, "_metadata"))
		if os.IsNotExist(err) && slices.Contains(seen, d) {
			t.Errorf("DC1's fenced mount lists %s, which has no _metadata on DC1's NAS", d)
		}
	}
	w.say(t, "   DC1's fenced mount lists %v of %v on its NAS", seen, raw)
	// The job keeps running on DC2 and checkpoints there; ZooKeeper
	// points only where DC2's Flink restores from, whatever DC1's
	// JobManager does.
	var last int64
	waitUntil(t, stepTimeout, "DC2's job to checkpoint on with DC1 back", func() bool {
		cp, err := fl2.REST.Checkpoints(ctx, w.job)
		if err != nil || cp.Latest.Completed == nil {
			return false
		}
		last = cp.Latest.Completed.ID
		return last >= restored.ID+afterTakeover+2
	})
	waitJob(ctx, t, fl2, w.job, "RUNNING")
	// DC1's JobManager may add a pointer as it comes back (Curator
	// retries the create cut off by the partition); DC2's daemon retracts
	// it (zkbridge.Sweeper).
	ids := w.waitStrayFree(ctx, t, zc.Conn, v2, "with DC1 back")
	out.StraysSwept = len(events(w.mounts["dc2"], logSwept, healAt))
	w.checkRestarts(ctx, t, fl2, jm2, jm1, restored.ID, healAt)
	w.say(t, "   DC2's job runs on (checkpoint %d), pointers %v, from which DC2 restores; DC1's JobManager %s", last, ids, processState(jm1))

	// 4. The replication was left in the old direction: it copies DC1's
	// NAS over DC2's, where DC2's Flink now writes. ckptfs on DC2 must
	// say so.
	if ok, said := w.lagHealthy(); !ok {
		t.Fatalf("DC2's health before the replication turns back: %s", said)
	}
	w.say(t, "4. the replication runs from DC1 to DC2 again, the old direction")
	repl()
	var alarm string
	waitUntil(t, stepTimeout, "DC2's ckptfs to notice the replication in the old direction", func() bool {
		ok, said := w.lagHealthy()
		alarm = said
		return !ok
	})
	replStop()
	out.OldDirectionAlarm = firstLine(alarm)
	w.say(t, "   DC2's health: %s", alarm)
	// Even the old direction carried nothing DC1 wrote after its fence.
	after = changedSince(w.backing["dc1"], fenceAt)
	out.WritesAfterFence, out.WritesAfterFenceDC2 = len(after), 0
	for rel, fi := range after {
		if got, err := os.Stat(filepath.Join(w.backing["dc2"], rel)); err == nil && got.Size() == fi.Size() {
			out.WritesAfterFenceDC2++
		}
	}
	if len(after) > 0 {
		t.Errorf("at the end: %d files written on DC1's NAS after its fence (%v), %d of them on DC2's", len(after), slices.Sorted(maps.Keys(after)), out.WritesAfterFenceDC2)
	}
	return out
}

// writtenBefore says whether the HA file a pointer's data names was on
// DC1's NAS, unchanged, since before t.
func (w *netWorld) writtenBefore(pointer []byte, t time.Time) error {
	h, err := flinkha.DecodeStateHandle(pointer)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(w.flink, strings.TrimPrefix(strings.TrimPrefix(h.URI, "file:"), "//"))
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("its HA file %s is not in Flink's storage %s", h.URI, w.flink)
	}
	fi, err := os.Stat(filepath.Join(w.backing["dc1"], rel))
	switch {
	case err != nil:
		return fmt.Errorf("its HA file on DC1's NAS: %w", err)
	case fi.ModTime().After(t):
		return fmt.Errorf("its HA file %s was written on DC1's NAS at %v, after the fence", rel, fi.ModTime())
	}
	return nil
}

// waitStrayFree waits until the pointers Flink reads are ones DC2's
// Flink restores from: none above the newest DC2 holds completely, none
// whose HA file DC2 cannot read (the takeover's rule, zkbridge.PlanJob).
// A stray pointer must be gone within the sweeper's grace (Flink's
// session timeout) and a few passes. It returns the pointers.
//
// An older pointer may outlive its checkpoint's files: Flink (1.20 and
// 2.3 read; DefaultCompletedCheckpointStore.addCheckpointAndSubsumeOldestOne
// hands every subsumed checkpoint to CheckpointsCleaner) discards a subsumed checkpoint even when releaseAndTryRemove
// left its pointer because another JobManager locked it (the returning
// one, recovering); Flink reads only the HA file of such a pointer and
// restores from the newest. That is logged, not failed.
func (w *netWorld) waitStrayFree(ctx context.Context, t *testing.T, conn *zk.Conn, v *manifest.Verifier, when string) []int64 {
	t.Helper()
	deadline := time.Now().Add(flinkSession + 15*time.Second)
	for {
		ids, err := w.visiblePointerIDs(conn)
		if err != nil {
			t.Fatal(err)
		}
		var facts []zkbridge.PointerFacts
		why := map[int64]string{}
		for _, id := range ids {
			pv, err := w.verifyPointer(ctx, conn, v, id)
			if errors.Is(err, zk.ErrNoNode) {
				continue // subsumed meanwhile
			}
			facts = append(facts, zkbridge.PointerFacts{
				ID: id, Visible: true,
				L2Complete:     err == nil && pv.L2Complete(),
				HAFileReadable: err == nil && pv.HAFileReadable,
			})
			if err != nil || !pv.L2Complete() {
				why[id] = fmt.Sprintf("%d: %v %v", id, err, pv)
			}
		}
		plan := zkbridge.PlanJob(facts)
		var stray []int64
		for _, r := range plan.Retract {
			stray = append(stray, r.ID)
		}
		slices.Sort(stray)
		if len(facts) > 0 && plan.Refused {
			stray = ids
		}
		if len(stray) == 0 {
			var gone []int64
			for _, f := range facts {
				if !f.L2Complete {
					gone = append(gone, f.ID)
				}
			}
			if len(gone) > 0 {
				w.say(t, "   pointers %v stay below DC2's newest complete %d with their HA files, their checkpoints' files discarded by Flink (another JobManager's lock kept the pointers)", gone, plan.NewestComplete)
			}
			return ids
		}
		if time.Now().After(deadline) {
			var said []string
			for _, id := range stray {
				said = append(said, why[id])
			}
			t.Errorf("%s, ZooKeeper points at checkpoints %v, from which DC2's Flink would not restore, for more than %v: %s", when, stray, flinkSession+15*time.Second, strings.Join(said, "; "))
			return ids
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkRestarts: DC2's job restored once per subtask, or restarted only
// because its JobManager lost its ZooKeeper connection after DC1 came
// back (Flink gives up leadership and recovers from ZooKeeper's newest
// pointer; on this loaded machine a ZooKeeper server may not answer
// within the session timeout), and then from a checkpoint no older than
// the takeover's (judgeRestarts). Any other restart is the returning
// site disturbing DC2's job.
func (w *netWorld) checkRestarts(ctx context.Context, t *testing.T, fl *Cluster, jm, jm1 *Process, restored int64, healAt time.Time) {
	t.Helper()
	rep := w.report("dc2")
	cause := ""
	if lost, ok := flinkLogTime(jm.FlinkLog, "Connection to ZooKeeper suspended", healAt); ok {
		cause = fmt.Sprintf("DC2's JobManager lost its ZooKeeper connection %.1fs after DC1 came back", lost.Sub(healAt).Seconds())
	} else if revoked, ok := flinkLogTime(jm1.FlinkLog, "was revoked the leadership", healAt); ok {
		// Flink's own: a returning leader whose session expired acts
		// on its job's leader information while its latch still
		// believes it leads, and deletes or overwrites the job's leader
		// node, which DC2's JobManager had written
		// (DefaultLeaderElectionService).
		cause = fmt.Sprintf("DC1's JobManager, still running, gave up its leadership %.1fs after DC1 came back (Flink then deletes or overwrites the job's leader node)", revoked.Sub(healAt).Seconds())
	}
	restarts, err := judgeRestarts(rep.Restores, restored, cause != "")
	w.out.Restarts = restarts
	if err != nil {
		why := "none recorded"
		if ex, xerr := fl.REST.Exceptions(ctx, w.job); xerr == nil && len(ex) > 0 {
			why = firstLine(ex[0].Stacktrace)
		}
		t.Errorf("with DC1 back: %v; the job's newest failure: %s", err, why)
		return
	}
	if restarts > 0 {
		w.out.RestartCause = cause
		w.say(t, "   DC2's job restarted %d time(s) (%v): %s", restarts, rep.Restores, w.out.RestartCause)
	}
}

// judgeRestarts counts the restarts in the checkpoints DC2's subtasks
// restored (one per subtask and attempt, the takeover's first) and says
// whether they are allowed: only with a cause seen in Flink's logs after
// DC1 came back (explained: DC2's JobManager lost its ZooKeeper
// connection, or DC1's gave up its leadership), and never from a
// checkpoint older than the takeover's.
func judgeRestarts(restores []int64, restored int64, explained bool) (int, error) {
	if len(restores) < parallelism {
		return 0, fmt.Errorf("DC2's subtasks restored %v, want at least one restore for each of %d", restores, parallelism)
	}
	extra := restores[parallelism:]
	restarts := (len(extra) + parallelism - 1) / parallelism // a subtask may not have restored yet
	if restarts == 0 {
		return 0, nil
	}
	if !explained {
		return restarts, fmt.Errorf("DC2's job restarted %d time(s) (restores %v), its JobManager kept its ZooKeeper connection and DC1's gave up no leadership", restarts, restores)
	}
	for _, id := range extra {
		if id < restored {
			return restarts, fmt.Errorf("DC2's job restarted from checkpoint %d, older than the %d of the takeover (restores %v)", id, restored, restores)
		}
	}
	return restarts, nil
}

func processState(p *Process) string {
	select {
	case <-p.Exited():
		return "exited"
	default:
		return "still running"
	}
}

func TestJudgeRestarts(t *testing.T) {
	one := slices.Repeat([]int64{4}, parallelism)
	again := append(slices.Clone(one), slices.Repeat([]int64{9}, parallelism)...)
	older := append(slices.Clone(one), slices.Repeat([]int64{3}, parallelism)...)
	for _, c := range []struct {
		restores  []int64
		explained bool
		restarts  int
		ok        bool
	}{
		{one, false, 0, true},
		{one, true, 0, true},
		{again, true, 1, true},
		{again, false, 1, false},               // restarted, and not for ZooKeeper
		{older, true, 1, false},                // went back before the takeover's checkpoint
		{again[:parallelism+1], true, 1, true}, // a subtask not restored yet
		{one[:1], false, 0, false},
	} {
		restarts, err := judgeRestarts(c.restores, 4, c.explained)
		if restarts != c.restarts || (err == nil) != c.ok {
			t.Errorf("judgeRestarts(%v, 4, %v) = %d, %v; want %d, ok %v", c.restores, c.explained, restarts, err, c.restarts, c.ok)
		}
	}
}

func TestWrittenBefore(t *testing.T) {
	root := t.TempDir()
	w := &netWorld{world: &world{flink: filepath.Join(root, "storage", "flink"), backing: map[string]string{"dc1": filepath.Join(root, "nas")}}}
	ha := filepath.Join(w.backing["dc1"], "ha", "c1", "completedCheckpoint1")
	if err := os.MkdirAll(filepath.Dir(ha), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ha, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fence := time.Now().Add(-time.Minute)
	os.Chtimes(ha, fence.Add(-time.Second), fence.Add(-time.Second))
	pointer := func(uri string) []byte {
		data, err := flinkha.EncodeStateHandle(flinkha.StateHandle{URI: uri, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := w.writtenBefore(pointer("file:"+filepath.Join(w.flink, "ha", "c1", "completedCheckpoint1")), fence); err != nil {
		t.Errorf("an HA file written before the fence: %v", err)
	}
	for _, uri := range []string{"file:" + filepath.Join(w.flink, "ha", "c1", "completedCheckpoint2"), "file:/elsewhere/completedCheckpoint1"} {
		if err := w.writtenBefore(pointer(uri), fence); err == nil {
			t.Errorf("%s: no error", uri)
		}
	}
	os.Chtimes(ha, fence.Add(time.Second), fence.Add(time.Second))
	if err := w.writtenBefore(pointer("file:"+filepath.Join(w.flink, "ha", "c1", "completedCheckpoint1")), fence); err == nil {
		t.Error("an HA file written after the fence: no error")
	}
}
