package jepsen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestJepsen (make jepsen) runs CKPTFS_JEPSEN_RUNS randomized histories
// over real ZooKeeper servers, the real ckptfs binary, writers and an
// emulated JobManager, with the seeds CKPTFS_JEPSEN_SEED,
// CKPTFS_JEPSEN_SEED+1, ..., holds each to the model (doc.go) and prints
// one line per run. A failing run's seed, with CKPTFS_JEPSEN_RUNS=1,
// replays it alone.
func TestJepsen(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv(runsEnv))
	if runs <= 0 {
		t.Skipf("jepsen runs are long: set %s (make jepsen RUNS=N)", runsEnv)
	}
	mounttest.RequireFUSE(t)
	base := uint64(time.Now().UnixNano() % 1_000_000)
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if base, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
	}
	t.Logf("jepsen: %d runs from seed %d", runs, base)
	var cfgs []*runConfig
	for i := range runs {
		cfgs = append(cfgs, drawRun(base+uint64(i)))
	}
	findFlink(t, cfgs)
	clusters := map[int]*zktest.Cluster{}
	var rows []*runOutcome
	for i, cfg := range cfgs {
		c := clusters[cfg.zkServers]
		if c == nil {
			c = zktest.StartCluster(t, cfg.zkServers, func(zc *zktest.Config) { zc.MaxSessionTimeout = maxSession })
			clusters[cfg.zkServers] = c
		}
		out := &runOutcome{cfg: cfg, result: "ok"}
		began := time.Now()
		ok := t.Run(fmt.Sprintf("%03d-seed-%d", i, cfg.seed), func(t *testing.T) { runOne(t, c, cfg, i, out) })
		out.took = time.Since(began)
		if !ok && out.result == "ok" {
			out.result = "FAILED"
		}
		rows = append(rows, out)
		fmt.Println(out.row(i))
	}
	fmt.Println(table(base, rows))
}

// runOutcome is one line of the table.
type runOutcome struct {
	cfg       *runConfig
	v         verdict
	takeovers map[string]int
	took      time.Duration
	result    string
}

var header = fmt.Sprintf("%-4s %-7s %-3s %-5s %-4s %-5s %-5s %-9s %-16s %-13s %-4s %-4s %-5s %-5s %-5s %-5s %-4s %-5s %-5s %-4s %-4s %-10s",
	"run", "seed", "zk", "d/dc", "D/g", "auto", "jm", "repl", "faults", "tk ok/4/5/3/k", "act", "wdk", "w/act", "ptr", "mid", "rp/pb", "rp!", "flink", "hfnc", "wd!", "time", "result")

func (o *runOutcome) row(i int) string {
	c := o.cfg
	tk := o.takeovers
	tks := fmt.Sprintf("%d/%d/%d/%d/%d", tk["ok"], tk["refused"], tk["alive"], tk["error"], tk["killed"])
	ptr := strconv.Itoa(o.v.pointersBad)
	if o.v.pointersNote != "" {
		ptr = "-"
	}
	faults := c.faultLetters()
	if len(faults) > 16 {
		faults = faults[:15] + "+"
	}
	flink := o.v.flink
	if flink == "" {
		flink = "-"
	}
	return fmt.Sprintf("%-4d %-7d %-3d %-5s %-4s %-5v %-5s %-9s %-16s %-13s %-4d %-4d %-5d %-5s %-5s %-5s %-4d %-5s %-5d %-4d %-4.0f %-10s",
		i, c.seed, c.zkServers, fmt.Sprintf("%d/%d", c.perSite[0], c.perSite[1]), fmt.Sprintf("%.0f/%.0f", c.lease.Seconds(), c.grace.Seconds()), c.auto, c.jmKind(),
		c.repl, faults, tks, o.v.activations, o.v.watchdogKills, o.v.writesAfter, ptr, fmt.Sprintf("%d/%d", o.v.midJudged, o.v.midChecks),
		fmt.Sprintf("%d/%d", o.v.restores, o.v.putBacks), o.v.restoreBad, flink, o.v.healthyFences, o.v.watchdogBad, o.took.Seconds(), o.result)
}

