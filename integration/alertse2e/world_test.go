package alertse2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/metrics"
)

// Flink's namespace and paths as every world's daemons and emulated
// JobManagers see them: Flink writes file:/flink/..., each site maps it
// to its own NAS.
const (
	pathRoot     = "/flink"
	flinkStorage = "file:/flink"
	// flinkSession is Flink's ZooKeeper session timeout, and the sweeper's
	// grace (flink-session-timeout).
	flinkSession = 4 * time.Second
	zkSession    = 4 * time.Second
)

// env is what the worlds of one test share: the ckptfs binary, a
// ZooKeeper server, and the figures they measure.
type env struct {
	binary string
	zk     *zktest.Cluster
	full   bool

	mu      sync.Mutex
	figures []figure // GUARDED_BY(mu)
}

// figure is how long an alert took from its fault to a state.
type figure struct {
	world, alert, prom, state, fault string
	took                             time.Duration
}

func (e *env) record(f figure) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.figures = append(e.figures, f)
}

// report logs every figure, as a table.
func (e *env) report(t *testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	slices.SortStableFunc(e.figures, func(a, b figure) int { return strings.Compare(a.world, b.world) })
	var b strings.Builder
	fmt.Fprintf(&b, "fault -> alert state, as Prometheus evaluated it (scrape and evaluation every %v; for/%d is the copy with every for: divided by %d):\n", interval, forFactor, forFactor)
	for _, f := range e.figures {
		fmt.Fprintf(&b, "  %-9s %-35s %-9s %-8s %7.1fs  after %s\n", f.world, f.alert, f.prom, f.state, f.took.Seconds(), f.fault)
	}
	t.Log(b.String())
}

// world is one scenario: its daemons, its emulated Flink, and a pair of
// Prometheus servers that scrape only them, one with the rules
// unchanged, one with every for: divided by forFactor. Each world has its
// own Prometheus, so an alert belongs to exactly one world.
type world struct {
	t       *testing.T
	env     *env
	name    string
	dir     string
	zk      *zktest.Cluster
	cluster string // Flink's cluster id, and ckptfs's
	// flinkURI is where Flink writes (state.checkpoints.dir's and
	// high-availability.storageDir's parent), as Flink names it; each
	// site maps it to its own NAS.
	flinkURI string

	daemons []*daemon
	// others are more ckptfs daemons' metrics addresses (run by other
	// means: in a site's namespace).
	others    []string
	textfiles string // the node exporter's textfile directory ("" without one)
	node      string // the node exporter's address
	proms     []*prom
	watching  time.Time // when the silence checks begin
}

func newWorld(t *testing.T, e *env, name string, zk *zktest.Cluster) *world {
	dir := t.TempDir()
	return &world{t: t, env: e, name: name, dir: dir, zk: zk, cluster: name, flinkURI: flinkStorage}
}

