package zkbridge

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// This file holds the ZooKeeper side of issue 32 at a platform's scale:
// hundreds of jobs, hundreds of daemons per site. TestIntegration_Scale
// is the short form make test runs; BenchmarkIntegration_ZKScale (make
// bench-zk-scale) the full one, on sites apart (integration/wan).

// layoutJobs writes n jobs of Flink 1.20 with three completed
// checkpoints each through an emulated JobManager, hides a state file of
// every job's newest checkpoint (this site holds it only in part, so a
// takeover retracts one pointer per job and keeps two), and closes the
// JobManager: no JobManager is alive when it returns. hidden are the
// hidden files (showFiles, hideFiles).
func layoutJobs(t testing.TB, e *env, n int) (jobs, hidden []string) {
	t.Helper()
	cfg := e.jmConfig(flinkemu.Flink1_20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start JobManager: %v", err)
	}
	defer jm.Close()
	for range n {
		job := flinkemu.NewJobID()
		jobs = append(jobs, job)
		if err := jm.SubmitJob(job); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{4096, 4096}}); err != nil {
				t.Fatal(err)
			}
		}
		hidden = append(hidden, jm.Checkpoints(job)[2].StateFiles[0])
	}
	hideFiles(t, hidden)
	return jobs, hidden
}

// hideFiles moves files away (hideFile); showFiles brings them back.
func hideFiles(t testing.TB, paths []string) {
	t.Helper()
	for _, p := range paths {
		hideFile(t, p)
	}
}

