package jepsen

import (
	"bytes"
	"context"
	binenc "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/realflink"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// runConfig is one run, all drawn from its seed (drawRun): replaying a
// seed replays the same world and the same faults at the same moments
// (what the processes do in between is up to the machine).
type runConfig struct {
	seed      uint64
	zkServers int
	perSite   [2]int // daemons of DC1 and DC2
	auto      bool   // takeover: auto on every daemon
	jm        bool   // DC1 runs a JobManager
	flink     string // real Flink's release for DC1's JobManager ("": the emulator)
	layout    flinkemu.Layout
	repl      string
	lease     time.Duration // the lease's D
	grace     time.Duration // Flink's session timeout
	duration  time.Duration // of the faults
	faults    []fault
	// endRestore is the restore-pruned run on the active site after the
	// run healed (JobManager runs only): kind 'R', at is unused.
	endRestore *fault
	// lag, when set, holds the replication back when DC1 is lost (L),
	// lag before DC1 freezes, until DC1 thaws or DC2 is activated: what
	// DC1 wrote last is not on DC2 at the takeover, which retracts it;
	// the R's late delivery brings it.
	lag time.Duration
}

// jmKind is the table's jm column: no JobManager, the emulator, or real
// Flink.
func (c *runConfig) jmKind() string {
	switch {
	case !c.jm:
		return "no"
	case c.flink != "":
		return "flink"
	}
	return "emu"
}

// fault is one fault of a run's schedule.
type fault struct {
	kind  byte          // a letter of faultNames
	at    time.Duration // after the faults began
	dur   time.Duration
	site  int
	slot  int
	arg   string
	delta time.Duration // clock steps
	back  bool          // operator edits: put back after dur
	index int           // takeovers, restore-pruned runs: which proxy set
	// restore-pruned runs (R): the replication first delivers the
	// checkpoints of retracted pointers to the active site (partly: one
	// file of one of them short), and the P fault at its lock or its
	// put-back multi ("lock:cut", "multi:kill", ...; "" none).
	deliver, partly bool
	phase           string
	// pass: P at a multi: how many multis of the lock's holder go
	// through before the one held (each step of a takeover).
	pass int
	// later: drawn by drawMore.
	later bool
}

// faultNames are the letters of the table's faults column.
var faultNames = map[byte]string{
	'S': "a daemon stopped (SIGSTOP) and continued",
	'K': "a daemon killed (SIGKILL) and restarted",
	'F': "a site frozen (cgroup freezer) and thawed",
	'C': "CLOCK_REALTIME stepped forward or back by minutes",
	'X': "a daemon's ZooKeeper connections blocked (short: lost; long: expired)",
	'D': "a daemon's ZooKeeper connections dropped",
	'T': "a manual takeover (ckptfs takeover)",
	'L': "DC1 lost: frozen long, and DC2's takeover",
	'P': "at a takeover's or sweep's lock, backup or inside one of its multis (or a daemon's next multi): its holder cut off or killed, or a stray pointer",
	'J': "the JobManager's ZooKeeper connections blocked until its session expired",
	'M': "the JobManager killed",
	'O': "an operator edits active-site, the epoch or the lease (put back or not)",
	'Q': "an anonymous squatter on Flink's leader/ or ckptfs's takeover/ or pruned/",
	'Y': "a returning JobManager's stray pointers",
	'R': "ckptfs restore-pruned on the active site or the other, after a late delivery or not, cut off or killed at its lock or put-back multi or not",
}

const faultOrder = "LTPSKFCXDJMOQYR"

func (c *runConfig) faultLetters() string {
	var b []byte
	for _, f := range c.faults {
		b = append(b, f.kind)
	}
	slices.SortFunc(b, func(x, y byte) int { return strings.IndexByte(faultOrder, x) - strings.IndexByte(faultOrder, y) })
	return string(b)
}

func (c *runConfig) String() string {
	var fs []string
	for _, f := range c.faults {
		fs = append(fs, f.String())
	}
	jm := fmt.Sprintf("JobManager %v (%s)", c.jm, c.layout)
	if c.lag > 0 {
		jm += fmt.Sprintf(", the replication held back %v before DC1's loss", c.lag.Round(time.Millisecond))
	}
	if c.flink != "" {
		jm = "real Flink " + c.flink
	}
	end := ""
	if c.endRestore != nil {
		end = "\n  then restore-pruned on the active site:" + strings.TrimPrefix(c.endRestore.String(), fmt.Sprintf("%5.1fs R", 0.0))
	}
	return fmt.Sprintf("seed %d: %d ZooKeeper servers, daemons %d+%d, takeover auto %v, %s, %s replication, lease %v, Flink's session timeout %v, %v of faults:\n  %s%s",
		c.seed, c.zkServers, c.perSite[0], c.perSite[1], c.auto, jm, c.repl, c.lease, c.grace, c.duration, strings.Join(fs, "\n  "), end)
}

func (f fault) String() string {
	s := fmt.Sprintf("%5.1fs %c", f.at.Seconds(), f.kind)
	switch f.kind {
	case 'S', 'K', 'X', 'D':
		s += fmt.Sprintf(" dc%d/%d", f.site+1, f.slot)
	case 'F':
		s += fmt.Sprintf(" dc%d", f.site+1)
	case 'C':
		s += fmt.Sprintf(" %+v", f.delta)
	case 'T':
		s += " " + f.arg
	case 'P', 'O', 'Q':
		if f.kind == 'P' && strings.HasPrefix(f.arg, "daemon-multi") {
			s += fmt.Sprintf(" dc%d/%d", f.site+1, f.slot)
		}
		s += " " + f.arg
		if f.kind == 'P' && strings.HasPrefix(f.arg, "multi") {
			s += fmt.Sprintf(" (after %d)", f.pass)
		}
		if f.kind == 'O' && f.back {
			s += " (put back)"
		}
	case 'R':
		s += " on the " + f.arg + " site"
		if f.deliver {
			s += ", after a late delivery"
			if f.partly {
				s += " (one file short)"
			}
		}
		if f.phase != "" {
			s += ", P at its " + f.phase
		}
	}
	if f.dur > 0 {
		s += fmt.Sprintf(" for %v", f.dur.Round(10*time.Millisecond))
	}
	return s
}

// drawRun draws a run from its seed.
func drawRun(seed uint64) *runConfig {
	rng := rand.New(rand.NewPCG(seed, 0x6a657073656e))
	c := &runConfig{seed: seed, zkServers: 3, perSite: [2]int{1, 1}}
	if rng.IntN(3) == 0 {
		c.zkServers = 5
	}
	if rng.IntN(3) == 0 { // many daemons per site
		c.perSite = [2]int{1 + rng.IntN(3), 1 + rng.IntN(2)}
		if c.perSite == [2]int{1, 1} {
			c.perSite[0] = 2
		}
	}
	c.auto = rng.IntN(3) == 0
	c.jm = rng.IntN(4) != 0
	c.layout = []flinkemu.Layout{flinkemu.Flink1_17, flinkemu.Flink1_20, flinkemu.Flink2}[rng.IntN(3)]
	c.repl = []string{"snapshot", "filelevel", "perobject"}[rng.IntN(3)]
	c.lease = []time.Duration{2 * time.Second, 3 * time.Second, 4 * time.Second}[rng.IntN(3)]
	c.grace = []time.Duration{4 * time.Second, 6 * time.Second}[rng.IntN(2)]
	c.duration = time.Duration(25+rng.IntN(16)) * time.Second
	type weighted struct {
		kind   byte
		weight int
	}
	kinds := []weighted{{'S', 4}, {'K', 3}, {'F', 3}, {'C', 3}, {'X', 4}, {'D', 2}, {'T', 4}, {'P', 4}, {'O', 3}, {'Q', 2}}
	if c.jm {
		kinds = append(kinds, weighted{'J', 2}, weighted{'M', 1}, weighted{'Y', 2})
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	at := func() time.Duration { return time.Duration(rng.Int64N(int64(c.duration - 2*time.Second))) }
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	takeovers := 0
	if rng.IntN(2) == 0 || !c.auto {
		// DC1 lost: what makes a takeover pass (and the others decide).
		c.faults = append(c.faults, fault{kind: 'L', at: at() / 3, dur: dur(12*time.Second, 24*time.Second), index: takeovers})
		takeovers++
	}
	n := 4 + rng.IntN(8)
	for range n {
		x := rng.IntN(total)
		var k byte
		for _, w := range kinds {
			if x < w.weight {
				k = w.kind
				break
			}
			x -= w.weight
		}
		f := fault{kind: k, at: at()}
		f.site = rng.IntN(2)
		f.slot = rng.IntN(c.perSite[f.site])
		switch k {
		case 'S':
			if rng.IntN(2) == 0 {
				f.dur = dur(c.lease/8, c.lease/3) // shorter than the write deadline
			} else {
				f.dur = dur(c.lease, 3*c.lease) // past the watchdog
			}
		case 'K':
			f.dur = dur(300*time.Millisecond, 4*time.Second) // until the restart
		case 'F':
			f.site = 0
			if rng.IntN(4) == 0 {
				f.site = 1
			}
			f.dur = dur(time.Second, 20*time.Second)
		case 'C':
			f.delta = time.Duration(1+rng.IntN(10)) * time.Minute
			if rng.IntN(2) == 0 {
				f.delta = -f.delta
			}
			f.dur = dur(time.Second, 4*time.Second)
		case 'X':
			if rng.IntN(2) == 0 {
				f.dur = dur(300*time.Millisecond, 2*time.Second) // the connection is lost, not the session
			} else {
				f.dur = dur(zkSession+time.Second, 2*zkSession+2*time.Second) // the session expires
			}
		case 'T':
			f.arg = []string{"other", "other", "dc2", "dc1"}[rng.IntN(4)]
			f.index = takeovers
			takeovers++
		case 'P':
			triggers := []string{"lock", "lock", "backup"}
			if c.jm {
				triggers = append(triggers, "activation", "lease-gone")
			}
			trigger := triggers[rng.IntN(len(triggers))]
			actions := []string{"cut", "cutlong", "kill"}
			if c.jm {
				actions = append(actions, "stray", "stray")
			}
			if trigger == "activation" || trigger == "lease-gone" {
				actions = []string{"stray"} // no process to blame
			}
			f.arg = trigger + ":" + actions[rng.IntN(len(actions))]
			switch {
			case strings.HasSuffix(f.arg, "cutlong"):
				f.dur = dur(zkSession+time.Second, 2*zkSession)
			case strings.HasSuffix(f.arg, "cut"):
				f.dur = dur(200*time.Millisecond, 2*time.Second)
			}
		case 'J':
			f.dur = dur(c.grace+time.Second, 2*c.grace+time.Second)
		case 'O':
			edits := []string{"del-active", "del-epoch", "rollback-epoch", "other-active", "del-lease"}
			if c.jm {
				// A returning JobManager's pointers, then an operator
				// deletes the lease within the sweeper's grace.
				edits = append(edits, "stray+del-lease")
			}
			f.arg = edits[rng.IntN(len(edits))]
			f.back = rng.IntN(3) != 0
			f.dur = dur(time.Second, 10*time.Second)
			if f.arg == "stray+del-lease" {
				f.dur = time.Duration(rng.Int64N(int64(c.grace)))
			}
		case 'Q':
			args := []string{"lock"}
			if c.jm {
				args = append(args, "leader", "backup")
			}
			f.arg = args[rng.IntN(len(args))]
			f.dur = dur(time.Second, 10*time.Second)
		case 'Y':
			f.slot = 1 + rng.IntN(3) // strays in the burst
		}
		c.faults = append(c.faults, f)
	}
	c.drawMore(seed)
	sort.SliceStable(c.faults, func(i, j int) bool { return c.faults[i].at < c.faults[j].at })
	return c
}

// drawMore draws what came after the first series of runs from a stream
// of its own, so that a seed keeps the faults it drew before and gets
// more: real Flink in about a third of the runs (four in nine of those
// with a JobManager), restore-pruned runs (R) with the P fault at their
// lock or put-back multi, and P faults inside multis.
func (c *runConfig) drawMore(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6a657073656e32))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	if c.jm {
		c.drawJM(rng, dur)
	}
	// P inside a multi (zktest.TrapRequest): of the next lock's holder,
	// after it sent pass multis (a takeover's backups, retractions and
	// activation, a sweep's retraction, restore-pruned's put-back, an
	// adopt's activation), or a daemon's next one (a renewal mostly).
	for range rng.IntN(3) {
		f := fault{kind: 'P', at: time.Duration(rng.Int64N(int64(c.duration - 2*time.Second))), later: true}
		actions := []string{"cut", "cutlong", "kill"}
		if rng.IntN(3) == 0 {
			f.site = rng.IntN(2)
			f.slot = rng.IntN(c.perSite[f.site])
			f.arg = "daemon-multi:"
		} else {
			f.pass = rng.IntN(3)
			f.arg = "multi:"
			if c.jm {
				actions = append(actions, "stray", "stray")
			}
		}
		f.arg += actions[rng.IntN(len(actions))]
		switch {
		case strings.HasSuffix(f.arg, "cutlong"):
			f.dur = dur(zkSession+time.Second, 2*zkSession)
		case strings.HasSuffix(f.arg, "cut"):
			f.dur = dur(200*time.Millisecond, 2*time.Second)
		}
		c.faults = append(c.faults, f)
	}
}

