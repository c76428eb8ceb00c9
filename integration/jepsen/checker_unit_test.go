package jepsen

import (
	"strings"
	"testing"
	"time"
)

// The checker's own tests: synthetic histories, each with and without
// the violation the checker must find. They need nothing of the machine.

// at is an instant s seconds into a synthetic history that began at 0.
func at(s float64) mono { return mono(s * float64(time.Second)) }

// synthetic is a history in which dc1 was activated at 0-0.1 s and dc2
// at 20-20.1 s, with the lease held at every observation by the owner.
func synthetic() *history {
	h := newHistory(4*time.Second, 4*time.Second, []string{"dc1", "dc2"})
	h.start = 0
	h.activations = []activation{
		{site: "dc1", epoch: 1, lo: at(0), hi: at(0.1), by: "dc1's bootstrap"},
		{site: "dc2", epoch: 2, lo: at(20), hi: at(20.1), by: "dc2's takeover"},
	}
	for s := 0.0; s < 40; s += 0.1 {
		o := observation{sent: at(s), recv: at(s + 0.01), epochExists: true, epoch: 1, active: "dc1", leaseExists: true, leaseSite: "dc1", leaseEpoch: 1,
			activeCzxid: 0x10, activeMzxid: 0x10}
		if s >= 20.1 {
			o.epoch, o.active, o.leaseSite, o.leaseEpoch = 2, "dc2", "dc2", 2
			o.activeMzxid, o.activeVersion = 0x50, 1
		}
		h.obs = append(h.obs, o)
	}
	h.procs = []*procLife{{slot: "dc1/0", pid: 1, start: at(0), ready: at(0.05), exit: never, successorFired: -1},
		{slot: "dc2/0", pid: 2, start: at(0), ready: at(0.05), exit: never, successorFired: -1}}
	return h
}

func violations(v verdict, inv string) []string {
	var out []string
	for _, x := range v.violations {
		if x.inv == inv {
			out = append(out, x.text)
		}
	}
	return out
}

func TestCheckWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  record
		bad  bool
	}{
		{"dc1 while it held the lease", record{site: "dc1", slot: "dc1/0", nas: "dc1", start: at(10)}, false},
		{"dc1 within D/4 of dc2's activation", record{site: "dc1", slot: "dc1/0", nas: "dc1", start: at(19.5)}, true},
		{"dc1 after dc2's activation", record{site: "dc1", slot: "dc1/0", nas: "dc1", start: at(25)}, true},
		{"dc1's record replicated to dc2", record{site: "dc1", slot: "dc1/0", nas: "dc2", start: at(21)}, true},
		{"dc2 before it was activated", record{site: "dc2", slot: "dc2/0", nas: "dc2", start: at(5)}, true},
		{"dc2 after its activation", record{site: "dc2", slot: "dc2/0", nas: "dc2", start: at(21)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := synthetic()
			h.records = []record{tc.rec}
			got := violations(check(h), invWrites)
			if bad := len(got) > 0; bad != tc.bad {
				t.Errorf("violations %q, want some: %v", got, tc.bad)
			}
		})
	}
	// dc1 active again from 30 s: its records there are allowed.
	h := synthetic()
	h.activations = append(h.activations, activation{site: "dc1", epoch: 3, lo: at(30), hi: at(30.1)})
	h.records = []record{{site: "dc1", slot: "dc1/0", nas: "dc1", start: at(31)}}
	if got := violations(check(h), invWrites); len(got) > 0 {
		t.Errorf("a record after dc1's second activation: %q", got)
	}
}