func table(base uint64, rows []*runOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\njepsen: %d runs from seed %d\n%s\n", len(rows), base, header)
	var acts, kills, writes, ptrs, fences, wdBad, violations, failed, mids, midsAll, rps, pbs, rpBad, flinkOK, flinkAll int
	tks := map[string]int{}
	var seeds []string
	for i, o := range rows {
		fmt.Fprintln(&b, o.row(i))
		acts += o.v.activations
		kills += o.v.watchdogKills
		writes += o.v.writesAfter
		ptrs += o.v.pointersBad
		fences += o.v.healthyFences
		wdBad += o.v.watchdogBad
		mids += o.v.midJudged
		midsAll += o.v.midChecks
		rps += o.v.restores
		pbs += o.v.putBacks
		rpBad += o.v.restoreBad
		if o.v.flink != "" && o.v.flink != "-" {
			flinkAll++
			if strings.HasPrefix(o.v.flink, "ok") {
				flinkOK++
			}
		}
		for k, v := range o.takeovers {
			tks[k] += v
		}
		switch {
		case o.result == "VIOLATION":
			violations++
			seeds = append(seeds, strconv.FormatUint(o.cfg.seed, 10))
		case o.result != "ok":
			failed++
			seeds = append(seeds, strconv.FormatUint(o.cfg.seed, 10))
		}
	}
	fmt.Fprintf(&b, "total: %d runs, takeovers %d ok / %d refused (4) / %d alive or lease held (5) / %d errors (3) / %d killed, %d activations, %d watchdog kills; pointers judged in %d of %d rounds after activations; %d restore-pruned runs put back %d pointers; real Flink restored on the active site in %d of %d runs; writes after activation %d, pointers incomplete %d, bad put-backs %d, healthy fences %d, watchdog violations %d (each must be 0); %d runs with violations, %d failed otherwise\n",
		len(rows), tks["ok"], tks["refused"], tks["alive"], tks["error"], tks["killed"], acts, kills, mids, midsAll, rps, pbs, flinkOK, flinkAll, writes, ptrs, rpBad, fences, wdBad, violations, failed)
	if len(seeds) > 0 {
		fmt.Fprintf(&b, "replay one alone: make jepsen RUNS=1 SEED=<seed> (seeds: %s)\n", strings.Join(seeds, " "))
	}
	fmt.Fprintf(&b, "faults:")
	for _, k := range faultOrder {
		fmt.Fprintf(&b, " %c %s;", k, faultNames[byte(k)])
	}
	fmt.Fprintln(&b)
	return b.String()
}

// runOne runs one history and holds it to the model.
func runOne(t *testing.T, cluster *zktest.Cluster, cfg *runConfig, index int, out *runOutcome) {
	w := newWorld(t, cluster, cfg, index)
	t.Cleanup(w.teardown)
	if err := w.setup(); err != nil {
		out.result = "setup failed"
		t.Fatalf("setup: %v\n%v\n%s", err, cfg, w.report())
	}
	w.runFaults()
	w.heal()
	w.pointersAtEnd()
	w.afterEnd()
	w.finish()
	out.v = check(w.h)
	for _, n := range out.v.midNotes {
		w.saveLine("checker", "a check after an activation not judged: "+n)
	}
	w.mu.Lock()
	out.takeovers = w.outcomes
	w.mu.Unlock()
	if len(out.v.violations) > 0 {
		out.result = "VIOLATION"
		for _, v := range out.v.violations {
			t.Errorf("VIOLATION of %s", v)
		}
		t.Logf("seed %d replays this run alone: make jepsen RUNS=1 SEED=%d\n%v\n%s", cfg.seed, cfg.seed, cfg, w.report())
	}
}

