//go:build linux

package realflink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// standbyLease is the liveness lease of the hot-standby runs: longer
// than Flink's session timeout, so that DC2's standby JobManager always
// leads (and reads) before DC2's daemon concludes that DC1 is dead: the
// order in which only the mount's hold keeps Flink from reading
// pointers the takeover has not judged yet. (With a lease equal to the
// session timeout the takeover often wins that race, and a run proves
// less.)
const standbyLease = flinkSession * 3 / 2

// rtoLease is the lease of the recovery-time runs (BenchmarkHotStandbyRTO):
// shorter than Flink's session timeout, so that DC2's daemon concluded
// DC1 dead before DC1's JobManager sessions end and takes over the
// moment they do, as DC2's standby JobManager is elected (design §5.11;
// the lease's safety does not depend on Flink's timeout).
const rtoLease = flinkSession * 3 / 4

// TestIntegration_HotStandby is zero-touch failover with real Flink
// (issue 17): JobManagers and TaskManagers run on both sites, both mount
// daemons run with takeover auto, and DC1 is lost at the run's seeded
// moment. With no command run after the loss, the job must end up
// RUNNING on DC2 from the newest checkpoint DC2 held completely at the
// loss, exactly that checkpoint's state, with no DC2 JobManager exiting
// and no incomplete checkpoint asked for: DC2's standby JobManager takes
// leadership when DC1's session expires, its first read of the HA
// directory is held by DC2's mount, DC2's daemon takes over once DC1's
// lease expired and no DC1 JobManager leads, and the mount, promoted,
// lets the read go on.
func TestIntegration_HotStandby(t *testing.T) {
	releases := TestReleases(t)
	seedRun := newRun(t, FindDist(t, releases[0]), true)
	d := FindDist(t, releases[seedRun.seed%uint64(len(releases))])
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	r := newRun(t, d, true)
	out := runHotStandby(t, c, r, standbyAuto)
	t.Logf("hot standby, Flink %s: DC1 lost -> job RUNNING on DC2 in %v (DC2's automatic takeover %v after the loss); checkpoint %d restored",
		d.Version, out.LossToRunning.Round(time.Millisecond), out.Takeover.Round(time.Millisecond), out.Restored)
}

// TestIntegration_StandbyJobManagerManual (issue 16, item 4): with
// takeover manual a JobManager running on the standby site reads the
// pointers as soon as DC1's session expires, before any takeover. DC2's
// daemon, told its site's JobManager addresses, must say so: an error
// line, the metric ckptfs_standby_jobmanager_sessions and a health
// failure.
func TestIntegration_StandbyJobManagerManual(t *testing.T) {
	releases := TestReleases(t)
	seedRun := newRun(t, FindDist(t, releases[0]), true)
	d := FindDist(t, releases[seedRun.seed%uint64(len(releases))])
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 5, func(cfg *zktest.Config) { cfg.MaxSessionTimeout = 5 * time.Second })
	runHotStandby(t, c, newRun(t, d, true), standbyManual)
}

// standbyMode is what runs on DC2 in a hot-standby run.
type standbyMode string

const (
	// standbyAuto: ckptfs with takeover auto (TestIntegration_HotStandby).
	standbyAuto standbyMode = "auto"
	// standbyManual: ckptfs with takeover manual; the run ends once DC2's
	// daemon reported DC2's JobManager leading (the loss of DC1 is then
	// only its JobManager's).
	standbyManual standbyMode = "manual"
	// standbyFlinkHA: no ckptfs and no replica: DC2's Flink uses DC1's
	// own NAS, Flink's own HA within one site (the RTO baseline).
	standbyFlinkHA standbyMode = "flink-ha"
)