// drawJM draws drawMore's part of a run with a JobManager.
func (c *runConfig) drawJM(rng *rand.Rand, dur func(lo, hi time.Duration) time.Duration) {
	if vs := flinkVersions(); rng.IntN(9) < 4 && len(vs) > 0 {
		c.flink = vs[rng.IntN(len(vs))]
	}
	phase := func() (string, time.Duration) {
		if rng.IntN(3) == 0 {
			return "", 0
		}
		p := []string{"lock", "multi"}[rng.IntN(2)] + ":" + []string{"cut", "cutlong", "kill"}[rng.IntN(3)]
		switch {
		case strings.HasSuffix(p, "cutlong"):
			return p, dur(zkSession+time.Second, 2*zkSession)
		case strings.HasSuffix(p, "cut"):
			return p, dur(200*time.Millisecond, 2*time.Second)
		}
		return p, 0
	}
	restores := 0
	for range rng.IntN(3) {
		f := fault{kind: 'R', at: time.Duration(rng.Int64N(int64(c.duration - 2*time.Second))), arg: "active", index: restores, later: true}
		if rng.IntN(4) == 0 {
			f.arg = "other"
		}
		f.deliver = rng.IntN(2) == 0
		f.partly = f.deliver && rng.IntN(3) == 0
		f.phase, f.dur = phase()
		c.faults = append(c.faults, f)
		restores++
	}
	end := fault{kind: 'R', arg: "active", index: restores, deliver: true, partly: rng.IntN(3) == 0}
	end.phase, end.dur = phase()
	c.endRestore = &end
	if strings.IndexByte(c.faultLetters(), 'L') >= 0 && rng.IntN(3) != 0 {
		// One to two and a half checkpoint intervals unreplicated: the
		// newest pointers are retracted, an older one kept.
		every := 400 * time.Millisecond
		if c.flink != "" {
			every = flinkInterval
		}
		c.lag = dur(every, every*5/2)
	}
}