func TestCheckNAS(t *testing.T) {
	snap := func(from, to float64, files map[string]string) nasSnapshot {
		return nasSnapshot{start: at(from), end: at(to), files: files}
	}
	same := map[string]string{"w-dc1-0": "16 bytes"}
	grown := map[string]string{"w-dc1-0": "32 bytes"}
	h := synthetic()
	h.nas["dc1"] = []nasSnapshot{snap(19, 19.1, same), snap(20.2, 20.3, same), snap(30, 30.1, same)}
	if got := violations(check(h), invWrites); len(got) > 0 {
		t.Errorf("an unchanged NAS: %q", got)
	}
	h.nas["dc1"][2] = snap(30, 30.1, grown)
	got := violations(check(h), invWrites)
	if len(got) != 1 || !strings.Contains(got[0], "changed w-dc1-0") {
		t.Errorf("dc1's NAS grew after dc2's activation: %q", got)
	}
	// dc2's NAS while the replication still ran is not judged.
	h = synthetic()
	h.activations = append(h.activations, activation{site: "dc1", epoch: 3, lo: at(30), hi: at(30.1)})
	h.replicationEnd = at(35)
	h.nas["dc2"] = []nasSnapshot{snap(30.2, 30.3, same), snap(39, 39.1, grown)}
	if got := violations(check(h), invWrites); len(got) > 0 {
		t.Errorf("dc2's NAS changed by the replication: %q", got)
	}
	h.replicationEnd = at(25)
	if got := violations(check(h), invWrites); len(got) != 1 {
		t.Errorf("dc2's NAS changed after dc1's activation, the replication stopped: %q", got)
	}
	// What the harness delivered late there is not dc2's writing.
	h.delivered["dc2"] = map[string]bool{"w-dc1-0": true}
	if got := violations(check(h), invWrites); len(got) > 0 {
		t.Errorf("a late delivery: %q", got)
	}
}

func TestCheckPointers(t *testing.T) {
	h := synthetic()
	h.pointersSite = "dc2"
	h.pointers = []pointerVerdict{
		{job: "j", id: 5, visible: true, complete: false, haReadable: true},
		{job: "j", id: 6, visible: true, complete: true, haReadable: true},
		{job: "j", id: 7, visible: false, complete: false, haReadable: false}, // marked for deletion: Flink skips it
	}
	if got := violations(check(h), invPointers); len(got) > 0 {
		t.Errorf("newest complete, an older readable one: %q", got)
	}
	h.pointers = append(h.pointers, pointerVerdict{job: "j", id: 8, visible: true, problems: "ha_file missing"})
	if got := violations(check(h), invPointers); len(got) != 1 || !strings.Contains(got[0], "newest pointer Flink reads, 8") {
		t.Errorf("a stray pointer above: %q", got)
	}
	h.pointers[3].visible = false
	h.pointers[0].haReadable = false
	if got := violations(check(h), invPointers); len(got) != 1 || !strings.Contains(got[0], "pointer 5") {
		t.Errorf("an older pointer without its HA file: %q", got)
	}
	h.pointersSkip = "no site held the lease"
	if v := check(h); len(violations(v, invPointers)) > 0 || v.pointersNote == "" {
		t.Errorf("not checked: %+v", v)
	}
}

func TestCheckHealthy(t *testing.T) {
	fence := stamp{who: "dc1/0", at: at(12), detail: "the write deadline passed"}
	for _, tc := range []struct {
		name  string
		setup func(h *history)
		bad   bool
	}{
		{"healthy", func(*history) {}, true},
		{"stopped", func(h *history) { h.stops = []span{{who: "dc1/0", from: at(8), to: at(9)}} }, false},
		{"site frozen", func(h *history) { h.freezes = []span{{who: "dc1", from: at(11), to: never}} }, false},
		{"cut off", func(h *history) { h.cuts = []span{{who: "dc1/0", from: at(10), to: at(10.5)}} }, false},
		{"connection dropped", func(h *history) { h.cuts = []span{{who: "dc1/0", from: at(11), to: at(11), dropOnly: true}} }, false},
		{"another daemon cut off", func(h *history) { h.cuts = []span{{who: "dc1/1", from: at(10), to: at(10.5)}} }, true},
		{"active-site deleted", func(h *history) { h.edits = []span{{what: "del-active", from: at(11), to: never}} }, false},
		{"a squatter", func(h *history) { h.edits = []span{{what: "squat lock", from: at(11), to: never, harmlessOp: true}} }, true},
		{"a clock step", func(h *history) { h.clock = []span{{from: at(11), to: at(12)}} }, true},
		{"just restarted", func(h *history) { h.procs[0].ready = at(9) }, false},
		{"long before, stopped", func(h *history) { h.stops = []span{{who: "dc1/0", from: at(1), to: at(2)}} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := synthetic()
			h.fences = []stamp{fence}
			tc.setup(h)
			got := violations(check(h), invHealthy)
			if bad := len(got) > 0; bad != tc.bad {
				t.Errorf("violations %q, want some: %v", got, tc.bad)
			}
		})
	}
	// After dc2's activation dc1 does not hold the lease: its fence and
	// its writer's EROFS are expected.
	h := synthetic()
	h.fences = []stamp{{who: "dc1/0", at: at(21)}}
	h.writerErrs = []stamp{{who: "dc1/0", at: at(21), detail: "EROFS"}, {who: "dc1/0", at: at(15), detail: "ENOTCONN"}}
	if got := violations(check(h), invHealthy); len(got) > 0 {
		t.Errorf("fenced after another site's activation: %q", got)
	}
	h.writerErrs = append(h.writerErrs, stamp{who: "dc1/0", at: at(15), detail: "EROFS"})
	if got := violations(check(h), invHealthy); len(got) != 1 {
		t.Errorf("EROFS of a healthy primary's writer: %q", got)
	}
}

