package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// The checker holds a history to the model (design §5.14, §6.1, §6.7,
// §6.12, §6.13). It reads only the history: what the harness observed
// of ZooKeeper, of the processes and of the two NASes.

// Invariants, as the table and the violations name them.
const (
	invWrites   = "no write after activation"
	invPointers = "pointers complete"
	invHealthy  = "no healthy primary fences itself"
	invWatchdog = "the watchdog kills only a daemon that does not run"
	invRestore  = "restore-pruned puts back only what the active site holds"
)

type violation struct {
	inv  string
	text string
}

func (v violation) String() string { return v.inv + ": " + v.text }

// verdict is what the checker found in one history.
type verdict struct {
	violations []violation
	// Counts for the table.
	writesAfter   int // records and NAS changes after another site's activation
	pointersBad   int // pointers Flink reads that the active site does not hold
	pointersNote  string
	healthyFences int // fences and EROFS of healthy primaries
	watchdogKills int
	watchdogBad   int // kills of daemons that ran, and wrong reports of them
	activations   int
	// Checks of the pointers after activations: judged, and of how many.
	midJudged, midChecks int
	midNotes             []string // why the others were not judged
	// restore-pruned: runs, pointers put back, violations.
	restores, putBacks, restoreBad int
	// flink is the end's real Flink: "ok", "BAD", or "-" (not made).
	flink string
}

func (v *verdict) add(inv, format string, args ...any) {
	v.violations = append(v.violations, violation{inv, fmt.Sprintf(format, args...)})
	switch inv {
	case invWatchdog:
		v.watchdogBad++
	case invPointers:
		v.pointersBad++
	case invRestore:
		v.restoreBad++
	}
}

// check holds h to every invariant.
func check(h *history) verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	var v verdict
	v.activations = len(h.activations)
	checkWrites(h, &v)
	checkNAS(h, &v)
	checkPointers(h, &v)
	checkMidPointers(h, &v)
	checkRestores(h, &v)
	checkFlinkEnd(h, &v)
	checkHealthy(h, &v)
	checkWatchdog(h, &v)
	return v
}

// allowedWrites are the intervals in which a site's mounts may admit a
// change: from an activation of the site (its lower bound) until D/4
// before the upper bound of the next activation of another site. By
// §5.10's proof every renewal that counted for the old owner started at
// least D before that activation applied, so its mounts stopped
// admitting D/2 before it (§5.14); a record that started later than D/4
// before it was admitted past the write deadline. Before its first
// activation a site writes nothing.
func allowedWrites(h *history) map[string][][2]mono {
	acts := h.sortedActivations()
	margin := mono(h.lease / 4)
	out := map[string][][2]mono{}
	for i, a := range acts {
		end := never
		for _, b := range acts[i+1:] {
			if b.site != a.site {
				end = b.hi - margin
				break
			}
		}
		if end > a.lo {
			out[a.site] = append(out[a.site], [2]mono{a.lo, end})
		}
	}
	return out
}