// flinkVersions are the releases of flink/versions.tsv that make test
// runs (realflink.TestReleases): a run with real Flink draws one.
var flinkVersions = sync.OnceValue(func() []string {
	rs, err := realflink.Releases()
	if err != nil {
		panic(err)
	}
	var out []string
	for _, r := range rs {
		if r.Use == "test" {
			out = append(out, r.Version)
		}
	}
	return out
})

// runFaults applies the schedule from now for the run's duration, then
// ends every fault still applied (the holds return early) and waits
// until each was undone.
func (w *world) runFaults() {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	start := now()
	w.faulting.Store(true)
	var wg sync.WaitGroup
	for _, f := range w.cfg.faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sleepCtx(ctx, start.add(f.at).sub(now())) {
				return
			}
			w.apply(ctx, &wg, f)
		}()
	}
	sleepCtx(ctx, w.cfg.duration)
	w.logf("faults over: healing")
	w.faulting.Store(false)
	cancel()
	w.faultsDone()
	wg.Wait()
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// apply applies one fault and undoes it after its duration, or when the
// run heals (faultCtx ends).
func (w *world) apply(ctx context.Context, wg *sync.WaitGroup, f fault) {
	hold := func() { sleepCtx(ctx, f.dur) }
	switch f.kind {
	case 'S':
		sl := w.sites[f.site].slots[f.slot]
		d := sl.current()
		if d == nil {
			w.logf("S %s: no daemon runs", sl.id)
			return
		}
		w.stop(sl, d, hold)
	case 'K':
		sl := w.sites[f.site].slots[f.slot]
		w.killDaemon(sl, f.dur)
	case 'F':
		w.freeze(w.sites[f.site], hold)
	case 'L':
		if w.cfg.lag > 0 {
			// The link goes first: DC1 writes on, unreplicated.
			w.replHeld.Store(true)
			w.logf("the replication DC1→DC2 carries nothing any more")
			sleepCtx(ctx, w.cfg.lag)
			defer func() {
				if w.replHeld.Swap(false) {
					w.logf("the replication DC1→DC2 carries again")
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sleepCtx(ctx, time.Duration(w.rng.Int64N(int64(3*time.Second)))) {
				w.runTakeover(ctx, "dc2", f.index)
			}
		}()
		w.freeze(w.sites[0], hold)
	case 'C':
		if err := w.clock.step(f.delta); err != nil {
			w.logf("C: %v", err)
			return
		}
		w.h.addSpan(&w.h.clock, span{who: "machine", what: "clock", from: now(), to: never, detail: f.delta.String()})
		w.logf("CLOCK_REALTIME stepped by %v", f.delta)
		hold()
		if err := w.clock.restore(); err != nil {
			w.logf("C: %v", err)
		}
		w.h.endSpan(&w.h.clock, "machine", "clock", now())
		w.logf("CLOCK_REALTIME restored")
	case 'X':
		w.cut(w.sites[f.site].slots[f.slot], f.dur, ctx)
	case 'D':
		sl := w.sites[f.site].slots[f.slot]
		n := 0
		for _, p := range sl.proxies {
			n += p.DropConns()
		}
		w.h.addSpan(&w.h.cuts, span{who: sl.id, what: "drop", from: now(), to: now(), dropOnly: true})
		w.logf("%s: dropped %d ZooKeeper connection(s)", sl.id, n)
	case 'T':
		site := f.arg
		if site == "other" {
			site = "dc2"
			if o, ok := w.lastObservation(); ok && o.holds("dc2") {
				site = "dc1"
			}
		}
		w.runTakeover(ctx, site, f.index)
	case 'P':
		trigger, action, _ := strings.Cut(f.arg, ":")
		switch trigger {
		case "daemon-multi":
			sl := w.sites[f.site].slots[f.slot]
			w.trapMulti(ctx, sl.proxies, 0, sl.id, func() { w.hit(ctx, sl, nil, sl.proxies, action, f.dur) })
		case "multi":
			w.mu.Lock()
			w.pending["lock"] = append(w.pending["lock"], func(pid int) {
				sl, r, proxies := w.holder(pid)
				if proxies == nil {
					w.logf("P at a multi: pid %d is none of ours", pid)
					return
				}
				w.trapMulti(ctx, proxies, f.pass, fmt.Sprintf("pid %d", pid), func() { w.hit(ctx, sl, r, proxies, action, f.dur) })
			})
			w.mu.Unlock()
		default:
			w.mu.Lock()
			w.pending[trigger] = append(w.pending[trigger], func(pid int) { w.phaseAction(ctx, action, pid, f.dur) })
			w.mu.Unlock()
		}
	case 'J':
		for _, p := range w.jmProxy {
			p.Block()
		}
		w.logf("JobManager cut off from ZooKeeper for %v", f.dur)
		hold()
		for _, p := range w.jmProxy {
			p.Unblock()
		}
		w.logf("JobManager reconnects")
	case 'M':
		switch {
		case w.fl != nil:
			w.fl.dc1.killJM()
		case w.jm != nil:
			w.jm.cmd.Process.Kill()
			w.logf("JobManager killed")
		}
	case 'O':
		w.operatorEdit(ctx, f)
	case 'Q':
		w.squat(ctx, f)
	case 'Y':
		for range f.slot {
			w.createStray(time.Duration(w.rng.Int64N(int64(2 * time.Second))))
		}
	case 'R':
		w.runRestore(ctx, f, f.index, false)
	}
}

// faultsDone ends the phase faults that did not fire.
func (w *world) faultsDone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = map[string][]func(int){}
}

func (w *world) lastObservation() (observation, bool) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if len(w.h.obs) == 0 {
		return observation{}, false
	}
	return w.h.obs[len(w.h.obs)-1], true
}