func showFiles(t testing.TB, paths []string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Rename(p+".away", p); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTakeover fails unless every job of rep kept [1 2] and retracted
// [3], and the site was activated.
func checkTakeover(t testing.TB, rep *TakeoverReport, n int) {
	t.Helper()
	if !rep.Activated || len(rep.Jobs) != n {
		t.Fatalf("takeover: activated %v, %d jobs of %d: %s", rep.Activated, len(rep.Jobs), n, rep.Decision)
	}
	for _, j := range rep.Jobs {
		if !slices.Equal(j.Retracted, []int64{3}) || !slices.Equal(j.Kept, []int64{1, 2}) {
			t.Fatalf("job %s: kept %v retracted %v (%s)", j.JobID, j.Kept, j.Retracted, j.Reason)
		}
	}
}

// undoTakeover puts the retracted pointers back and names another site
// active, so that the next takeover has the same work (not timed). The
// kept pointers' backups stay: a takeover that finds them reads them and
// writes none, as on a site taken over before.
func undoTakeover(t testing.TB, e *env, br *Bridge, other string) {
	t.Helper()
	ctx := context.Background()
	if _, err := br.RestorePruned(ctx, RestoreOptions{Unverified: true}); err != nil {
		t.Fatal(err)
	}
	c := zktest.Connect(t, e.servers)
	defer c.Close()
	if _, err := c.Set(e.ckptfs+"/default/active-site", []byte(other), -1); err != nil {
		t.Fatal(err)
	}
}

// simDaemon makes the ZooKeeper calls of one mount daemon of a site
// (daemon/loop.go), without its mount: a pass every min(1 s, D/16),
// bounded by it, reads the epoch, active-site and the lease
// (Bridge.ReadState) and renews the lease when due (LeaseHolder.Renew,
// DecideRenew's rule). With a source it also looks at its site's duty
// (Duty), and while it holds it runs the site's work as the daemon's
// connect does: a Publisher of the site's markers of every job of its
// source, a Sweeper every second (Run paces it) and the lag's status
// every lagEvery. It counts its fences: a pass that finds its write
// deadline passed while it held the lease.
type simDaemon struct {
	b    *Bridge
	h    *LeaseHolder
	pub  *Publisher
	sw   *Sweeper
	duty *Duty

	statuses, statusFails atomic.Int64

	passes, renewals, renewFails, readFails atomic.Int64
	// fences counts the times the deadline passed while claimed;
	// firstHeld is set once a renewal counted.
	fences    atomic.Int64
	firstHeld atomic.Bool
	// worst is the longest pass, in nanoseconds.
	worst atomic.Int64
}

func newSimDaemon(t testing.TB, b *Bridge, src MarkerSource) *simDaemon {
	t.Helper()
	h, err := b.NewLeaseHolder(LeaseRule{Duration: b.cfg.LeaseDuration})
	if err != nil {
		t.Fatal(err)
	}
	d := &simDaemon{b: b, h: h}
	if src != nil {
		if d.pub, err = b.NewPublisher(src); err != nil {
			t.Fatal(err)
		}
		if d.sw, err = b.NewSweeper(b.cfg.FlinkSessionTimeout); err != nil {
			t.Fatal(err)
		}
		if d.duty, err = b.NewDuty(); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// lagEvery is the daemon's default --lag-interval.
const lagEvery = 10 * time.Second

// siteWork is what the duty's holder runs (daemon/loop.go's connect).
func (d *simDaemon) siteWork(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { d.pub.Run(ctx) })
	wg.Go(func() { d.sw.Run(ctx, time.Second) })
	wg.Go(func() {
		for {
			if _, err := d.b.Status(ctx); err != nil && ctx.Err() == nil {
				d.statusFails.Add(1)
			} else if err == nil {
				d.statuses.Add(1)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(lagEvery):
			}
		}
	})
	wg.Wait()
}

// run makes passes until ctx ends; the publisher runs beside them.
func (d *simDaemon) run(ctx context.Context) {
	interval := min(time.Second, d.b.cfg.LeaseDuration/16)
	var wg sync.WaitGroup
	if d.duty != nil {
		wg.Go(func() { d.duty.Run(ctx, d.siteWork) })
	}
	defer wg.Wait()
	// Daemons of a site start at different instants.
	t := time.NewTimer(time.Duration(time.Now().UnixNano() % int64(interval)))
	defer t.Stop()
	claimed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		d.pass(ctx, interval, &claimed)
		took := time.Since(start)
		if int64(took) > d.worst.Load() {
			d.worst.Store(int64(took))
		}
		t.Reset(interval) // as the loop: the next pass an interval after this one ended
	}
}

func (d *simDaemon) pass(ctx context.Context, interval time.Duration, claimed *bool) {
	d.passes.Add(1)
	pctx, cancel := context.WithTimeout(ctx, interval)
	defer cancel()
	st, err := d.b.ReadState(pctx)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		d.readFails.Add(1)
	case d.h.Due(time.Now()) && st.Holds(d.b.cfg.Site):
		if err := d.h.Renew(pctx, st); err != nil {
			d.renewFails.Add(1)
		} else {
			d.renewals.Add(1)
			d.firstHeld.Store(true)
		}
	case !st.Holds(d.b.cfg.Site):
		d.h.End()
	}
	// The mount's rule (design §5.14): it writes until the deadline.
	dl := d.h.Deadline()
	switch {
	case !dl.IsZero() && time.Now().Before(dl):
		*claimed = true
	case *claimed:
		*claimed = false
		d.fences.Add(1)
	}
}

// manySources is the same truth for every daemon of a site: each mount
// of a site sees the same NAS, so every daemon's catalog knows every
// job.
func siteSource(jobs []string) *fakeSource {
	src := newFakeSource()
	for _, job := range jobs {
		src.set(job, 2, manifest.L3)
	}
	return src
}

// mntr sums a numeric key of mntr over the ensemble's running servers.
func mntr(t testing.TB, c *zktest.Cluster, keys ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for i := range c.Size() {
		if !c.Running(i) {
			continue
		}
		s, err := c.FourLetterWord(i, "mntr")
		if err != nil {
			t.Fatalf("mntr of server %d: %v", i, err)
		}
		sc := bufio.NewScanner(strings.NewReader(s))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), "\t")
			if !ok || !slices.Contains(keys, k) {
				continue
			}
			if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				out[k] += int64(n)
			}
		}
	}
	return out
}

// requestCounter counts the requests the ensemble received (mntr's
// zk_packets_received, pings included) between mark and since.
type requestCounter struct {
	t     testing.TB
	c     *zktest.Cluster
	start int64
	at    time.Time
}

func countRequests(t testing.TB, c *zktest.Cluster) *requestCounter {
	r := &requestCounter{t: t, c: c}
	r.mark()
	return r
}