// forbiddenBy names the activation that forbids a record of site that
// started at t: the last activation of another site whose margin began
// before t.
func forbiddenBy(h *history, site string, t mono) string {
	var by *activation
	for _, a := range h.sortedActivations() {
		if a.site != site && a.hi-mono(h.lease/4) <= t {
			a := a
			by = &a
		}
	}
	if by == nil {
		return "before " + site + " was ever activated"
	}
	after := "after"
	if t < by.hi {
		after = fmt.Sprintf("%v before the return of", by.hi.sub(t).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s %s's activation at epoch %d (%s; applied in [%s, %s])", after, by.site, by.epoch, by.by, h.rel(by.lo), h.rel(by.hi))
}

// checkWrites: invariant 1 on the writers' records (§5.14, §6.7).
func checkWrites(h *history, v *verdict) {
	allowed := allowedWrites(h)
	type key struct{ slot, nas string }
	bad := map[key][]record{}
	for _, r := range h.records {
		ok := false
		for _, iv := range allowed[r.site] {
			if r.start >= iv[0] && r.start < iv[1] {
				ok = true
				break
			}
		}
		if !ok {
			k := key{r.slot, r.nas}
			bad[k] = append(bad[k], r)
		}
	}
	keys := slices.Collect(maps.Keys(bad))
	sort.Slice(keys, func(i, j int) bool { return keys[i].slot+keys[i].nas < keys[j].slot+keys[j].nas })
	for _, k := range keys {
		rs := bad[k]
		v.writesAfter += len(rs)
		first, last := rs[0], rs[len(rs)-1]
		v.add(invWrites, "%d record(s) of %s's writer on %s's NAS started where %s may not write: the first (seq %d) at %s, %s; the last (seq %d) at %s",
			len(rs), k.slot, k.nas, first.site, first.seq, h.rel(first.start), forbiddenBy(h, first.site, first.start), last.seq, h.rel(last.start))
	}
}

// checkNAS: invariant 1 on the NASes themselves: a site's NAS does not
// change between another site's activation and its own next one
// (except by the replication, which writes DC2's NAS until it stops).
func checkNAS(h *history, v *verdict) {
	acts := h.sortedActivations()
	for i, a := range acts {
		for _, x := range h.sites {
			if x == a.site {
				continue
			}
			to := never
			for _, b := range acts[i+1:] {
				if b.site == x {
					to = b.lo
					break
				}
			}
			from := a.hi
			if x != h.sites[0] && from < h.replicationEnd {
				continue // the replication may write there
			}
			var first, last *nasSnapshot
			for j := range h.nas[x] {
				s := &h.nas[x][j]
				if first == nil && s.start >= from {
					first = s
				}
				if s.end <= to && (first != nil && s.start >= first.start) {
					last = s
				}
			}
			if first == nil || last == nil || last == first {
				continue
			}
			diff := diffTrees(first.files, last.files)
			// What the harness delivered late (restore-pruned's case)
			// is the replication's, not the site's.
			diff = slices.DeleteFunc(diff, func(d string) bool { return h.delivered[x][diffPath(d)] })
			if len(diff) == 0 {
				continue
			}
			v.writesAfter += len(diff)
			if len(diff) > 6 {
				diff = append(diff[:6], fmt.Sprintf("... %d more", len(diff)-6))
			}
			v.add(invWrites, "%s's NAS changed after %s's activation at epoch %d (applied by %s) and before %s's next (walks of %s and %s): %s",
				x, a.site, a.epoch, h.rel(a.hi), x, h.rel(first.start), h.rel(last.end), strings.Join(diff, "; "))
		}
	}
}

// diffPath is the path a line of diffTrees names.
func diffPath(d string) string {
	_, rest, _ := strings.Cut(d, " ")
	p, _, _ := strings.Cut(rest, " (")
	return p
}

func diffTrees(a, b map[string]string) []string {
	var out []string
	for p, x := range a {
		if y, ok := b[p]; !ok {
			out = append(out, "removed "+p)
		} else if x != y {
			out = append(out, fmt.Sprintf("changed %s (%s -> %s)", p, x, y))
		}
	}
	for p, y := range b {
		if _, ok := a[p]; !ok {
			out = append(out, fmt.Sprintf("added %s (%s)", p, y))
		}
	}
	sort.Strings(out)
	return out
}

// checkPointers: invariant 2 (§6.1, §6.12): at the end, once the
// sweeper's grace passed, the newest pointer Flink reads of every job is
// complete (L2) on the active site, and every one it reads has a
// readable HA file there: what a takeover keeps. The same again after
// the end's restore-pruned put pointers back.
func checkPointers(h *history, v *verdict) {
	if h.pointersSkip != "" {
		v.pointersNote = h.pointersSkip
		return
	}
	// zxids says where the pointer stands against the bound the
	// sweeper judges from (design §5.5.2).
	zxids := func(p pointerVerdict) string {
		if p.czxid == 0 {
			return ""
		}
		return fmt.Sprintf(" (created at zxid %#x; the lease says pointers up to zxid %#x were judged, by %s)", p.czxid, h.judged, h.judgedBy)
	}
	judgePointers(v, h.pointers, h.pointersSite+", the active site", zxids, nil)
	if h.pointersAfter != nil {
		judgePointers(v, h.pointersAfter, h.pointersSite+", the active site, after restore-pruned", zxids, nil)
	}
}

// judgePointers holds ps, the pointers `ckptfs status` listed on a site
// (where), to what a takeover keeps: per job the newest visible one
// complete, every other visible one with a readable HA file. judge, when
// set, says which pointers may be held to it (the others are not judged:
// they only decide which one is the newest).
func judgePointers(v *verdict, ps []pointerVerdict, where string, note func(pointerVerdict) string, judge func(pointerVerdict) bool) {
	byJob := map[string][]pointerVerdict{}
	for _, p := range ps {
		if p.visible {
			byJob[p.job] = append(byJob[p.job], p)
		}
	}
	ok := func(p pointerVerdict) bool { return judge == nil || judge(p) }
	jobs := slices.Sorted(maps.Keys(byJob))
	for _, job := range jobs {
		ps := byJob[job]
		sort.Slice(ps, func(i, j int) bool { return ps[i].id < ps[j].id })
		newest := ps[len(ps)-1]
		if !newest.complete && ok(newest) {
			v.add(invPointers, "job %s: the newest pointer Flink reads, %d, is not complete on %s%s: %s", job, newest.id, where, note(newest), newest.problems)
		}
		for _, p := range ps[:len(ps)-1] {
			if !p.haReadable && ok(p) {
				v.add(invPointers, "job %s: pointer %d, which Flink reads, has no readable HA file on %s%s: %s", job, p.id, where, note(p), p.problems)
			}
		}
	}
}

// midSkip says why a check after an activation cannot be judged, "" when
// it can: the sweeper must have had the whole window (design §5.5.2).
// Another activation, an operator's edit (or a squatter on the lock),
// the lock held by anything but a sweep once the grace ran out (the
// sweeper retracts under it), the site not holding the lease
// at every observation, or no daemon of the site that ran unhindered
// through the window (not stopped, frozen or cut off, and no failed
// sweep pass in the 32 seconds before: a failed pass backs the sweeper
// off up to 32 intervals) each keep it from judging.
func midSkip(h *history, mc midCheck) string {
	if mc.skip != "" {
		return mc.skip
	}
	from, to := mc.t1, mc.recv
	for _, a := range h.activations {
		if a.hi > mc.actHi && a.lo < to {
			return fmt.Sprintf("%s's activation at epoch %d intervened", a.site, a.epoch)
		}
	}
	for _, e := range h.edits {
		if e.overlaps(from, to) && (!e.harmlessOp || e.what == "squat lock") {
			return "an edit intervened (" + e.what + ")"
		}
	}
	// The sweeper records when it first saw a pointer before it takes
	// the lock: a lock held only before the grace ran out (the
	// activation's own, released as it applied) delays nothing. A sweep
	// holds it for a pass; one held longer (its holder cut off inside
	// its multi) keeps the other sweepers off.
	due := from.add(h.grace)
	for _, l := range h.locks {
		if (l.op != "sweep" || l.to.sub(l.from) > 2*time.Second) && l.from < to && due < l.to {
			op := l.op
			if op == "" {
				op = "a node not ckptfs's"
			}
			return "the takeover lock was held (" + op + ")"
		}
	}
	for _, o := range h.obs {
		if o.recv >= from && o.sent <= to && (!o.holds(mc.site) || o.leaseEpoch != mc.epoch) {
			return mc.site + " did not hold the lease throughout"
		}
	}
	for _, p := range h.procs {
		if !strings.HasPrefix(p.slot, mc.site+"/") || p.ready == 0 || p.ready > from || p.exit < to {
			continue
		}
		hindered := false
		for _, s := range h.stops {
			hindered = hindered || s.who == p.slot && s.overlaps(from, to)
		}
		for _, s := range h.freezes {
			hindered = hindered || s.who == mc.site && s.overlaps(from, to)
		}
		for _, s := range h.cuts {
			hindered = hindered || s.who == p.slot && (s.overlaps(from, to) || s.dropOnly && s.from >= from && s.from <= to)
		}
		for _, f := range h.sweepFails {
			hindered = hindered || f.who == p.slot && f.at >= from.add(-32*time.Second) && f.at <= to
		}
		if !hindered {
			return ""
		}
	}
	return "no daemon of " + mc.site + " swept unhindered throughout"
}

// checkMidPointers: invariant 2 after each activation (design §5.5.2):
// once the sweeper's grace has passed with the activation current, the
// pointers that existed soon after it are what a takeover keeps on the
// activated site. Pointers made since (their grace has not passed), gone
// right after the status (Flink deleting them), or written by a leading
// session (the sweeper leaves those) are not judged.
func checkMidPointers(h *history, v *verdict) {
	for _, mc := range h.midChecks {
		v.midChecks++
		if why := midSkip(h, mc); why != "" {
			v.midNotes = append(v.midNotes, fmt.Sprintf("%s at epoch %d: %s", mc.site, mc.epoch, why))
			continue
		}
		v.midJudged++
		where := fmt.Sprintf("%s, %v after its activation at epoch %d (by %s, seen by %s; grace %v)", mc.site, mc.sent.sub(mc.actHi).Round(time.Millisecond), mc.epoch, mc.by, h.rel(mc.actHi), h.grace)
		note := func(p pointerVerdict) string {
			return fmt.Sprintf(" (there since %s at least, created at zxid %#x; that activation judged pointers up to zxid %#x)", h.rel(mc.t1), p.czxid, mc.judged)
		}
		judgePointers(v, mc.pointers, where, note, func(p pointerVerdict) bool {
			cz, ok := mc.before[pointerKey(p.job, p.id)]
			return ok && cz == p.czxid && !p.goneAfter && !p.ownLeader
		})
	}
}

// activeAt says which site active-site named when the transaction of
// zxid z applied, before ret. Known when the write of active-site with
// the greatest mzxid at or below z was seen by a read that began at or
// after ret (no write came between), or when the next write seen is the
// very next version of the same node, made after z ("" and false
// otherwise).
func activeAt(h *history, z int64, ret mono) (string, bool) {
	var x *observation
	for i := range h.obs {
		o := &h.obs[i]
		if o.activeMzxid != 0 && o.activeMzxid <= z && (x == nil || o.activeMzxid > x.activeMzxid) {
			x = o
		}
	}
	if x == nil {
		return "", false
	}
	var next *observation
	for i := range h.obs {
		o := &h.obs[i]
		if o.activeMzxid == x.activeMzxid && o.activeCzxid == x.activeCzxid && o.sent >= ret {
			return x.active, true
		}
		if o.activeMzxid > x.activeMzxid && (next == nil || o.activeMzxid < next.activeMzxid) {
			next = o
		}
	}
	if next != nil && next.activeMzxid > z && next.activeCzxid == x.activeCzxid && next.activeVersion == x.activeVersion+1 {
		return x.active, true
	}
	return "", false
}

// checkRestores: restore-pruned (design §5.6) puts back only pointers
// its site holds completely, only while active-site names its site, and
// nothing when it refuses for a live JobManager; and it never ends well
// on a site that active-site did not name at any moment of its run.
func checkRestores(h *history, v *verdict) {
	for _, rr := range h.restores {
		v.restores++
		v.putBacks += len(rr.putBacks)
		label := fmt.Sprintf("restore-pruned on %s (%s-%s, exit %d%s)", rr.site, h.rel(rr.start), h.rel(rr.ret), rr.exit, map[bool]string{true: ", " + rr.fault, false: ""}[rr.fault != ""])
		for _, pb := range rr.putBacks {
			if pb.judged && !pb.complete {
				v.add(invRestore, "%s put back pointer %d of job %s, which %s does not hold completely: %s", label, pb.id, pb.job, rr.site, pb.problems)
			}
			if pb.czxid == 0 {
				continue
			}
			if named, ok := activeAt(h, pb.czxid, rr.ret); ok && named != rr.site {
				v.add(invRestore, "%s put back pointer %d of job %s at zxid %#x, while active-site named %q", label, pb.id, pb.job, pb.czxid, named)
			}
		}
		if rr.exit == 5 && len(rr.putBacks) > 0 {
			v.add(invRestore, "%s refused for a live JobManager, yet put back %d pointer(s)", label, len(rr.putBacks))
		}
		if rr.exit == 0 {
			if named, ok := activeThroughout(h, rr.start, rr.ret); ok && named != rr.site {
				v.add(invRestore, "%s ended well although active-site named %q, one and the same write of it, throughout its run", label, named)
			}
		}
	}
}

// activeThroughout says what active-site named from the last read that
// began before start to the first that began after ret, when they all
// saw one and the same write of it.
func activeThroughout(h *history, start, ret mono) (string, bool) {
	a, b := -1, -1
	for i, o := range h.obs {
		if o.sent <= start {
			a = i
		}
		if o.sent > ret {
			b = i
			break
		}
	}
	if a < 0 || b < 0 {
		return "", false
	}
	first := h.obs[a]
	for _, o := range h.obs[a : b+1] {
		if o.activeMzxid == 0 || o.activeMzxid != first.activeMzxid || o.activeCzxid != first.activeCzxid {
			return "", false
		}
	}
	return first.active, true
}

// checkFlinkEnd: invariant 2 made real: Flink started on the active site
// after the run restores the newest pointer, which the last check judged
// complete there, runs, and its state is exactly that checkpoint's.
func checkFlinkEnd(h *history, v *verdict) {
	fe := h.flinkEnd
	if fe == nil {
		v.flink = "-"
		return
	}
	switch {
	case fe.err != "":
		v.flink = "BAD"
		v.add(invPointers, "real Flink on %s, the active site, did not restore the job and run: %s", fe.site, fe.err)
	case fe.note != "" && fe.restored < 0:
		v.flink = "-"
	case fe.restored != fe.newest:
		v.flink = "BAD"
		v.add(invPointers, "real Flink on %s, the active site, restored checkpoint %d, not the newest pointer %d", fe.site, fe.restored, fe.newest)
	case fe.stateErr != "":
		v.flink = "BAD"
		v.add(invPointers, "real Flink on %s, the active site, restored checkpoint %d with other state: %s", fe.site, fe.restored, fe.stateErr)
	default:
		v.flink = "ok"
		if fe.note != "" {
			v.flink = "ok?"
		}
	}
}

// healthWindow is how far back a fault keeps a daemon from counting as
// healthy: a fence at t follows from no renewal counting since D/2
// before t; the window covers that with a margin.
func (h *history) healthWindow() time.Duration { return h.lease + h.lease/2 }

// healthy says whether the daemon of slot (of site) was healthy at t:
// it had run for the whole window, no fault touched it, its site or
// ckptfs's nodes in the window, and its site held the lease at every
// observation of the window. Clock steps and squatters do not count:
// the lease uses monotonic durations only, and no renewal reads what a
// squatter holds.
func (h *history) healthy(slot, site string, t mono) (bool, string) {
	from := t.add(-h.healthWindow())
	var p *procLife
	for _, q := range h.procs {
		if q.slot == slot && q.start <= t && q.exit > t {
			p = q
		}
	}
	switch {
	case p == nil:
		return false, "no daemon ran"
	case p.ready == 0 || p.ready > from:
		return false, "started within the window"
	case h.replacedFence[slot]:
		return false, "its backing was replaced by the replication"
	}
	for _, s := range h.stops {
		if s.who == slot && s.overlaps(from, t+1) {
			return false, "stopped"
		}
	}
	for _, s := range h.freezes {
		if s.who == site && s.overlaps(from, t+1) {
			return false, "frozen"
		}
	}
	for _, s := range h.cuts {
		if s.who == slot && (s.overlaps(from, t+1) || s.dropOnly && s.from >= from && s.from <= t) {
			return false, "cut off from ZooKeeper"
		}
	}
	for _, s := range h.edits {
		if !s.harmlessOp && s.overlaps(from, t+1) {
			return false, "ckptfs's nodes edited (" + s.what + ")"
		}
	}
	seen, before := false, false
	for _, o := range h.obs {
		if o.recv < from {
			before = o.holds(site)
			continue
		}
		if o.sent > t {
			break
		}
		seen = true
		if !o.holds(site) {
			return false, "its site did not hold the lease"
		}
	}
	if !seen || !before {
		return false, "its site did not hold the lease throughout"
	}
	return true, ""
}

// checkHealthy: invariant 3 (§6.13): a primary to which no fault was
// applied never fences itself and its writer never gets EROFS.
func checkHealthy(h *history, v *verdict) {
	for _, f := range h.fences {
		site, _, _ := strings.Cut(f.who, "/")
		if ok, _ := h.healthy(f.who, site, f.at); ok {
			v.healthyFences++
			v.add(invHealthy, "%s fenced its mount at %s although healthy: %s", f.who, h.rel(f.at), f.detail)
		}
	}
	for _, e := range h.writerErrs {
		if e.detail != "EROFS" {
			continue
		}
		site, _, _ := strings.Cut(e.who, "/")
		if ok, _ := h.healthy(e.who, site, e.at); ok {
			v.healthyFences++
			v.add(invHealthy, "%s's writer got EROFS at %s although its daemon was healthy", e.who, h.rel(e.at))
		}
	}
}

// stoppedAt says whether the daemon of slot was stopped (SIGSTOP) or its
// site frozen at t, or had just been continued or thawed (the v1
// freezer lets a fatal signal act as the group thaws).
func (h *history) stoppedAt(slot string, t mono) bool {
	site, _, _ := strings.Cut(slot, "/")
	const thawing = mono(500 * time.Millisecond)
	for _, s := range h.stops {
		if s.who == slot && s.from <= t && t <= s.to+thawing {
			return true
		}
	}
	for _, s := range h.freezes {
		if s.who == site && s.from <= t && t <= s.to+thawing {
			return true
		}
	}
	return false
}

// checkWatchdog (§5.14): a daemon killed by SIGKILL that the harness did
// not send was killed by its watchdog, at the deadline of its record,
// and was then stopped or frozen (a daemon that runs is never killed);
// the next daemon of its mount says so (ckptfs_watchdog_fired_previous),
// and says nothing after a daemon whose watchdog was not armed.
func checkWatchdog(h *history, v *verdict) {
	const slack = 300 * time.Millisecond
	for _, p := range h.procs {
		if p.exit == never {
			continue
		}
		if p.sigkilled && !p.killedByUs {
			v.watchdogKills++
			switch {
			case !p.wdRecord || !p.wdArmed:
				v.add(invWatchdog, "%s (pid %d) died by SIGKILL at %s, which the harness did not send, with no watchdog armed", p.slot, p.pid, h.rel(p.exit))
			case !h.stoppedAt(p.slot, p.exit):
				v.add(invWatchdog, "%s (pid %d) was killed by its watchdog at %s (deadline %s) although it was neither stopped nor frozen then", p.slot, p.pid, h.rel(p.exit), h.rel(p.wdDeadline))
			case p.exit < p.wdDeadline-mono(h.lease/4):
				// Arm writes the record before it sets the timer: the
				// timer may still hold the renewal before's deadline.
				v.add(invWatchdog, "%s (pid %d) died by SIGKILL at %s, before its watchdog's deadline %s", p.slot, p.pid, h.rel(p.exit), h.rel(p.wdDeadline))
			case p.successorFired == 0:
				v.add(invWatchdog, "%s (pid %d) was killed by its watchdog, and its successor reports ckptfs_watchdog_fired_previous 0", p.slot, p.pid)
			}
			continue
		}
		if p.successorFired < 0 || !p.wdRecord {
			continue
		}
		switch {
		case !p.wdArmed && p.successorFired != 0:
			v.add(invWatchdog, "%s (pid %d) ended with its watchdog disarmed, and its successor reports ckptfs_watchdog_fired_previous %d", p.slot, p.pid, p.successorFired)
		case p.wdArmed && p.successorStart > p.wdDeadline.add(slack) && p.successorFired != 1:
			v.add(invWatchdog, "%s (pid %d) was killed with its watchdog armed (deadline %s), and its successor, started at %s, reports ckptfs_watchdog_fired_previous %d", p.slot, p.pid, h.rel(p.wdDeadline), h.rel(p.successorStart), p.successorFired)
		case p.wdArmed && p.successorStart.add(slack) < p.wdDeadline && p.successorFired != 0:
			v.add(invWatchdog, "%s (pid %d) was killed with its watchdog armed until %s, and its successor, started before that at %s, reports ckptfs_watchdog_fired_previous %d", p.slot, p.pid, h.rel(p.wdDeadline), h.rel(p.successorStart), p.successorFired)
		}
	}
}