// stop stops a daemon with SIGSTOP until hold returns.
func (w *world) stop(sl *slot, d *daemonProc, hold func()) {
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return
	}
	w.h.addSpan(&w.h.stops, span{who: sl.id, what: "stop", from: now(), to: never})
	w.logf("%s (pid %d) stopped", sl.id, d.life.pid)
	hold()
	d.cmd.Process.Signal(syscall.SIGCONT)
	w.h.endSpan(&w.h.stops, sl.id, "stop", now())
	w.logf("%s (pid %d) continued", sl.id, d.life.pid)
}

// killDaemon kills the slot's daemon; it restarts after restart.
func (w *world) killDaemon(sl *slot, restart time.Duration) {
	d := sl.current()
	if d == nil {
		w.logf("K %s: no daemon runs", sl.id)
		return
	}
	w.h.mu.Lock()
	d.life.killedByUs, d.life.restartAfter = true, restart
	w.h.mu.Unlock()
	d.cmd.Process.Kill()
	w.logf("%s (pid %d) killed; restart in %v", sl.id, d.life.pid, restart.Round(time.Millisecond))
}

// freeze freezes every process of a site until hold returns.
func (w *world) freeze(s *site, hold func()) {
	s.mu.Lock()
	if s.frozen {
		s.mu.Unlock()
		w.logf("%s is frozen already", s.name)
		return
	}
	from := now()
	// A group that does not settle is frozen all the same, but for a
	// process in a request to a daemon frozen already.
	err := s.group.Freeze()
	s.frozen = true
	s.mu.Unlock()
	w.h.addSpan(&w.h.freezes, span{who: s.name, what: "freeze", from: from, to: never})
	if err != nil {
		w.logf("%s frozen (%s), not all of it: %v", s.name, s.group.Kind, err)
	} else {
		w.logf("%s frozen (%s)", s.name, s.group.Kind)
	}
	hold()
	w.thaw(s)
}

