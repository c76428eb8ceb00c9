package jepsen

import (
	"bufio"
	"context"
	binenc "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/freezer"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// Timing of every run. The lease's D and Flink's session timeout (the
// JobManager's, the takeover's quiet period and the sweeper's grace)
// are drawn per run (runConfig): short, so that a takeover concludes
// within a run, and in part of the runs with the grace longer than D,
// as in production (60 s and 20 s by default).
const (
	zkSession     = 4 * time.Second  // ckptfs's own
	maxSession    = 8 * time.Second  // the servers' maximum session timeout
	takeoverLimit = 45 * time.Second // a takeover command still running then is killed
	pollEvery     = 500 * time.Millisecond
	observeEvery  = 100 * time.Millisecond
	snapshotEvery = 250 * time.Millisecond
	flinkStorage  = "file:/flink"
)

// world is one run: two sites over one ZooKeeper ensemble, with the
// harness's own direct connection to observe and edit ckptfs's nodes.
type world struct {
	t       *testing.T
	cfg     *runConfig
	h       *history
	rng     *rand.Rand
	cluster *zktest.Cluster
	zk      *zktest.Client
	dir     string
	cid     string
	base    string // /ckptfs/<cluster id>
	sites   []*site
	clock   clockStepper
	job     string
	emu     flinkemu.Config // where the JobManager's znodes are
	// storage is Flink's file system as Flink names it (its paths in
	// znodes and files): every ckptfs command maps it to its site's NAS.
	storage string
	fl      *flinkWorld // real Flink's parts, in a run with real Flink

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ending atomic.Bool

	jm        *child
	jmEnded   mono // when heal stopped it
	jmProxy   []*zktest.Proxy
	toProxies [][]*zktest.Proxy // per takeover of the schedule
	rpProxies [][]*zktest.Proxy // per restore-pruned run (R, then the end's two)
	faulting  atomic.Bool       // the faults run: activations get a check of their own
	checks    sync.WaitGroup    // those checks, waited for before the end's restore
	repl      replication.Replicator
	replStop  atomic.Bool
	replHeld  atomic.Bool // DC1 lost: the link carries nothing (runConfig.lag)

	mu        sync.Mutex
	takeovers []*takeoverRun         // GUARDED_BY(mu)
	outcomes  map[string]int         // GUARDED_BY(mu): manual takeovers by outcome
	held      []*zk.Conn             // GUARDED_BY(mu): squatters' and strays' sessions
	pending   map[string][]func(int) // GUARDED_BY(mu): phase faults by trigger, given the holder's pid
	seenLocks map[string]bool        // GUARDED_BY(mu)
	seenBk    map[string]bool        // GUARDED_BY(mu)
	lastLock  int                    // GUARDED_BY(mu): the pid of the last lock holder seen
	strays    []strayPointer         // GUARDED_BY(mu)
	restoreRs []*takeoverRun         // GUARDED_BY(mu): restore-pruned commands
	lockOpen  map[string]int         // GUARDED_BY(mu): lock nodes held, by name: index in h.locks
	runLog    *os.File
	logMu     sync.Mutex
	logTails  map[string]*[]string // GUARDED_BY(logMu)
}

// site is one data center: a NAS, daemons over it, and a freezer group
// with all its processes.
type site struct {
	name  string
	nas   string
	group *freezer.Group
	slots []*slot

	mu     sync.Mutex // serializes freezing against adding processes
	frozen bool       // GUARDED_BY(mu)
}

// slot is one machine of a site: a mount point, a daemon (restarted
// after it dies), its proxies to ZooKeeper and a writer.
type slot struct {
	id      string // dc1/0
	site    *site
	mnt     string
	rt      string // the daemon's RUNTIME_DIRECTORY: its watchdog record
	proxies []*zktest.Proxy
	writer  *child

	mu  sync.Mutex
	cur *daemonProc // GUARDED_BY(mu)
}

type daemonProc struct {
	cmd    *exec.Cmd
	life   *procLife
	exited chan struct{}
	addr   chan string
}

// child is a helper process (writer, JobManager).
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (w *world) logf(format string, args ...any) {
	w.h.logf(format, args...)
}

// newWorld makes the directories, mount points, proxies and freezer
// groups of a run; nothing runs yet.
func newWorld(t *testing.T, cluster *zktest.Cluster, cfg *runConfig, index int) *world {
	w := &world{
		t: t, cfg: cfg, cluster: cluster, dir: t.TempDir(),
		rng:      rand.New(rand.NewPCG(cfg.seed, 0x776f726c64)),
		cid:      fmt.Sprintf("jepsen-%d-%d", cfg.seed, index),
		outcomes: map[string]int{}, pending: map[string][]func(int){}, seenLocks: map[string]bool{}, seenBk: map[string]bool{},
		logTails: map[string]*[]string{}, lockOpen: map[string]int{}, storage: flinkStorage,
	}
	w.base = "/ckptfs/" + w.cid
	w.h = newHistory(cfg.lease, cfg.grace, []string{"dc1", "dc2"})
	w.ctx, w.cancel = context.WithCancel(context.Background())
	var err error
	if w.runLog, err = os.Create(filepath.Join(w.dir, "run.log")); err != nil {
		t.Fatal(err)
	}
	w.zk = zktest.Connect(t, cluster.Servers())
	w.job = fmt.Sprintf("%032x", cfg.seed*0x9e3779b97f4a7c15+uint64(index))
	w.emu = flinkemu.DefaultConfig()
	// Each run has its own path root: the ensemble serves a series of
	// runs, and a takeover refuses a path root holding another cluster.
	w.emu.PathRoot, w.emu.ClusterID, w.emu.Layout, w.emu.Storage = "/flink-"+w.cid, w.cid, cfg.layout, "/unused"
	for i, name := range []string{"dc1", "dc2"} {
		s := &site{name: name, nas: filepath.Join(w.dir, name, "nas")}
		if err := os.MkdirAll(s.nas, 0o755); err != nil {
			t.Fatal(err)
		}
		s.group = freezer.New(t, "jepsen-"+name, "")
		for j := range cfg.perSite[i] {
			sl := &slot{id: fmt.Sprintf("%s/%d", name, j), site: s,
				mnt: filepath.Join(w.dir, name, fmt.Sprintf("mnt-%d", j)), rt: filepath.Join(w.dir, name, fmt.Sprintf("run-%d", j))}
			for _, d := range []string{sl.mnt, sl.rt} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// A read-only tmpfs under the mount: a write through a mount
			// whose daemon died and was detached fails (EROFS) instead of
			// landing in the bare directory.
			if err := syscall.Mount("none", sl.mnt, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
				t.Fatalf("tmpfs under %s: %v", sl.mnt, err)
			}
			mnt := sl.mnt
			t.Cleanup(func() {
				for topMountIsFUSE(mnt) {
					if syscall.Unmount(mnt, syscall.MNT_DETACH) != nil {
						break
					}
				}
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			})
			for _, addr := range cluster.Servers() {
				sl.proxies = append(sl.proxies, zktest.NewProxy(t, addr))
			}
			s.slots = append(s.slots, sl)
		}
		w.sites = append(w.sites, s)
	}
	proxySet := func() []*zktest.Proxy {
		var ps []*zktest.Proxy
		for _, addr := range cluster.Servers() {
			ps = append(ps, zktest.NewProxy(t, addr))
		}
		return ps
	}
	for _, f := range cfg.faults {
		for (f.kind == 'T' || f.kind == 'L') && len(w.toProxies) <= f.index {
			w.toProxies = append(w.toProxies, proxySet())
		}
	}
	if cfg.endRestore != nil {
		// Each R of the schedule, then the end's run and the one that
		// follows a faulted one.
		for range cfg.endRestore.index + 2 {
			w.rpProxies = append(w.rpProxies, proxySet())
		}
	}
	if cfg.flink != "" {
		w.fl = newFlinkWorld(w)
	}
	return w
}

// topMountIsFUSE reports whether the topmost mount at dir is a ckptfs
// mount (so that detaching it leaves the tmpfs beneath).
func topMountIsFUSE(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	top := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			top = line
		}
	}
	return strings.Contains(top, "fuse.ckptfs")
}

