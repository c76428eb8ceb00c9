package jepsen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// restore-pruned (design §5.6) in a run: R faults while the faults run,
// and one run on the active site after the run healed (runConfig
// .endRestore), each cut off or killed at its lock or its put-back multi
// when its P says so. What a run puts back is found by its report and by
// the backups it removed (a backup goes in the multi that puts its
// pointer back); `ckptfs status` on its site judges each right after.
//
// Before a run the replication may deliver late what the active site
// lacked of retracted pointers' checkpoints (the runbook's case for
// restore-pruned: the replica caught up): every file of their HA file,
// checkpoint directory and shared state from DC1's NAS to DC2's, one
// file of one of them short when partly.

// backups reads the job's backups: by id, with their bytes.
func (w *world) backups() (map[int64]zkbridge.Backup, map[int64][]byte, error) {
	dir := w.base + "/pruned/" + w.job
	kids, _, err := w.zk.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	out, raw := map[int64]zkbridge.Backup{}, map[int64][]byte{}
	for _, k := range kids {
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			continue
		}
		data, _, err := w.zk.Get(dir + "/" + k)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		var bk zkbridge.Backup
		if json.Unmarshal(data, &bk) != nil || bk.JobID != w.job || bk.CheckpointID != id {
			continue // a squatter's garbage
		}
		out[id], raw[id] = bk, data
	}
	return out, raw, nil
}

// deliver copies to DC2's NAS what it lacks of the checkpoints of the
// retracted pointers that DC1's NAS holds completely, as a replication
// that caught up; partly: one file of the newest of them stays short. It
// returns what it wrote, relative to the NAS.
func (w *world) deliver(partly bool) ([]string, error) {
	bks, _, err := w.backups()
	if err != nil {
		return nil, err
	}
	src, dst := w.sites[0].nas, w.sites[1].nas
	v, err := verifierFor(w.storage, src)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for id, bk := range bks {
		if !bk.Kept {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var files [][]string // per checkpoint: its files, relative to the NAS
	for _, id := range ids {
		h, err := flinkha.DecodeStateHandle(bks[id].Data)
		if err != nil {
			continue
		}
		pv := v.VerifyPointer(context.Background(), id, *h)
		if !pv.L2Complete() || pv.Verdict.Manifest == nil {
			continue // a stray: its files are nowhere
		}
		rel := func(uri string) (string, bool) {
			r, ok := strings.CutPrefix(uri, w.storage+"/")
			return filepath.Clean(r), ok
		}
		var need []string
		if r, ok := rel(h.URI); ok {
			need = append(need, r)
		}
		dir, err := filepath.Rel(src, pv.Verdict.Dir)
		if err != nil {
			continue
		}
		filepath.WalkDir(pv.Verdict.Dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				r, _ := filepath.Rel(src, p)
				need = append(need, r)
			}
			return nil
		})
		for _, f := range pv.Verdict.Manifest.Files {
			if f.IsDir() {
				continue
			}
			if f.Relative {
				need = append(need, filepath.Join(dir, f.Path))
			} else if r, ok := rel(f.Path); ok {
				need = append(need, r)
			}
		}
		slices.Sort(need)
		files = append(files, slices.Compact(need))
	}
	var wrote []string
	for i, need := range files {
		short := ""
		if partly && i == len(files)-1 {
			short = largest(src, need)
		}
		for _, f := range need {
			ok, err := copyMissing(filepath.Join(src, f), filepath.Join(dst, f), f == short)
			if err != nil {
				return wrote, err
			}
			if ok {
				wrote = append(wrote, f)
			}
		}
	}
	return wrote, nil
}

// largest is the largest of files (under root).
func largest(root string, files []string) string {
	best, size := "", int64(-1)
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(root, f)); err == nil && fi.Size() > size {
			best, size = f, fi.Size()
		}
	}
	return best
}

// copyMissing copies src to dst unless dst has src's size already, or
// only half of it when short (unless dst has half already), creating
// dst's directories; it reports whether it wrote.
func copyMissing(src, dst string, short bool) (bool, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return false, nil // gone from DC1 meanwhile: not delivered
	}
	size := fi.Size()
	if di, err := os.Stat(dst); err == nil && di.Size() == size {
		return false, nil // there already: not taken back
	}
	if short {
		size /= 2
	}
	if di, err := os.Stat(dst); err == nil && di.Size() == size {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	in, err := os.Open(src)
	if err != nil {
		return false, nil
	}
	defer in.Close()
	tmp := dst + ".delivery"
	out, err := os.Create(tmp)
	if err != nil {
		return false, err
	}
	_, err = io.CopyN(out, in, size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return false, err
	}
	return true, nil
}