func (w *world) thaw(s *site) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.frozen {
		return
	}
	if err := s.group.Thaw(); err != nil {
		w.logf("thawing %s: %v", s.name, err)
	}
	s.frozen = false
	w.h.endSpan(&w.h.freezes, s.name, "freeze", now())
	w.logf("%s thawed", s.name)
}

// cut blocks a slot's proxies for d.
func (w *world) cut(sl *slot, d time.Duration, ctx context.Context) {
	for _, p := range sl.proxies {
		p.Block()
	}
	w.h.addSpan(&w.h.cuts, span{who: sl.id, what: "cut", from: now(), to: never})
	w.logf("%s cut off from ZooKeeper for %v", sl.id, d.Round(time.Millisecond))
	sleepCtx(ctx, d)
	for _, p := range sl.proxies {
		p.Unblock()
	}
	w.h.endSpan(&w.h.cuts, sl.id, "cut", now())
	w.logf("%s reconnects to ZooKeeper", sl.id)
}

// firePhase runs the pending phase faults of trigger: at a lock node
// (op, the holder's pid) or a backup.
func (w *world) firePhase(trigger, op string, pid int) {
	w.mu.Lock()
	if trigger == "lock" {
		w.lastLock = pid
	} else {
		pid = w.lastLock // a backup or an activation: the lock's holder
	}
	fns := w.pending[trigger]
	delete(w.pending, trigger)
	if trigger == "lock" && op != "" {
		// Faults for one kind of holder only (a restore-pruned's lock).
		fns = append(fns, w.pending["lock:"+op]...)
		delete(w.pending, "lock:"+op)
	}
	w.mu.Unlock()
	if len(fns) > 0 {
		w.logf("phase %s (%s, pid %d): %d fault(s)", trigger, op, pid, len(fns))
	}
	for _, fn := range fns {
		go fn(pid)
	}
}

// phaseAction cuts off or kills the process of pid (a daemon or a
// command), or creates a stray pointer.
func (w *world) phaseAction(ctx context.Context, action string, pid int, d time.Duration) {
	if action == "stray" {
		w.createStray(time.Duration(w.rng.Int64N(int64(time.Second))))
		return
	}
	sl, r, proxies := w.holder(pid)
	if proxies == nil {
		w.logf("phase %s: pid %d is none of ours", action, pid)
		return
	}
	w.hit(ctx, sl, r, proxies, action, d)
}

// holder is the process of pid: a daemon's slot or a command, and its
// proxies (nil when it is none of ours).
func (w *world) holder(pid int) (*slot, *takeoverRun, []*zktest.Proxy) {
	for _, s := range w.sites {
		for _, x := range s.slots {
			if c := x.current(); c != nil && c.life.pid == pid {
				return x, nil, x.proxies
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range append(slices.Clone(w.takeovers), w.restoreRs...) {
		if r.pid == pid {
			return nil, r, r.proxies
		}
	}
	return nil, nil, nil
}

// hit applies action to a daemon (sl) or a command (r) whose proxies
// may hold a request: "cut" and "cutlong" block its proxies for d (the
// connection, or the session, is lost), "kill" kills it (its connections
// dropped, so a request held never reaches ZooKeeper), "stray" creates
// a returning JobManager's pointer. Its proxies are unblocked after.
func (w *world) hit(ctx context.Context, sl *slot, r *takeoverRun, proxies []*zktest.Proxy, action string, d time.Duration) {
	if r != nil {
		w.mu.Lock()
		r.fault = "P " + action
		w.mu.Unlock()
	}
	switch {
	case action == "stray":
		w.createStray(time.Duration(w.rng.Int64N(int64(time.Second))))
	case action == "kill" && sl != nil:
		w.killDaemon(sl, time.Second)
		for _, p := range proxies {
			p.DropConns()
		}
	case action == "kill":
		w.mu.Lock()
		r.killed = true
		w.mu.Unlock()
		r.cmd.Process.Kill()
		for _, p := range proxies {
			p.DropConns()
		}
		w.logf("%s (pid %d) killed", r.name(), r.pid)
	case sl != nil:
		w.cut(sl, d, ctx)
	default:
		for _, p := range proxies {
			p.Block()
		}
		w.logf("%s (pid %d) cut off from ZooKeeper for %v", r.name(), r.pid, d.Round(time.Millisecond))
		sleepCtx(ctx, d)
	}
	for _, p := range proxies {
		p.Unblock()
	}
}

// trapMulti holds a multi of a process inside, between its header and
// its body (zktest.TrapRequest on each of its proxies), after pass
// others went through, and runs hit with every proxy blocked. It gives
// up when ctx ends first.
func (w *world) trapMulti(ctx context.Context, proxies []*zktest.Proxy, pass int, who string, hit func()) {
	defer func() {
		for _, p := range proxies {
			p.Disarm()
		}
	}()
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
		for _, p := range proxies {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.TrapRequest(zktest.OpMulti))})
		}
		i, _, _ := reflect.Select(cases)
		if i == 0 {
			return
		}
		if pass > 0 {
			pass--
			proxies[i-1].Unblock()
			continue
		}
		for _, p := range proxies {
			p.Disarm()
			p.Block()
		}
		w.logf("a multi of %s held inside", who)
		hit()
		return
	}
}