// runHotStandby runs one hot-standby failover with DC2 as mode says.
func runHotStandby(t *testing.T, c *zktest.Cluster, r *run, mode standbyMode) outcome {
	manual, ckptfs := mode == standbyManual, mode != standbyFlinkHA
	out := &r.out
	t.Logf("seed %d (replay: %s=%d go test -run '%s' ./integration/realflink/)", r.seed, seedEnvVar, r.seed, t.Name())
	t.Logf("hot standby run: %s", r)
	ctx, cancel := context.WithTimeout(context.Background(), 6*stepTimeout)
	defer cancel()
	w := newSites(t, c, r, "hotstandby")
	// The first takeover refuses a path root that holds other clusters
	// (design §5.5): one root per run.
	w.zkRoot = fmt.Sprintf("/flink-hs-%d", r.seed)
	fl1, fl2 := w.cluster(t, c, w.dc1), w.cluster(t, c, w.dc2)
	// Both sites' daemons run the same settings but their own
	// JobManagers' addresses (all sites share 127.0.0.1 here, so the
	// ports tell them apart).
	metricsPort := freePorts(t, siteAddr, 1)[0]
	mountArgs := func(site string, fl *Cluster) []string {
		args := []string{"--zk", c.ConnectString(), "--cluster-id", w.clusterID, "--path-root", w.flinkRoot(),
			"--map", w.uri() + "=" + w.backing[site], "--poll", "100ms",
			"--site-jobmanagers", fmt.Sprintf("%s:%d", siteAddr, fl.Config.RPCPort),
			"--site-jobmanagers", fmt.Sprintf("%s:%d", siteAddr, fl.Config.RESTPort)}
		if !manual {
			args = append(args, "--takeover", "auto", "--lease-duration", r.leaseOr(standbyLease).String(), "--hold-timeout", "90s")
		}
		if site == "dc2" {
			args = append(args, "--metrics-addr", fmt.Sprintf("%s:%d", siteAddr, metricsPort))
		}
		return args
	}
	var err error
	if !ckptfs {
		// One NAS, DC1's, seen by both sites' Flink at the same path.
		w.backing["dc2"] = w.backing["dc1"]
		for _, s := range []*Site{w.dc1, w.dc2} {
			if err := s.Bind(w.backing["dc1"], w.flink); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		if w.mounts["dc1"], err = w.dc1.StartMount("ckptfs", binary, "primary", w.backing["dc1"], w.flink, mountArgs("dc1", fl1)...); err != nil {
			t.Fatal(err)
		}
		if w.mounts["dc2"], err = w.dc2.StartMount("ckptfs", binary, "replica", w.backing["dc2"], w.flink, mountArgs("dc2", fl2)...); err != nil {
			t.Fatal(err)
		}
		// The first start goes through ckptfs takeover (the systemd gate):
		// DC1 is the active site.
		if code, said := w.siteTakeover(t, c, "dc1", c.ConnectString()); code != 0 {
			t.Fatalf("DC1's first takeover exited %d:\n%s", code, said)
		}
	}

	// 1. DC1's Flink runs the job.
	jm1, tm1 := w.startFlink(t, fl1, "dc1")
	jar := JobJar(t, r.dist)
	w.job, err = fl1.REST.Submit(ctx, jar, w.jobArgs())
	if err != nil {
		t.Fatalf("submit the job to DC1: %v", err)
	}
	w.say(t, "DC1: job %s submitted to a real Flink %s session cluster", w.job, r.dist.Version)
	waitJob(ctx, t, fl1, w.job, "RUNNING")

	// 2. The replication, then DC2's standby JobManager and TaskManager.
	var stopOnce sync.Once
	stopReplication := func() {}
	if ckptfs {
		repl, every := w.replicator(t, jm1, tm1)
		replDone := make(chan error, 1)
		go func() { replDone <- repl.Run(ctx, every) }()
		stopReplication = func() {
			stopOnce.Do(func() {
				repl.Stop()
				if err := <-replDone; err != nil {
					t.Errorf("replication: %v", err)
				}
				w.say(t, "replication stopped (%+v)", repl.Stats())
			})
		}
	}
	defer stopReplication()
	zc := zktest.Connect(t, c.Servers())
	v2 := newVerifier(t, w.uri(), w.backing["dc2"])
	first := w.waitComplete(ctx, t, zc.Conn, v2)
	w.say(t, "DC2 holds checkpoint %d L2-complete", first)
	jm2, err := fl2.StartJobManager("jobmanager")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flinkErrors(t, jm2) })
	tm2, err := fl2.StartTaskManager("taskmanager")
	if err != nil {
		t.Fatal(err)
	}
	// A standby site stays out of the way: DC2's JobManager is no
	// leader, DC1 keeps checkpointing through its primary mount.
	// A standby that leads before the loss means DC1's JobManager lost
	// its session while DC1 was healthy (once: the snapshot replication's
	// freeze outlasting it): say so rather than wait for REST.
	standbyLed := func() {
		if ckptfs && w.mounts["dc2"].Count("a JobManager of this site leads while site") > 0 {
			t.Fatalf("DC2's JobManager took leadership before the loss (DC1's JobManager lost its ZooKeeper session while DC1 was healthy)")
		}
	}
	waitUntil(t, stepTimeout, "DC2's standby JobManager to answer REST", func() bool {
		standbyLed()
		_, err := fl2.REST.Overview(ctx)
		return err == nil
	}, jm2)
	var before int64
	waitUntil(t, stepTimeout, "DC1's newest checkpoint", func() bool {
		cp, err := fl1.REST.Checkpoints(ctx, w.job)
		if err != nil || cp.Latest.Completed == nil {
			return false // REST answers 500 while DC1's JobMaster is busy
		}
		before = cp.Latest.Completed.ID
		return true
	}, jm1)
	waitUntil(t, stepTimeout, "DC1 to complete two more checkpoints with DC2's Flink standing by", func() bool {
		cp, err := fl1.REST.Checkpoints(ctx, w.job)
		return err == nil && cp.Latest.Completed != nil && cp.Latest.Completed.ID >= before+2
	})
	standbyLed()
	if ckptfs {
		if n := w.mounts["dc2"].Count("automatic takeover"); n > 0 {
			t.Fatalf("DC2's daemon took steps of an automatic takeover while DC1 was healthy (%d)", n)
		}
		if h := healthz(t, siteAddr, metricsPort); !h.OK {
			t.Fatalf("DC2's health with DC1 healthy and DC2's JobManager on standby: %v", h.Problems)
		}
	}
	w.say(t, "DC2: standby JobManager and TaskManager running; DC1 healthy, nothing changed")
	if manual {
		// DC1's JobManager dies: DC2's leads, and reads the pointers.
		jm1.Kill()
		waitUntil(t, stepTimeout, "DC2's daemon to report DC2's leading JobManager", func() bool {
			return w.mounts["dc2"].Count("with takeover manual no JobManager may run on a standby site") > 0
		}, w.mounts["dc2"])
		var h health
		waitUntil(t, stepTimeout, "DC2's health to fail for it", func() bool {
			h = healthz(t, siteAddr, metricsPort)
			return !h.OK && strings.Contains(strings.Join(h.Problems, "\n"), "no JobManager may run on a standby site")
		})
		w.say(t, "DC2's health fails: %s", strings.Join(h.Problems, "; "))
		if got := metricValue(t, siteAddr, metricsPort, "ckptfs_standby_jobmanager_sessions"); got < 1 {
			t.Errorf("ckptfs_standby_jobmanager_sessions %v, want >= 1", got)
		}
		return *out
	}
	w.awaitMoment(ctx, t, zc.Conn)

	// 3. DC1 is lost. From here the test only watches.
	lostAt := time.Now()
	out.Lost = true
	stopReplication()
	for _, p := range []*Process{jm1, tm1, w.mounts["dc1"]} {
		if p != nil {
			p.Kill()
		}
	}
	for _, i := range []int{0, 1} {
		if err := c.Kill(i); err != nil {
			t.Fatalf("kill zk%d: %v", i, err)
		}
	}
	if _, err := c.WaitLeader(stepTimeout); err != nil {
		t.Fatalf("no ZooKeeper leader among the survivors: %v", err)
	}
	w.say(t, "DC1 LOST (%v)", time.Since(lostAt).Round(time.Millisecond))
	zc2 := zktest.Connect(t, c.Servers(2, 3, 4))
	out.Hit = w.hit(zc2.Conn)
	loss := w.observe(ctx, t, zc2.Conn, v2)
	for _, id := range loss.ids {
		w.say(t, "  ZooKeeper points at checkpoint %d; on DC2 it is %v", id, loss.verdicts[id].Verdict)
	}
	out.Ahead = loss.newest() > loss.optimal
	out.Refused = loss.optimal < 0
	out.Optimal, out.Restored, out.Newest = loss.optimal, -1, loss.newest()
	rep1 := w.report("dc1")
	if loss.optimal < 0 {
		// Nothing to recover from: DC2's automatic takeover must refuse,
		// say why, and leave DC2 inactive.
		waitUntil(t, stepTimeout, "DC2's automatic takeover to refuse", func() bool {
			return w.mounts["dc2"].Count("automatic takeover refused") > 0
		}, w.mounts["dc2"])
		if n := w.mounts["dc2"].Count("automatic takeover: site dc2 is active"); n > 0 {
			t.Errorf("DC2 activated although no pointer was complete there")
		}
		w.say(t, "no pointer L2-complete on DC2 at the loss: DC2's automatic takeover refused, DC2 stays inactive")
		return *out
	}

	// 4. DC2 recovers by itself.
	if ckptfs {
		waitUntil(t, stepTimeout, "DC2's automatic takeover", func() bool {
			return w.mounts["dc2"].Count("automatic takeover: site dc2 is active") > 0
		}, w.mounts["dc2"], jm2)
		out.Takeover = time.Since(lostAt)
	}
	restored := waitRestored(ctx, t, fl2, w.job)
	out.Restored, out.LossToRunning = restored.ID, time.Since(lostAt)
	w.say(t, "DC2: the job RUNNING from checkpoint %d %v after the loss (automatic takeover by %v)", restored.ID,
		out.LossToRunning.Round(time.Millisecond), out.Takeover.Round(time.Millisecond))
	if restored.ID != loss.optimal {
		t.Errorf("DC2's Flink restored checkpoint %d; the newest L2-complete on DC2 at the loss was %d", restored.ID, loss.optimal)
	}
	w.checkRestore(ctx, t, fl2, rep1, loss.optimal)
	if !ckptfs {
		out.Breakdown = recoverySteps(nil, jm2, lostAt, out.LossToRunning)
		w.say(t, "DC2's recovery after the loss:%s", out.Breakdown)
		return *out
	}
	w.autoTakeoverBreakdown(t, c, lostAt, jm2, out.LossToRunning)
	if n := w.mounts["dc2"].Count("Flink asked for incomplete"); n > 0 {
		t.Errorf("DC2's daemon logged %d times that Flink asked for an incomplete checkpoint", n)
	}
	if n := w.mounts["dc2"].Count("held for hold-timeout"); n > 0 {
		t.Errorf("DC2's mount failed %d held opens", n)
	}
	for _, p := range []*Process{jm2, tm2} {
		select {
		case <-p.Exited():
			t.Errorf("DC2's %s exited: %v", p.Name, p.Err())
		default:
		}
	}
	held := w.mounts["dc2"].Count("holding an open")
	w.say(t, "DC2's mount held %d open(s) until the takeover decided", held)
	for _, l := range w.mounts["dc2"].Lines() {
		if strings.Contains(l, "holding an open") {
			w.say(t, "  %s", l)
		}
	}
	// Only a lease longer than Flink's session timeout makes DC2's
	// JobManager lead before the takeover decided in every run.
	if held == 0 && r.leaseOr(standbyLease) > flinkSession {
		t.Errorf("DC2's JobManager opened nothing before the takeover decided: the run did not exercise the hold")
	}
	return *out
}

