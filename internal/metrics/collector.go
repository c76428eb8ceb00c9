package metrics

import (
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Sources are what one mount daemon knows. Every field but Version may
// be zero: the metrics of an absent source are not exported.
type Sources struct {
	// Site labels every series (omitted when empty).
	Site    string
	Version string
	// Catalog is the verification catalog of the backing directory; Poll
	// its pass interval (health reports a catalog that stopped passing).
	Catalog *manifest.Catalog
	Poll    time.Duration
	// Mount is the FUSE mount.
	Mount *fusefs.Server
	// ZooKeeper is the daemon's ZooKeeper side (nil without --zk).
	ZooKeeper *ZooKeeper
	// Backing reports a backing directory that is no longer the one the
	// mount was pinned to (nil: not checked).
	Backing func() error
	// Probe reports a backing file system that does not answer the
	// daemon's probe in time, or fails it; ProbeDuration is how long the
	// last probe took (nil: not probed).
	Probe         func() error
	ProbeDuration func() time.Duration
}

// NewRegistry returns a registry with ckptfs's collector, Go's runtime
// metrics and the process's (memory, file descriptors, CPU).
func NewRegistry(src Sources) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	var r prometheus.Registerer = reg
	if src.Site != "" {
		r = prometheus.WrapRegistererWith(prometheus.Labels{labelSite: src.Site}, reg)
	}
	r.MustRegister(&collector{src: src})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// collector reads every source when scraped.
type collector struct {
	src Sources
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range Families {
		if !f.Textfile {
			ch <- desc(f.Name)
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc(name), prometheus.GaugeValue, v, labels...)
	}
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc(name), prometheus.CounterValue, float64(v), labels...)
	}
	gauge(BuildInfo, 1, c.src.Version, runtime.Version())
	var jobs []string
	if cat := c.src.Catalog; cat != nil {
		jobs = collectCatalog(cat, gauge, counter)
	}
	if c.src.ProbeDuration != nil {
		gauge(BackingProbeDuration, c.src.ProbeDuration().Seconds())
	}
	if srv := c.src.Mount; srv != nil {
		collectMount(ch, srv, jobs, gauge, counter)
	}
	if z := c.src.ZooKeeper; z != nil {
		collectZooKeeper(z, c.src.Site, gauge, counter)
	}
}

type (
	gaugeFunc   func(name string, v float64, labels ...string)
	counterFunc func(name string, v uint64, labels ...string)
)

// counterByValue exports a counter for every value of its family's
// label (Family.Values), at 0 for those counts lacks; a value counts has
// beyond them is exported too.
func counterByValue(counter counterFunc, name string, counts map[string]uint64) {
	values := family(name).Values
	for _, v := range values {
		counter(name, counts[v], v)
	}
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(values, v) {
			counter(name, counts[v], v)
		}
	}
}

// jobID is the label of a job directory: its last element, Flink's job
// id (the directory layout is <state.checkpoints.dir>/<job id>/chk-N).
func jobID(dir string) string { return filepath.Base(dir) }

// collectCatalog exports the catalog's metrics and returns the jobs it
// knows.
func collectCatalog(cat *manifest.Catalog, gauge gaugeFunc, counter counterFunc) []string {
	st := cat.Stats()
	counterByValue(counter, Verifications, map[string]uint64{"complete": st.Complete, "incomplete": st.Incomplete, "unknown": st.Unknown})
	counter(CatalogPasses, st.Passes)
	counterByValue(counter, CatalogAudited, map[string]uint64{"unchanged": st.Audited - st.AuditChanged, "changed": st.AuditChanged})
	counter(BackingTimeouts, st.BackingTimeouts)
	hung := 0.0
	if len(st.Hung) > 0 {
		hung = time.Since(st.Hung[0].Since).Seconds()
	}
	gauge(BackingHung, hung)
	counter(ChecksummedBytes, st.ChecksummedBytes, "verify")
	if st.Passes > 0 {
		gauge(CatalogLastPass, unixSeconds(st.LastPass))
		gauge(CatalogLastPassDuration, st.LastPassDuration.Seconds())
	}
	// Two job directories with one name (the same job under two roots)
	// are one series: the newest ids are the highest, counts add up.
	type jobStats struct{ newest, complete, incomplete int64 }
	byJob := map[string]*jobStats{}
	for _, j := range cat.Jobs() {
		id := jobID(j.Dir)
		s := byJob[id]
		if s == nil {
			s = &jobStats{newest: -1, complete: -1}
			byJob[id] = s
		}
		for _, v := range j.Checkpoints {
			s.newest = max(s.newest, v.CheckpointID)
			if v.Complete {
				s.complete = max(s.complete, v.CheckpointID)
			} else {
				s.incomplete++
			}
		}
	}
	for id, s := range byJob {
		gauge(SiteNewestCheckpoint, float64(s.newest), id)
		gauge(SiteNewestComplete, float64(s.complete), id)
		gauge(IncompleteCheckpoints, float64(s.incomplete), id)
	}
	return slices.Collect(maps.Keys(byJob))
}