// takeoverRun is one `ckptfs takeover` command.
type takeoverRun struct {
	site    string
	pid     int
	proxies []*zktest.Proxy
	cmd     *exec.Cmd
	killed  bool   // GUARDED_BY(world.mu)
	fault   string // GUARDED_BY(world.mu): the P fault applied to it
	restore bool   // restore-pruned, not a takeover
}

func (r *takeoverRun) name() string {
	if r.restore {
		return "restore-pruned"
	}
	return "takeover"
}

// runTakeover runs `ckptfs takeover` for site through its own proxies
// and records its outcome; one still running after takeoverLimit, or
// 15 s after the run began to heal (ctx), is killed.
func (w *world) runTakeover(ctx context.Context, site string, index int) {
	s := w.sites[0]
	if site == "dc2" {
		s = w.sites[1]
	}
	r := &takeoverRun{site: site, proxies: w.toProxies[index]}
	args := []string{"takeover", "--site", site, "--zk", proxyAddrs(r.proxies), "--cluster-id", w.cid, "--path-root", w.emu.PathRoot,
		"--map", w.storage + "=" + s.nas, "--wait", (3 * w.cfg.grace).String(), "--flink-session-timeout", w.cfg.grace.String(),
		"--lease-duration", w.cfg.lease.String(), "--zk-session-timeout", zkSession.String(), "-o", "json", "--log-format", "json", "-v"}
	r.cmd = exec.Command(binary, args...)
	var out, errb bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &out, &errb
	if err := r.cmd.Start(); err != nil {
		w.logf("takeover on %s: %v", site, err)
		return
	}
	r.pid = r.cmd.Process.Pid
	w.mu.Lock()
	w.takeovers = append(w.takeovers, r)
	w.mu.Unlock()
	w.logf("takeover on %s started (pid %d)", site, r.pid)
	err := w.waitCommand(ctx, r.cmd, &r.killed)
	ret := now()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		w.saveLine(fmt.Sprintf("takeover %s[%d]", site, r.pid), line)
	}
	var rep struct {
		Activated bool   `json:"activated"`
		Epoch     int64  `json:"epoch"`
		Decision  string `json:"decision"`
	}
	json.Unmarshal(out.Bytes(), &rep)
	w.mu.Lock()
	killed := r.killed
	w.mu.Unlock()
	outcome := map[int]string{0: "ok", 3: "error", 4: "refused", 5: "alive"}[code]
	if killed || code < 0 {
		outcome = "killed"
	}
	if outcome == "" {
		outcome = "exit " + strconv.Itoa(code)
	}
	w.mu.Lock()
	w.outcomes[outcome]++
	w.mu.Unlock()
	if rep.Activated {
		w.h.tookOver(site, rep.Epoch, ret)
	}
	w.logf("takeover on %s (pid %d) ended: %s, exit %d: %s", site, r.pid, outcome, code, rep.Decision)
}

// operatorEdit is an operator's edit of ckptfs's nodes, put back after
// f.dur when f.back (a deleted lease is never put back by hand: the
// daemons take it again).
func (w *world) operatorEdit(ctx context.Context, f fault) {
	conn := w.zk.Conn
	if f.arg == "stray+del-lease" {
		w.createStray(0)
		if !sleepCtx(ctx, f.dur) {
			return
		}
		f.arg = "del-lease"
	}
	node := map[string]string{"del-active": "active-site", "other-active": "active-site", "del-epoch": "epoch", "rollback-epoch": "epoch", "del-lease": "lease"}[f.arg]
	path := w.base + "/" + node
	data, _, err := conn.Get(path)
	if err != nil {
		w.logf("O %s: reading %s: %v", f.arg, node, err)
		return
	}
	switch f.arg {
	case "del-active", "del-epoch", "del-lease":
		err = conn.Delete(path, -1)
	case "rollback-epoch":
		e, _ := strconv.ParseInt(string(data), 10, 64)
		_, err = conn.Set(path, []byte(strconv.FormatInt(e-1, 10)), -1)
	case "other-active":
		other := "dc2"
		if string(data) == "dc2" {
			other = "dc1"
		}
		_, err = conn.Set(path, []byte(other), -1)
	}
	if err != nil {
		w.logf("O %s: %v", f.arg, err)
		return
	}
	w.h.addSpan(&w.h.edits, span{who: "operator", what: f.arg, from: now(), to: never, detail: string(data)})
	w.logf("operator: %s (was %q)", f.arg, data)
	if !f.back || f.arg == "del-lease" {
		return
	}
	sleepCtx(ctx, f.dur)
	if _, err := conn.Set(path, data, -1); errors.Is(err, zk.ErrNoNode) {
		_, err = conn.Create(path, data, 0, zk.WorldACL(zk.PermAll))
		if err != nil {
			w.logf("O %s: putting back: %v", f.arg, err)
			return
		}
	} else if err != nil {
		w.logf("O %s: putting back: %v", f.arg, err)
		return
	}
	w.h.endSpan(&w.h.edits, "operator", f.arg, now())
	w.logf("operator: %s put back (%q)", node, data)
}

