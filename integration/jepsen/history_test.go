package jepsen

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// mono is a CLOCK_BOOTTIME reading in nanoseconds, the one clock of a
// history: writers stamp their records with it, the harness its
// observations, the daemon's watchdog counts its deadline on it, and
// steps of CLOCK_REALTIME do not move it.
type mono int64

// never is later than every instant of a run.
const never = mono(1<<63 - 1)

func now() mono {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(err)
	}
	return mono(ts.Nano())
}

func (m mono) add(d time.Duration) mono { return m + mono(d) }

func (m mono) sub(o mono) time.Duration { return time.Duration(m - o) }

// span is an interval [from, to) during which something held: a daemon
// stopped, a site frozen, a daemon's connections blocked, an operator's
// edit in effect. to is never while it still holds.
type span struct {
	who, what  string
	from, to   mono
	detail     string
	dropOnly   bool // a connection drop: an instant, not a span
	harmlessOp bool // an edit that no renewal reads (squatters)
}

func (s span) overlaps(from, to mono) bool { return s.from < to && from < s.to }

// observation is one read of ckptfs's nodes by the harness: the epoch,
// active-site and the lease, begun at sent and returned at recv.
type observation struct {
	sent, recv  mono
	epoch       int64
	epochExists bool
	active      string // "" missing
	leaseSite   string // "" missing or unowned
	leaseEpoch  int64
	leaseExists bool
	leaseBy     string // granted_by
	leaseJudged int64
	leaseMzxid  int64
	// active-site's stat when it exists: which write of it this is.
	activeCzxid, activeMzxid int64
	activeVersion            int32
}

// holds: the state in which site's daemons renew (zkbridge State.Holds).
func (o observation) holds(site string) bool {
	return site != "" && o.epochExists && o.active == site && o.leaseExists && o.leaseSite == site && o.leaseEpoch == o.epoch
}

// activation is a change of the lease's owner or epoch to a site: what
// only an activation writes. It applied after lo (the start of the last
// read that did not show it) and before hi (the return of the first that
// did, or of the takeover command that made it).
type activation struct {
	site   string
	epoch  int64
	lo, hi mono
	by     string // the lease's granted_by: the takeover, adopt or bootstrap
}

// procLife is one daemon process (a generation of a slot).
type procLife struct {
	slot       string
	pid        int
	start      mono
	ready      mono
	exit       mono // never while it runs
	status     string
	killedByUs bool // the harness sent SIGKILL
	sigkilled  bool // it ended by SIGKILL
	// watchdog is the record its watchdog left (read after it ended).
	wdArmed    bool
	wdDeadline mono
	wdRecord   bool
	// successorFired is what the next daemon of the slot reported as
	// ckptfs_watchdog_fired_previous (-1: not read), at successorStart.
	successorFired int
	successorStart mono
	// prev is the daemon of the slot before this one; restartAfter how
	// long after a kill by the harness the next one starts.
	prev         *procLife
	restartAfter time.Duration
}

// stamp is an instant something was seen: a fence logged, an error a
// writer got.
type stamp struct {
	who    string
	at     mono
	detail string
}

// record is one writer record found on a NAS.
type record struct {
	site  string // the site whose writer wrote it
	slot  string
	nas   string // the NAS it was found on
	seq   uint64
	start mono
}

// nasSnapshot is a walk of one NAS: every file and directory (not
// .ckptfs, ckptfs's own sealed manifests) with its size and mtime.
type nasSnapshot struct {
	start, end mono
	files      map[string]string
}

// pointerVerdict is one of Flink's pointers as ckptfs status judged it
// on the active site at the end of a run.
type pointerVerdict struct {
	job        string
	id         int64
	czxid      int64
	visible    bool
	complete   bool
	haReadable bool
	problems   string
	// ownLeader: written by a session that leads (the sweeper leaves
	// it); goneAfter: gone, or made again, right after the status.
	ownLeader, goneAfter bool
}

// lockTenure is a node under ckptfs's takeover/ from the first listing
// that showed it to the first that did not (to is never while held).
type lockTenure struct {
	node, op, site string
	pid            int
	from, to       mono
}

// midCheck is invariant 2 checked after an activation (design §5.5.2):
// the pointers that existed at t1, soon after the activation was seen,
// judged by `ckptfs status` on the activated site once the sweeper's
// grace has passed (the status ran in [sent, recv]).
type midCheck struct {
	site       string
	epoch      int64
	by         string // the lease's granted_by
	actHi      mono   // the activation's upper bound
	t1         mono
	before     map[string]int64 // "job/id" -> czxid of the pointers at t1
	sent, recv mono
	pointers   []pointerVerdict
	skip       string // the world's reason not to judge ("" judged)
	judged     int64  // the lease's judged_after_zxid
}

// restoreRun is one `ckptfs restore-pruned` and what it put back.
type restoreRun struct {
	site       string
	start, ret mono
	exit       int // -1 killed
	fault      string
	delivered  []string // what the late delivery brought to the site's NAS first
	reported   []int64  // the ids its report or log says it restored
	putBacks   []putBack
	end        bool // the run after the heal
	note       string
}