// collectMount exports the mount's metrics; jobs are the catalog's, whose
// hidden accesses are exported from the start (at 0).
func collectMount(ch chan<- prometheus.Metric, srv *fusefs.Server, jobs []string, gauge gaugeFunc, counter counterFunc) {
	mode := srv.Mode()
	for _, m := range []fusefs.Mode{fusefs.ModeReplica, fusefs.ModePrimary, fusefs.ModeFenced} {
		gauge(MountMode, boolValue(m == mode), m.String())
	}
	st := srv.Stats()
	counter(FUSEReadOnlyRefusals, st.ReadOnlyRefusals)
	counter(DeadlineRefusals, st.DeadlineRefusals)
	counter(WritesAfterFence, st.WritesAfterFence)
	counterByValue(counter, GuardedDeletions, map[string]uint64{"refused": st.DeletionsRefused, "held": st.DeletionsHeld})
	counterByValue(counter, FUSEOpens, map[string]uint64{"passthrough": st.PassthroughOpens, "daemon": st.DaemonOpens})
	counter(ChecksummedBytes, st.ReadBackBytes, "seal")
	byJob := make(map[string]uint64, len(jobs))
	for _, id := range jobs {
		byJob[id] = 0
	}
	for dir, n := range srv.IncompleteLookups() {
		byJob[jobID(dir)] += n
	}
	for id, n := range byJob {
		counter(HiddenCheckpointAccesses, n, id)
	}
	bounds := fusefs.LatencyBuckets()
	for _, l := range srv.Latencies() {
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b.Seconds()] = l.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(desc(FUSERequestDuration), l.Count, l.Sum.Seconds(), buckets, l.Op)
	}
}

func collectZooKeeper(z *ZooKeeper, site string, gauge gaugeFunc, counter counterFunc) {
	s := z.Session()
	for _, st := range []zkbridge.SessionState{zkbridge.SessionConnected, zkbridge.SessionConnecting, zkbridge.SessionDisconnected, zkbridge.SessionClosed} {
		gauge(ZooKeeperSessionState, boolValue(s.State == st), string(st))
	}
	counter(ZooKeeperExpirations, s.Expirations)
	counter(ZooKeeperSessionLosses, s.Losses)
	if !s.Since.IsZero() {
		gauge(ZooKeeperStateSince, unixSeconds(s.Since))
	}
	if !s.LastRegained.IsZero() {
		gauge(ZooKeeperLastOutage, s.LastRegained.Sub(s.LastLost).Seconds())
	}
	if a, ok := z.ActiveSite(); ok {
		gauge(ActiveSiteEpoch, float64(a.Epoch))
		gauge(SiteActive, boolValue(site != "" && a.Site == site))
		gauge(ActiveSiteLastRead, unixSeconds(a.Read))
	}
	if z.Failover != nil {
		f := z.Failover()
		gauge(LeaseClaiming, boolValue(f.Claiming))
		counterByValue(counter, LeaseRenewals, map[string]uint64{"ok": f.Renewals, "failed": f.RenewalFailures})
		if f.WriteDeadline != nil {
			gauge(LeaseWriteDeadline, time.Until(*f.WriteDeadline).Seconds())
		}
		gauge(FenceOverrun, time.Duration(f.Overrun).Seconds())
		gauge(WatchdogArmed, boolValue(f.WatchdogArmed))
		gauge(WatchdogFiredPrevious, boolValue(f.PreviousWatchdog != nil))
		if f.Observed != nil {
			gauge(LeaseObservedUnchanged, time.Duration(f.Observed.Unchanged).Seconds(), f.Observed.Owner)
		}
		gauge(MountHolding, boolValue(f.Holding))
		counterByValue(counter, AutoTakeovers, f.Runs)
		for job, n := range f.Rollbacks {
			gauge(TakeoverRollback, float64(n), job)
		}
		gauge(SyncDegraded, boolValue(f.Sync.Degraded))
		counterByValue(counter, SyncCloses, map[string]uint64{"acknowledged": f.Sync.Acknowledged, "timeout": f.Sync.TimedOut, "failed": f.Sync.Failed})
		gauge(StandbyJobManagers, float64(len(f.StandbyJobManagers)))
	}
	// The publisher and the sweeper exist once the daemon connected;
	// their counters are 0 until then.
	var passes, actions, sweeps map[string]uint64
	if p := z.publisher.Load(); p != nil {
		st := p.Stats()
		passes = map[string]uint64{"full": st.FullPasses, "fast": st.FastPasses}
		actions = map[string]uint64{"write": st.Writes, "conflict": st.Conflicts, "refused": st.Refused, "failure": st.Failures}
	}
	if s := z.sweeper.Load(); s != nil {
		st := s.Stats()
		sweeps = map[string]uint64{"retract": st.Retracted, "failure": st.Failures, "skipped_locked": st.SkippedLocked, "left_no_complete": st.LeftNoComplete}
	}
	counterByValue(counter, ReconcilePasses, passes)
	counterByValue(counter, ReconcileActions, actions)
	counterByValue(counter, SweepActions, sweeps)
	if held, _, ok := z.Duty(); ok {
		gauge(SiteDuty, boolValue(held))
	}
	if z.Lag == nil {
		return
	}
	lag := z.Lag.Snapshot()
	counter(LagUpdateFailures, lag.Failures)
	if lag.Updated.IsZero() {
		return
	}
	gauge(LagLastUpdate, unixSeconds(lag.Updated))
	for _, j := range lag.Jobs {
		if j.Pointer == nil {
			continue
		}
		gauge(FlinkPointer, float64(*j.Pointer), j.JobID)
		complete := int64(-1)
		if j.CompletePointer != nil {
			complete = *j.CompletePointer
		}
		gauge(FlinkCompletePointer, float64(complete), j.JobID)
		if j.LagCheckpoints != nil {
			gauge(LagCheckpoints, float64(*j.LagCheckpoints), j.JobID)
		}
		if j.LagSeconds != nil {
			gauge(LagSeconds, *j.LagSeconds, j.JobID)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