// setup starts the observer, DC1's daemons (primaries, which activate
// DC1 themselves in a cluster never activated), DC2's (replicas), a
// writer per daemon, the JobManager and the replication.
func (w *world) setup() error {
	w.wg.Add(2)
	go w.observe()
	go w.snapshotNAS()
	for _, s := range w.sites {
		for _, sl := range s.slots {
			d, err := w.startDaemon(sl)
			if err != nil {
				return err
			}
			w.wg.Add(1)
			go w.runSlot(sl, d)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if o, ok := w.lastObservation(); ok && o.holds("dc1") {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("DC1 did not activate itself within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, sl := range w.sites[0].slots {
		if err := waitWritable(sl); err != nil {
			return err
		}
	}
	for _, s := range w.sites {
		for _, sl := range s.slots {
			if err := w.startWriter(sl); err != nil {
				return err
			}
		}
	}
	switch {
	case w.fl != nil:
		if err := w.fl.startDC1(); err != nil {
			return err
		}
	case w.cfg.jm:
		if err := w.startJobManager(); err != nil {
			return err
		}
	}
	if err := w.startReplication(); err != nil {
		return err
	}
	w.logf("setup done: faults begin")
	return nil
}

// heal undoes every fault: the clock, blocked connections, stopped
// daemons, frozen sites, squatters' and strays' sessions; it stops the
// JobManager.
func (w *world) heal() {
	if err := w.clock.restore(); err != nil {
		w.t.Errorf("restoring the clock: %v", err)
	}
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	for _, c := range held {
		c.Close()
	}
	for _, s := range w.sites {
		w.thaw(s)
		for _, sl := range s.slots {
			for _, p := range sl.proxies {
				p.Unblock()
			}
			if d := sl.current(); d != nil {
				d.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	}
	for _, p := range w.jmProxy {
		p.Unblock()
	}
	for _, ps := range w.toProxies {
		for _, p := range ps {
			p.Unblock()
		}
	}
	if w.jm != nil {
		w.jm.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-w.jm.exited:
		case <-time.After(5 * time.Second):
			w.jm.cmd.Process.Kill()
			<-w.jm.exited
		}
		w.jmEnded = now()
		w.logf("JobManager stopped")
	}
	if w.fl != nil && w.fl.dc1 != nil {
		// Killed: its sessions end Flink's session timeout later.
		w.fl.dc1.stop()
		w.jmEnded = now()
	}
}

// pointersAtEnd waits until every slot has a daemon, one site holds the
// lease, no takeover or sweep holds the lock and the sweeper's grace
// passed since the last stray could appear, and then asks `ckptfs
// status` on that site for Flink's pointers (invariant 2). As soon as a
// site holds the lease with no takeover running, it adds a stray
// pointer of its own: no takeover comes after it, so the sweeper alone
// must retract it before the status.
func (w *world) pointersAtEnd() {
	if !w.cfg.jm {
		w.h.pointersSkip = "no JobManager in this run"
		return
	}
	settle := w.cfg.grace + 3*time.Second
	deadline := time.Now().Add(60 * time.Second)
	var site string
	var strayAt mono
	for {
		if strayAt == 0 && w.settled(0) != "" {
			w.createStray(0)
			strayAt = now()
		}
		site = w.settled(settle)
		jmGone := w.jmEnded == 0 || now().sub(w.jmEnded) >= w.cfg.grace+time.Second
		swept := strayAt != 0 && now().sub(strayAt) >= w.cfg.grace+midMargin
		if site != "" && jmGone && swept {
			break
		}
		if time.Now().After(deadline) {
			site = ""
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if site == "" {
		o, _ := w.lastObservation()
		w.h.pointersSkip = fmt.Sprintf("no site held the lease for %v at the end (epoch %d exists %v, active-site %q, lease %q at %d)",
			settle, o.epoch, o.epochExists, o.active, o.leaseSite, o.leaseEpoch)
		w.logf("pointers not checked: %s", w.h.pointersSkip)
		return
	}
	ps, err := w.status(site)
	if err != nil {
		w.t.Error(err)
		w.h.pointersSkip = "ckptfs status failed"
		return
	}
	var lease struct {
		Judged    int64  `json:"judged_after_zxid"`
		GrantedBy string `json:"granted_by"`
	}
	if data, _, err := w.zk.Get(w.base + "/lease"); err == nil {
		json.Unmarshal(data, &lease)
	}
	w.h.mu.Lock()
	w.h.pointersSite, w.h.judged, w.h.judgedBy = site, lease.Judged, lease.GrantedBy
	w.h.pointers = ps
	n := len(w.h.pointers)
	w.h.mu.Unlock()
	w.logf("pointers checked on %s, the active site: %d", site, n)
}

// settled returns the site that held the lease for at least d at the
// last observation, with every slot's daemon serving and no lock node
// under takeover/; "" if none.
func (w *world) settled(d time.Duration) string {
	for _, s := range w.sites {
		for _, sl := range s.slots {
			if sl.current() == nil {
				return ""
			}
		}
	}
	if kids, _, err := w.zk.Children(w.base + "/takeover"); err != nil || len(kids) > 0 {
		return ""
	}
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	n := len(w.h.obs)
	if n == 0 {
		return ""
	}
	last := w.h.obs[n-1]
	site := last.leaseSite
	if !last.holds(site) {
		return ""
	}
	since := last.sent
	for i := n - 1; i >= 0 && w.h.obs[i].holds(site) && w.h.obs[i].epoch == last.epoch; i-- {
		since = w.h.obs[i].sent
	}
	if last.recv.sub(since) < d {
		return ""
	}
	return site
}

// finish stops everything that runs, takes the last walk of the NASes
// and reads the writers' records.
func (w *world) finish() {
	w.ending.Store(true)
	w.cancel()
	for _, s := range w.sites {
		for _, sl := range s.slots {
			if sl.writer != nil {
				sl.writer.cmd.Process.Kill()
				<-sl.writer.exited
			}
		}
	}
	w.wg.Wait()
	for _, s := range w.sites {
		snap := walkNAS(s.nas)
		w.h.mu.Lock()
		w.h.nas[s.name] = append(w.h.nas[s.name], snap)
		w.h.mu.Unlock()
	}
	w.stopDaemons()
	w.readRecords()
	w.h.mu.Lock()
	w.h.end = now()
	recs := map[string]int{}
	for _, r := range w.h.records {
		recs[r.site+" on "+r.nas]++
	}
	walks, obs := len(w.h.nas["dc1"])+len(w.h.nas["dc2"]), len(w.h.obs)
	w.h.mu.Unlock()
	w.logf("the checker reads %d observations, %d NAS walks, writer records %v", obs, walks, recs)
}

// stopDaemons ends every daemon at once: SIGTERM, SIGKILL after 20 s.
func (w *world) stopDaemons() {
	var wg sync.WaitGroup
	for _, s := range w.sites {
		for _, sl := range s.slots {
			d := sl.current()
			if d == nil {
				continue
			}
			d.cmd.Process.Signal(syscall.SIGCONT)
			d.cmd.Process.Signal(syscall.SIGTERM)
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-d.exited:
				case <-time.After(20 * time.Second):
					w.t.Errorf("%s did not stop within 20s of SIGTERM", sl.id)
					d.cmd.Process.Kill()
					<-d.exited
				}
			}()
		}
	}
	wg.Wait()
}

// teardown runs whatever a failed run left: the clock first.
func (w *world) teardown() {
	if err := w.clock.restore(); err != nil {
		w.t.Errorf("restoring the clock: %v", err)
	}
	w.ending.Store(true)
	w.cancel()
	for _, s := range w.sites {
		w.thaw(s)
	}
	for _, s := range w.sites {
		for _, sl := range s.slots {
			if sl.writer != nil {
				sl.writer.cmd.Process.Kill()
			}
		}
	}
	if w.jm != nil {
		w.jm.cmd.Process.Kill()
	}
	w.mu.Lock()
	for _, r := range append(slices.Clone(w.takeovers), w.restoreRs...) {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
		}
	}
	w.mu.Unlock()
	w.checks.Wait()
	w.stopDaemons()
	w.wg.Wait()
	w.runLog.Close()
	// CKPTFS_JEPSEN_KEEP=<dir> keeps each run's history and every
	// process's output there.
	if keep := os.Getenv(keepEnv); keep != "" {
		dst := filepath.Join(keep, fmt.Sprintf("seed-%d.log", w.cfg.seed))
		data, _ := os.ReadFile(w.runLog.Name())
		text := fmt.Sprintf("%v\n\nhistory:\n%s\n\noutput:\n%s", w.cfg, w.h.eventLog(), data)
		if err := os.WriteFile(dst, []byte(text), 0o644); err == nil && w.t.Failed() {
			w.t.Logf("the run's history and output: %s", dst)
		}
	}
}

const keepEnv = "CKPTFS_JEPSEN_KEEP"

// report is a failed run's history and the last lines of every process.
func (w *world) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "history:\n%s\n", w.h.eventLog())
	w.logMu.Lock()
	defer w.logMu.Unlock()
	var who []string
	for k := range w.logTails {
		who = append(who, k)
	}
	sort.Strings(who)
	for _, k := range who {
		tail := *w.logTails[k]
		if len(tail) > 15 {
			tail = tail[len(tail)-15:]
		}
		fmt.Fprintf(&b, "--- %s, last lines:\n%s\n", k, strings.Join(tail, "\n"))
	}
	return b.String()
}
