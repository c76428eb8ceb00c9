package scale

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
)

func TestMain(m *testing.M) { faultfs.Main(m) }

// params are one run's parameters.
type params struct {
	Jobs, Files int
	// Delay is added to every operation on the NAS. Local serves the
	// NAS's directory to the daemon directly, without faultfs: a local
	// disk, as fast as this machine goes, but no operation is counted
	// and there is no floor.
	Delay time.Duration
	Local bool
	// Duration is the steady window measured; Interval how often each
	// job writes a checkpoint (the writer adds one every Interval/Jobs,
	// round robin).
	Duration, Interval time.Duration
	// Disappear is how many jobs have a shared file deleted (and as many
	// truncated) in a visible checkpoint.
	Disappear int
	// WarmPasses are how many passes run with the writer before the
	// steady window; IdlePasses how many passes with nothing new are
	// counted (2 at least: a file found complete is trusted for two poll
	// intervals, so passes alternate).
	WarmPasses, IdlePasses int
	// Patience bounds each wait for the daemon (start, every job
	// visible, a hidden checkpoint).
	Patience time.Duration
	// Audit is the daemon's --audit-period (0: its default): it bounds
	// how soon a truncated file hides its checkpoint; NoTruncate skips
	// that measure (it waits up to Audit).
	Audit      time.Duration
	NoTruncate bool
}

// result is what a run measured.
type result struct {
	p params
	// files on disk, and directories below the NAS's top.
	files, dirs int
	// mounted: start to ready; allVisible: start to every job's newest
	// checkpoint visible through the mount.
	mounted, allVisible time.Duration
	// cpu is the daemon's CPU in the steady window, in cores; rss its
	// mean RSS there and peak its VmHWM, in bytes. quietCPU is its CPU
	// with the writer running and nobody else asking it anything: no
	// lookups through the mount, no scrape of /metrics (this harness
	// scrapes 5 times a second, Prometheus every 15 s or so).
	cpu, quietCPU   float64
	rssSteady, peak int64
	// passes are the pass durations seen in the steady window.
	passes []time.Duration
	// written: checkpoints written in the window; vis: the latency of
	// each seen; unseen: written, never seen within the patience.
	written  int
	vis      []time.Duration
	unseen   int
	subsumed int
	// deleted and truncated: time until the checkpoint was hidden.
	deleted, truncated []time.Duration
	// reappeared: time until it was visible again once put back.
	reappeared []time.Duration
	// steadyOps: backing operations per pass in the steady window (the
	// writer running); idleOps: per pass with nothing new.
	steadyOps, idleOps float64
	// idleAudited: files the daemon's audit stat'ed again a pass with
	// nothing new (its metric), which --audit-period sets.
	idleAudited              float64
	steadyCounts, idleCounts faultfs.Counts
	// idlePasses: the durations of the passes with nothing new.
	idlePasses []time.Duration
	// floorRate: operations a second the NAS serves issued on it
	// directly with the daemon's concurrency; floorOps how many were
	// measured. A pass's floor is its operations at that rate.
	floorRate float64
	floorOps  uint64
	// observer's cost: stats through the mount and sweeps.
	obsStats, obsSweeps int64
	obsSweep            time.Duration
}