func proxyAddrs(ps []*zktest.Proxy) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Addr())
	}
	return strings.Join(out, ",")
}

// saveLine appends a process's output line to the run's log and keeps
// the last lines of each process for a failure's report.
func (w *world) saveLine(who, line string) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	fmt.Fprintf(w.runLog, "%8.3fs %s| %s\n", now().sub(w.h.start).Seconds(), who, line)
	tail := w.logTails[who]
	if tail == nil {
		tail = &[]string{}
		w.logTails[who] = tail
	}
	*tail = append(*tail, line)
	if len(*tail) > 60 {
		*tail = (*tail)[len(*tail)-60:]
	}
}

func (s *site) addProcess(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group.Add(pid)
}

func (s *site) isFrozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen
}

// daemonArgs are the slot's `ckptfs mount` arguments.
func (w *world) daemonArgs(sl *slot) []string {
	mode, jms := "replica", []string{"jm-" + sl.site.name + ":6123"}
	if sl.site.name == "dc1" {
		mode = "primary"
	}
	if w.fl != nil {
		jms = w.fl.addresses(sl.site.name)
	}
	takeover := "manual"
	if w.cfg.auto {
		takeover = "auto"
	}
	args := []string{"mount", "--mode", mode, "--site", sl.site.name, "--zk", proxyAddrs(sl.proxies), "--cluster-id", w.cid, "--path-root", w.emu.PathRoot,
		"--lease-duration", w.cfg.lease.String(), "--log-format", "json", "--log-level", "info",
		"--map", w.storage + "=" + sl.site.nas, "--metrics-addr", "127.0.0.1:0",
		"--flink-session-timeout", w.cfg.grace.String(), "--zk-session-timeout", zkSession.String(),
		"--poll", pollEvery.String(), "--takeover", takeover, "--hold-timeout", "10s"}
	for _, jm := range jms {
		args = append(args, "--site-jobmanagers", jm)
	}
	return append(args, sl.site.nas, sl.mnt)
}