func TestCheckWatchdog(t *testing.T) {
	killed := func(h *history) *procLife {
		p := h.procs[0]
		p.exit, p.sigkilled, p.wdRecord, p.wdArmed, p.wdDeadline = at(13), true, true, true, at(13.2)
		return p
	}
	h := synthetic()
	killed(h)
	h.stops = []span{{who: "dc1/0", from: at(10), to: at(15)}}
	if v := check(h); len(violations(v, invWatchdog)) > 0 || v.watchdogKills != 1 {
		t.Errorf("killed while stopped: %+v", v)
	}
	h.stops = nil
	if got := violations(check(h), invWatchdog); len(got) != 1 || !strings.Contains(got[0], "neither stopped nor frozen") {
		t.Errorf("killed while running: %q", got)
	}
	// The v1 freezer: killed as the group thaws.
	h.freezes = []span{{who: "dc1", from: at(10), to: at(12.8)}}
	if got := violations(check(h), invWatchdog); len(got) > 0 {
		t.Errorf("killed as its site thawed: %q", got)
	}
	h.freezes = nil
	killed(h).exit = at(11)
	h.stops = []span{{who: "dc1/0", from: at(10), to: at(15)}}
	if got := violations(check(h), invWatchdog); len(got) != 1 || !strings.Contains(got[0], "before its watchdog's deadline") {
		t.Errorf("killed long before its deadline: %q", got)
	}
	h = synthetic()
	killed(h).successorFired = 0
	h.freezes = []span{{who: "dc1", from: at(10), to: at(14)}}
	if got := violations(check(h), invWatchdog); len(got) != 1 || !strings.Contains(got[0], "successor") {
		t.Errorf("the successor did not report it: %q", got)
	}
	h = synthetic()
	killed(h).wdArmed = false
	if got := violations(check(h), invWatchdog); len(got) != 1 {
		t.Errorf("SIGKILL without a watchdog: %q", got)
	}
	// Killed by the harness, armed: the successor started past the
	// deadline says so; one that says nothing is wrong.
	h = synthetic()
	p := killed(h)
	p.killedByUs, p.successorStart, p.successorFired = true, at(14), 1
	if got := violations(check(h), invWatchdog); len(got) > 0 {
		t.Errorf("a harness kill reported: %q", got)
	}
	p.successorFired = 0
	if got := violations(check(h), invWatchdog); len(got) != 1 {
		t.Errorf("a harness kill not reported: %q", got)
	}
}

// midHistory is synthetic() with a check after dc2's activation at epoch
// 2: pointers 5 and 6 there at 20.2 s, judged at 30-31 s.
func midHistory(ps ...pointerVerdict) *history {
	h := synthetic()
	h.midChecks = []midCheck{{site: "dc2", epoch: 2, by: "dc2's takeover", actHi: at(20.1), t1: at(20.2), sent: at(30), recv: at(31), judged: 0x40,
		before: map[string]int64{pointerKey("j", 5): 0x45, pointerKey("j", 6): 0x46}, pointers: ps}}
	return h
}

