package metrics

import "github.com/prometheus/client_golang/prometheus"

// Family describes one exported metric family.
type Family struct {
	Name string
	// Type is "gauge", "counter" or "histogram".
	Type   string
	Labels []string
	// Values are every value of a counter's one label, when they are
	// known up front: each series is exported from the start, at 0, so
	// that increase() sees its first event (a series born at 1 shows no
	// increase). The label's values are owned here.
	Values []string
	Help   string
	// Textfile: written by takeover and restore-pruned for node_exporter's
	// textfile collector, not served by the daemon.
	Textfile bool
}

// Metric names.
const (
	BuildInfo                = "ckptfs_build_info"
	MountMode                = "ckptfs_mount_mode"
	SiteNewestCheckpoint     = "ckptfs_site_newest_checkpoint_id"
	SiteNewestComplete       = "ckptfs_site_newest_complete_checkpoint_id"
	IncompleteCheckpoints    = "ckptfs_incomplete_checkpoints"
	Verifications            = "ckptfs_verifications_total"
	CatalogPasses            = "ckptfs_catalog_passes_total"
	CatalogLastPass          = "ckptfs_catalog_last_pass_timestamp_seconds"
	CatalogLastPassDuration  = "ckptfs_catalog_last_pass_duration_seconds"
	CatalogAudited           = "ckptfs_catalog_audited_files_total"
	ChecksummedBytes         = "ckptfs_checksummed_bytes_total"
	BackingTimeouts          = "ckptfs_backing_timeouts_total"
	BackingHung              = "ckptfs_backing_hung_seconds"
	BackingProbeDuration     = "ckptfs_backing_probe_duration_seconds"
	HiddenCheckpointAccesses = "ckptfs_hidden_checkpoint_accesses_total"
	FUSERequestDuration      = "ckptfs_fuse_request_duration_seconds"
	FUSEReadOnlyRefusals     = "ckptfs_fuse_readonly_refusals_total"
	DeadlineRefusals         = "ckptfs_fence_deadline_refusals_total"
	WritesAfterFence         = "ckptfs_writes_after_fence_total"
	GuardedDeletions         = "ckptfs_guarded_deletions_total"
	FUSEOpens                = "ckptfs_fuse_opens_total"
	ZooKeeperSessionState    = "ckptfs_zookeeper_session_state"
	ZooKeeperExpirations     = "ckptfs_zookeeper_session_expirations_total"
	ZooKeeperSessionLosses   = "ckptfs_zookeeper_session_losses_total"
	ZooKeeperStateSince      = "ckptfs_zookeeper_session_state_since_timestamp_seconds"
	ZooKeeperLastOutage      = "ckptfs_zookeeper_last_outage_seconds"
	ActiveSiteLastRead       = "ckptfs_active_site_last_read_timestamp_seconds"
	ActiveSiteEpoch          = "ckptfs_active_site_epoch"
	SiteActive               = "ckptfs_site_active"
	SiteDuty                 = "ckptfs_site_duty"
	FlinkPointer             = "ckptfs_flink_pointer_checkpoint_id"
	FlinkCompletePointer     = "ckptfs_flink_complete_pointer_checkpoint_id"
	LagCheckpoints           = "ckptfs_checkpoint_lag_checkpoints"
	LagSeconds               = "ckptfs_checkpoint_lag_seconds"
	LagLastUpdate            = "ckptfs_lag_last_update_timestamp_seconds"
	LagUpdateFailures        = "ckptfs_lag_update_failures_total"
	ReconcilePasses          = "ckptfs_reconcile_passes_total"
	ReconcileActions         = "ckptfs_reconcile_actions_total"
	SweepActions             = "ckptfs_sweep_actions_total"
	TakeoverActions          = "ckptfs_takeover_actions_total"
	TakeoverLastRun          = "ckptfs_takeover_last_run_timestamp_seconds"
	TakeoverLastExitCode     = "ckptfs_takeover_last_exit_code"
	TakeoverRollback         = "ckptfs_takeover_rollback_checkpoints"
	SyncDegraded             = "ckptfs_sync_degraded"
	SyncCloses               = "ckptfs_sync_closes_total"
	LeaseClaiming            = "ckptfs_lease_claiming"
	LeaseRenewals            = "ckptfs_lease_renewals_total"
	LeaseObservedUnchanged   = "ckptfs_lease_observed_unchanged_seconds"
	LeaseWriteDeadline       = "ckptfs_lease_write_deadline_seconds"
	FenceOverrun             = "ckptfs_fence_overrun_seconds"
	WatchdogArmed            = "ckptfs_watchdog_armed"
	WatchdogFiredPrevious    = "ckptfs_watchdog_fired_previous"
	MountHolding             = "ckptfs_mount_holding"
	AutoTakeovers            = "ckptfs_auto_takeovers_total"
	StandbyJobManagers       = "ckptfs_standby_jobmanager_sessions"
)