// verifierFor verifies checkpoints whose Flink paths start with storage
// in dir.
func verifierFor(storage, dir string) (*manifest.Verifier, error) {
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: storage, Dir: dir}}, nil)
	if err != nil {
		return nil, err
	}
	cfg := manifest.DefaultVerifierConfig()
	cfg.Resolver = res
	return manifest.NewVerifier(cfg)
}

// runRestore runs f, an R of the schedule or the end's, and records it.
// ctx ending kills it 15 s later (the run heals).
func (w *world) runRestore(ctx context.Context, f fault, index int, end bool) *restoreRun {
	rr := &restoreRun{end: end, exit: -2}
	o, _ := w.lastObservation()
	active := o.active
	if active == "" {
		active = "dc1"
	}
	rr.site = active
	if f.arg == "other" {
		rr.site = map[string]string{"dc1": "dc2", "dc2": "dc1"}[active]
	}
	defer func() {
		w.h.mu.Lock()
		w.h.restores = append(w.h.restores, *rr)
		w.h.mu.Unlock()
	}()
	if f.deliver && active == "dc2" {
		wrote, err := w.deliver(f.partly)
		w.h.mu.Lock()
		if w.h.delivered["dc2"] == nil {
			w.h.delivered["dc2"] = map[string]bool{}
		}
		for _, p := range wrote {
			for d := p; d != "." && d != "/"; d = filepath.Dir(d) {
				w.h.delivered["dc2"][d] = true
			}
		}
		w.h.mu.Unlock()
		rr.delivered = wrote
		w.logf("late delivery to dc2's NAS: %d file(s)%s", len(wrote), map[bool]string{true: ", one short", false: ""}[f.partly && len(wrote) > 0])
		if err != nil {
			w.logf("late delivery: %v", err)
		}
	}
	before, _, err := w.backups()
	if err != nil {
		rr.note = "reading the backups: " + err.Error()
		return rr
	}
	proxies := w.rpProxies[index]
	nas := w.sites[0].nas
	if rr.site == "dc2" {
		nas = w.sites[1].nas
	}
	r := &takeoverRun{site: rr.site, proxies: proxies, restore: true}
	args := []string{"restore-pruned", "--site", rr.site, "--zk", proxyAddrs(proxies), "--cluster-id", w.cid, "--path-root", w.emu.PathRoot,
		"--map", w.storage + "=" + nas, "--flink-session-timeout", w.cfg.grace.String(), "--zk-session-timeout", zkSession.String(),
		"--job", w.job, "-o", "json", "--log-format", "json", "-v"}
	r.cmd = exec.Command(binary, args...)
	var out, errb bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &out, &errb
	trigger, action, _ := strings.Cut(f.phase, ":")
	if trigger == "lock" {
		w.mu.Lock()
		w.pending["lock:restore-pruned"] = append(w.pending["lock:restore-pruned"], func(pid int) { w.phaseAction(ctx, action, pid, f.dur) })
		w.mu.Unlock()
	}
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	if trigger == "multi" {
		go w.trapMulti(tctx, proxies, 0, "restore-pruned", func() { w.hit(tctx, nil, r, proxies, action, f.dur) })
	}
	rr.start = now()
	if err := r.cmd.Start(); err != nil {
		rr.note = err.Error()
		return rr
	}
	r.pid = r.cmd.Process.Pid
	w.mu.Lock()
	w.restoreRs = append(w.restoreRs, r)
	w.mu.Unlock()
	w.logf("restore-pruned on %s started (pid %d)%s", rr.site, r.pid, map[bool]string{true: ", P at its " + f.phase, false: ""}[f.phase != ""])
	err = w.waitCommand(ctx, r.cmd, &r.killed)
	rr.ret = now()
	tcancel()
	for _, p := range proxies {
		p.Disarm()
		p.Unblock()
	}
	w.mu.Lock()
	if trigger == "lock" {
		delete(w.pending, "lock:restore-pruned")
	}
	killed := r.killed
	w.mu.Unlock()
	rr.exit = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		rr.exit = ee.ExitCode()
	}
	if killed || rr.exit < 0 {
		rr.exit = -1
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()+"\n"+out.String()), "\n") {
		w.saveLine(fmt.Sprintf("restore-pruned %s[%d]", rr.site, r.pid), line)
	}
	rr.reported = restoredIDs(out.Bytes(), errb.Bytes())
	w.mu.Lock()
	rr.fault = r.fault
	w.mu.Unlock()
	w.findPutBacks(rr, before)
	w.logf("restore-pruned on %s (pid %d) ended: exit %d, reported %v, put back %d", rr.site, r.pid, rr.exit, rr.reported, len(rr.putBacks))
	return rr
}

