package flinkemu

import (
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Layout is a family of Flink releases with one ZooKeeper HA layout.
type Layout int

const (
	// Flink1_4 is 1.4, the legacy JobManager, as real 1.4.2 writes it:
	// pointers, their ephemeral lock children, checkpoint-counter/<job>
	// and jobgraphs/<job> as 1.5-1.13; one leader election, the
	// JobManager's, under leaderlatch/<job 0>/job_manager_lock and
	// leader/<job 0>/job_manager_lock (HighAvailabilityServices.
	// DEFAULT_JOB_ID); no running job registry; the HA files directly in
	// high-availability.storageDir, the job graph's a SubmittedJobGraph;
	// chk-N holds state files and no _metadata.
	Flink1_4 Layout = iota + 1
	// Flink1_13 is 1.5-1.13: checkpoints/<job>/<%019d> with ephemeral
	// lock children, leaderlatch/<suffix> and leader/<suffix>,
	// checkpoint-counter/<job>, running_job_registry.
	Flink1_13
	// Flink1_14 is 1.14: jobs/<job>/checkpoints/<%019d> with ephemeral
	// lock children directly, leader/<component>/{latch,connection_info},
	// jobs/<job>/leader/{latch,connection_info}.
	Flink1_14
	// Flink1_17 is 1.15-1.17: a persistent locks child holding the
	// ephemeral locks, one leader/latch, leader/<component>/connection_info
	// with the job component <jobId>.
	Flink1_17
	// Flink1_20 is 1.18-1.20: as 1.17, job component job-<jobId>.
	Flink1_20
	// Flink2 is 2.x: as 1.20, execution-plans/ instead of jobgraphs/.
	Flink2
)

// Layouts lists every layout, oldest first.
func Layouts() []Layout {
	return []Layout{Flink1_4, Flink1_13, Flink1_14, Flink1_17, Flink1_20, Flink2}
}

func (l Layout) String() string {
	switch l {
	case Flink1_4:
		return "1.4"
	case Flink1_13:
		return "1.5-1.13"
	case Flink1_14:
		return "1.14"
	case Flink1_17:
		return "1.15-1.17"
	case Flink1_20:
		return "1.18-1.20"
	case Flink2:
		return "2.x"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// Version is a Flink version string of the layout (for --flink-version).
func (l Layout) Version() string {
	switch l {
	case Flink1_4:
		return "1.4"
	case Flink1_13:
		return "1.13"
	case Flink1_14:
		return "1.14"
	case Flink1_17:
		return "1.17"
	case Flink1_20:
		return "1.20"
	case Flink2:
		return "2.0"
	}
	return ""
}

// releases are the first and last release of each layout family, as
// major*100+minor.
var releases = map[Layout][2]int{
	Flink1_4: {104, 104}, Flink1_13: {105, 113}, Flink1_14: {114, 114}, Flink1_17: {115, 117}, Flink1_20: {118, 120}, Flink2: {200, 299},
}

// LayoutOf is the layout family of a Flink release ("major.minor", a
// patch level ignored).
func LayoutOf(release string) (Layout, error) {
	r, err := parseRelease(release)
	if err != nil {
		return 0, err
	}
	for _, l := range Layouts() {
		if span := releases[l]; r >= span[0] && r <= span[1] {
			return l, nil
		}
	}
	return 0, fmt.Errorf("flinkemu: no layout family for Flink %s", release)
}

// parseRelease reads "major.minor" (a patch level is ignored) as
// major*100+minor.
func parseRelease(s string) (int, error) {
	var major, minor int
	el := strings.Split(s, ".")
	if len(el) < 2 || len(el) > 3 {
		return 0, fmt.Errorf("flinkemu: release %q is not major.minor", s)
	}
	if _, err := fmt.Sscanf(el[0]+" "+el[1], "%d %d", &major, &minor); err != nil || major < 1 || minor < 0 || minor > 99 {
		return 0, fmt.Errorf("flinkemu: release %q is not major.minor", s)
	}
	return major*100 + minor, nil
}

// release is Config.Release (default Layout.Version()) as major*100+minor.
func (c *Config) release() int {
	s := c.Release
	if s == "" {
		s = c.Layout.Version()
	}
	r, err := parseRelease(s)
	if err != nil {
		return 0 // Validate reports it
	}
	return r
}

// releaseString is Config.Release, default Layout.Version() (for
// flinkha.CheckpointSpec.Release).
func (c *Config) releaseString() string {
	if c.Release != "" {
		return c.Release
	}
	return c.Layout.Version()
}

// metadataVersion is the _metadata format version the release writes
// (Checkpoints.storeCheckpointMetadata in each release's flink-dist:
// MetadataV3Serializer up to 1.15, V4 in 1.16-1.20, V5 in 2.0, V6 from
// 2.1; 1.5-1.10 wrote version 2, which is not emulated). 1.4 writes no
// _metadata; version 2 (SavepointV2) is what its externalized metadata
// file holds and what its state handles are.
func (c *Config) metadataVersion() int32 {
	switch r := c.release(); {
	case c.Layout == Flink1_4:
		return 2
	case r >= 201:
		return 6
	case r >= 200:
		return 5
	case r >= 116:
		return 4
	}
	return 3
}

// applicationStore reports 2.3's application store: the persistent
// applications znode and ha/application-result-store/<cluster>/.
func (c *Config) applicationStore() bool { return c.release() >= 203 }

// flatHAFiles reports where the release writes its HA files
// (completedCheckpoint<hex>, submittedJobGraph<hex>): up to 1.9 directly
// in high-availability.storageDir, from 1.10 (FLINK-13633) in
// <storageDir>/<cluster id>. The blob store is below the cluster id in
// every release (real 1.4.2).
func (c *Config) flatHAFiles() bool { return c.release() < 110 }

// submittedJobGraph reports a job graph HA file holding a
// SubmittedJobGraph (the JobGraph and its JobInfo), as 1.4 to 1.9 write
// it; from 1.10 on it holds the JobGraph itself.
func (c *Config) submittedJobGraph() bool { return c.release() < 110 }

// jobResultStore reports the JobResultStore (1.15+), which replaced the
// running job registry: ha/job-result-store/<cluster>/.
func (c *Config) jobResultStore() bool { return c.Layout >= Flink1_17 }

// sharedPrivateFiles reports where RocksDB's private files (MANIFEST,
// OPTIONS, CURRENT) of an incremental checkpoint go: into shared/ like
// the sst files (RocksDB's state uploader writes both with
// CheckpointedStateScope.SHARED), as real 1.13.6, 1.14.6, 1.20.5 and
// 2.3.0 showed; 1.4 has no shared/ and writes them into chk-N.
func (c *Config) sharedPrivateFiles() bool { return c.Layout >= Flink1_13 }

// oneLeaderSession reports one leader election for all components (one
// latch, 1.15+): they share its leader session id.
func (l Layout) oneLeaderSession() bool { return l >= Flink1_17 }

// LocksChild reports whether pointers carry a persistent locks child.
func (l Layout) LocksChild() bool { return l >= Flink1_17 }

// FieldSet is the CompletedCheckpoint field set the release writes:
// 1.14 already has completionTimestamp, restoredProps came with 1.16
// (real 1.14.5 and 1.15.4 HA files have none).
func (c *Config) FieldSet() flinkha.FieldSet {
	switch {
	case c.Layout == Flink1_4:
		return flinkha.FieldSet14
	case c.Layout == Flink1_13:
		return flinkha.FieldSet15
	case c.release() < 116:
		return flinkha.FieldSet1150
	}
	return flinkha.FieldSet115
}

// paths are a layout's znodes below the namespace ns.
type paths struct {
	l  Layout
	ns string
	// oldHA: leader election as 1.14 (Config.OldHAServices).
	oldHA bool
}

// leaderLayout is the layout whose leader election the paths follow.
func (p paths) leaderLayout() Layout {
	if p.oldHA {
		return Flink1_14
	}
	return p.l
}

func (p paths) join(el ...string) string { return p.ns + "/" + strings.Join(el, "/") }

func (p paths) pointerDir(job string) string {
	if p.l <= Flink1_13 {
		return p.join("checkpoints", job)
	}
	return p.join("jobs", job, "checkpoints")
}

func (p paths) pointer(job string, id int64) string {
	return fmt.Sprintf("%s/%019d", p.pointerDir(job), id)
}

func (p paths) counter(job string) string {
	if p.l <= Flink1_13 {
		return p.join("checkpoint-counter", job)
	}
	return p.join("jobs", job, "checkpoint_id_counter")
}

func (p paths) jobGraph(job string) string {
	if p.l == Flink2 {
		return p.join("execution-plans", job)
	}
	return p.join("jobgraphs", job)
}

// runningRegistry is the running job registry entry (1.5-1.14), "" in
// 1.4 (the legacy JobManager keeps none) and from 1.15 on.
func (p paths) runningRegistry(job string) string {
	if p.l >= Flink1_13 && p.l <= Flink1_14 {
		return p.join("running_job_registry", job)
	}
	return ""
}

// component is a leader election of one JobManager part.
type component struct {
	latch  string // the latch node whose EPHEMERAL_SEQUENTIAL children elect
	leader string // the ephemeral leader information node
	addr   string // what the leader node holds
}

// legacyJobID is the job id under which Flink 1.4's legacy JobManager
// elects itself: HighAvailabilityServices.DEFAULT_JOB_ID.
const legacyJobID = "00000000000000000000000000000000"

// clusterComponents are the resource manager, dispatcher and REST server;
// resourceManager and dispatcher are their RPC endpoint names
// (JobManager.rpcName). In 1.4 the one legacy JobManager, whose actor is
// "jobmanager" (JobManager.JOB_MANAGER_NAME), is elected for job 0.
func (p paths) clusterComponents(host, resourceManager, dispatcher string) []component {
	if p.leaderLayout() == Flink1_4 {
		return []component{{
			latch:  p.join("leaderlatch", legacyJobID, "job_manager_lock"),
			leader: p.join("leader", legacyJobID, "job_manager_lock"),
			addr:   p.rpcScheme() + "://flink@" + host + "/user/jobmanager",
		}}
	}
	addrs := map[string]string{
		"resource_manager": p.rpcAddress(host, resourceManager),
		"dispatcher":       p.rpcAddress(host, dispatcher),
		"rest_server":      "http://" + host,
	}
	var out []component
	for _, name := range []string{"resource_manager", "dispatcher", "rest_server"} {
		var c component
		switch l := p.leaderLayout(); {
		case l == Flink1_13:
			c = component{latch: p.join("leaderlatch", name+"_lock"), leader: p.join("leader", name+"_lock")}
		case l == Flink1_14:
			c = component{latch: p.join("leader", name, "latch"), leader: p.join("leader", name, "connection_info")}
		default:
			c = component{latch: p.join("leader", "latch"), leader: p.join("leader", name, "connection_info")}
		}
		c.addr = addrs[name]
		out = append(out, c)
	}
	return out
}

// jobLeader reports a leader election per job (a JobMaster's, 1.5+); the
// legacy JobManager of 1.4 runs every job itself.
func (p paths) jobLeader() bool { return p.leaderLayout() != Flink1_4 }

// jobComponent is the JobMaster's leader election of one job; endpoint
// is the JobMaster's RPC endpoint name (JobManager.rpcName). Only where
// jobLeader.
func (p paths) jobComponent(job, host, endpoint string) component {
	addr := p.rpcAddress(host, endpoint)
	switch p.leaderLayout() {
	case Flink1_13:
		return component{latch: p.join("leaderlatch", job, "job_manager_lock"), leader: p.join("leader", job, "job_manager_lock"), addr: addr}
	case Flink1_14:
		return component{latch: p.join("jobs", job, "leader", "latch"), leader: p.join("jobs", job, "leader", "connection_info"), addr: addr}
	case Flink1_17:
		return component{latch: p.join("leader", "latch"), leader: p.join("leader", job, "connection_info"), addr: addr}
	}
	return component{latch: p.join("leader", "latch"), leader: p.join("leader", "job-"+job, "connection_info"), addr: addr}
}

// rpcAddress is the address of an RPC endpoint of the JobManager's actor
// system, as Flink publishes it in leader information.
func (p paths) rpcAddress(host, endpoint string) string {
	return p.rpcScheme() + "://flink@" + host + "/user/rpc/" + endpoint
}

func (p paths) rpcScheme() string {
	if p.l >= Flink1_20 {
		return "pekko.tcp"
	}
	return "akka.tcp"
}

// PointerDir is the znode under which the layout keeps a job's
// checkpoint pointers.
func (c *Config) PointerDir(job string) string {
	return paths{l: c.Layout, ns: c.Namespace()}.pointerDir(job)
}