func TestCheckMidPointers(t *testing.T) {
	old := pointerVerdict{job: "j", id: 5, czxid: 0x45, visible: true, complete: true, haReadable: true}
	stray := pointerVerdict{job: "j", id: 6, czxid: 0x46, visible: true, problems: "ha_file missing"}
	h := midHistory(old)
	if v := check(h); len(violations(v, invPointers)) > 0 || v.midJudged != 1 {
		t.Errorf("a complete pointer: %+v", v)
	}
	h = midHistory(old, stray)
	got := violations(check(h), invPointers)
	if len(got) != 1 || !strings.Contains(got[0], "newest pointer Flink reads, 6") || !strings.Contains(got[0], "after its activation at epoch 2") {
		t.Errorf("a stray there since the activation, grace passed: %q", got)
	}
	for _, tc := range []struct {
		name string
		edit func(h *history)
	}{
		{"made since", func(h *history) { h.midChecks[0].pointers[1].czxid = 0x99 }},
		{"not there at t1", func(h *history) { delete(h.midChecks[0].before, pointerKey("j", 6)) }},
		{"written by the leader", func(h *history) { h.midChecks[0].pointers[1].ownLeader = true }},
		{"gone after the status", func(h *history) { h.midChecks[0].pointers[1].goneAfter = true }},
		{"another activation", func(h *history) {
			h.activations = append(h.activations, activation{site: "dc1", epoch: 3, lo: at(25), hi: at(25.1)})
		}},
		{"an operator's edit", func(h *history) { h.edits = []span{{what: "del-lease", from: at(22), to: at(23)}} }},
		{"a squatter on the lock", func(h *history) {
			h.edits = []span{{what: "squat lock", from: at(22), to: at(23), harmlessOp: true}}
		}},
		{"the lock held by a takeover", func(h *history) {
			h.locks = []lockTenure{{node: "l", op: "takeover", from: at(22), to: at(26)}}
		}},
		{"a sweep held up inside its multi", func(h *history) {
			h.locks = []lockTenure{{node: "l", op: "sweep", from: at(22), to: at(28)}}
		}},
		{"dc2's daemon stopped", func(h *history) { h.stops = []span{{who: "dc2/0", from: at(24), to: at(25)}} }},
		{"dc2's daemon restarted", func(h *history) { h.procs[1].ready = at(22) }},
		{"a failed sweep pass before", func(h *history) { h.sweepFails = []stamp{{who: "dc2/0", at: at(5)}} }},
		{"skipped by the world", func(h *history) { h.midChecks[0].skip = "the run ended first" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := midHistory(old, stray)
			tc.edit(h)
			if got := violations(check(h), invPointers); len(got) > 0 {
				t.Errorf("judged: %q", got)
			}
		})
	}
	// A sweep's own lock, the activation's takeover's released at once,
	// a squatter elsewhere, a daemon of the other site stopped: judged.
	h = midHistory(old, stray)
	h.locks = []lockTenure{{node: "l", op: "sweep", from: at(25), to: at(25.1)}, {node: "m", op: "takeover", from: at(10), to: at(20.5)}}
	h.edits = []span{{what: "squat leader", from: at(22), to: at(23), harmlessOp: true}}
	h.stops = []span{{who: "dc1/0", from: at(24), to: at(25)}}
	if got := violations(check(h), invPointers); len(got) != 1 {
		t.Errorf("a window the sweeper had: %q", got)
	}
	// An older pointer without its HA file below a complete newest.
	h = midHistory(pointerVerdict{job: "j", id: 5, czxid: 0x45, visible: true, problems: "ha_file missing"},
		pointerVerdict{job: "j", id: 6, czxid: 0x46, visible: true, complete: true, haReadable: true})
	if got := violations(check(h), invPointers); len(got) != 1 || !strings.Contains(got[0], "pointer 5") {
		t.Errorf("an older pointer without its HA file: %q", got)
	}
}