// squat holds an ephemeral node under Flink's leader/ or ckptfs's
// takeover/ for f.dur, or leaves garbage where a takeover's next backup
// goes.
func (w *world) squat(ctx context.Context, f fault) {
	c, err := w.dial()
	if err != nil {
		w.logf("Q: %v", err)
		return
	}
	defer c.Close()
	open := zk.WorldACL(zk.PermAll)
	var path string
	flags := int32(zk.FlagEphemeral)
	switch f.arg {
	case "leader":
		path = w.emu.Namespace() + "/leader/squatter-" + strconv.FormatUint(w.rng.Uint64()%1e6, 10)
	case "lock":
		path = w.base + "/takeover/_c_squatter-lock-0000000000"
	case "backup":
		// Garbage among the backups, far above the ids in use: where a
		// pointer the sweeper must retract will be, it would block the
		// retraction for good (nothing is deleted without its backup),
		// which only open ACLs allow (design §6.9).
		next, err := nextPointerID(c, w.emu.PointerDir(w.job))
		if err != nil {
			w.logf("Q backup: %v", err)
			return
		}
		path, flags = fmt.Sprintf("%s/pruned/%s/%019d", w.base, w.job, next+1000), 0
	}
	ensureParents(c, path)
	if _, err := c.Create(path, []byte(`{"squatter":true}`), flags, open); err != nil {
		w.logf("Q %s: %v", path, err)
		return
	}
	w.h.addSpan(&w.h.edits, span{who: "squatter", what: "squat " + f.arg, from: now(), to: never, harmlessOp: true})
	w.logf("squatter holds %s", path)
	if flags == 0 {
		return
	}
	sleepCtx(ctx, f.dur)
	w.h.endSpan(&w.h.edits, "squatter", "squat "+f.arg, now())
	w.logf("squatter lets go of %s", path)
}

func ensureParents(c *zk.Conn, path string) {
	for i := 1; i < len(path); i++ {
		if path[i] == '/' {
			c.Create(path[:i], nil, 0, zk.WorldACL(zk.PermAll))
		}
	}
}

// nextPointerID is one above the highest pointer of dir.
func nextPointerID(c *zk.Conn, dir string) (int64, error) {
	kids, _, err := c.Children(dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return 0, err
	}
	next := int64(1)
	for _, k := range kids {
		if id, err := strconv.ParseInt(k, 10, 64); err == nil && id >= next {
			next = id + 1
		}
	}
	return next, nil
}

// strayPointer is a pointer a returning JobManager created.
type strayPointer struct {
	path string
	data []byte
}

// createStray creates a pointer as a returning JobManager of DC1 does
// (not leading, with a session of its own): shaped as Flink's, with its
// persistent locks child and, for lockFor, an ephemeral lock of its
// session; its HA file is on no NAS. Its id comes from the job's
// checkpoint counter, as Flink's do; or, one time in three, it is an
// earlier stray created again with the same bytes where it is gone
// (Curator retrying a create whose reply a partition cut off, after a
// takeover or a sweep retracted the node).
func (w *world) createStray(lockFor time.Duration) {
	c, err := w.dial()
	if err != nil {
		w.logf("stray: %v", err)
		return
	}
	var sp strayPointer
	w.mu.Lock()
	retry := len(w.strays) > 0 && w.rng.IntN(3) == 0
	if retry {
		sp = w.strays[w.rng.IntN(len(w.strays))]
	}
	w.mu.Unlock()
	if retry {
		if ok, _, err := c.Exists(sp.path); err != nil || ok {
			retry = false
		}
	}
	if !retry {
		id, err := counterNext(c, w.emu.Namespace()+"/jobs/"+w.job+"/checkpoint_id_counter")
		var st flinkha.StateHandle
		if err == nil {
			ha := fmt.Sprintf("%s/ha/%s/completedCheckpoint%012x", w.storage, w.cid, w.rng.Uint64()&0xffffffffffff)
			st, err = flinkha.NewStateHandle(ha, 4321)
		}
		if err == nil {
			sp.data, err = flinkha.EncodeStateHandle(st)
		}
		if err != nil {
			c.Close()
			w.logf("stray: %v", err)
			return
		}
		sp.path = fmt.Sprintf("%s/%019d", w.emu.PointerDir(w.job), id)
	}
	open := zk.WorldACL(zk.PermAll)
	ops := []any{
		&zk.CreateRequest{Path: sp.path, Data: sp.data, Acl: open},
		&zk.CreateRequest{Path: sp.path + "/locks", Data: []byte("127.0.0.1"), Acl: open},
	}
	if lockFor > 0 {
		ops = append(ops, &zk.CreateRequest{Path: sp.path + "/locks/" + fmt.Sprintf("%016x", w.rng.Uint64()), Data: []byte("127.0.0.1"), Acl: open, Flags: zk.FlagEphemeral})
	}
	name := sp.path[strings.LastIndexByte(sp.path, '/')+1:]
	if _, err := c.Multi(ops...); err != nil {
		c.Close()
		w.logf("stray %s: %v", name, err)
		return
	}
	what := "created"
	if retry {
		what = "created again, same bytes"
	} else {
		w.mu.Lock()
		w.strays = append(w.strays, sp)
		w.mu.Unlock()
	}
	w.logf("stray pointer %s %s (its HA file is nowhere; locked for %v)", name, what, lockFor.Round(time.Millisecond))
	if lockFor <= 0 {
		c.Close()
		return
	}
	w.holdConn(c)
	go func() {
		time.Sleep(lockFor)
		c.Close()
	}()
}