// restoredIDs are the ids restore-pruned says it put back: its JSON
// report, or its log's "pointer restored" lines.
func restoredIDs(stdout, stderr []byte) []int64 {
	var rep zkbridge.RestoreReport
	var ids []int64
	if json.Unmarshal(stdout, &rep) == nil {
		for _, j := range rep.Jobs {
			ids = append(ids, j.Restored...)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		var rec struct {
			Msg        string `json:"msg"`
			Checkpoint int64  `json:"checkpoint"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "pointer restored" {
			ids = append(ids, rec.Checkpoint)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// findPutBacks finds what rr put back: the ids it reported, and every
// backup that was there before it and is gone, whose pointer exists with
// the backup's bytes; each judged by `ckptfs status` on rr's site.
func (w *world) findPutBacks(rr *restoreRun, before map[int64]zkbridge.Backup) {
	after, _, err := w.backups()
	if err != nil {
		rr.note = "reading the backups after it: " + err.Error()
		return
	}
	ids := slices.Clone(rr.reported)
	for id, bk := range before {
		if _, still := after[id]; still {
			continue
		}
		if data, _, err := w.zk.Get(bk.Znode); err == nil && bytes.Equal(data, bk.Data) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return
	}
	ps, err := w.status(rr.site)
	if err != nil {
		rr.note = err.Error()
	}
	for _, id := range ids {
		pb := putBack{job: w.job, id: id}
		if ok, st, err := w.zk.Exists(fmt.Sprintf("%s/%019d", w.emu.PointerDir(w.job), id)); err == nil && ok {
			pb.czxid = st.Czxid
		}
		for _, p := range ps {
			if p.job == w.job && p.id == id && p.czxid == pb.czxid && pb.czxid != 0 {
				pb.judged, pb.complete, pb.haReadable, pb.problems = true, p.complete, p.haReadable, p.problems
			}
		}
		rr.putBacks = append(rr.putBacks, pb)
	}
}

// afterEnd waits for the checks after activations still running, then
// follows the check of the pointers at the end on S, the active site: the end's restore-pruned on S (a late delivery first when
// S is DC2, and its P), again without a fault when that one was faulted
// or failed (the runbook: run it again), the check of the pointers once
// more when they put any back; then, with real Flink, Flink on S.
func (w *world) afterEnd() {
	// The checks of the last activations first: nothing changes the
	// pointers under them.
	w.checks.Wait()
	w.h.mu.Lock()
	site, ps := w.h.pointersSite, w.h.pointers
	w.h.mu.Unlock()
	if site == "" || w.cfg.endRestore == nil {
		return
	}
	f := *w.cfg.endRestore
	rr := w.runRestore(w.ctx, f, f.index, true)
	n := len(rr.putBacks)
	if f.phase != "" || rr.exit != 0 {
		rr2 := w.runRestore(w.ctx, fault{kind: 'R', arg: "active"}, f.index+1, true)
		n += len(rr2.putBacks)
	}
	if n > 0 {
		after, err := w.status(site)
		if err != nil {
			w.t.Error(err)
		} else {
			w.h.mu.Lock()
			w.h.pointersAfter = after
			w.h.mu.Unlock()
			ps = after
			w.logf("pointers checked on %s again after restore-pruned: %d", site, len(after))
		}
	}
	if w.fl != nil {
		newest := int64(-1)
		for _, p := range ps {
			if p.job == w.job && p.visible && p.id > newest {
				newest = p.id
			}
		}
		w.fl.atEnd(site, newest)
	}
}