// AutoTakeoverResults are the values of the result label of
// ckptfs_auto_takeovers_total.
var AutoTakeoverResults = []string{"activated", "refused", "jobmanager-alive", "lease-held", "lost-race", "failed"}

// Label names.
const (
	labelJob       = "job_id"
	labelSite      = "site"
	labelResult    = "result"
	labelAction    = "action"
	labelState     = "state"
	labelOp        = "op"
	labelMode      = "mode"
	labelKind      = "kind"
	labelVersion   = "version"
	labelGo        = "goversion"
	labelLeaseSite = "lease_site"
	labelPath      = "path"
	labelReader    = "reader"
)

// Families are every metric family ckptfs exports. Every daemon series
// also carries the label site when the daemon has a site name; so do the
// textfile series.
var Families = []Family{
	{Name: BuildInfo, Type: "gauge", Labels: []string{labelVersion, labelGo},
		Help: "Always 1; the labels say which ckptfs runs, built with which Go."},
	{Name: MountMode, Type: "gauge", Labels: []string{labelMode},
		Help: "1 for the mount's current mode (replica, primary or fenced), 0 for the others."},
	{Name: SiteNewestCheckpoint, Type: "gauge", Labels: []string{labelJob},
		Help: "The highest chk-N directory of the job on this site, complete or not."},
	{Name: SiteNewestComplete, Type: "gauge", Labels: []string{labelJob},
		Help: "The newest checkpoint of the job complete on this site (L1 or better), -1 when none is."},
	{Name: IncompleteCheckpoints, Type: "gauge", Labels: []string{labelJob},
		Help: "chk-N directories of the job that are not complete on this site (being written, being copied, or torn)."},
	{Name: Verifications, Type: "counter", Labels: []string{labelResult}, Values: []string{"complete", "incomplete", "unknown"},
		Help: "Checkpoint verifications by result: complete, incomplete, or unknown (an I/O error). Every pass verifies every checkpoint, incrementally."},
	{Name: BackingTimeouts, Type: "counter",
		Help: "Times a verification pass gave up waiting for the backing file system (a job directory or the search for them did not answer within the catalog's backing timeout); that job's checkpoints became unknown."},
	{Name: BackingHung, Type: "gauge",
		Help: "How long the oldest work on the backing file system that a verification pass gave up on has been waiting; 0 when none waits (the NAS answers)."},
	{Name: BackingProbeDuration, Type: "gauge",
		Help: "How long the daemon's last probe of the backing file system (a statfs) took, or how long the one in flight has waited if longer."},
	{Name: CatalogPasses, Type: "counter",
		Help: "Completed verification passes over the backing directory."},
	{Name: CatalogLastPass, Type: "gauge",
		Help: "When the last verification pass ended (Unix time)."},
	{Name: CatalogLastPassDuration, Type: "gauge",
		Help: "How long the last verification pass took."},
	{Name: CatalogAudited, Type: "counter", Labels: []string{labelResult}, Values: []string{"unchanged", "changed"},
		Help: "Files of complete checkpoints the passes stat'ed again to notice one truncated or replaced in place (design 3.6), by result: unchanged, or changed (no longer trusted: judged again)."},
	{Name: ChecksummedBytes, Type: "counter", Labels: []string{labelReader}, Values: []string{"seal", "verify"},
		Help: "Bytes read to take CRC-32C checksums: by the mount, reading back what its writers closed (seal), and by the verifier, checking sealed manifests (verify)."},
	{Name: HiddenCheckpointAccesses, Type: "counter", Labels: []string{labelJob},
		Help: "Lookups of chk-N directories refused because the checkpoint is not complete on this site: Flink asked for a checkpoint this site does not hold."},
	{Name: FUSERequestDuration, Type: "histogram", Labels: []string{labelOp},
		Help: "Time the daemon took to answer FUSE requests, by operation (reads served by FUSE passthrough never reach the daemon)."},
	{Name: FUSEReadOnlyRefusals, Type: "counter",
		Help: "Changes refused with EROFS (replica or fenced mount)."},
	{Name: DeadlineRefusals, Type: "counter",
		Help: "Changes the mount refused because its write deadline had passed before the daemon fenced it (the daemon was late: stopped, frozen or starved; design 5.14)."},
	{Name: WritesAfterFence, Type: "counter",
		Help: "Changes admitted before a fence that came back from the backing file system after the fence stopped waiting for them (a hung NAS answered late). Should stay 0."},
	{Name: GuardedDeletions, Type: "counter", Labels: []string{labelAction}, Values: []string{"refused", "held"},
		Help: "Deletions of the newest complete checkpoint of a job after a promotion that the deletion guard refused or held (action): Flink deleting what the failover restored, a job that reached FAILED."},
	{Name: FUSEOpens, Type: "counter", Labels: []string{labelPath}, Values: []string{"passthrough", "daemon"},
		Help: "File opens by data path: passthrough (the kernel reads the backing file) or daemon."},
	{Name: ZooKeeperSessionState, Type: "gauge", Labels: []string{labelState},
		Help: "1 for the current state of the daemon's ZooKeeper session (connected, connecting, disconnected, closed), 0 for the others."},
	{Name: ZooKeeperExpirations, Type: "counter",
		Help: "ZooKeeper sessions of the daemon that the servers expired."},
	{Name: ZooKeeperSessionLosses, Type: "counter",
		Help: "Times the daemon lost its ZooKeeper session: its connection closed or no server answered (the session may have survived), or it expired."},
	{Name: ZooKeeperStateSince, Type: "gauge",
		Help: "When the daemon's ZooKeeper session was last established, or last lost (Unix time). Absent before the first session."},
	{Name: ZooKeeperLastOutage, Type: "gauge",
		Help: "How long the daemon's last ZooKeeper outage lasted, from losing its session to having one again. Absent until one ended."},
	{Name: ActiveSiteLastRead, Type: "gauge",
		Help: "When the daemon last read active-site and the epoch from ZooKeeper (Unix time)."},
	{Name: ActiveSiteEpoch, Type: "gauge",
		Help: "The epoch in ZooKeeper: how many takeovers activated a site."},
	{Name: SiteActive, Type: "gauge",
		Help: "1 when ZooKeeper names this site the active one, 0 otherwise."},
	{Name: SiteDuty, Type: "gauge",
		Help: "1 when this daemon holds its site's duty: it publishes the site's markers, sweeps stray pointers and computes the lag (design §5.5.3); 0 when another daemon of the site does or none."},
	{Name: FlinkPointer, Type: "gauge", Labels: []string{labelJob},
		Help: "The newest checkpoint pointer of the job in ZooKeeper: the checkpoint Flink would restore."},
	{Name: FlinkCompletePointer, Type: "gauge", Labels: []string{labelJob},
		Help: "The newest checkpoint pointer of the job that is complete on this site at L2 (restorable by failover), -1 when none is."},
	{Name: LagCheckpoints, Type: "gauge", Labels: []string{labelJob},
		Help: "How many checkpoints ZooKeeper's newest pointer is ahead of the newest pointer complete on this site. Absent while no pointer is complete here."},
	{Name: LagSeconds, Type: "gauge", Labels: []string{labelJob},
		Help: "How much older the newest pointer complete on this site is than ZooKeeper's newest pointer, from Flink's checkpoint timestamps: what a failover now would lose. Absent while no pointer is complete here."},
	{Name: LagLastUpdate, Type: "gauge",
		Help: "When the lag was last computed from ZooKeeper (Unix time)."},
	{Name: LagUpdateFailures, Type: "counter",
		Help: "Lag computations that failed (ZooKeeper or I/O errors)."},
	{Name: ReconcilePasses, Type: "counter", Labels: []string{labelKind}, Values: []string{"full", "fast"},
		Help: "Passes of the marker publisher: full (re-reads ZooKeeper) or fast (after a verdict changed)."},
	{Name: ReconcileActions, Type: "counter", Labels: []string{labelAction}, Values: []string{"write", "conflict", "refused", "failure"},
		Help: "What the marker publisher did: write (a marker changed), conflict (another publisher wrote first), refused (the invariant check failed), failure (a pass failed)."},
	{Name: SweepActions, Type: "counter", Labels: []string{labelAction}, Values: []string{"retract", "failure", "skipped_locked", "left_no_complete"},
		Help: "What the active site's sweep of stray pointers did: retract (a pointer another site's JobManager added after the takeover, not held here), failure (a pass failed), skipped_locked (a pass with stray pointers due found the takeover lock held, and retracted nothing), left_no_complete (a pass left a job whose pointers since the takeover are all incomplete here, because retracting them would start it from empty state although this site holds a complete checkpoint of it)."},
	{Name: TakeoverActions, Type: "counter", Labels: []string{labelAction}, Textfile: true,
		Values: []string{ActionRun, ActionRetract, ActionRefuseJob, ActionRefuseAlive, ActionActivate, ActionError, ActionRestore},
		Help:   "What ckptfs takeover and restore-pruned did on this machine: run, retract (pointers), refuse_job, refuse_alive, activate, error, restore (pointers)."},
	{Name: TakeoverLastRun, Type: "gauge", Textfile: true,
		Help: "When the last takeover or restore-pruned on this machine ended (Unix time)."},
	{Name: TakeoverLastExitCode, Type: "gauge", Textfile: true,
		Help: "The exit status of the last takeover or restore-pruned on this machine."},
	{Name: TakeoverRollback, Type: "gauge", Labels: []string{labelJob},
		Help: "The rollback window of each job at the last takeover that made this site active (the daemon's automatic one; a manual one's in its textfile): how many checkpoint ids Flink completed on the old site after the one it restores here, whose exactly-once output the job produces again (design 4.8)."},
	{Name: LeaseClaiming, Type: "gauge",
		Help: "1 while this daemon holds the lease: its last renewal that applied started less than half the lease ago, and its mount may write (design 5.10, 5.14)."},
	{Name: LeaseRenewals, Type: "counter", Labels: []string{labelResult}, Values: []string{"ok", "failed"},
		Help: "Renewals of the lease by this daemon, by result (ok, failed)."},
	{Name: LeaseObservedUnchanged, Type: "gauge", Labels: []string{labelLeaseSite},
		Help: "How long this daemon has seen the lease unchanged while its site did not hold it; lease_site is the lease's owner."},
	{Name: LeaseWriteDeadline, Type: "gauge",
		Help: "Seconds until the mount's write deadline (negative: passed); absent before the first renewal (design 5.14)."},
	{Name: FenceOverrun, Type: "gauge",
		Help: "How long past its write deadline the daemon last went without running before it fenced the mount (0: never late)."},
	{Name: WatchdogArmed, Type: "gauge",
		Help: "1 while the kernel would kill the daemon if it stopped running with its mount writable (design 5.14)."},
	{Name: WatchdogFiredPrevious, Type: "gauge",
		Help: "1 when the daemon before this one, on the same mount point, ended with its watchdog armed past its deadline: it had stopped running with its mount writable and was killed."},
	{Name: MountHolding, Type: "gauge",
		Help: "1 while the mount holds Flink's opens of its HA and checkpoint directories until this site's takeover decided (takeover auto)."},
	{Name: SyncDegraded, Type: "gauge",
		Help: "1 while synchronous replication (replication-mode sync) is degraded: no other site acknowledged a checkpoint within sync-timeout, and checkpoints complete without waiting until one does (design 4.8)."},
	{Name: SyncCloses, Type: "counter", Labels: []string{labelResult}, Values: []string{"acknowledged", "timeout", "failed"},
		Help: "Closes of checkpoints' HA files that synchronous replication held, by how they ended: acknowledged (another site holds the checkpoint), timeout (sync let it complete after sync-timeout), failed (strict after sync-timeout, or the site was fenced: Flink's checkpoint failed)."},
	{Name: AutoTakeovers, Type: "counter", Labels: []string{labelResult}, Values: AutoTakeoverResults,
		Help: "Automatic takeovers this daemon ran, by result (activated, refused, jobmanager-alive, lease-held, lost-race, failed)."},
	{Name: StandbyJobManagers, Type: "gauge",
		Help: "Leader sessions of this site's JobManagers (site-jobmanagers) seen while another site is active; with takeover manual a health failure."},
}

// descs are the descriptors of Families, by name.
var descs = func() map[string]*prometheus.Desc {
	m := make(map[string]*prometheus.Desc, len(Families))
	for _, f := range Families {
		m[f.Name] = prometheus.NewDesc(f.Name, f.Help, f.Labels, nil)
	}
	return m
}()

// desc returns the descriptor of a family.
func desc(name string) *prometheus.Desc {
	d, ok := descs[name]
	if !ok {
		panic("metrics: no family " + name)
	}
	return d
}

// family returns the family of a name.
func family(name string) *Family {
	for i := range Families {
		if Families[i].Name == name {
			return &Families[i]
		}
	}
	panic("metrics: no family " + name)
}