// runScale lays out the NAS, mounts it through faultfs and a real
// `ckptfs mount --mode replica`, runs the writer and measures.
func runScale(t testing.TB, p params) *result {
	t.Helper()
	mounttest.RequireFUSE(t)
	l := openLayout(t, p.Jobs, p.Files)
	r := &result{p: p, files: l.FilesOnDisk(), dirs: l.Dirs()}

	binary, err := mounttest.BuildCkptfs("ckptfs-scale-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(binary)) })

	top := t.TempDir()
	nas, mnt := filepath.Join(top, "nas"), filepath.Join(top, "flink")
	for _, d := range []string{nas, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var fault *faultfs.FS
	if p.Local {
		nas = l.nas()
	} else {
		fault = faultfs.MountWith(t, l.nas(), nas, faultfs.Options{LookupAttrs: true})
		if p.Delay > 0 {
			fault.Add(faultfs.Rule{Ops: faultfs.OpAll, Delay: p.Delay})
		}
	}
	ops := func() faultfs.Counts {
		if fault == nil {
			return nil
		}
		return fault.Ops()
	}
	addr := mounttest.FreeAddr(t)
	args := []string{"--mode", "replica", "--site", "dc2", "--map", flinkURI + "=" + nas, "--metrics-addr", addr}
	if p.Audit > 0 {
		args = append(args, "--audit-period", p.Audit.String())
	}
	d := mounttest.StartCkptfs(t, binary, nas, mnt, p.Patience, args...)
	r.mounted = d.Ready.Sub(d.Started)

	ctx, cancel := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() })
	sc := &scraper{url: "http://" + addr + "/metrics", client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	ps := &procSampler{pid: d.Pid()}
	obs := &observer{mnt: mnt, waits: make(map[string]*watch)}
	bg.Add(3)
	go func() { defer bg.Done(); sc.run(ctx) }()
	go func() { defer bg.Done(); ps.run(ctx) }()
	go func() { defer bg.Done(); obs.run(ctx) }()

	// Every job's newest checkpoint visible.
	var all sync.WaitGroup
	for _, j := range l.jobs {
		all.Add(1)
		obs.await(j.ID+"/"+j.chk(j.Newest()), time.Now(), true, func(time.Duration) { all.Done() })
	}
	if !waitGroup(&all, p.Patience) {
		t.Fatalf("not every job's newest checkpoint visible within %v of mounting (%d waiting)\n%s", p.Patience, obs.pending(), d.Tail(20))
	}
	r.allVisible = time.Since(d.Started)
	t.Logf("mounted %v after start, every job's newest checkpoint visible after %v", r.mounted.Round(time.Millisecond), r.allVisible.Round(time.Millisecond))

	// The writer.
	var (
		visMu    sync.Mutex
		measure  atomic.Bool
		written  atomic.Int64
		subsumed atomic.Int64
		writeErr error
	)
	wctx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan struct{})
	m := l.tp.decode(t)
	go func() {
		defer close(writerDone)
		step := p.Interval / time.Duration(p.Jobs)
		next := time.Now()
		for i := 0; ; i++ {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			next = next.Add(step)
			j := l.jobs[i%len(l.jobs)]
			oldest := j.Retained[0].ID
			id, at, err := j.addCheckpoint(l.nas(), l.tp, p.Files, m)
			if err != nil {
				writeErr = err
				return
			}
			// A checkpoint subsumed before the mount showed it never
			// will: counted, not awaited.
			if obs.cancel(j.ID + "/" + j.chk(oldest)) {
				subsumed.Add(1)
			}
			if !measure.Load() {
				continue
			}
			written.Add(1)
			obs.await(j.ID+"/"+j.chk(id), at, true, func(lat time.Duration) {
				visMu.Lock()
				r.vis = append(r.vis, lat)
				visMu.Unlock()
			})
		}
	}()

	// Warm up: passes with the writer running.
	sc.waitPasses(ctx, sc.passes()+int64(p.WarmPasses), p.Patience)
	measure.Store(true)
	cpu0, t0, pass0, ops0 := ps.cpu(), time.Now(), sc.passes(), ops()
	ps.startWindow()
	time.Sleep(p.Duration)
	cpu1, t1, pass1, ops1 := ps.cpu(), time.Now(), sc.passes(), ops()
	measure.Store(false)
	// Quiet: the writer alone, once what was awaited is seen.
	for deadline := time.Now().Add(p.Patience); obs.pending() > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	sc.pause(true)
	cpuQ0, tQ0 := ps.cpu(), time.Now()
	time.Sleep(quietWindow(p.Duration))
	r.quietCPU = (ps.cpu() - cpuQ0) / time.Since(tQ0).Seconds()
	sc.pause(false)
	stopWriter()
	<-writerDone
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
	r.cpu = (cpu1 - cpu0) / t1.Sub(t0).Seconds()
	r.rssSteady = ps.windowRSS()
	r.passes = sc.durationsBetween(t0, t1)
	r.written = int(written.Load())
	if n := pass1 - pass0; n > 0 && fault != nil {
		r.steadyCounts = ops1.Sub(ops0)
		r.steadyOps = float64(r.steadyCounts.Total(faultfs.OpAll)) / float64(n)
	}
	// What was written is seen, or counted unseen.
	deadline := time.Now().Add(p.Patience)
	for obs.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	r.unseen = obs.cancelAll()
	r.subsumed = int(subsumed.Load())
	if len(r.passes) == 0 {
		// Passes longer than the window: the first ones after it.
		r.passes = sc.durationsBetween(t0, time.Now())
	}

	// Passes with nothing new: from one pass's end to the
	// p.IdlePasses-th after, once the quiet window's last writes, which
	// nobody awaited, have settled (the catalog lists a changed directory
	// again 2 s after it saw the change).
	time.Sleep(settleWrites)
	sc.waitPasses(ctx, sc.passes()+2, p.Patience)
	passA, opsA, auditA, tA := sc.passes(), ops(), sc.auditedFiles(), time.Now()
	sc.waitPasses(ctx, passA+int64(p.IdlePasses), p.Patience)
	passB, opsB, auditB := sc.passes(), ops(), sc.auditedFiles()
	r.idlePasses = sc.durationsBetween(tA, time.Now())
	if fault != nil && passB > passA {
		r.idleCounts = opsB.Sub(opsA)
		r.idleOps = float64(r.idleCounts.Total(faultfs.OpAll)) / float64(passB-passA)
		r.idleAudited = (auditB - auditA) / float64(passB-passA)
	}

	// A file that disappears from a visible checkpoint.
	healed := disappear(t, l, obs, p, r)

	r.obsStats, r.obsSweeps, r.obsSweep = obs.cost()
	r.peak = ps.peak()

	// The floor, with the daemon stopped.
	d.Stop(t)
	if fault != nil {
		r.floorRate, r.floorOps = floorRate(t, l, fault, nas, uint64(max(r.idleOps, r.steadyOps)))
	}

	if healed {
		l.close(t)
	}
	return r
}