// counterNext is Flink's CheckpointIDCounter.getAndIncrement: a
// compare-and-set of the 4-byte counter (Curator's SharedCount).
func counterNext(c *zk.Conn, path string) (int64, error) {
	for range 20 {
		data, st, err := c.Get(path)
		if err != nil {
			return 0, fmt.Errorf("checkpoint counter: %w", err)
		}
		if len(data) != 4 {
			return 0, fmt.Errorf("checkpoint counter: %d bytes", len(data))
		}
		cur := binenc.BigEndian.Uint32(data)
		next := binenc.BigEndian.AppendUint32(nil, cur+1)
		if _, err := c.Set(path, next, st.Version); errors.Is(err, zk.ErrBadVersion) {
			continue
		} else if err != nil {
			return 0, fmt.Errorf("checkpoint counter: %w", err)
		}
		return int64(cur), nil
	}
	return 0, errors.New("checkpoint counter: it keeps changing")
}

// TestDrawRun: a seed draws the same run every time, and the schedule
// fits the run.
func TestDrawRun(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		a, b := drawRun(seed), drawRun(seed)
		if a.String() != b.String() {
			t.Fatalf("seed %d drew two runs:\n%v\n%v", seed, a, b)
		}
		for _, f := range a.faults {
			if f.at < 0 || f.at >= a.duration {
				t.Errorf("seed %d: fault %v outside the run's %v", seed, f, a.duration)
			}
			if strings.IndexByte(faultOrder, f.kind) < 0 {
				t.Errorf("seed %d: fault %c has no name", seed, f.kind)
			}
			if f.kind == 'R' && (a.endRestore == nil || f.index >= a.endRestore.index) {
				t.Errorf("seed %d: %v has no proxies of its own", seed, f)
			}
		}
		if (a.endRestore != nil) != a.jm || a.flink != "" && !a.jm || a.flink != "" && !slices.Contains(flinkVersions(), a.flink) {
			t.Errorf("seed %d: JobManager %v, real Flink %q, the end's restore-pruned %v", seed, a.jm, a.flink, a.endRestore)
		}
		if a.lag > 0 && !strings.Contains(a.faultLetters(), "L") {
			t.Errorf("seed %d: the replication held back at a loss that never comes", seed)
		}
	}
}

// TestDrawMore: what came after the first series keeps every seed's
// history of faults as it was (doc.go names seeds), and draws real Flink
// in about a third of the runs.
func TestDrawMore(t *testing.T) {
	// Schedules drawn before real Flink and restore-pruned came.
	for seed, want := range map[uint64][]string{
		4200: {"2.2s L for 20.8s", "11.2s X dc1/0 for 7.7s", "11.8s K dc1/0 for 3.24s", "27.2s K dc2/0 for 1.39s", "28.8s P backup:stray", "32.3s T other"},
		5189: {"2.3s T other", "3.9s S dc1/0 for 950ms", "8.5s L for 16.45s", "11.1s T dc1", "11.2s K dc2/0 for 3.34s", "23.5s C -9m0s for 1.6s",
			"24.4s K dc2/0 for 2.3s", "24.7s X dc1/0 for 9.35s", "32.2s O del-active for 4.81s"},
		9459: {"8.7s J for 8.51s", "9.2s O stray+del-lease (put back) for 770ms", "14.9s P backup:cut for 720ms", "30.2s Y"},
	} {
		var got []string
		for _, f := range drawRun(seed).faults {
			if !f.later {
				got = append(got, strings.TrimSpace(f.String()))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("seed %d draws\n  %s\nbefore\n  %s", seed, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	flink := 0
	for seed := uint64(0); seed < 900; seed++ {
		if drawRun(seed).flink != "" {
			flink++
		}
	}
	if flink < 250 || flink > 350 {
		t.Errorf("real Flink in %d of 900 runs, want about 300", flink)
	}
}

// waitCommand waits for cmd, started by the harness: it kills it after
// takeoverLimit, or 15 s after ctx ended, and then sets *killed (under
// w.mu).
func (w *world) waitCommand(ctx context.Context, cmd *exec.Cmd, killed *bool) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	kill := func() error {
		w.mu.Lock()
		*killed = true
		w.mu.Unlock()
		cmd.Process.Kill()
		return <-done
	}
	select {
	case err := <-done:
		return err
	case <-time.After(takeoverLimit):
		return kill()
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			return kill()
		}
	}
}
