package jepsen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// midMargin is how long past Flink's session timeout (the sweeper's
// grace) a check after an activation waits: the sweeper's pass (every
// second), its reads and its retraction, and the status command.
const midMargin = 4 * time.Second

// statusOut is what `ckptfs status -o json` says, in the fields the
// checks read.
type statusOut struct {
	JobManager struct {
		Nodes []struct {
			Kind    string `json:"kind"`
			Session string `json:"session"`
		} `json:"nodes"`
	} `json:"jobmanager"`
	Jobs []struct {
		JobID    string `json:"job_id"`
		Pointers []struct {
			ID             int64             `json:"id"`
			Visible        bool              `json:"visible"`
			Complete       bool              `json:"complete"`
			HAFileReadable bool              `json:"ha_file_readable"`
			Problems       []json.RawMessage `json:"problems"`
		} `json:"pointers"`
	} `json:"jobs"`
}

// status runs `ckptfs status -o json` on site (its NAS mapped) and
// returns its pointers with their verdicts, each with the czxid the
// harness reads for it afterwards (0: gone by then) and whether a
// leading JobManager's session wrote it (a lock of its session with the
// pointer's czxid: the sweeper never judges those, design §5.5.2).
func (w *world) status(site string) ([]pointerVerdict, error) {
	nas := w.sites[0].nas
	if site == "dc2" {
		nas = w.sites[1].nas
	}
	cmd := exec.Command(binary, "status", "-o", "json", "--site", site, "--zk", w.cluster.ConnectString(), "--cluster-id", w.cid, "--path-root", w.emu.PathRoot,
		"--map", w.storage+"="+nas, "--flink-session-timeout", w.cfg.grace.String(), "--lease-duration", w.cfg.lease.String())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ckptfs status on %s: %v\n%s", site, err, errb.String())
	}
	var st statusOut
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		return nil, fmt.Errorf("ckptfs status: %v\n%s", err, out.String())
	}
	var leaders []string
	for _, n := range st.JobManager.Nodes {
		if n.Kind == "leader" {
			leaders = append(leaders, n.Session)
		}
	}
	var ps []pointerVerdict
	for _, j := range st.Jobs {
		for _, p := range j.Pointers {
			var probs []string
			for _, pr := range p.Problems {
				probs = append(probs, string(pr))
			}
			path := fmt.Sprintf("%s/%019d", w.emu.PointerDir(j.JobID), p.ID)
			var czxid int64
			own := false
			if ok, stat, err := w.zk.Exists(path); err == nil && ok {
				czxid = stat.Czxid
				own = w.writtenByLeader(path, czxid, leaders)
			}
			ps = append(ps, pointerVerdict{job: j.JobID, id: p.ID, czxid: czxid, visible: p.Visible, complete: p.Complete,
				haReadable: p.HAFileReadable, problems: strings.Join(probs, "; "), ownLeader: own})
		}
	}
	return ps, nil
}

// writtenByLeader: one of the pointer's ephemeral locks was created with
// it (Flink adds a pointer and its lock in one transaction) by a session
// that leads.
func (w *world) writtenByLeader(pointer string, czxid int64, leaders []string) bool {
	kids, _, err := w.zk.Children(pointer + "/locks")
	if err != nil {
		return false
	}
	for _, k := range kids {
		if ok, st, err := w.zk.Exists(pointer + "/locks/" + k); err == nil && ok && st.Czxid == czxid && st.EphemeralOwner != 0 &&
			slices.Contains(leaders, fmt.Sprintf("0x%x", uint64(st.EphemeralOwner))) {
			return true
		}
	}
	return false
}

// activated starts the checks of an activation seen while the faults run
// (JobManager runs only): the pointers that exist at some moment, once
// the sweeper's grace has passed, must be what a takeover keeps.
func (w *world) activated(o observation) {
	if !w.faulting.Load() || !w.cfg.jm {
		return
	}
	w.checks.Add(1)
	go func() {
		defer w.checks.Done()
		w.midChecks(o)
	}()
}

// midChecks checks the activation o in rounds while it stays current: a
// round lists the pointers (with their czxids) at t1, waits Flink's
// session timeout and midMargin, and asks `ckptfs status` on the site; the
// next round lists at the end of this one (a returning JobManager's
// pointers come later). Rounds start while the faults run; the last one
// ends after them (the run waits for it before the end's restore-pruned).
// The checker decides what each window allows it to judge
// (checkMidPointers).
func (w *world) midChecks(o observation) {
	for w.midCheck(o) && w.faulting.Load() {
	}
}

// midCheck is one round of midChecks; it reports whether the activation
// was still current at its end. A round that cannot be made is recorded
// with the reason.
func (w *world) midCheck(o observation) bool {
	mc := midCheck{site: o.leaseSite, epoch: o.leaseEpoch, by: o.leaseBy, actHi: o.recv, judged: o.leaseJudged, before: map[string]int64{}}
	defer func() {
		w.h.mu.Lock()
		w.h.midChecks = append(w.h.midChecks, mc)
		w.h.mu.Unlock()
	}()
	mc.t1 = now()
	kids, _, err := w.zk.Children(w.emu.PointerDir(w.job))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		mc.skip = "listing the pointers: " + err.Error()
		return false
	}
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			continue
		}
		if ok, st, err := w.zk.Exists(w.emu.PointerDir(w.job) + "/" + k); err == nil && ok {
			mc.before[pointerKey(w.job, id)] = st.Czxid
		}
	}
	if !sleepCtx(w.ctx, w.cfg.grace+midMargin) {
		mc.skip = "the run ended first"
		return false
	}
	if last, ok := w.lastObservation(); !ok || !last.holds(mc.site) || last.leaseEpoch != mc.epoch {
		mc.skip = fmt.Sprintf("%s no longer held the lease at epoch %d", mc.site, mc.epoch)
		return false
	}
	mc.sent = now()
	ps, err := w.status(mc.site)
	mc.recv = now()
	if err != nil {
		mc.skip = err.Error()
		return false
	}
	// A pointer gone or made again since is not the one judged.
	for i := range ps {
		p := &ps[i]
		if ok, st, err := w.zk.Exists(fmt.Sprintf("%s/%019d", w.emu.PointerDir(p.job), p.id)); err != nil || !ok || st.Czxid != p.czxid {
			p.goneAfter = true
		}
	}
	mc.pointers = ps
	w.logf("pointers checked on %s after its activation at epoch %d (there at %s): %d", mc.site, mc.epoch, w.h.rel(mc.t1), len(ps))
	return true
}

// pointerKey names a pointer in midCheck.before.
func pointerKey(job string, id int64) string { return fmt.Sprintf("%s/%d", job, id) }