// disappear deletes one shared file of the newest checkpoint of
// p.Disappear jobs and truncates one of as many others, all at once,
// timing each until its checkpoint is hidden, then puts each back and
// times its return. It says whether every file was put back and seen.
func disappear(t testing.TB, l *layout, obs *observer, p params, r *result) bool {
	t.Helper()
	k := min(p.Disappear, len(l.jobs)/2)
	type victim struct {
		j    *job
		path string
		size int64
		hurt func(path string, size int64) error
		out  *[]time.Duration
	}
	del := func(path string, _ int64) error { return os.Remove(path) }
	trunc := func(path string, size int64) error { return os.Truncate(path, size/2) }
	var victims []victim
	n := 2 * k
	if p.NoTruncate {
		n = k
	}
	for i, j := range l.jobs[:n] {
		c := j.Retained[len(j.Retained)-1]
		n := c.Files[0] // an SST, most likely shared by all three
		v := victim{j: j, path: filepath.Join(l.nas(), j.ID, "shared", j.sharedName(n)), size: j.sharedSize(n), hurt: del, out: &r.deleted}
		if i >= k {
			v.hurt, v.out = trunc, &r.truncated
		}
		victims = append(victims, v)
	}
	var mu sync.Mutex
	var hidden, back sync.WaitGroup
	for _, v := range victims {
		if err := v.hurt(v.path, v.size); err != nil {
			t.Fatalf("%s: %v", v.path, err)
		}
		hidden.Add(1)
		obs.await(v.j.ID+"/"+v.j.chk(v.j.Newest()), time.Now(), false, func(d time.Duration) {
			mu.Lock()
			*v.out = append(*v.out, d)
			mu.Unlock()
			hidden.Done()
		})
	}
	if !waitGroup(&hidden, p.Patience) {
		t.Errorf("%d of %d checkpoints with a deleted or truncated file still visible after %v", obs.pending(), len(victims), p.Patience)
		obs.cancelAll()
	}
	for _, v := range victims {
		if err := writeFile(v.path, v.size); err != nil {
			t.Fatalf("putting back %s: %v", v.path, err)
		}
		back.Add(1)
		obs.await(v.j.ID+"/"+v.j.chk(v.j.Newest()), time.Now(), true, func(d time.Duration) {
			mu.Lock()
			r.reappeared = append(r.reappeared, d)
			mu.Unlock()
			back.Done()
		})
	}
	if !waitGroup(&back, p.Patience) {
		t.Errorf("%d checkpoints not visible again %v after their file was put back", obs.pending(), p.Patience)
		obs.cancelAll()
		return false
	}
	return true
}