// startDaemon runs the slot's daemon and waits until it serves. A dead
// predecessor's mount is detached first.
func (w *world) startDaemon(sl *slot) (*daemonProc, error) {
	if topMountIsFUSE(sl.mnt) {
		if err := syscall.Unmount(sl.mnt, syscall.MNT_DETACH); err != nil {
			return nil, fmt.Errorf("detaching %s: %w", sl.mnt, err)
		}
	}
	cmd := exec.Command(binary, w.daemonArgs(sl)...)
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3", "RUNTIME_DIRECTORY="+sl.rt)
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		readyW.Close()
		return nil, err
	}
	start := now()
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return nil, err
	}
	d := &daemonProc{cmd: cmd, exited: make(chan struct{}), addr: make(chan string, 1),
		life: &procLife{slot: sl.id, pid: cmd.Process.Pid, start: start, exit: never, successorFired: -1}}
	who := fmt.Sprintf("%s[%d]", sl.id, d.life.pid)
	if err := sl.site.addProcess(d.life.pid); err != nil {
		w.logf("%s: adding to the freezer group: %v", who, err)
	}
	go w.readDaemonLog(sl, d, who, stderr)
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "READY\n" {
			cmd.Process.Kill()
			<-d.exited
			return nil, fmt.Errorf("%s did not become ready (%q)", who, line)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-d.exited
		return nil, fmt.Errorf("%s not ready after 30s", who)
	}
	d.life.ready = now()
	w.h.mu.Lock()
	w.h.procs = append(w.h.procs, d.life)
	w.h.mu.Unlock()
	w.logf("%s serves (%s)", who, sl.mnt)
	return d, nil
}