// path is p inside the world's directory, created.
func (w *world) path(p string) string {
	full := filepath.Join(w.dir, p)
	if err := os.MkdirAll(full, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return full
}

func (w *world) logf(format string, args ...any) {
	w.t.Helper()
	w.t.Logf("%s: %s", w.name, fmt.Sprintf(format, args...))
}

// zkArgs are the ZooKeeper flags of every ckptfs command of the world.
func (w *world) zkArgs() []string {
	return []string{"--zk", w.zk.ConnectString(), "--cluster-id", w.cluster, "--path-root", pathRoot,
		"--zk-session-timeout", zkSession.String(), "--flink-session-timeout", flinkSession.String()}
}

// ckptfs runs a ckptfs command and returns its output and exit status.
func (w *world) ckptfs(args ...string) (stdout, stderr string, code int) {
	w.t.Helper()
	cmd := exec.Command(w.env.binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// createNamespace creates the cluster's empty Flink namespace in
// ZooKeeper, as docs/runbook.md has the operator do before the first
// takeover of a new cluster beside others (worlds share a server).
func (w *world) createNamespace() {
	w.t.Helper()
	c := zktest.Connect(w.t, w.zk.Servers())
	defer c.Conn.Close()
	for _, p := range []string{pathRoot, pathRoot + "/" + w.cluster} {
		if _, err := c.Conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			w.t.Fatalf("%s: create %s: %v", w.name, p, err)
		}
	}
}

// takeoverReport is what the tests read of takeover -o json.
type takeoverReport struct {
	Activated bool `json:"activated"`
	Jobs      []struct {
		JobID     string  `json:"job_id"`
		Status    string  `json:"status"`
		Kept      []int64 `json:"kept"`
		Retracted []int64 `json:"retracted"`
	} `json:"jobs"`
}

// restoreReport is what the tests read of restore-pruned -o json.
type restoreReport struct {
	Jobs []struct {
		JobID    string  `json:"job_id"`
		Restored []int64 `json:"restored"`
	} `json:"jobs"`
}

// takeover runs `ckptfs takeover` for site over its NAS (as ckptfs
// takeover -o json; into the world's textfile when it has a node
// exporter) and returns its report, its output and exit status.
func (w *world) takeover(site, nas string, extra ...string) (*takeoverReport, string, int) {
	w.t.Helper()
	args := append([]string{"takeover", "--site", site, "--map", w.flinkURI + "=" + nas, "-o", "json"}, w.zkArgs()...)
	if w.textfiles != "" {
		args = append(args, "--metrics-textfile", filepath.Join(w.textfiles, "ckptfs-"+site+".prom"))
	}
	out, stderr, code := w.ckptfs(append(args, extra...)...)
	var rep takeoverReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		w.t.Fatalf("%s: takeover on %s: exit %d, no report (%v)\n%s%s", w.name, site, code, err, out, stderr)
	}
	return &rep, out + stderr, code
}

// restorePruned runs `ckptfs restore-pruned` for site over its NAS.
func (w *world) restorePruned(site, nas string) (*restoreReport, string, int) {
	w.t.Helper()
	args := append([]string{"restore-pruned", "--site", site, "--map", w.flinkURI + "=" + nas, "-o", "json"}, w.zkArgs()...)
	if w.textfiles != "" {
		args = append(args, "--metrics-textfile", filepath.Join(w.textfiles, "ckptfs-"+site+".prom"))
	}
	out, stderr, code := w.ckptfs(args...)
	var rep restoreReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil && code == 0 {
		w.t.Fatalf("%s: restore-pruned on %s: exit %d, no report (%v)\n%s%s", w.name, site, code, err, out, stderr)
	}
	return &rep, out + stderr, code
}

// daemon is a `ckptfs mount` process of a site: the real binary, with
// ZooKeeper and its metrics on a loopback port.
type daemon struct {
	w          *world
	site       string
	nas, mnt   string
	addr       string // metrics-addr
	args       []string
	cmd        *exec.Cmd
	exited     chan struct{}
	mu         sync.Mutex
	log        []string // GUARDED_BY(mu)
	generation int
}

// startDaemon runs a replica mount of site over nas (the active site's
// daemons turn primary by following active-site, as deployed), and
// returns once it serves.
func (w *world) startDaemon(site, nas string, extra ...string) *daemon {
	w.t.Helper()
	mounttest.RequireFUSE(w.t)
	d := &daemon{w: w, site: site, nas: nas, mnt: w.path(site + "/flink"), addr: freeAddr(w.t)}
	d.args = append(append([]string{"mount", "--mode", "replica", "--site", site, "--log-level", "debug", "--log-format", "json",
		"--map", w.flinkURI + "=" + nas, "--poll", "500ms", "--lag-interval", "1s", "--metrics-addr", d.addr}, w.zkArgs()...), extra...)
	d.args = append(d.args, nas, d.mnt)
	d.start()
	w.daemons = append(w.daemons, d)
	w.t.Cleanup(func() { d.stop() })
	return d
}

// start runs the daemon (again) and waits for its readiness.
func (d *daemon) start() {
	t := d.w.t
	t.Helper()
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	d.cmd = exec.Command(d.w.env.binary, d.args...)
	d.cmd.ExtraFiles = []*os.File{readyW}
	d.cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	d.generation++
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.log = append(d.log, sc.Text())
			d.mu.Unlock()
		}
		cmd.Wait()
		close(exited)
	}(d.cmd, d.exited)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "READY\n" {
			t.Fatalf("%s: %s's daemon did not become ready (%q)\n%s", d.w.name, d.site, line, d.tail(30))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: %s's daemon not ready after 30s\n%s", d.w.name, d.site, d.tail(30))
	}
}

// kill is kill -9: the mount stays behind, dead, until stop detaches it.
func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// stop ends the daemon with SIGTERM (a clean unmount, as systemctl stop
// does) and detaches whatever is left at the mount point.
func (d *daemon) stop() {
	t := d.w.t
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: %s's daemon did not stop within 30s of SIGTERM\n%s", d.w.name, d.site, d.tail(40))
			d.kill()
		}
	}
	if err := syscall.Unmount(d.mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		t.Errorf("detach %s: %v", d.mnt, err)
	}
}

func (d *daemon) tail(n int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.log[max(0, len(d.log)-n):], "\n")
}