// floorRate issues about ops operations on the NAS directly (lstat of
// its files through faultfs), with the daemon's concurrency, for at most
// 20 s, and returns the operations a second it measured, and how many.
func floorRate(t testing.TB, l *layout, fault *faultfs.FS, nas string, ops uint64) (float64, uint64) {
	t.Helper()
	if ops == 0 {
		return 0, 0
	}
	var paths []string
	for _, j := range l.jobs {
		for _, c := range j.Retained {
			paths = append(paths, filepath.Join(nas, j.ID, j.chk(c.ID), "_metadata"))
			for _, n := range c.Files {
				paths = append(paths, filepath.Join(nas, j.ID, "shared", j.sharedName(n)))
			}
		}
	}
	workers := manifest.DefaultVerifierConfig().Workers
	before := fault.Ops()
	start := time.Now()
	var next atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st syscall.Stat_t
			for {
				select {
				case <-stop:
					return
				default:
				}
				syscall.Lstat(paths[int(next.Add(1)-1)%len(paths)], &st)
			}
		}()
	}
	var done uint64
	for {
		time.Sleep(100 * time.Millisecond)
		done = fault.Ops().Sub(before).Total(faultfs.OpAll)
		if done >= ops || time.Since(start) > 20*time.Second {
			break
		}
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	done = fault.Ops().Sub(before).Total(faultfs.OpAll)
	return float64(done) / elapsed.Seconds(), done
}

// floors returns the floors of a steady pass and of a pass with nothing
// new (their operations at the NAS's rate), and each pass's median time
// over it; zero where unmeasured. A pass's operations are those between
// two passes' ends, the audit's beside it included.
func (r *result) floors() (steady, idle time.Duration, steadyRatio, idleRatio float64) {
	if r.floorRate == 0 {
		return 0, 0, 0, 0
	}
	at := func(ops float64) time.Duration { return time.Duration(ops / r.floorRate * float64(time.Second)) }
	steady, idle = at(r.steadyOps), at(r.idleOps)
	if steady > 0 {
		steadyRatio = quantile(r.passes, 0.5).Seconds() / steady.Seconds()
	}
	if idle > 0 {
		idleRatio = quantile(r.idlePasses, 0.5).Seconds() / idle.Seconds()
	}
	return steady, idle, steadyRatio, idleRatio
}

func waitGroup(wg *sync.WaitGroup, within time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

// observer polls names through the mount until each reaches the state
// awaited (visible or hidden): a stat of each pending name every
// observeEvery, one after another, and nothing else.
type observer struct {
	mnt   string
	mu    sync.Mutex
	waits map[string]*watch // GUARDED_BY(mu)

	stats, sweeps atomic.Int64
	busy          atomic.Int64 // nanoseconds spent sweeping
}

type watch struct {
	since   time.Time
	visible bool
	found   func(time.Duration)
}

const observeEvery = 25 * time.Millisecond

func (o *observer) await(rel string, since time.Time, visible bool, found func(time.Duration)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.waits[rel] = &watch{since: since, visible: visible, found: found}
}

func (o *observer) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.waits)
}

// cancel forgets the wait for rel and says whether there was one.
func (o *observer) cancel(rel string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.waits[rel]
	delete(o.waits, rel)
	return ok
}

// cancelAll forgets every wait and says how many there were.
func (o *observer) cancelAll() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.waits)
	clear(o.waits)
	return n
}

func (o *observer) cost() (stats, sweeps int64, mean time.Duration) {
	s, n := o.stats.Load(), o.sweeps.Load()
	if n > 0 {
		mean = time.Duration(o.busy.Load() / n)
	}
	return s, n, mean
}