// putBack is a pointer restore-pruned created from its backup, as
// `ckptfs status` on the run's site judged it right after.
type putBack struct {
	job        string
	id         int64
	czxid      int64 // 0: gone before it was read
	judged     bool  // status listed it
	complete   bool
	haReadable bool
	problems   string
}

// flinkEnd is real Flink started on the active site after the run: what
// it restored.
type flinkEnd struct {
	site     string
	newest   int64 // the newest pointer Flink reads, by the last status
	restored int64 // -1: none
	err      string
	stateErr string // the job's restored state against the checkpoint's
	note     string // what kept the check from being made
}

// history is everything a run recorded, for the checker. The world
// appends to it under mu; the checker reads it once the run ended.
type history struct {
	mu sync.Mutex

	lease, grace time.Duration
	sites        []string
	start, end   mono

	obs         []observation
	activations []activation
	procs       []*procLife
	stops       []span // who: slot
	freezes     []span // who: site
	cuts        []span // who: slot (its ZooKeeper connections blocked or dropped)
	edits       []span // operator edits in effect
	clock       []span // CLOCK_REALTIME stepped
	fences      []stamp
	writerErrs  []stamp
	records     []record
	nas         map[string][]nasSnapshot
	// replicationEnd is when the replication DC1→DC2 was stopped.
	replicationEnd mono
	// pointers: the final check's verdicts on the active site, and why
	// it was not made ("" when made).
	pointers     []pointerVerdict
	pointersSite string
	pointersSkip string
	// judged is what the lease said at the end: the zxid up to which
	// the activation judged pointers, and which activation it was.
	judged        int64
	judgedBy      string
	replacedFence map[string]bool // slots fenced because the backing was replaced
	// pointersAfter: the final check again once restore-pruned put
	// pointers back at the end (nil when it put none back).
	pointersAfter []pointerVerdict
	locks         []lockTenure
	midChecks     []midCheck
	restores      []restoreRun
	sweepFails    []stamp // a daemon's failed sweep pass (it backs off)
	delivered     map[string]map[string]bool
	flinkEnd      *flinkEnd
	// events is the narrative, for a failed run's log.
	events []string
}

func newHistory(lease, grace time.Duration, sites []string) *history {
	return &history{lease: lease, grace: grace, sites: sites, nas: map[string][]nasSnapshot{}, replacedFence: map[string]bool{}, delivered: map[string]map[string]bool{},
		start: now(), end: never, replicationEnd: never}
}

func (h *history) logf(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf("%8.3fs ", now().sub(h.start).Seconds())+fmt.Sprintf(format, args...))
}

// rel formats an instant relative to the run's start.
func (h *history) rel(m mono) string {
	if m == never {
		return "end"
	}
	return fmt.Sprintf("%.3fs", m.sub(h.start).Seconds())
}

func (h *history) addSpan(list *[]span, s span) *span {
	h.mu.Lock()
	defer h.mu.Unlock()
	*list = append(*list, s)
	return &(*list)[len(*list)-1]
}

// endSpan ends the open span of who and what in list.
func (h *history) endSpan(list *[]span, who, what string, at mono) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range *list {
		s := &(*list)[i]
		if s.who == who && s.what == what && s.to == never {
			s.to = at
		}
	}
}

func (h *history) addStamp(list *[]stamp, s stamp) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*list = append(*list, s)
}

// observe appends an observation and derives an activation from it
// (reported).
func (h *history) observe(o observation) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var prev *observation
	if n := len(h.obs); n > 0 {
		prev = &h.obs[n-1]
	}
	h.obs = append(h.obs, o)
	// Only an activation writes the owner, the epoch and the zxid it
	// judged pointers up to; renewals copy them.
	if o.leaseSite == "" || prev != nil && prev.leaseSite == o.leaseSite && prev.leaseEpoch == o.leaseEpoch && prev.leaseJudged == o.leaseJudged {
		return false
	}
	lo := h.start
	if prev != nil {
		lo = prev.sent
	}
	h.activations = append(h.activations, activation{site: o.leaseSite, epoch: o.leaseEpoch, lo: lo, hi: o.recv, by: o.leaseBy})
	h.events = append(h.events, fmt.Sprintf("%8.3fs activation of %s at epoch %d (%s), applied in [%s, %s]",
		o.recv.sub(h.start).Seconds(), o.leaseSite, o.leaseEpoch, o.leaseBy, h.relLocked(lo), h.relLocked(o.recv)))
	return true
}

func (h *history) relLocked(m mono) string { return h.rel(m) }

// tookOver lowers the upper bound of the activation a takeover command
// reported when it returned at ret.
func (h *history) tookOver(site string, epoch int64, ret mono) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.activations {
		a := &h.activations[i]
		if a.site == site && a.epoch == epoch && ret < a.hi && ret > a.lo {
			a.hi = ret
		}
	}
}

// sortedActivations returns the activations by their upper bound.
func (h *history) sortedActivations() []activation {
	out := append([]activation(nil), h.activations...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].hi < out[j].hi })
	return out
}

func (h *history) eventLog() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.events, "\n")
}