func (r *requestCounter) mark() {
	r.start, r.at = mntr(r.t, r.c, "zk_packets_received")["zk_packets_received"], time.Now()
}

// since returns the requests since mark and the time they took.
func (r *requestCounter) since() (int64, time.Duration) {
	n := mntr(r.t, r.c, "zk_packets_received")["zk_packets_received"]
	return n - r.start, time.Since(r.at)
}

// timedTakeover runs a takeover and returns its report and how long it
// took without its waits (for JobManagers and the lease): the work that
// grows with the jobs.
func timedTakeover(t testing.TB, br *Bridge, opts TakeoverOptions) (*TakeoverReport, time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	rep, err := br.Takeover(context.Background(), opts)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	return rep, took, took - time.Duration(rep.Waited)
}

// TestIntegration_Scale is the short form of issue 32's ZooKeeper
// benchmark (BenchmarkIntegration_ZKScale): 50 jobs and 20 daemons, a
// client 10 ms one way from its server (a proxy). It fails when the
// takeover's or status's round trips grow with the jobs one after
// another again (their time past a bound of a few round trips per
// parallel wave, far below one round trip per job), when a marker pass
// writes more than one znode per job, or when a daemon in steady state
// fences or sends more than its share of requests.
func TestIntegration_Scale(t *testing.T) {
	const (
		jobs    = 50
		daemons = 20
		oneWay  = 10 * time.Millisecond
		rtt     = 2 * oneWay
	)
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.Extra = map[string]string{"maxClientCnxns": "0"}
	})
	e := newEnv(t, c)
	ids, _ := layoutJobs(t, e, jobs)
	p := zktest.NewProxy(t, c.Servers()[0])
	p.SetLatency(oneWay)
	far := func(cfg *Config) { cfg.Servers = []string{p.Addr()}; cfg.ClusterID = "default" }

	// Status: reads only; every job's pointers, HA files and markers.
	br := e.bridge("dc2", far)
	start := time.Now()
	st, err := br.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	statusTook := time.Since(start)
	if len(st.Jobs) != jobs {
		t.Fatalf("status: %d jobs", len(st.Jobs))
	}

	// The first takeover also backs up the kept pointers; the second
	// finds them (the steady case of a site taken over before).
	rep, took, work := timedTakeover(t, br, TakeoverOptions{})
	checkTakeover(t, rep, jobs)
	undoTakeover(t, e, br, "dc1")
	rep2, took2, work2 := timedTakeover(t, br, TakeoverOptions{})
	checkTakeover(t, rep2, jobs)
	t.Logf("%d jobs, %v round trip: status %v; takeover %v (work %v), again %v (work %v)", jobs, rtt, statusTook, took, work, took2, work2)
	// One job's takeover is about 20 round trips one after another;
	// run one job after another that is 20 per job (20 s here). Jobs in
	// parallel waves of parallelJobs take a few waves' worth: the bound
	// is 4 round trips per job, a fifth of the serial cost.
	bound := time.Duration(jobs) * 4 * rtt
	for _, w := range []time.Duration{work, work2} {
		if w > bound {
			t.Errorf("takeover of %d jobs took %v besides its waits, over %v (4 round trips per job): its round trips are serial again", jobs, w, bound)
		}
	}
	if statusTook > time.Duration(jobs)*2*rtt {
		t.Errorf("status of %d jobs took %v, over %v (2 round trips per job): its round trips are serial again", jobs, statusTook, time.Duration(jobs)*2*rtt)
	}

	// A marker pass of a site that has none writes one znode per job.
	pub, err := e.bridge("m", far).NewPublisher(siteSource(ids))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := pub.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := pub.Stats().Writes; w != jobs {
		t.Errorf("a marker pass of %d jobs wrote %d markers", jobs, w)
	}
	markerTook := time.Since(start)
	t.Logf("marker pass of %d jobs: %v", jobs, markerTook)
	if bound := time.Duration(jobs) * rtt; markerTook > bound {
		t.Errorf("a marker pass of %d jobs took %v, over %v (a round trip per job): its writes are serial again", jobs, markerTook, bound)
	}

	// The site's work, which one daemon of a site runs (its duty's
	// holder): a sweeper's pass and the lag's status, counted.
	reqs := countRequests(t, c)
	sw, err := br.NewSweeper(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	sweepReqs, _ := reqs.since()
	reqs.mark()
	if _, err := br.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	statusReqs, _ := reqs.since()

	// The daemons of the active site (dc2 now) in steady state: a lease
	// of 4 s (a pass every 250 ms, a renewal every 500 ms), 10 ms from
	// their server; one of them holds the site's duty and runs the
	// site's work: every job's marker, the sweeper, the lag.
	const lease = 4 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	src := siteSource(ids)
	ds := make([]*simDaemon, daemons)
	for i := range ds {
		ds[i] = newSimDaemon(t, e.bridge("dc2", far, func(cfg *Config) { cfg.LeaseDuration = lease }), src)
		wg.Go(func() { ds[i].run(ctx) })
	}
	time.Sleep(3 * time.Second) // the duty taken, the holder's first full pass
	reqs.mark()
	time.Sleep(3 * time.Second)
	// Five checkpoints complete; every daemon's catalog sees them.
	for _, job := range ids[:5] {
		src.set(job, 3, manifest.L3)
	}
	for _, d := range ds {
		d.pub.Trigger()
	}
	time.Sleep(3 * time.Second)
	n, window := reqs.since()
	var held int
	for _, d := range ds {
		if d.duty.Held() {
			held++
		}
	}
	cancel()
	wg.Wait()
	perDaemon := float64(n) / window.Seconds() / daemons
	// Each daemon: a pass's three reads, a renewal per D/8, a ping per
	// third of the session timeout. The site once: a sweeper's pass
	// every quarter of Flink's session timeout (Sweeper.Run), a status
	// every lagEvery. Half as much again for markers and slack.
	sweepEvery := max(time.Second, DefaultConfig().FlinkSessionTimeout/4)
	site := float64(sweepReqs)/sweepEvery.Seconds() + float64(statusReqs)/lagEvery.Seconds()
	want := 1.5 * (3/(lease/16).Seconds() + 8/lease.Seconds() + 1 + site/daemons)
	t.Logf("%d daemons: %.1f requests/s each (bound %.1f; the site's work %.0f requests/s: a sweeper's pass %d requests, a status %d)", daemons, perDaemon, want, site, sweepReqs, statusReqs)
	if perDaemon > want {
		t.Errorf("a daemon sends %.1f requests/s in steady state, over %.1f", perDaemon, want)
	}
	// One daemon holds the duty and publishes: the others' publishers
	// never pass, and no marker write meets another's.
	var taken, passed, working int
	var writes, conflicts uint64
	for i, d := range ds {
		if f := d.fences.Load(); f > 0 || !d.firstHeld.Load() {
			t.Errorf("daemon %d: held the lease %v, fenced %d times with ZooKeeper fine (%d renewals failed, %d reads)", i, d.firstHeld.Load(), f, d.renewFails.Load(), d.readFails.Load())
		}
		st := d.pub.Stats()
		writes, conflicts = writes+st.Writes, conflicts+st.Conflicts
		if st.FullPasses > 0 {
			passed++
		}
		if d.statuses.Load() > 0 || d.sw.Stats().Passes > 0 {
			working++
		}
		taken += int(d.duty.Stats().Taken)
	}
	t.Logf("the site's duty: taken %d times, held by %d at the end; %d publishers passed, %d daemons swept or computed the lag; %d marker writes, %d conflicts", taken, held, passed, working, writes, conflicts)
	if held != 1 || taken != 1 || passed != 1 || working != 1 {
		t.Errorf("%d daemons held the site's duty at the end (taken %d times), %d publishers passed and %d daemons swept or computed the lag: want 1 of each (every daemon does the site's work again?)", held, taken, passed, working)
	}
	if conflicts > 0 || writes != jobs+5 {
		t.Errorf("%d markers created, then 5 changed: %d writes, %d compare-and-set conflicts (want %d and 0: one publisher a site)", jobs, writes, conflicts, jobs+5)
	}
}