func (o *observer) run(ctx context.Context) {
	for {
		start := time.Now()
		o.mu.Lock()
		names := make([]string, 0, len(o.waits))
		for rel := range o.waits {
			names = append(names, rel)
		}
		o.mu.Unlock()
		for _, rel := range names {
			_, err := os.Stat(filepath.Join(o.mnt, rel))
			at := time.Now()
			o.stats.Add(1)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			o.mu.Lock()
			w := o.waits[rel]
			if w != nil && (err == nil) == w.visible {
				delete(o.waits, rel)
			} else {
				w = nil
			}
			o.mu.Unlock()
			if w != nil {
				w.found(at.Sub(w.since))
			}
		}
		if len(names) > 0 {
			o.sweeps.Add(1)
			o.busy.Add(int64(time.Since(start)))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(observeEvery))):
		}
	}
}

// scraper reads the daemon's /metrics and records each pass's duration.
type scraper struct {
	url    string
	client *http.Client
	paused atomic.Bool

	mu      sync.Mutex
	count   int64    // GUARDED_BY(mu); ckptfs_catalog_passes_total
	ends    []sample // GUARDED_BY(mu)
	audited float64  // GUARDED_BY(mu); ckptfs_catalog_audited_files_total
}

type sample struct {
	at       time.Time
	duration time.Duration
}

const scrapeEvery = 200 * time.Millisecond

// settleWrites is more than the catalog's settle (manifest's 2 s).
const settleWrites = 3 * time.Second

// quietWindow is how long the quiet CPU is measured: half the steady
// window, within 5 to 60 s.
func quietWindow(steady time.Duration) time.Duration {
	return min(max(steady/2, 5*time.Second), time.Minute)
}

// pause stops (or resumes) the scrapes.
func (s *scraper) pause(p bool) { s.paused.Store(p) }

func (s *scraper) run(ctx context.Context) {
	defer s.client.CloseIdleConnections()
	for {
		if !s.paused.Load() {
			s.scrape()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(scrapeEvery):
		}
	}
}

func (s *scraper) scrape() {
	resp, err := s.client.Get(s.url)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var passes int64 = -1
	var last, audited float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		if i := strings.LastIndexByte(line, ' '); i >= 0 {
			rest = line[i+1:]
		}
		switch name {
		case metrics.CatalogPasses:
			v, _ := strconv.ParseFloat(rest, 64)
			passes = int64(v)
		case metrics.CatalogLastPassDuration:
			last, _ = strconv.ParseFloat(rest, 64)
		case metrics.CatalogAudited:
			v, _ := strconv.ParseFloat(rest, 64)
			audited += v
		}
	}
	if passes < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audited = audited
	if passes > s.count {
		s.count = passes
		s.ends = append(s.ends, sample{at: time.Now(), duration: time.Duration(last * float64(time.Second))})
	}
}

func (s *scraper) passes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// auditedFiles is the daemon's count of files its audit stat'ed again.
func (s *scraper) auditedFiles() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.audited
}

func (s *scraper) waitPasses(ctx context.Context, n int64, within time.Duration) {
	deadline := time.Now().Add(within)
	for s.passes() < n && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *scraper) durationsBetween(from, to time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, e := range s.ends {
		if !e.at.Before(from) && !e.at.After(to) {
			out = append(out, e.duration)
		}
	}
	return out
}

// procSampler reads the daemon's CPU time and RSS from /proc.
type procSampler struct {
	pid int

	mu       sync.Mutex
	inWindow bool    // GUARDED_BY(mu)
	rss      []int64 // GUARDED_BY(mu); samples since startWindow
	hwm      int64   // GUARDED_BY(mu)
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// cpu is the process's user and system CPU time so far, in seconds.
func (s *procSampler) cpu() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: utime and stime are fields 14 and 15;
	// comm may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// status reads VmRSS and VmHWM, in bytes.
func (s *procSampler) status() (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

func (s *procSampler) run(ctx context.Context) {
	for {
		rss, hwm := s.status()
		s.mu.Lock()
		if rss > 0 && s.inWindow {
			s.rss = append(s.rss, rss)
		}
		s.hwm = max(s.hwm, hwm)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *procSampler) startWindow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inWindow = true
}

func (s *procSampler) windowRSS() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inWindow = false
	if len(s.rss) == 0 {
		return 0
	}
	var sum int64
	for _, v := range s.rss {
		sum += v
	}
	return sum / int64(len(s.rss))
}

func (s *procSampler) peak() int64 {
	_, hwm := s.status()
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.hwm, hwm)
}