func TestActiveAt(t *testing.T) {
	h := synthetic() // active-site dc1 (mzxid 0x10) until 20.1 s, dc2 (0x50, version 1) after
	for _, tc := range []struct {
		z    int64
		ret  float64
		want string
		ok   bool
	}{
		{0x20, 10, "dc1", true}, // read after ret saw the write before z
		{0x60, 25, "dc2", true}, // the same
		{0x20, 25, "dc1", true}, // the write after z directly follows dc1's
		{0x05, 10, "", false},   // before any write seen
		{0x20, 45, "dc1", true}, // no read after ret, but the next write is the next version
	} {
		if got, ok := activeAt(h, tc.z, at(tc.ret)); got != tc.want || ok != tc.ok {
			t.Errorf("activeAt(%#x, %vs) = %q, %v; want %q, %v", tc.z, tc.ret, got, ok, tc.want, tc.ok)
		}
	}
	// Not the next write (another version, or deleted and made again):
	// unknown.
	for i := range h.obs {
		if h.obs[i].activeMzxid == 0x50 {
			h.obs[i].activeVersion = 2
		}
	}
	if got, ok := activeAt(h, 0x20, at(25)); ok {
		t.Errorf("a write in between may be unseen, yet %q", got)
	}
}

func TestCheckRestores(t *testing.T) {
	good := putBack{job: "j", id: 7, czxid: 0x60, judged: true, complete: true, haReadable: true}
	run := func(site string, exit int, pbs ...putBack) *history {
		h := synthetic()
		h.restores = []restoreRun{{site: site, start: at(24), ret: at(25), exit: exit, putBacks: pbs}}
		return h
	}
	if v := check(run("dc2", 0, good)); len(violations(v, invRestore)) > 0 || v.putBacks != 1 || v.restores != 1 {
		t.Errorf("a complete pointer put back on the active site: %+v", v)
	}
	for _, tc := range []struct {
		name string
		h    *history
		want string
	}{
		{"incomplete", run("dc2", 0, putBack{job: "j", id: 7, czxid: 0x60, judged: true, problems: "file missing"}), "does not hold completely"},
		{"while another site was named", run("dc1", 0, putBack{job: "j", id: 7, czxid: 0x60, judged: true, complete: true}), "while active-site named \"dc2\""},
		{"refused for a live JobManager", run("dc2", 5, good), "refused for a live JobManager"},
		{"ended well on the other site", run("dc1", 0), "ended well although active-site named \"dc2\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations(check(tc.h), invRestore)
			if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("violations %q, want one saying %q", got, tc.want)
			}
		})
	}
	// Refused on the other site, and a run across a change of
	// active-site that put nothing back: nothing to say.
	h := run("dc1", 4)
	h.restores = append(h.restores, restoreRun{site: "dc1", start: at(19), ret: at(21), exit: 0})
	if got := violations(check(h), invRestore); len(got) > 0 {
		t.Errorf("refused, or across a change: %q", got)
	}
}

func TestCheckFlinkEnd(t *testing.T) {
	for _, tc := range []struct {
		fe   *flinkEnd
		flag string
		bad  bool
	}{
		{nil, "-", false},
		{&flinkEnd{site: "dc2", newest: 7, restored: 7}, "ok", false},
		{&flinkEnd{site: "dc2", newest: 7, restored: -1, err: "its JobManager exited"}, "BAD", true},
		{&flinkEnd{site: "dc2", newest: 7, restored: 6}, "BAD", true},
		{&flinkEnd{site: "dc2", newest: 7, restored: 7, stateErr: "key 3: restored count 1"}, "BAD", true},
		{&flinkEnd{site: "dc2", newest: 7, restored: -1, note: "starting Flink: no ports"}, "-", false},
	} {
		h := synthetic()
		h.flinkEnd = tc.fe
		v := check(h)
		if got := violations(v, invPointers); (len(got) > 0) != tc.bad || v.flink != tc.flag {
			t.Errorf("%+v: %q, %q", tc.fe, v.flink, got)
		}
	}
}
