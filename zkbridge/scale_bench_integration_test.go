//go:build linux

package zkbridge

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/wan"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// scaleEnv is issue 32's ZooKeeper at a platform's scale: a three-server
// ensemble with one server in each of three sites (dc1, dc2 and the
// tie-breaker dc3), network hosts of a WAN (integration/wan) whose links
// between sites carry a latency each way. Writes therefore cross the WAN
// (the leader and a quorum are never all in one site). The test process
// is the WAN's host outside the sites and its own links are not delayed:
// a client of the test stands in its site's machine when it talks to its
// site's server, and reaches dc3's server as from dc2 through a zktest
// proxy that adds the WAN's latency (far).
type scaleEnv struct {
	*env
	w      *wan.WAN
	c      *zktest.Cluster
	jobs   []string
	hidden []string
	proxy  *zktest.Proxy // before dc3's server, delayed like the WAN
	warns  *warnings
	lease  time.Duration
}

// The ensemble's servers by site.
const (
	zkDC1 = 0
	zkDC2 = 1
	zkDC3 = 2
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

// warnings counts the warnings and errors of every bridge of the
// benchmark and keeps the first few: 500 bridges' info lines would be
// much of its work.
type warnings struct {
	n     atomic.Int64
	mu    sync.Mutex
	first []string
}

func (w *warnings) Write(p []byte) (int, error) {
	w.n.Add(1)
	w.mu.Lock()
	if len(w.first) < 20 {
		w.first = append(w.first, strings.TrimSpace(string(p)))
	}
	w.mu.Unlock()
	return len(p), nil
}

func newScaleEnv(b *testing.B, jobs int) *scaleEnv {
	b.Helper()
	if os.Getenv("CKPTFS_ZK_SCALE") == "" {
		b.Skip("the ZooKeeper scale benchmark runs with CKPTFS_ZK_SCALE=1 (make bench-zk-scale)")
	}
	if os.Geteuid() != 0 {
		b.Fatal("the ZooKeeper scale benchmark needs root (a WAN of network namespaces)")
	}
	w := wan.New(b)
	hosts := []*wan.Host{wan.NewHost(b, w, "dc1"), wan.NewHost(b, w, "dc2"), wan.NewHost(b, w, "dc3")}
	c := zktest.StartCluster(b, 3, func(cfg *zktest.Config) {
		cfg.HeapMB = 512
		cfg.LogLevel = "WARN"
		// Every client of the test comes from one address; a real
		// site's daemons each from their own machine.
		cfg.Extra = map[string]string{"maxClientCnxns": "0"}
		// The harness's JVMs start fast (C1 only); a real server runs
		// C2, which the last flag wins back.
		cfg.JVMFlags = []string{"-XX:TieredStopAtLevel=4"}
		cfg.MaxSessionTimeout = 20 * time.Second
		cfg.Place = func(i int) zktest.Host {
			h := hosts[i]
			return zktest.Host{Addr: h.Addr, Enter: append([]string{"nsenter"}, h.Enter()...)}
		}
	})
	s := &scaleEnv{env: newEnv(b, c), w: w, c: c, warns: &warnings{}, lease: envDuration("CKPTFS_ZK_SCALE_LEASE", 4*time.Second)}
	start := time.Now()
	s.jobs, s.hidden = layoutJobs(b, s.env, jobs)
	b.Logf("%d jobs x 3 pointers written in %v", jobs, time.Since(start).Round(time.Millisecond))
	s.proxy = zktest.NewProxy(b, c.Servers(zkDC3)[0])
	b.Cleanup(func() {
		if n := s.warns.n.Load(); n > 0 {
			b.Logf("%d warnings of the bridges, the first: %s", n, strings.Join(s.warns.first, "\n"))
		}
	})
	return s
}

// setLatency puts lat between the sites (each way) and on the proxy to
// dc3's server.
func (s *scaleEnv) setLatency(lat time.Duration) {
	s.w.SetLatency(lat)
	s.proxy.SetLatency(lat)
}

// site returns a bridge of site connected to the given server of its own
// site (no delay) or, with far, to dc3's through the delayed proxy.
func (s *scaleEnv) site(b *testing.B, site string, server int, far bool, modify ...func(*Config)) *Bridge {
	b.Helper()
	return s.bridge(site, append([]func(*Config){func(cfg *Config) {
		cfg.ClusterID = "default"
		cfg.Servers = s.c.Servers(server)
		if far {
			cfg.Servers = []string{s.proxy.Addr()}
		}
		cfg.SessionTimeout = 10 * time.Second
		cfg.LeaseDuration = s.lease
		cfg.LockWait = time.Minute
		cfg.Logger = slog.New(slog.NewTextHandler(s.warns, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}}, modify...)...)
}

// activate makes site br's the active one, holding the lease at a new
// epoch, by a takeover while it holds every file (not timed; at no
// latency).
func (s *scaleEnv) activate(b *testing.B, br *Bridge) {
	b.Helper()
	showFiles(b, s.hidden)
	defer hideFiles(b, s.hidden)
	rep, err := br.Takeover(context.Background(), TakeoverOptions{})
	if err != nil || !rep.Activated && !rep.AlreadyActive {
		b.Fatalf("%s's takeover: %v %+v", br.cfg.Site, err, rep)
	}
	for _, j := range rep.Jobs {
		if len(j.Retracted) != 0 {
			b.Fatalf("%s's takeover retracted %v of job %s", br.cfg.Site, j.Retracted, j.JobID)
		}
	}
}

// restore puts back what a takeover of br's site retracted (not timed).
func (s *scaleEnv) restore(b *testing.B, br *Bridge) {
	b.Helper()
	rep, err := br.RestorePruned(context.Background(), RestoreOptions{Unverified: true})
	if err != nil {
		b.Fatalf("restore-pruned: %v", err)
	}
	n := 0
	for _, j := range rep.Jobs {
		n += len(j.Restored)
	}
	if n != len(s.jobs) {
		b.Fatalf("restore-pruned put back %d pointers, want %d", n, len(s.jobs))
	}
}

// holders runs n daemons of site (lease holders, no markers) until the
// returned stop, which returns the start of their last renewal that
// counted.
func (s *scaleEnv) holders(b *testing.B, site string, server, n int) (stop func() time.Time) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ds []*simDaemon
	for range n {
		d := newSimDaemon(b, s.site(b, site, server, false), nil)
		ds = append(ds, d)
		wg.Go(func() { d.run(ctx) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() }) // when the benchmark fails first
	waitFor(b, 30*time.Second, site+"'s daemons renew", func() (bool, error) {
		for _, d := range ds {
			if !d.firstHeld.Load() {
				return false, nil
			}
		}
		return true, nil
	})
	return func() time.Time {
		cancel()
		wg.Wait()
		var last time.Time
		for _, d := range ds {
			if r := d.h.LastRenewal(); r.After(last) {
				last = r
			}
		}
		return last
	}
}

// autoTakeover is the automatic takeover as a daemon of a standby site
// with takeover: auto runs it (daemon/loop.go, design §5.11): a pass
// every min(1 s, D/16) and at the instant the lease would expire reads
// the state and observes the lease; once it expired, no JobManager of
// another site leads (Liveness) and another site is active, it takes
// over with the pass's guard. It returns when its pass decided, and the
// report.
func autoTakeover(ctx context.Context, br *Bridge) (decided time.Time, rep *TakeoverReport, err error) {
	rule := LeaseRule{Duration: br.cfg.LeaseDuration}
	obs, err := NewLeaseObserver(rule)
	if err != nil {
		return decided, nil, err
	}
	interval := min(time.Second, rule.Duration/16)
	for {
		next := interval
		st, err := br.ReadState(ctx)
		if err == nil && st.ActiveSite != br.cfg.Site && !st.Holds(br.cfg.Site) {
			v := obs.See(st)
			switch {
			case v.State == LeaseExpired:
				live, err := br.Liveness(ctx)
				if err != nil {
					return decided, nil, err
				}
				if !live.Alive {
					decided = time.Now()
					g, _ := v.Guard()
					rep, err := br.Takeover(ctx, TakeoverOptions{Wait: rule.Duration, Lease: &g, Journal: "the benchmark's automatic takeover"})
					return decided, rep, err
				}
			case v.State == LeaseFresh && v.ExpiresIn > 0:
				next = min(next, time.Duration(v.ExpiresIn))
			}
		}
		select {
		case <-ctx.Done():
			return decided, nil, ctx.Err()
		case <-time.After(next):
		}
	}
}

// markerBytes sums the data of every marker of a site.
func markerBytes(b *testing.B, conn *zk.Conn, dir string) (n int, bytes int64) {
	b.Helper()
	names, _, err := conn.Children(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range names {
		_, st, err := conn.Exists(dir + "/" + name)
		if err != nil {
			b.Fatal(err)
		}
		bytes += int64(st.DataLength)
	}
	return len(names), bytes
}

// BenchmarkIntegration_ZKScale (make bench-zk-scale): issue 32's
// ZooKeeper at scale. On a three-server ensemble, one server per site,
// with latency=10ms and 40ms each way between sites (20 and 80 ms round
// trips), over CKPTFS_ZK_SCALE_JOBS (500) jobs of three pointers each
// (Flink 1.20's layout, the newest checkpoint of each incomplete here):
//
//   - status: ckptfs status's Bridge.Status from dc2, given dc2's server
//     (zk=dc2) or dc3's only (zk=dc3: every request crosses the WAN);
//   - takeover: a manual takeover of dc2 after dc1 stopped renewing,
//     zk=dc2 and zk=dc3: the whole call, and its work without the waits
//     for the lease (D) and JobManagers;
//   - auto: dc1's daemons renew and stop at once (the site is lost); a
//     daemon of dc2 with takeover: auto observes the lease expire and
//     takes over: from dc1's last renewal to the activation, and the
//     takeover alone;
//   - markers: dc2's Publisher creates every job's marker, raises them
//     all, and passes with nothing to change: time and bytes;
//   - daemons (latency=40ms only): CKPTFS_ZK_SCALE_DAEMONS (500) daemons
//     of dc2, each a bridge with its own session on dc2's server, renew
//     the lease for CKPTFS_ZK_SCALE_RUN (3m), one of them holding the
//     site's duty (every job's marker, the sweeper, the lag's status),
//     while every job completes a checkpoint every
//     CKPTFS_ZK_SCALE_CHECKPOINT (1m): spurious fences, the requests
//     the ensemble received (mntr) per daemon and in all; then the same
//     requests' mix as fast as the ensemble serves it (the ceiling).
//
// The lease duration is CKPTFS_ZK_SCALE_LEASE (4s, the default is 20s:
// an automatic takeover's end to end is D plus what is measured past it).
func BenchmarkIntegration_ZKScale(b *testing.B) {
	jobs := envInt("CKPTFS_ZK_SCALE_JOBS", 500)
	s := newScaleEnv(b, jobs)
	dc1 := s.site(b, "dc1", zkDC1, false)
	dc2 := s.site(b, "dc2", zkDC2, false)
	dc2far := s.site(b, "dc2", zkDC3, true)
	s.activate(b, dc1)
	for _, lat := range []time.Duration{10 * time.Millisecond, 40 * time.Millisecond} {
		l := fmt.Sprintf("latency=%dms", lat.Milliseconds())
		b.Run("status/"+l, func(b *testing.B) {
			s.setLatency(lat)
			defer s.setLatency(0)
			for _, c := range []struct {
				name string
				br   *Bridge
			}{{"zk=dc2", dc2}, {"zk=dc3", dc2far}} {
				reqs := countRequests(b, s.c)
				start := time.Now()
				rep, err := c.br.Status(context.Background())
				took := time.Since(start)
				n, _ := reqs.since()
				if err != nil || len(rep.Jobs) != jobs {
					b.Fatalf("status: %v", err)
				}
				b.ReportMetric(ms(took), "ms-"+c.name)
				b.ReportMetric(float64(n)/float64(jobs), "requests/job")
			}
		})
		b.Run("takeover/"+l, func(b *testing.B) {
			for _, c := range []struct {
				name string
				br   *Bridge
			}{{"zk=dc2", dc2}, {"zk=dc3", dc2far}} {
				s.setLatency(lat)
				reqs := countRequests(b, s.c)
				rep, took, work := timedTakeover(b, c.br, TakeoverOptions{})
				n, _ := reqs.since()
				s.setLatency(0)
				checkTakeover(b, rep, jobs)
				b.ReportMetric(ms(took), "ms-"+c.name)
				b.ReportMetric(ms(work), "ms-work-"+c.name)
				b.ReportMetric(float64(n)/float64(jobs), "requests/job")
				s.restore(b, dc2)
				s.activate(b, dc1)
			}
		})
		b.Run("auto/"+l, func(b *testing.B) {
			s.setLatency(lat)
			defer s.setLatency(0)
			stop := s.holders(b, "dc1", zkDC1, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			type result struct {
				decided time.Time
				rep     *TakeoverReport
				err     error
				at      time.Time
			}
			done := make(chan result, 1)
			go func() {
				d, rep, err := autoTakeover(ctx, dc2)
				done <- result{d, rep, err, time.Now()}
			}()
			time.Sleep(2 * s.lease)
			lost := stop()
			r := <-done
			if r.err != nil {
				b.Fatalf("automatic takeover: %v", r.err)
			}
			checkTakeover(b, r.rep, jobs)
			b.ReportMetric(ms(r.at.Sub(lost)), "ms-end-to-end")
			b.ReportMetric(ms(r.decided.Sub(lost)), "ms-to-decision")
			b.ReportMetric(ms(r.at.Sub(r.decided)), "ms-takeover")
			s.setLatency(0)
			s.restore(b, dc2)
			s.activate(b, dc1)
		})
		b.Run("markers/"+l, func(b *testing.B) {
			s.setLatency(lat)
			defer s.setLatency(0)
			// A site of its own per latency: its markers start absent.
			site := fmt.Sprintf("m%d", lat.Milliseconds())
			src := siteSource(s.jobs)
			pub, err := s.site(b, site, zkDC2, false).NewPublisher(src)
			if err != nil {
				b.Fatal(err)
			}
			obs := zktest.Connect(b, s.c.Servers(zkDC2))
			dir := s.ckptfs + "/default/sites/" + site + "/jobs"
			ctx := context.Background()
			pass := func(what string, change func()) {
				if change != nil {
					change()
				}
				before := pub.Stats().Writes
				reqs := countRequests(b, s.c)
				start := time.Now()
				if err := pub.Sync(ctx); err != nil {
					b.Fatalf("marker pass (%s): %v", what, err)
				}
				took := time.Since(start)
				n, _ := reqs.since()
				b.ReportMetric(ms(took), "ms-"+what)
				b.ReportMetric(float64(pub.Stats().Writes-before), "writes-"+what)
				b.ReportMetric(float64(n)/float64(jobs), "requests/job-"+what)
			}
			pass("create", nil)
			count, bytes := markerBytes(b, obs.Conn, dir)
			if count != jobs {
				b.Fatalf("%d markers, want %d", count, jobs)
			}
			b.ReportMetric(float64(bytes), "bytes-markers")
			pass("raise", func() {
				for _, job := range s.jobs {
					src.set(job, 3, manifest.L3)
				}
			})
			pass("unchanged", nil)
		})
	}
	// What else a daemon of the active site asks of ZooKeeper: its
	// sweeper's pass (every FollowInterval, 1 s by default) and, with
	// metrics, its lag's status (every lag-interval, 10 s). Too much to
	// run 500 of at once here: one of each, counted.
	b.Run("sweeper/latency=40ms", func(b *testing.B) {
		s.setLatency(40 * time.Millisecond)
		defer s.setLatency(0)
		s.activate(b, dc2)
		sw, err := dc2.NewSweeper(time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		reqs := countRequests(b, s.c)
		start := time.Now()
		if _, err := sw.Pass(context.Background()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		n, _ := reqs.since()
		b.ReportMetric(ms(took), "ms-pass")
		b.ReportMetric(float64(n), "requests-pass")
		b.ReportMetric(float64(n)/float64(jobs), "requests/job")
		reqs = countRequests(b, s.c)
		if _, err := dc2.Status(context.Background()); err != nil {
			b.Fatal(err)
		}
		n, _ = reqs.since()
		b.ReportMetric(float64(n), "requests-status")
	})
	b.Run("daemons/latency=40ms", func(b *testing.B) {
		s.setLatency(40 * time.Millisecond)
		defer s.setLatency(0)
		s.daemons(b, dc2)
	})
}

// daemons runs the site's daemons (see BenchmarkIntegration_ZKScale).
func (s *scaleEnv) daemons(b *testing.B, dc2 *Bridge) {
	n := envInt("CKPTFS_ZK_SCALE_DAEMONS", 500)
	run := envDuration("CKPTFS_ZK_SCALE_RUN", 3*time.Minute)
	every := envDuration("CKPTFS_ZK_SCALE_CHECKPOINT", time.Minute)
	// dc2 active, holding the lease.
	s.activate(b, dc2)
	src := siteSource(s.jobs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	ds := make([]*simDaemon, n)
	start := time.Now()
	// The daemons run with the default lease duration (20 s: a pass
	// every second, a renewal every 2.5 s), not the short one of the
	// takeovers above, so that their rate is a real site's. One of them
	// holds the site's duty and runs the site's work: the markers, the
	// sweeper (a pass every 15 s with Flink's default session timeout)
	// and the lag's status (every 10 s).
	def := func(cfg *Config) { cfg.LeaseDuration = DefaultConfig().LeaseDuration }
	for i := range n {
		ds[i] = newSimDaemon(b, s.site(b, "dc2", zkDC2, false, def), src)
		wg.Go(func() { ds[i].run(ctx) })
	}
	b.Logf("%d daemons connected in %v", n, time.Since(start).Round(time.Millisecond))
	// Every job completes a checkpoint every `every`; every daemon's
	// catalog sees it (the site's one NAS) and triggers its publisher.
	var completed atomic.Int64
	wg.Go(func() {
		next := map[string]int64{}
		for _, job := range s.jobs {
			next[job] = 3
		}
		tick := every / time.Duration(len(s.jobs))
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(tick):
			}
			job := s.jobs[rand.N(len(s.jobs))]
			src.set(job, next[job], manifest.L3)
			next[job]++
			completed.Add(1)
			for _, d := range ds {
				d.pub.Trigger()
			}
		}
	})
	// The first full passes of every publisher, then the steady state.
	warm := envDuration("CKPTFS_ZK_SCALE_WARM", 45*time.Second)
	time.Sleep(warm)
	reqs := countRequests(b, s.c)
	before := make([]PublisherStats, n)
	for i, d := range ds {
		before[i] = d.pub.Stats()
	}
	time.Sleep(run)
	total, window := reqs.since()
	var writes, conflicts, full, fast uint64
	for i, d := range ds {
		st := d.pub.Stats()
		writes += st.Writes - before[i].Writes
		conflicts += st.Conflicts - before[i].Conflicts
		full += st.FullPasses - before[i].FullPasses
		fast += st.FastPasses - before[i].FastPasses
	}
	stats := mntr(b, s.c, "zk_avg_latency", "zk_max_latency", "zk_num_alive_connections", "zk_outstanding_requests")
	held := 0
	for _, d := range ds {
		if d.duty.Held() {
			held++
		}
	}
	cancel()
	wg.Wait()
	var taken, working, sweeps, statuses int64
	for _, d := range ds {
		taken += int64(d.duty.Stats().Taken)
		if n := d.sw.Stats().Passes; n > 0 {
			working++
			sweeps += int64(n)
		}
		statuses += d.statuses.Load()
	}
	if held != 1 || taken != 1 || working != 1 {
		b.Errorf("the site's duty: held by %d daemons at the end, taken %d times, %d daemons swept: want 1 of each", held, taken, working)
	}
	b.Logf("the site's duty: held by %d, taken %d times; its holder: %d sweeper passes, %d statuses (the lag)", held, taken, sweeps, statuses)
	b.ReportMetric(float64(held), "duty-holders")
	var fences, renewals, renewFails, readFails, passes int64
	var worst time.Duration
	for _, d := range ds {
		fences += d.fences.Load()
		renewals += d.renewals.Load()
		renewFails += d.renewFails.Load()
		readFails += d.readFails.Load()
		passes += d.passes.Load()
		worst = max(worst, time.Duration(d.worst.Load()))
		if !d.firstHeld.Load() {
			b.Errorf("a daemon never held the lease")
		}
	}
	if fences > 0 {
		b.Errorf("%d spurious fences of %d daemons with ZooKeeper fine", fences, n)
	}
	rate := float64(total) / window.Seconds()
	b.Logf("%d daemons, %v: %d requests (%.0f/s, %.2f/s per daemon); passes %d, renewals %d (failed %d), failed reads %d, worst pass %v; markers: %d checkpoints completed, %d writes, %d conflicts, %d full and %d fast passes; mntr %v",
		n, window.Round(time.Second), total, rate, rate/float64(n), passes, renewals, renewFails, readFails, worst.Round(time.Millisecond),
		completed.Load(), writes, conflicts, full, fast, stats)
	b.ReportMetric(float64(fences), "spurious-fences")
	b.ReportMetric(rate, "requests/s")
	b.ReportMetric(rate/float64(n), "requests/s/daemon")
	b.ReportMetric(float64(renewFails), "failed-renewals")
	b.ReportMetric(ms(worst), "ms-worst-pass")
	b.ReportMetric(float64(conflicts)/window.Seconds(), "marker-conflicts/s")

	// The ceiling: the same mix (per daemon and second: a pass's three
	// reads, its share of renewals and marker reads and writes) from
	// many clients as fast as the ensemble serves it.
	ceil := s.ceiling(b, envDuration("CKPTFS_ZK_SCALE_CEILING", 20*time.Second))
	b.ReportMetric(ceil, "ceiling-requests/s")
	b.ReportMetric(ceil/rate, "headroom")
	b.Logf("ceiling %.0f requests/s, headroom x%.1f", ceil, ceil/rate)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ceiling loads the ensemble with the daemons' mix for d, as fast as it
// serves it: 32 clients (sessions) with 32 requests' loops each, every
// loop a pass's three reads of the state (ReadState), a marker read,
// and every eighth a renewal (a multi) and every twentieth a marker
// write (a set): about ten reads to one write, as the daemons' steady
// state (passes, full marker passes, renewals and the markers a
// completed checkpoint changes). It returns the requests the ensemble
// received per second.
func (s *scaleEnv) ceiling(b *testing.B, d time.Duration) float64 {
	var brs []*Bridge
	var hs []*LeaseHolder
	for range 32 {
		br := s.site(b, "dc2", zkDC2, false)
		h, err := br.NewLeaseHolder(LeaseRule{Duration: DefaultConfig().LeaseDuration})
		if err != nil {
			b.Fatal(err)
		}
		brs, hs = append(brs, br), append(hs, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	reqs := countRequests(b, s.c)
	var wg sync.WaitGroup
	for i, br := range brs {
		for k := range 32 {
			wg.Go(func() {
				marker := s.ckptfs + "/default/sites/dc2/jobs/" + s.jobs[(i*32+k)%len(s.jobs)]
				for n := k; ctx.Err() == nil; n++ {
					st, err := br.ReadState(ctx)
					if err != nil {
						continue
					}
					if n%8 == 0 {
						hs[i].Renew(ctx, st)
					}
					data, _, err := br.zk.get(ctx, marker)
					if err == nil && n%20 == 0 {
						br.zk.set(ctx, marker, data, -1)
					}
				}
			})
		}
	}
	wg.Wait()
	n, took := reqs.since()
	return float64(n) / took.Seconds()
}