// quantile is the q-quantile of ds (nearest rank), 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s" }

// table is the run's report, one line a figure.
func (r *result) table() string {
	var b strings.Builder
	p := r.p
	nas := fmt.Sprintf("faultfs, %v a NAS operation", p.Delay)
	if p.Local {
		nas = "the local disk (no faultfs)"
	}
	fmt.Fprintf(&b, "scale: %d jobs × %d files a checkpoint (%d files on disk, %d directories) on %s, a checkpoint per job every %v, steady window %v\n",
		p.Jobs, p.Files, r.files, r.dirs, nas, p.Interval, p.Duration)
	row := func(k, v string) { fmt.Fprintf(&b, "  %-44s %s\n", k, v) }
	row("start to mounted", seconds(r.mounted))
	row("start to every job's newest visible", seconds(r.allVisible))
	row("steady CPU (cores)", fmt.Sprintf("%.3f", r.cpu))
	row("steady CPU, quiet (cores): the writer alone", fmt.Sprintf("%.3f", r.quietCPU))
	row("RSS steady / peak", fmt.Sprintf("%.0f MB / %.0f MB (%.2f KB a file on disk)", float64(r.rssSteady)/1e6, float64(r.peak)/1e6, float64(r.peak)/1e3/float64(r.files)))
	row("pass time median / max (n)", fmt.Sprintf("%s / %s (%d)", seconds(quantile(r.passes, 0.5)), seconds(quantile(r.passes, 1)), len(r.passes)))
	row("new checkpoint visible p50 / p99 / max", fmt.Sprintf("%s / %s / %s (%d seen of %d written; %d subsumed before seen, %d not seen within the patience)", seconds(quantile(r.vis, 0.5)), seconds(quantile(r.vis, 0.99)), seconds(quantile(r.vis, 1)), len(r.vis), r.written, r.subsumed, r.unseen))
	row("deleted shared file hidden p50 / max", fmt.Sprintf("%s / %s (%d)", seconds(quantile(r.deleted, 0.5)), seconds(quantile(r.deleted, 1)), len(r.deleted)))
	row("truncated shared file hidden p50 / max", fmt.Sprintf("%s / %s (%d)", seconds(quantile(r.truncated, 0.5)), seconds(quantile(r.truncated, 1)), len(r.truncated)))
	row("put back, visible again max", seconds(quantile(r.reappeared, 1)))
	if p.Local {
		row("observer's cost", fmt.Sprintf("%d stats through the mount in %d sweeps (every %v, a sweep %v on average)", r.obsStats, r.obsSweeps, observeEvery, r.obsSweep.Round(time.Microsecond)))
		return b.String()
	}
	if r.steadyCounts == nil {
		row("NAS operations a steady pass (writer on)", "no pass ended in the window")
	} else {
		row("NAS operations a steady pass (writer on)", fmt.Sprintf("%.0f (over the window: %s)", r.steadyOps, r.steadyCounts))
	}
	row("NAS operations a pass, nothing new", fmt.Sprintf("%.0f (%.1f%% of the files on disk; the audit stat'ed %.0f files; over the passes: %s)", r.idleOps, 100*r.idleOps/float64(r.files), r.idleAudited, r.idleCounts))
	row("floor: the NAS's rate issued directly", fmt.Sprintf("%.0f operations/s (%d workers; %d operations measured)", r.floorRate, manifest.DefaultVerifierConfig().Workers, r.floorOps))
	if steady, idle, sr, ir := r.floors(); r.floorRate > 0 {
		row("steady pass: median / floor", fmt.Sprintf("%s / %s = %.2f", seconds(quantile(r.passes, 0.5)), seconds(steady), sr))
		row("pass with nothing new: median / floor", fmt.Sprintf("%s / %s = %.2f", seconds(quantile(r.idlePasses, 0.5)), seconds(idle), ir))
	}
	row("observer's cost", fmt.Sprintf("%d stats through the mount in %d sweeps (every %v, a sweep %v on average)", r.obsStats, r.obsSweeps, observeEvery, r.obsSweep.Round(time.Microsecond)))
	return b.String()
}