// readDaemonLog reads a daemon's JSON log: fences and the metrics
// address; when the log ends, the daemon has ended, and the exit is
// recorded with its watchdog's record.
func (w *world) readDaemonLog(sl *slot, d *daemonProc, who string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		at := now()
		line := sc.Text()
		w.saveLine(who, line)
		var rec struct{ Msg, Reason, Addr string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "fencing the mount: read-only":
			w.h.addStamp(&w.h.fences, stamp{who: sl.id, at: at, detail: rec.Reason})
			w.logf("%s fenced its mount: %s", who, rec.Reason)
			if strings.Contains(rec.Reason, "backing directory was replaced") {
				w.h.mu.Lock()
				w.h.replacedFence[sl.id] = true
				w.h.mu.Unlock()
			}
		case "promoting the mount to primary":
			w.logf("%s promoted its mount: %s", who, rec.Reason)
		case "sweeping stray pointers":
			w.h.addStamp(&w.h.sweepFails, stamp{who: sl.id, at: at, detail: line})
		case "serving metrics":
			select {
			case d.addr <- rec.Addr:
			default:
			}
		default:
			for _, p := range narrated {
				if strings.HasPrefix(rec.Msg, p) {
					w.logf("%s: %s %s", who, rec.Msg, rec.Reason)
					break
				}
			}
		}
	}
	err := d.cmd.Wait()
	at := now()
	w.h.mu.Lock()
	d.life.exit = at
	d.life.status = "exit 0"
	if err != nil {
		d.life.status = err.Error()
	}
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		d.life.sigkilled = true
	}
	if data, err := os.ReadFile(watchdogRecordPath(sl)); err == nil {
		var r struct {
			PID      int   `json:"pid"`
			Armed    bool  `json:"armed"`
			Deadline int64 `json:"deadline_boottime_ns"`
		}
		if json.Unmarshal(data, &r) == nil && r.PID == d.life.pid {
			d.life.wdRecord, d.life.wdArmed, d.life.wdDeadline = true, r.Armed, mono(r.Deadline)
		}
	}
	life := *d.life
	w.h.mu.Unlock()
	close(d.exited)
	wd := "no watchdog record"
	switch {
	case life.wdRecord && life.wdArmed:
		wd = "watchdog armed, deadline " + w.h.rel(life.wdDeadline)
	case life.wdRecord:
		wd = "watchdog disarmed"
	}
	w.logf("%s ended: %s (killed by the harness: %v; %s)", who, life.status, life.killedByUs, wd)
}

// narrated are the daemon's log messages that go into the history.
var narrated = []string{"automatic takeover", "stray pointer retracted", "activating this site", "this site is active",
	"activation (", "the daemon did not run", "the previous daemon of this mount", "site activated"}

// watchdogRecordPath is where `ckptfs mount` keeps the slot's watchdog
// record (cmd/ckptfs watchdogRecord, under RUNTIME_DIRECTORY).
func watchdogRecordPath(sl *slot) string {
	name := strings.ReplaceAll(strings.Trim(filepath.Clean(sl.mnt), "/"), "/", "-")
	return filepath.Join(sl.rt, name+".watchdog")
}

// runSlot keeps the slot's daemon running, as systemd's Restart=always:
// a daemon that ends is restarted once its site is not frozen, after
// delay (the harness's kill says how long) or a second.
func (w *world) runSlot(sl *slot, first *daemonProc) {
	defer w.wg.Done()
	d := first
	for {
		sl.mu.Lock()
		sl.cur = d
		sl.mu.Unlock()
		if d != nil {
			go w.readSuccessor(d)
			select {
			case <-d.exited:
			case <-w.ctx.Done():
				return
			}
		}
		delay := time.Second
		w.h.mu.Lock()
		if d != nil && d.life.killedByUs && d.life.restartAfter > 0 {
			delay = d.life.restartAfter
		}
		w.h.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-w.ctx.Done():
			return
		}
		for sl.site.isFrozen() && w.ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		if w.ctx.Err() != nil {
			return
		}
		next, err := w.startDaemon(sl)
		if err != nil {
			w.logf("%s: restart failed: %v", sl.id, err)
			d = nil
			continue
		}
		if d != nil {
			w.h.mu.Lock()
			next.life.prev = d.life
			w.h.mu.Unlock()
		}
		d = next
	}
}