// flinkErrors logs, when the test failed and p exited, the errors of its
// Flink log: why a JobManager died.
func flinkErrors(t *testing.T, p *Process) {
	select {
	case <-p.Exited():
	default:
		return
	}
	if !t.Failed() || p.FlinkLog == "" {
		return
	}
	data, err := os.ReadFile(p.FlinkLog)
	if err != nil {
		return
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, " ERROR ") || strings.Contains(l, "Exception") || strings.Contains(l, "Caused by") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	t.Logf("%s exited (%v); its log's errors:\n%s", p.Name, p.Err(), strings.Join(lines, "\n"))
}

// health is what a daemon's /healthz says, as far as the tests read it.
type health struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

func healthz(t *testing.T, addr string, port int) health {
	t.Helper()
	var h health
	resp, err := http.Get(fmt.Sprintf("http://%s:%d/healthz", addr, port))
	if err != nil {
		t.Fatalf("healthz: %v", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	return h
}

// metricValue is the value of an unlabelled series of a daemon (-1:
// absent).
func metricValue(t *testing.T, addr string, port int, name string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s:%d/metrics", addr, port))
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			f := strings.Fields(rest)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// siteTakeover runs `ckptfs takeover` for site with ZooKeeper at zk.
func (w *world) siteTakeover(t *testing.T, c *zktest.Cluster, site, zk string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, "takeover", "--zk", zk, "--site", site,
		"--cluster-id", w.clusterID, "--path-root", w.flinkRoot(), "--map", w.uri()+"="+w.backing[site],
		"--checkpoints-dir", w.uri()+"/checkpoints", "--flink-session-timeout", flinkSession.String(),
		"--wait", "60s")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return 0, string(out)
}

// autoTakeoverBreakdown checks, with `ckptfs status` on DC2, that the
// automatic takeover's journal names DC2's daemon and its activation,
// and logs the recovery's parts as times after the loss: DC2's
// JobManager's leadership, the mount's first held open, the journal's
// steps, the mount's promotion, and the job RUNNING.
func (w *world) autoTakeoverBreakdown(t *testing.T, c *zktest.Cluster, lostAt time.Time, jm2 *Process, running time.Duration) {
	t.Helper()
	cmd := exec.Command(binary, "status", "--zk", c.ConnectString(2, 3, 4), "--site", "dc2",
		"--cluster-id", w.clusterID, "--path-root", w.flinkRoot(), "--map", w.uri()+"="+w.backing["dc2"],
		"--checkpoints-dir", w.uri()+"/checkpoints", "--flink-session-timeout", flinkSession.String(), "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ckptfs status on DC2: %v\n%s", err, out)
	}
	var st struct {
		AutoTakeover *zkbridge.AutoTakeover `json:"auto_takeover"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("ckptfs status on DC2: %v", err)
	}
	a := st.AutoTakeover
	if a == nil || a.Site != "dc2" || a.State != zkbridge.AutoActivated || len(a.Steps) == 0 {
		t.Fatalf("ckptfs status on DC2 shows the automatic takeover %+v; want DC2's, activated, with its steps", a)
	}
	var marks []mark
	for _, s := range a.Steps {
		marks = append(marks, mark{s.At, "takeover " + s.Outcome + ": " + s.What})
	}
	for _, l := range w.mounts["dc2"].Lines() {
		var e struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || e.Time.Before(lostAt) {
			continue
		}
		switch {
		case strings.HasPrefix(e.Msg, "holding an open"), strings.HasPrefix(e.Msg, "promoting the mount"),
			strings.HasPrefix(e.Msg, "automatic takeover"), strings.HasPrefix(e.Msg, "a JobManager of this site leads"):
			marks = append(marks, mark{e.Time, "DC2's daemon: " + e.Msg})
		}
	}
	b := recoverySteps(marks, jm2, lostAt, running)
	w.r.out.Breakdown = b
	w.say(t, "DC2's recovery after the loss (ckptfs status shows the takeover by %s pid %d):%s", a.Host, a.PID, b)
}

type mark struct {
	at   time.Time
	what string
}

// flinkSteps are what DC2's JobManager logged of its recovery: the
// moments after since of the first line with each of them.
var flinkSteps = []struct{ sub, what string }{
	{"was granted leadership", "DC2's JobManager granted leadership"},
	{"Recovered", "DC2's JobManager recovered the job graph"},
	{"Restoring job", "DC2's JobManager restores the checkpoint"},
	{"switched from state CREATED to RUNNING", "DC2's job RUNNING"},
}

// recoverySteps sorts marks with the Flink log's steps and the job
// RUNNING (as REST saw it), as lines of times after lostAt.
func recoverySteps(marks []mark, jm2 *Process, lostAt time.Time, running time.Duration) string {
	for _, f := range flinkSteps {
		if at, ok := flinkLogTime(jm2.FlinkLog, f.sub, lostAt); ok {
			marks = append(marks, mark{at, f.what + " (Flink's log)"})
		}
	}
	marks = append(marks, mark{lostAt.Add(running), "the job RUNNING on DC2 (REST)"})
	slices.SortStableFunc(marks, func(x, y mark) int { return x.at.Compare(y.at) })
	var b strings.Builder
	for _, m := range marks {
		fmt.Fprintf(&b, "\n  +%6.3fs  %s", m.at.Sub(lostAt).Seconds(), m.what)
	}
	return b.String()
}

// flinkLogTime is the time of the first line of a Flink log at or after
// since that contains sub (Flink logs HH:mm:ss,SSS in local time).
func flinkLogTime(path, sub string, since time.Time) (time.Time, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, sub) || len(l) < 12 {
			continue
		}
		c, err := time.ParseInLocation("15:04:05,000", l[:12], time.Local)
		if err != nil {
			continue
		}
		y, m, d := since.Date()
		at := time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), time.Local)
		if !at.Before(since.Add(-time.Second)) {
			return at, true
		}
	}
	return time.Time{}, false
}