// health reads the daemon's /healthz.
func (d *daemon) health() (metrics.Health, error) {
	var h metrics.Health
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + d.addr + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// waitMode waits until the daemon reports mode.
func (d *daemon) waitMode(mode string, limit time.Duration) {
	d.w.t.Helper()
	d.w.waitFor(limit, d.site+"'s mount in mode "+mode, func() bool {
		h, err := d.health()
		return err == nil && h.Mode == mode
	})
}

// lingerFor is how long a world keeps watching after its last fault, so
// that its silence check also sees alerts that would come late.
const lingerFor = 20 * time.Second

// linger keeps watching for d.
func (w *world) linger(d time.Duration) {
	w.logf("watching %v more", d)
	time.Sleep(d)
}

// waitFor polls cond every 100ms until it holds or limit passes.
func (w *world) waitFor(limit time.Duration, what string, cond func() bool) time.Duration {
	w.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			w.t.Fatalf("%s: %s: not within %v", w.name, what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// emulator starts an emulated Flink JobManager of the world writing to
// storage (a NAS directly, or through a primary mount), retaining
// retained checkpoints.
func (w *world) emulator(storage string, configure ...func(*flinkemu.Config)) *flinkemu.JobManager {
	w.t.Helper()
	cfg := flinkemu.DefaultConfig()
	cfg.Servers, cfg.Storage, cfg.FlinkStorage = w.zk.Servers(), storage, w.flinkURI
	cfg.PathRoot, cfg.ClusterID, cfg.SessionTimeout = pathRoot, w.cluster, flinkSession
	for _, c := range configure {
		c(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(jm.Close)
	return jm
}

// checkpointer completes a checkpoint of job every period until stopped.
type checkpointer struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	last  int64 // GUARDED_BY(mu)
	err   error // GUARDED_BY(mu)
}

func (w *world) checkpointEvery(jm *flinkemu.JobManager, job string, period time.Duration) *checkpointer {
	c := &checkpointer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
			c.mu.Lock()
			if err != nil {
				c.err = err
			} else {
				c.last = cp.ID
			}
			c.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-c.stopc:
				return
			case <-time.After(period):
			}
		}
	}()
	w.t.Cleanup(func() { c.stop() })
	return c
}

// stop ends the checkpoints and returns the id of the last one.
func (c *checkpointer) stop() (int64, error) {
	select {
	case <-c.stopc:
	default:
		close(c.stopc)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.err
}

// replica is a running replication (file-level, as rsync) of one tree.
type replica struct {
	r    *replication.FileLevel
	done chan error
	once sync.Once
}

// replicate copies src to dst every 200ms until stopped.
func (w *world) replicate(src, dst string) *replica {
	w.t.Helper()
	r, err := replication.NewFileLevel(replication.Options{Source: src, Dest: dst})
	if err != nil {
		w.t.Fatal(err)
	}
	rep := &replica{r: r, done: make(chan error, 1)}
	go func() { rep.done <- r.Run(context.Background(), 200*time.Millisecond) }()
	w.t.Cleanup(rep.stop)
	return rep
}

// stop ends the replication wherever it is.
func (r *replica) stop() {
	r.once.Do(func() {
		r.r.Stop()
		<-r.done
	})
}

// syncOnce copies src to dst once, whole.
func (w *world) syncOnce(src, dst string) {
	w.t.Helper()
	r, err := replication.NewFileLevel(replication.Options{Source: src, Dest: dst})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := r.Pass(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

// nodeExporter gives the world a node exporter reading the textfiles its
// takeovers write.
func (w *world) nodeExporter() {
	w.t.Helper()
	w.textfiles = w.path("textfiles")
	w.node = startNodeExporter(w.t, w.textfiles, w.dir)
}

// watch starts the world's two Prometheus servers, scraping its daemons
// and node exporter, and returns once both scraped every target up; the
// silence checks begin there. backfillNode gives the unchanged one an
// hour of the node exporter's up (see doc.go).
func (w *world) watch(backfillNode bool) {
	w.t.Helper()
	tg := targets{node: w.node}
	for _, d := range w.daemons {
		tg.ckptfs = append(tg.ckptfs, d.addr)
	}
	tg.ckptfs = append(tg.ckptfs, w.others...)
	for _, factor := range []int{1, forFactor} {
		var backfill []byte
		if backfillNode && factor == 1 {
			backfill = upHistory(w.node, time.Now())
		}
		w.proms = append(w.proms, startProm(w.t, w.path(fmt.Sprintf("prometheus-%d", factor)), factor, tg, backfill))
	}
	n := len(tg.ckptfs)
	if tg.node != "" {
		n++
	}
	for _, p := range w.proms {
		w.waitFor(30*time.Second, "Prometheus ("+p.name+") to scrape every target up", func() bool {
			res, err := p.query("up == 1", time.Now())
			return err == nil && len(res) == n
		})
	}
	// One evaluation of the rules after every target answered; then two
	// more before any fault, for expect to see an alert that was in its
	// state before the fault.
	time.Sleep(2 * interval)
	w.watching = time.Now()
	w.checkRules()
	time.Sleep(2 * interval)
}

// upHistory is an hour of the node exporter's up at 1, 15 seconds apart,
// ending a minute before now: what Prometheus would hold had it scraped
// that node exporter for the last hour.
func upHistory(node string, now time.Time) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE up gauge\n")
	for ts := now.Add(-70 * time.Minute); ts.Before(now.Add(-time.Minute)); ts = ts.Add(15 * time.Second) {
		fmt.Fprintf(&b, "up{job=\"node\",instance=%q} 1 %d\n", node, ts.Unix())
	}
	b.WriteString("# EOF\n")
	return b.Bytes()
}

// checkRules: both servers loaded every rule, each healthy (evaluated
// without error), the copy with every for: divided by forFactor and
// nothing else changed.
func (w *world) checkRules() {
	w.t.Helper()
	want := forOf(w.t, rulesFile(w.t))
	for _, p := range w.proms {
		rs, err := p.rules()
		if err != nil {
			w.t.Fatalf("%s: /api/v1/rules (%s): %v", w.name, p.name, err)
		}
		if len(rs) != len(want) {
			w.t.Errorf("%s: Prometheus (%s) loaded %d alerting rules, the file has %d", w.name, p.name, len(rs), len(want))
		}
		for _, r := range rs {
			if r.Health != "ok" || r.LastError != "" {
				w.t.Errorf("%s: Prometheus (%s): rule %s is %q: %s", w.name, p.name, r.Name, r.Health, r.LastError)
			}
			f, ok := want[r.Name]
			if !ok {
				w.t.Errorf("%s: Prometheus (%s) has a rule %s the file does not", w.name, p.name, r.Name)
			}
			if got, exp := time.Duration(r.Duration*float64(time.Second)), f/time.Duration(p.factor); got != exp {
				w.t.Errorf("%s: Prometheus (%s): %s has for: %v, want %v", w.name, p.name, r.Name, got, exp)
			}
		}
	}
}

// unchanged and scaled are the world's two Prometheus servers.
func (w *world) unchanged() *prom { return w.proms[0] }
func (w *world) scaled() *prom    { return w.proms[1] }

// fault logs a fault and returns when it happened.
func (w *world) fault(format string, args ...any) time.Time {
	w.t.Helper()
	w.logf("FAULT: "+format, args...)
	return time.Now()
}

// expect waits until Prometheus p shows the alert in state (with those
// labels), and records how long after the fault Prometheus first
// evaluated it so.
func (w *world) expect(p *prom, name, state string, labels map[string]string, fault time.Time, what string, limit time.Duration) time.Duration {
	w.t.Helper()
	deadline := fault.Add(limit)
	var last []alert
	for {
		as, err := p.alerts()
		if err == nil {
			last = as
			for _, a := range as {
				if a.Labels["alertname"] == name && a.State == state && matches(a.Labels, labels) {
					// The fault must have caused it: no sample in that
					// state before it.
					if before, err := p.firstAlertSample(name, state, labels, w.watching); err == nil && before.Before(fault) {
						w.t.Fatalf("%s: Prometheus (%s): %s was %s %.1fs before %s already", w.name, p.name, name, state, fault.Sub(before).Seconds(), what)
					}
					at, err := p.firstAlertSample(name, state, labels, fault)
					if err != nil {
						continue // not evaluated since the fault yet
					}
					took := at.Sub(fault)
					w.logf("Prometheus (%s): %s %s %.1fs after %s", p.name, name, state, took.Seconds(), what)
					shown := name
					if site := labels["site"]; site != "" {
						shown += "{" + site + "}"
					}
					w.env.record(figure{world: w.name, alert: shown, prom: p.name, state: state, fault: what, took: took})
					return took
				}
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: Prometheus (%s): %s did not reach %s within %v of %s (alerts now: %v; last error %v)", w.name, p.name, name, state, limit, what, last, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// absent checks that Prometheus p does not show the alert now.
func (w *world) absent(p *prom, name string, why string) {
	w.t.Helper()
	as, err := p.alerts()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, a := range as {
		if a.Labels["alertname"] == name {
			w.t.Errorf("%s: Prometheus (%s) shows %s (%s): %s", w.name, p.name, a, why, a.Value)
		}
	}
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// allow is what a phase allows of each alert: "pending", or "firing"
// (which allows pending too). An alert it does not name may not even be
// pending.
type allow map[string]string

// silence checks that, between from and to, no alert other than the
// allowed ones was pending or firing in each Prometheus (the unchanged
// rules with unchanged, the copy with scaled), from Prometheus's own
// record (the ALERTS series).
func (w *world) silence(phase string, from, to time.Time, unchanged, scaled allow) {
	w.t.Helper()
	for i, al := range []allow{unchanged, scaled} {
		p := w.proms[i]
		got, err := p.activeBetween(from, to)
		if err != nil {
			w.t.Fatalf("%s: %s: %v", w.name, phase, err)
		}
		var seen []string
		for _, a := range got {
			seen = append(seen, fmt.Sprintf("%s %s %v", a.name, a.state, a.labels))
			max, ok := al[a.name]
			if !ok || (a.state == "firing" && max == "pending") {
				w.t.Errorf("%s: %s (%.0fs): Prometheus (%s): %s was %s, which the phase does not allow (allowed: %v)",
					w.name, phase, to.Sub(from).Seconds(), p.name, a.name, a.state, al)
			}
		}
		w.logf("%s (%.0fs): Prometheus (%s) had pending or firing: %v", phase, to.Sub(from).Seconds(), p.name, seen)
	}
}

// query reads one series' value in Prometheus p now (ok false when
// absent).
func (w *world) value(p *prom, expr string) (float64, bool) {
	w.t.Helper()
	res, err := p.query(expr, time.Now())
	if err != nil {
		w.t.Fatalf("%s: query %s: %v", w.name, expr, err)
	}
	if len(res) != 1 || len(res[0].Points) != 1 {
		return 0, false
	}
	return res[0].Points[0].V, true
}

// firstAt waits until Prometheus p holds the series sel at want, and
// returns the time of its first raw sample at want since since.
func (w *world) firstAt(p *prom, sel string, want float64, since time.Time, limit time.Duration) time.Time {
	w.t.Helper()
	var first time.Time
	w.waitFor(limit, fmt.Sprintf("Prometheus (%s): %s == %v", p.name, sel, want), func() bool {
		res, err := p.query(sel+"["+promDuration(time.Since(since)+interval)+"]", time.Now())
		if err != nil || len(res) != 1 {
			return false
		}
		for _, pt := range res[0].Points {
			if pt.V == want && !pt.T.Before(since) {
				first = pt.T
				return true
			}
		}
		return false
	})
	return first
}

// waitValue waits until both Prometheus servers hold expr at want.
func (w *world) waitValue(expr string, want float64, limit time.Duration) {
	w.t.Helper()
	for _, p := range w.proms {
		w.waitFor(limit, fmt.Sprintf("Prometheus (%s): %s == %v", p.name, expr, want), func() bool {
			v, ok := w.value(p, expr)
			return ok && v == want
		})
	}
}

// writer writes a file through a mount every period, as Flink would,
// counting what happens.
type writer struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	burst time.Time // GUARDED_BY(mu): until then, a write every millisecond
	ok    int       // GUARDED_BY(mu)
	erofs int       // GUARDED_BY(mu)
	first time.Time // GUARDED_BY(mu): the first EROFS
	other []string  // GUARDED_BY(mu)
}

func (w *world) writeEvery(mnt string, period time.Duration) *writer {
	wr := &writer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wr.done)
		for i := 0; ; i++ {
			err := os.WriteFile(filepath.Join(mnt, fmt.Sprintf("write-%d", i)), []byte("x"), 0o644)
			wr.mu.Lock()
			switch {
			case err == nil:
				wr.ok++
			case errors.Is(err, syscall.EROFS):
				if wr.erofs == 0 {
					wr.first = time.Now()
				}
				wr.erofs++
			default:
				wr.other = append(wr.other, err.Error())
			}
			next := period
			if time.Now().Before(wr.burst) {
				next = time.Millisecond
			}
			wr.mu.Unlock()
			select {
			case <-wr.stopc:
				return
			case <-time.After(next):
			}
		}
	}()
	w.t.Cleanup(func() { wr.stop() })
	return wr
}

// burstFor writes every millisecond for d.
func (wr *writer) burstFor(d time.Duration) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.burst = time.Now().Add(d)
}

// stop ends the writes and returns their counts, and when the first was
// refused with EROFS.
func (wr *writer) stop() (ok, erofs int, other []string, firstEROFS time.Time) {
	select {
	case <-wr.stopc:
	default:
		close(wr.stopc)
	}
	<-wr.done
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.ok, wr.erofs, wr.other, wr.first
}