// readSuccessor reads ckptfs_watchdog_fired_previous of a daemon and
// gives it to its predecessor's record.
func (w *world) readSuccessor(d *daemonProc) {
	w.h.mu.Lock()
	prev := d.life.prev
	w.h.mu.Unlock()
	if prev == nil {
		return
	}
	var addr string
	select {
	case addr = <-d.addr:
	case <-d.exited:
		return
	case <-time.After(30 * time.Second):
		return
	}
	for range 50 {
		v, err := scrapeGauge(addr, "ckptfs_watchdog_fired_previous")
		if err == nil {
			w.h.mu.Lock()
			prev.successorFired, prev.successorStart = v, d.life.start
			w.h.mu.Unlock()
			return
		}
		select {
		case <-d.exited:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeGauge reads one unlabelled series of a daemon's /metrics.
func scrapeGauge(addr, name string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("%s not served", name)
}

// current is the slot's running daemon, nil if none.
func (sl *slot) current() *daemonProc {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil {
		return nil
	}
	select {
	case <-sl.cur.exited:
		return nil
	default:
		return sl.cur
	}
}

// startChild runs the test binary as a helper with env set, its output
// read line by line by handle.
func (w *world) startChild(s *site, who string, env string, handle func(at mono, line string)) (*child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	if err := s.addProcess(cmd.Process.Pid); err != nil {
		w.logf("%s: adding to the freezer group: %v", who, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			at := now()
			w.saveLine(who, sc.Text())
			if handle != nil {
				handle(at, sc.Text())
			}
		}
		cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// startWriter starts the slot's writer: its file on the site's NAS is
// w-<site>-<n>.
func (w *world) startWriter(sl *slot) error {
	path := filepath.Join(sl.mnt, writerFile(sl))
	c, err := w.startChild(sl.site, "writer "+sl.id, writerEnv+"="+path, func(_ mono, line string) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "E" {
			if at, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				w.h.addStamp(&w.h.writerErrs, stamp{who: sl.id, at: mono(at), detail: f[1]})
			}
		}
	})
	sl.writer = c
	return err
}

func writerFile(sl *slot) string { return "w-" + strings.ReplaceAll(sl.id, "/", "-") }

// startJobManager starts DC1's JobManager through its own proxies, and
// waits until it submitted its job.
func (w *world) startJobManager() error {
	for _, addr := range w.cluster.Servers() {
		w.jmProxy = append(w.jmProxy, zktest.NewProxy(w.t, addr))
	}
	var servers []string
	for _, p := range w.jmProxy {
		servers = append(servers, p.Addr())
	}
	data, _ := json.Marshal(jmConfig{Servers: servers, PathRoot: w.emu.PathRoot, ClusterID: w.cid, Storage: w.sites[0].slots[0].mnt,
		Layout: w.cfg.layout, Job: w.job, Interval: 400 * time.Millisecond, Session: w.cfg.grace})
	submitted := make(chan struct{}, 1)
	c, err := w.startChild(w.sites[0], "jobmanager", jmEnv+"="+string(data), func(_ mono, line string) {
		if strings.HasPrefix(line, "submitted") {
			select {
			case submitted <- struct{}{}:
			default:
			}
		}
	})
	if err != nil {
		return err
	}
	w.jm = c
	select {
	case <-submitted:
		return nil
	case <-c.exited:
		return errors.New("the JobManager exited")
	case <-time.After(30 * time.Second):
		return errors.New("the JobManager did not submit its job within 30s")
	}
}

// startReplication copies DC1's NAS to DC2's until an activation of
// DC2 stops it (the runbook's failover turns the replication).
func (w *world) startReplication() error {
	opts := replication.Options{Source: w.sites[0].nas, Dest: w.sites[1].nas, ChunkSize: 4 << 10,
		Rand: rand.New(rand.NewPCG(w.cfg.seed, 0x7265706c)),
		Hook: func(replication.Op) error {
			for w.replHeld.Load() && !w.replStop.Load() && w.ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
			}
			if w.replStop.Load() {
				return errors.New("stopped: DC2 was activated")
			}
			return nil
		}}
	var err error
	switch w.cfg.repl {
	case "snapshot":
		w.repl, err = replication.NewSnapshot(replication.SnapshotOptions{Options: opts})
	case "filelevel":
		w.repl, err = replication.NewFileLevel(opts)
	default:
		w.repl, err = replication.NewPerObject(replication.PerObjectOptions{Options: opts, MinDelay: 50 * time.Millisecond, MaxDelay: 1500 * time.Millisecond})
	}
	if err != nil {
		return err
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := w.repl.Run(w.ctx, 300*time.Millisecond); err != nil {
			w.logf("replication ended: %v", err)
		}
	}()
	return nil
}

// stopReplication stops it at once (from the observer, on DC2's
// activation).
func (w *world) stopReplication() {
	if w.replStop.Swap(true) {
		return
	}
	w.h.mu.Lock()
	w.h.replicationEnd = now()
	w.h.mu.Unlock()
	w.logf("replication DC1→DC2 stopped")
}

// observe reads the epoch, active-site and the lease with watches (and
// at least every observeEvery), records every state in the history, and
// watches the takeover lock's children and the job's backups to fire
// phase faults.
func (w *world) observe() {
	defer w.wg.Done()
	conn := w.zk.Conn
	paths := []string{w.base + "/epoch", w.base + "/active-site", w.base + "/lease"}
	watches := make([]<-chan zk.Event, len(paths))
	var lockW, bkW <-chan zk.Event
	dc2Active, leaseSeen := false, false
	for w.ctx.Err() == nil {
		o := observation{sent: now()}
		var datas [3][]byte
		var stats [3]*zk.Stat
		var exists [3]bool
		failed := false
		for i, p := range paths {
			var data []byte
			var st *zk.Stat
			var err error
			if watches[i] == nil {
				var ch <-chan zk.Event
				data, st, ch, err = conn.GetW(p)
				if errors.Is(err, zk.ErrNoNode) {
					var ok bool
					ok, st, ch, err = conn.ExistsW(p)
					if err == nil && ok {
						data, st, err = conn.Get(p) // created meanwhile: the next round watches it
						ch = nil
					}
				}
				if err == nil {
					watches[i] = ch
				}
			} else {
				data, st, err = conn.Get(p)
			}
			if errors.Is(err, zk.ErrNoNode) {
				err, st = nil, nil
			}
			if err != nil {
				failed = true
				break
			}
			datas[i], stats[i], exists[i] = data, st, st != nil
		}
		o.recv = now()
		if !failed {
			o.epochExists = exists[0]
			if exists[0] {
				o.epoch, _ = strconv.ParseInt(strings.TrimSpace(string(datas[0])), 10, 64)
			}
			if exists[1] {
				o.active = string(datas[1])
				o.activeCzxid, o.activeMzxid, o.activeVersion = stats[1].Czxid, stats[1].Mzxid, stats[1].Version
			}
			if exists[2] {
				o.leaseExists = true
				var rec struct {
					Site      string `json:"site"`
					Epoch     int64  `json:"epoch"`
					Judged    int64  `json:"judged_after_zxid"`
					GrantedBy string `json:"granted_by"`
				}
				if json.Unmarshal(datas[2], &rec) == nil {
					o.leaseSite, o.leaseEpoch, o.leaseJudged, o.leaseBy = rec.Site, rec.Epoch, rec.Judged, rec.GrantedBy
				}
				o.leaseMzxid = stats[2].Mzxid
			}
			if w.h.observe(o) {
				w.firePhase("activation", o.leaseSite, 0)
				w.activated(o)
			}
			if leaseSeen && !o.leaseExists {
				w.logf("the lease is gone")
				w.firePhase("lease-gone", "", 0)
			}
			leaseSeen = o.leaseExists
			if o.leaseSite == "dc2" && !dc2Active {
				dc2Active = true
				w.stopReplication()
			}
		}
		if lockW == nil {
			lockW = w.watchChildren(w.base+"/takeover", "lock")
		}
		if bkW == nil && w.cfg.jm {
			bkW = w.watchChildren(w.base+"/pruned/"+w.job, "backup")
		}
		// A nil channel never delivers: a node without a watch waits
		// for the timer.
		t := time.NewTimer(observeEvery)
		select {
		case <-w.ctx.Done():
		case <-t.C:
		case <-watches[0]:
			watches[0] = nil
		case <-watches[1]:
			watches[1] = nil
		case <-watches[2]:
			watches[2] = nil
		case <-lockW:
			lockW = nil
		case <-bkW:
			bkW = nil
		}
		t.Stop()
	}
}

// watchChildren lists path's children with a watch and fires the phase
// faults of trigger for every child not seen before (a lock node: its
// holder's pid from its data).
func (w *world) watchChildren(path, trigger string) <-chan zk.Event {
	conn := w.zk.Conn
	names, _, ch, err := conn.ChildrenW(path)
	if errors.Is(err, zk.ErrNoNode) {
		_, _, ch, err = conn.ExistsW(path)
	}
	if err != nil {
		return nil
	}
	if trigger == "lock" {
		w.lockTenures(names)
	}
	for _, n := range names {
		full := path + "/" + n
		w.mu.Lock()
		seen := trigger == "lock" && w.seenLocks[full] || trigger == "backup" && w.seenBk[full]
		if trigger == "lock" {
			w.seenLocks[full] = true
		} else {
			w.seenBk[full] = true
		}
		w.mu.Unlock()
		if seen {
			continue
		}
		pid, op := 0, ""
		if trigger == "lock" {
			if data, _, err := conn.Get(full); err == nil {
				var holder struct {
					PID  int    `json:"pid"`
					Op   string `json:"op"`
					Site string `json:"site"`
				}
				if json.Unmarshal(data, &holder) == nil {
					pid, op = holder.PID, holder.Op
					w.logf("takeover lock %s taken by %s's %s (pid %d)", n, holder.Site, holder.Op, holder.PID)
				}
				if i, ok := w.lockIndex(n); ok {
					w.h.mu.Lock()
					w.h.locks[i].op, w.h.locks[i].pid = op, pid
					w.h.mu.Unlock()
				}
			}
		} else {
			w.logf("backup %s written", n)
		}
		w.firePhase(trigger, op, pid)
	}
	return ch
}

// lockTenures records which nodes under takeover/ a listing shows: a
// node not seen before begins a tenure, one gone ends it.
func (w *world) lockTenures(names []string) {
	at := now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	for _, n := range names {
		if _, ok := w.lockOpen[n]; !ok {
			w.lockOpen[n] = len(w.h.locks)
			w.h.locks = append(w.h.locks, lockTenure{node: n, from: at, to: never})
		}
	}
	for n, i := range w.lockOpen {
		if !slices.Contains(names, n) {
			w.h.locks[i].to = at
			delete(w.lockOpen, n)
		}
	}
}

// lockIndex is the tenure of lock node n in h.locks.
func (w *world) lockIndex(n string) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, ok := w.lockOpen[n]
	return i, ok
}

// snapshotNAS walks both NASes every snapshotEvery.
func (w *world) snapshotNAS() {
	defer w.wg.Done()
	for w.ctx.Err() == nil {
		for _, s := range w.sites {
			snap := walkNAS(s.nas)
			w.h.mu.Lock()
			w.h.nas[s.name] = append(w.h.nas[s.name], snap)
			w.h.mu.Unlock()
		}
		select {
		case <-w.ctx.Done():
		case <-time.After(snapshotEvery):
		}
	}
}

// walkNAS records every entry below root but .ckptfs (the sealed
// manifests ckptfs writes itself, not through the mount).
func walkNAS(root string) nasSnapshot {
	s := nasSnapshot{start: now(), files: map[string]string{}}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".ckptfs" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			s.files[rel] = "dir"
			return nil
		}
		if fi, err := d.Info(); err == nil {
			s.files[rel] = fmt.Sprintf("%d bytes, mtime %d", fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	s.end = now()
	return s
}

// readRecords reads every writer file on both NASes into the history.
func (w *world) readRecords() {
	for _, nas := range w.sites {
		for _, s := range w.sites {
			for _, sl := range s.slots {
				data, err := os.ReadFile(filepath.Join(nas.nas, writerFile(sl)))
				if err != nil {
					continue
				}
				w.h.mu.Lock()
				for i := 0; i+16 <= len(data); i += 16 {
					w.h.records = append(w.h.records, record{site: s.name, slot: sl.id, nas: nas.name,
						seq: binenc.BigEndian.Uint64(data[i:]), start: mono(binenc.BigEndian.Uint64(data[i+8:]))})
				}
				w.h.mu.Unlock()
			}
		}
	}
}

// holdConn keeps a squatter's or stray's session until the run heals.
func (w *world) holdConn(c *zk.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = append(w.held, c)
}

// dial opens a session of an anonymous client (a squatter, a returning
// JobManager, an operator) straight to the servers.
func (w *world) dial() (*zk.Conn, error) {
	c, events, err := zk.Connect(w.cluster.Servers(), 4*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-deadline:
			c.Close()
			return nil, errors.New("no session within 10s")
		}
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// waitWritable waits until the slot's mount admits a change, from the
// test process: only at the start, while every daemon runs.
func waitWritable(sl *slot) error { return mounttest.WaitWritable(sl.mnt, 30*time.Second) }
