package flinkemu

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/internal/zksasl"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Config describes one emulated JobManager.
type Config struct {
	// Servers are the ZooKeeper addresses (zktest proxies, to cut the
	// JobManager off or expire its session).
	Servers []string
	// SessionTimeout is Flink's high-availability.zookeeper.client.
	// session-timeout (the test servers clamp it).
	SessionTimeout time.Duration
	Layout         Layout
	// Release is the Flink release within the layout's family as
	// major.minor (for example "2.3"); empty means Layout.Version(). It
	// picks what changed inside a family: the _metadata version (3 up to
	// 1.15, 4 in 1.16-1.20, 5 in 2.0, 6 from 2.1) and 2.3's application
	// store (the applications znode, ha/application-result-store/).
	Release string
	// OldHAServices is Flink 1.15-1.17's high-availability.
	// use-old-ha-services: leader election as 1.14 (a latch and
	// connection_info per component, jobs/<job>/leader/), everything else
	// (persistent locks children, the job result store) as 1.15. Only
	// with Layout Flink1_17.
	OldHAServices bool
	// PathRoot and ClusterID are Flink's high-availability.zookeeper.
	// path.root and high-availability.cluster-id.
	PathRoot  string
	ClusterID string
	// Storage is the local directory standing for Flink's file system;
	// FlinkStorage is the Flink path it has in znodes and files (for
	// example file:/flink). Checkpoints go to <Storage>/checkpoints/<job>,
	// HA files to <Storage>/ha/<cluster id> (up to 1.9 to <Storage>/ha
	// itself), blobs to <Storage>/ha/<cluster id>/blob. <Storage>/ha is
	// high-availability.storageDir, <Storage>/checkpoints the checkpoint
	// directory and, in 1.4, state.checkpoints.dir as well (externalized
	// metadata files).
	Storage      string
	FlinkStorage string
	// Host is the JobManager's host:port in leader addresses.
	Host string
	// Address is the JobManager host's IP address, which Curator writes
	// as the data of every node Flink creates without data of its own
	// (the lock nodes and the persistent locks children, see addAndLock);
	// empty means 127.0.0.1.
	Address string
	// Retention is Flink's externalized checkpoint retention
	// (execution.checkpointing.externalized-checkpoint-retention), kept in
	// the CheckpointProperties of the HA file and _metadata. The zero
	// value is Flink's default, NO_EXTERNALIZED_CHECKPOINTS. In 1.4 only
	// a retained checkpoint is externalized: its metadata goes to a flat
	// <Storage>/checkpoints/checkpoint_metadata-<12 hex>.
	Retention flinkha.Retention
	// Retained is state.checkpoints.num-retained.
	Retained int
	// KeepSubsumedData leaves a subsumed checkpoint's files in place (its
	// znode and HA file still go), as a lagging replica may.
	KeepSubsumedData bool
	// MetadataInProgress writes _metadata as Flink's recoverable writers
	// do on local file systems and HDFS (1.15+): into
	// ._metadata.inprogress.<uuid>, renamed to _metadata on commit.
	// Without it _metadata is created and streamed in place (1.5-1.14).
	// 1.4 writes no _metadata and ignores it.
	MetadataInProgress bool
	// BeforeStep, if set, is called before each step of writing a
	// checkpoint; an error stops the checkpoint there, as if the
	// JobManager died (CompleteCheckpoint returns it).
	BeforeStep func(Step) error
	// Logger, if set, receives the ZooKeeper client's messages.
	Logger *slog.Logger
	// Digest, SASL and TLS give the JobManager the ZooKeeper identity a
	// Flink JobManager can have: Digest is user:password added to every
	// session before its first request, as Curator adds Flink 1.20's
	// high-availability.zookeeper.client.authorization
	// (digest:'user:password'); SASL is user:password logged in by SASL
	// DIGEST-MD5, as a JAAS DigestLoginModule in Flink's Client section
	// does; TLS connects to a secureClientPort with it. CreatorACL
	// creates every znode with the ACL of Flink's
	// high-availability.zookeeper.client.acl: creator (Flink's
	// SecureAclProvider: ZooDefs.Ids.CREATOR_ALL_ACL), which lets only
	// the creating identity do anything with it, even read.
	Digest     string
	SASL       string
	TLS        *tls.Config
	CreatorACL bool
}

// DefaultConfig returns a 1.20 JobManager of cluster "default" under
// /flink, retaining 3 checkpoints. The caller sets Servers and Storage.
func DefaultConfig() Config {
	return Config{
		SessionTimeout: 4 * time.Second,
		Layout:         Flink1_20,
		PathRoot:       "/flink",
		ClusterID:      "default",
		FlinkStorage:   "file:/flink",
		Host:           "jm-dc1:6123",
		Retained:       3,
	}
}

// Validate reports a configuration that cannot work.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("flinkemu: no ZooKeeper servers"))
	}
	if c.Layout < Flink1_4 || c.Layout > Flink2 {
		errs = append(errs, fmt.Errorf("flinkemu: unknown layout %d", c.Layout))
	}
	if !strings.HasPrefix(c.PathRoot, "/") || strings.Trim(c.ClusterID, "/") == "" {
		errs = append(errs, fmt.Errorf("flinkemu: path root %q and cluster id %q must make a namespace", c.PathRoot, c.ClusterID))
	}
	if !filepath.IsAbs(c.Storage) || c.FlinkStorage == "" {
		errs = append(errs, fmt.Errorf("flinkemu: Storage %q must be absolute and FlinkStorage set", c.Storage))
	}
	if c.OldHAServices && c.Layout != Flink1_17 {
		errs = append(errs, fmt.Errorf("flinkemu: OldHAServices is a setting of Flink 1.15-1.17, not %s", c.Layout))
	}
	if c.Retained < 1 {
		errs = append(errs, fmt.Errorf("flinkemu: Retained %d must be at least 1", c.Retained))
	}
	if c.SessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("flinkemu: SessionTimeout %v must be positive", c.SessionTimeout))
	}
	if c.Release != "" {
		r, err := parseRelease(c.Release)
		switch span := releases[c.Layout]; {
		case err != nil:
			errs = append(errs, err)
		case span != [2]int{} && (r < span[0] || r > span[1]):
			errs = append(errs, fmt.Errorf("flinkemu: release %s is not of the %s layout", c.Release, c.Layout))
		}
	}
	for _, id := range []string{c.Digest, c.SASL} {
		if u, p, ok := strings.Cut(id, ":"); id != "" && (!ok || u == "" || p == "") {
			errs = append(errs, errors.New("flinkemu: Digest and SASL are user:password"))
		}
	}
	if c.Address != "" && net.ParseIP(c.Address) == nil {
		errs = append(errs, fmt.Errorf("flinkemu: Address %q is not an IP address", c.Address))
	}
	return errors.Join(errs...)
}

// dialer connects as Flink's ZooKeeper client would: over TLS when
// configured, logged in by SASL DIGEST-MD5 when configured.
func (c *Config) dialer() zk.Dialer {
	tlsCfg, sasl := c.TLS, c.SASL
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var conn net.Conn
		var err error
		if tlsCfg != nil {
			tc := tlsCfg.Clone()
			if host, _, herr := net.SplitHostPort(addr); herr == nil && tc.ServerName == "" {
				tc.ServerName = host
			}
			conn, err = (&tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: tc}).Dial(network, addr)
		} else {
			conn, err = net.DialTimeout(network, addr, timeout)
		}
		if err != nil || sasl == "" {
			return conn, err
		}
		user, password, _ := strings.Cut(sasl, ":")
		return zksasl.Wrap(conn, user, password, 10*time.Second, nil), nil
	}
}

// Namespace is the Flink namespace <path.root>/<cluster-id>.
func (c *Config) Namespace() string {
	return strings.TrimRight(c.PathRoot, "/") + "/" + strings.Trim(c.ClusterID, "/")
}

// Mapping is the --map value that resolves the Flink paths to Storage.
func (c *Config) Mapping() string { return c.FlinkStorage + "=" + c.Storage }

// curatorData is what Curator stores in a node created without data: its
// default data, the local host's address.
func (c *Config) curatorData() []byte {
	if c.Address == "" {
		return []byte("127.0.0.1")
	}
	return []byte(c.Address)
}

// haDir is the local directory of the cluster's HA data
// (high-availability.storageDir/<cluster id>): its blobs, and from 1.10
// on its HA files.
func (c *Config) haDir() string {
	return filepath.Join(c.Storage, "ha", strings.Trim(c.ClusterID, "/"))
}

// haFileDir is the directory of the HA files as its path elements below
// Storage: ha/<cluster id>, up to 1.9 ha itself (flatHAFiles).
func (c *Config) haFileDir() []string {
	if c.flatHAFiles() {
		return []string{"ha"}
	}
	return []string{"ha", strings.Trim(c.ClusterID, "/")}
}

// JobManager is one emulated Flink JobManager process with its own
// ZooKeeper session. Methods may be called from several goroutines.
type JobManager struct {
	cfg  Config
	p    paths
	conn *zk.Conn
	// graphLockID is the job graph (execution plan) store's instance id,
	// which names its locks; every job's checkpoint store has its own
	// (lockIDs).
	graphLockID string
	// leaderSession is the leader session id of every component when one
	// election serves them all (Layout.oneLeaderSession).
	leaderSession string
	acl           []zk.ACL

	mu sync.Mutex
	// lockIDs: GUARDED_BY(mu). Per job, the instance id of its checkpoint
	// store (ZooKeeperStateHandleStore), which names its locks.
	lockIDs map[string]string
	// jobs: GUARDED_BY(mu). Retained checkpoints per job, ascending.
	jobs map[string][]*Checkpoint
	// shared: GUARDED_BY(mu). Per job, the shared/ files that retained
	// checkpoints reference (Flink's SharedStateRegistry).
	shared map[string]map[string]*sharedFile
	// latches: GUARDED_BY(mu). Latch paths that have our child.
	latches []string
	// rpcNames: GUARDED_BY(mu). The next number of RpcServiceUtils.
	// createRandomName, one counter per process (see rpcName).
	rpcNames int64
	// closed: GUARDED_BY(mu).
	closed bool
}

// Checkpoint is one completed checkpoint as written.
type Checkpoint struct {
	JobID string
	ID    int64
	// Dir is the local chk-N directory, FlinkDir the Flink path of it.
	Dir      string
	FlinkDir string
	// Metadata and StateFiles are the local files of chk-N: _metadata and
	// the tasks' exclusive state files. A 1.4 checkpoint has no _metadata:
	// Metadata is its externalized metadata file (outside chk-N), or ""
	// when it was not externalized.
	Metadata   string
	StateFiles []string
	// PrivateFiles are the RocksDB private files the checkpoint wrote,
	// which no other checkpoint references: in shared/ (1.4: in chk-N).
	PrivateFiles []string
	// HAFile is the local HA file, HAFlinkPath its Flink path.
	HAFile      string
	HAFlinkPath string
	// Znode is the pointer and Data its bytes.
	Znode string
	Data  []byte
	// Timestamp is the trigger time stored in the HA file.
	Timestamp time.Time
	// SharedFiles are the local shared/ files the checkpoint references
	// (new and reused ones); NewSharedFiles those it wrote. 1.4 has no
	// shared/: a checkpoint writes its new files into its own chk-N, and
	// later ones reference them there.
	SharedFiles    []string
	NewSharedFiles []string
}

// Files returns every local file the checkpoint needs: _metadata (1.4:
// the externalized metadata file, if any), its exclusive state files, its
// private files and the shared files it references (not the HA file).
func (cp *Checkpoint) Files() []string {
	var meta []string
	if cp.Metadata != "" {
		meta = []string{cp.Metadata}
	}
	return slices.Concat(meta, cp.StateFiles, cp.PrivateFiles, cp.SharedFiles)
}

// Start connects, waits for a session and creates the JobManager's
// leader election and leader information nodes.
func Start(ctx context.Context, cfg Config) (*JobManager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	jm := &JobManager{
		cfg: cfg, p: paths{l: cfg.Layout, ns: cfg.Namespace(), oldHA: cfg.OldHAServices},
		graphLockID: newUUID(), leaderSession: newUUID(), acl: zk.WorldACL(zk.PermAll),
		lockIDs: map[string]string{}, jobs: map[string][]*Checkpoint{}, shared: map[string]map[string]*sharedFile{},
	}
	hasSession := make(chan struct{}, 1)
	onEvent := func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			select {
			case hasSession <- struct{}{}:
			default:
			}
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.CreatorACL {
		jm.acl = zk.AuthACL(zk.PermAll)
	}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout, zk.WithEventCallback(onEvent), zk.WithLogger(slogPrintf{log}), zk.WithDialer(cfg.dialer()))
	if err != nil {
		return nil, err
	}
	jm.conn = conn
	select {
	case <-hasSession:
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		conn.Close()
		return nil, errors.New("flinkemu: no ZooKeeper session within 30s")
	}
	if cfg.Digest != "" {
		if err := conn.AddAuth("digest", []byte(cfg.Digest)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("flinkemu: addauth digest: %w", err)
		}
	}
	// The ResourceManager and the Dispatcher are made before any
	// JobMaster: resourcemanager_0 and dispatcher_1, as in the harvests.
	rm, dispatcher := jm.rpcName("resourcemanager"), jm.rpcName("dispatcher")
	for _, c := range jm.p.clusterComponents(cfg.Host, rm, dispatcher) {
		if err := jm.elect(c); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if err := jm.startStores(); err != nil {
		conn.Close()
		return nil, err
	}
	return jm, nil
}

// startStores creates what the HA services and the dispatcher's stores
// create when the JobManager starts: the blob store's directory
// (ha/<cluster>/blob), the JobResultStore's (ha/job-result-store/
// <cluster>, 1.15+) and in 2.3 the application store's znode and
// ha/application-result-store/<cluster>.
func (jm *JobManager) startStores() error {
	cluster := strings.Trim(jm.cfg.ClusterID, "/")
	dirs := []string{filepath.Join(jm.cfg.haDir(), "blob")}
	if jm.cfg.jobResultStore() {
		dirs = append(dirs, filepath.Join(jm.cfg.Storage, "ha", "job-result-store", cluster))
	}
	if jm.cfg.applicationStore() {
		dirs = append(dirs, filepath.Join(jm.cfg.Storage, "ha", "application-result-store", cluster))
		if err := jm.ensure(jm.p.join("applications")); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// rpcName is Flink's RpcServiceUtils.createRandomName: prefix_<n>, n
// taken from one counter per process (a static AtomicLong, from 0), each
// time an RPC endpoint is made. The ResourceManager, the Dispatcher and
// every JobMaster (JobMaster.JOB_MANAGER_NAME "jobmanager", one per job
// and leadership) take their names from it, so the first job's JobMaster
// is jobmanager_2, the second's jobmanager_3, and a restarted JobManager
// (a new process) counts from 0 again.
func (jm *JobManager) rpcName(prefix string) string {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	n := jm.rpcNames
	jm.rpcNames++
	return fmt.Sprintf("%s_%d", prefix, n)
}

// checkpointLockID returns the lock id of a job's checkpoint store.
func (jm *JobManager) checkpointLockID(jobID string) string {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	id, ok := jm.lockIDs[jobID]
	if !ok {
		id = newUUID()
		jm.lockIDs[jobID] = id
	}
	return id
}

// Conn is the JobManager's connection (for zktest.ExpireConnSession).
func (jm *JobManager) Conn() *zk.Conn { return jm.conn }

// Layout returns the emulated layout.
func (jm *JobManager) Layout() Layout { return jm.cfg.Layout }

// Namespace returns Flink's namespace.
func (jm *JobManager) Namespace() string { return jm.p.ns }

// Close ends the JobManager's session: its latch, leader and lock nodes
// vanish at once, everything persistent stays, as when its site dies.
func (jm *JobManager) Close() {
	jm.mu.Lock()
	jm.closed = true
	jm.mu.Unlock()
	jm.conn.Close()
}

// transient reports a connection failure: the request may not have been
// applied (or may have been: callers that are not idempotent check).
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrClosing)
}

// retry runs op again while it fails transiently, for 30 seconds. op must
// be idempotent, or check what an earlier attempt did.
func (jm *JobManager) retry(op func(attempt int) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		err := op(attempt)
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		if err := jm.usable(); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (jm *JobManager) usable() error {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	if jm.closed {
		return errors.New("flinkemu: the JobManager is closed")
	}
	return nil
}

// elect joins a component's leader latch (one child per latch path and
// process) and writes its leader information node.
func (jm *JobManager) elect(c component) error {
	jm.mu.Lock()
	joined := slices.Contains(jm.latches, c.latch)
	if !joined {
		jm.latches = append(jm.latches, c.latch)
	}
	jm.mu.Unlock()
	if !joined {
		if err := jm.ensure(c.latch); err != nil {
			return err
		}
		if err := jm.joinLatch(c.latch); err != nil {
			return fmt.Errorf("flinkemu: join latch %s: %w", c.latch, err)
		}
	}
	session := newUUID()
	if jm.cfg.Layout.oneLeaderSession() && !jm.cfg.OldHAServices {
		session = jm.leaderSession
	}
	data, err := flinkha.EncodeLeaderInfo(flinkha.LeaderInfo{Address: c.addr, SessionID: session})
	if err != nil {
		return err
	}
	if err := jm.ensure(parent(c.leader)); err != nil {
		return err
	}
	err = jm.retry(func(attempt int) error {
		_, err := jm.conn.Create(c.leader, data, zk.FlagEphemeral, jm.acl)
		if errors.Is(err, zk.ErrNodeExists) && attempt > 0 {
			if _, stat, gerr := jm.conn.Get(c.leader); gerr == nil && stat.EphemeralOwner == jm.conn.SessionID() {
				return nil // an earlier attempt made it
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("flinkemu: leader node %s: %w", c.leader, err)
	}
	return nil
}

// joinLatch adds this process's node to a leader latch as Curator's
// LeaderLatch does: a protected EPHEMERAL_SEQUENTIAL node
// _c_<UUID>-latch-<%010d> with empty data. Protected: after a lost reply,
// a retry looks for the node with its own UUID before creating another.
func (jm *JobManager) joinLatch(latch string) error {
	prefix := "_c_" + newUUID() + "-"
	return jm.retry(func(attempt int) error {
		if attempt > 0 {
			kids, _, err := jm.conn.Children(latch)
			if err != nil {
				return err
			}
			for _, k := range kids {
				if strings.HasPrefix(k, prefix) {
					return nil // an earlier attempt made it
				}
			}
		}
		_, err := jm.conn.Create(latch+"/"+prefix+"latch-", nil, zk.FlagEphemeral|zk.FlagSequence, jm.acl)
		return err
	})
}

// SubmitJob registers a job as Flink's dispatcher does: the user jar in
// the HA blob store (ha/<cluster>/blob/job_<job>/blob_p-<sha1>-<random>),
// the job graph (with its HA file and lock), the checkpoint counter at 1,
// the running registry entry, the job's checkpoint directories
// (checkpoints/<job>/shared and taskowned) and JobMaster leadership. The
// legacy JobManager of 1.4 keeps neither a registry entry nor a JobMaster
// election, and makes no checkpoint directory before the first
// checkpoint.
func (jm *JobManager) SubmitJob(jobID string) error {
	if !isJobID(jobID) {
		return fmt.Errorf("flinkemu: job id %q is not 32 hex digits", jobID)
	}
	prefix := "submittedJobGraph"
	if jm.cfg.Layout == Flink2 {
		prefix = "submittedExecutionPlan"
	}
	if err := jm.usable(); err != nil {
		return err
	}
	jar, err := jm.writeJarBlob(jobID)
	if err != nil {
		return err
	}
	// Real Flink writes a Java-serialized JobGraph (in 2.3 a StreamGraph,
	// up to 1.9 a SubmittedJobGraph holding the JobGraph) naming the jar's
	// blob key; this one has the fields ckptfs reads.
	var graph []byte
	if jm.cfg.submittedJobGraph() {
		graph, err = flinkha.EncodeSubmittedJobGraph(jobID, "job "+jobID, []flinkha.BlobKey{jar})
	} else {
		graph, err = flinkha.EncodeJobGraph(jobID, "job "+jobID, jm.cfg.Layout == Flink2, []flinkha.BlobKey{jar})
	}
	if err != nil {
		return err
	}
	_, haFlink, err := jm.writeHAFile(prefix, graph)
	if err != nil {
		return err
	}
	st, err := jm.stateHandle(haFlink, int64(len(graph)))
	if err != nil {
		return err
	}
	if err := jm.addAndLock(jm.p.jobGraph(jobID), st, jm.graphLockID); err != nil {
		return err
	}
	counter := make([]byte, 4)
	binary.BigEndian.PutUint32(counter, 1)
	if err := jm.createPersistent(jm.p.counter(jobID), counter); err != nil {
		return err
	}
	if reg := jm.p.runningRegistry(jobID); reg != "" {
		if err := jm.createPersistent(reg, []byte("RUNNING")); err != nil {
			return err
		}
	}
	// FsCheckpointStorageAccess.initializeBaseLocationsForCheckpoint
	// (1.5+; 1.4's FsCheckpointStreamFactory makes chk-N when a task
	// writes its first file).
	for _, d := range []string{"shared", "taskowned"} {
		if jm.cfg.Layout == Flink1_4 {
			break
		}
		if err := os.MkdirAll(filepath.Join(jm.cfg.Storage, "checkpoints", jobID, d), 0o755); err != nil {
			return err
		}
	}
	// The JobMaster, made once the job is persisted, names its endpoint.
	if jm.p.jobLeader() {
		if err := jm.elect(jm.p.jobComponent(jobID, jm.cfg.Host, jm.rpcName("jobmanager"))); err != nil {
			return err
		}
	}
	if jm.cfg.Layout >= Flink1_14 {
		if err := jm.ensure(jm.p.pointerDir(jobID)); err != nil {
			return err
		}
	}
	jm.mu.Lock()
	jm.jobs[jobID] = nil
	jm.shared[jobID] = map[string]*sharedFile{}
	jm.mu.Unlock()
	return nil
}

// Checkpoints returns the retained checkpoints of a job, ascending.
func (jm *JobManager) Checkpoints(jobID string) []*Checkpoint {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return slices.Clone(jm.jobs[jobID])
}

// nextCheckpointID is the counter's getAndIncrement: a compare-and-set
// loop on the SharedCount node.
func (jm *JobManager) nextCheckpointID(jobID string) (int64, error) {
	path := jm.p.counter(jobID)
	for range 100 {
		var data []byte
		var stat *zk.Stat
		err := jm.retry(func(int) (err error) {
			data, stat, err = jm.conn.Get(path)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("flinkemu: counter %s: %w", path, err)
		}
		if len(data) != 4 {
			return 0, fmt.Errorf("flinkemu: counter %s holds %d bytes", path, len(data))
		}
		cur := binary.BigEndian.Uint32(data)
		next := make([]byte, 4)
		binary.BigEndian.PutUint32(next, cur+1)
		_, err = jm.conn.Set(path, next, stat.Version)
		if transient(err) {
			// Lost reply: this JobManager is the counter's only writer,
			// so cur+1 there means the increment was ours.
			err = jm.retry(func(int) (err error) {
				data, _, err = jm.conn.Get(path)
				return err
			})
			if err == nil && len(data) == 4 && binary.BigEndian.Uint32(data) == cur+1 {
				return int64(int32(cur)), nil
			}
			continue
		}
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return int64(int32(cur)), nil
	}
	return 0, fmt.Errorf("flinkemu: counter %s keeps changing", path)
}

// emptyJar is an empty zip archive: the user jar's blob.
var emptyJar = append([]byte("PK\x05\x06"), make([]byte, 18)...)

// writeJarBlob puts the user jar into the HA blob store as the BlobServer
// does on submission: ha/<cluster>/blob/job_<job>/blob_p-<SHA-1 of the
// content>-<random 16 bytes> (BlobUtils, a PermanentBlobKey).
func (jm *JobManager) writeJarBlob(jobID string) (flinkha.BlobKey, error) {
	dir := filepath.Join(jm.cfg.haDir(), "blob", "job_"+jobID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return flinkha.BlobKey{}, err
	}
	var random [16]byte
	_, _ = rand.Read(random[:])
	sum := sha1.Sum(emptyJar)
	k := flinkha.BlobKey{Permanent: true, Hash: hex.EncodeToString(sum[:]), Random: hex.EncodeToString(random[:])}
	return k, os.WriteFile(filepath.Join(dir, k.FileName()), emptyJar, 0o644)
}

// addAndLock is ZooKeeperStateHandleStore.addAndLock: the node and its
// lock (named by the store's lockID) in one multi (1.15+: node,
// persistent locks, ephemeral locks/<lockID>). The persistent locks child
// and the ephemeral lock hold Curator's default data, the host's address,
// as Flink gives them none (zkbridge's backups keep the locks child's
// bytes, so restore-pruned puts them back).
func (jm *JobManager) addAndLock(path string, st flinkha.StateHandle, lockID string) error {
	data, err := flinkha.EncodeStateHandle(st)
	if err != nil {
		return err
	}
	if err := jm.ensure(parent(path)); err != nil {
		return err
	}
	ops := []any{&zk.CreateRequest{Path: path, Data: data, Acl: jm.acl}}
	lock := jm.cfg.curatorData()
	if jm.cfg.Layout.LocksChild() {
		ops = append(ops,
			&zk.CreateRequest{Path: path + "/locks", Data: lock, Acl: jm.acl},
			&zk.CreateRequest{Path: path + "/locks/" + lockID, Data: lock, Acl: jm.acl, Flags: zk.FlagEphemeral})
	} else {
		ops = append(ops, &zk.CreateRequest{Path: path + "/" + lockID, Data: lock, Acl: jm.acl, Flags: zk.FlagEphemeral})
	}
	err = jm.retry(func(attempt int) error {
		_, err := jm.conn.Multi(ops...)
		if errors.Is(err, zk.ErrNodeExists) && attempt > 0 {
			if cur, _, gerr := jm.conn.Get(path); gerr == nil && bytes.Equal(cur, data) {
				return nil // an earlier attempt made it
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("flinkemu: add %s: %w", path, err)
	}
	return nil
}

// writeHAFile writes <Storage>/ha/<cluster>/<prefix><12 hex> (up to 1.9
// <Storage>/ha/<prefix><12 hex>) with NO_OVERWRITE.
func (jm *JobManager) writeHAFile(prefix string, data []byte) (local, flink string, err error) {
	return jm.writeNewFile(jm.cfg.haFileDir(), prefix, data)
}

// writeNewFile writes a file <dir>/<prefix><12 random hex> (dir as path
// elements below Storage) as Flink's FileSystemStateStorageHelper and
// 1.4's SavepointStore do (FileUtils.getRandomFilename, NO_OVERWRITE, 10
// attempts), and returns its local and its Flink path.
func (jm *JobManager) writeNewFile(dir []string, prefix string, data []byte) (local, flink string, err error) {
	localDir := filepath.Join(append([]string{jm.cfg.Storage}, dir...)...)
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		return "", "", err
	}
	for range 10 {
		var r [6]byte
		_, _ = rand.Read(r[:])
		name := prefix + hex.EncodeToString(r[:])
		local = filepath.Join(localDir, name)
		f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return "", "", err
		}
		if err := f.Close(); err != nil {
			return "", "", err
		}
		return local, jm.flinkPath(append(slices.Clone(dir), name)...), nil
	}
	return "", "", fmt.Errorf("flinkemu: no free file name %s<hex> in %s", prefix, localDir)
}

func (jm *JobManager) stateHandle(flinkPath string, size int64) (flinkha.StateHandle, error) {
	return flinkha.NewStateHandle(flinkPath, size)
}

func (jm *JobManager) flinkPath(el ...string) string {
	return strings.TrimRight(jm.cfg.FlinkStorage, "/") + "/" + strings.Join(el, "/")
}

// ensure creates path and its ancestors as persistent nodes.
func (jm *JobManager) ensure(path string) error {
	if path == "" || path == "/" {
		return nil
	}
	var ok bool
	if err := jm.retry(func(int) (err error) { ok, _, err = jm.conn.Exists(path); return err }); err != nil || ok {
		return err
	}
	if err := jm.ensure(parent(path)); err != nil {
		return err
	}
	err := jm.retry(func(int) error {
		_, err := jm.conn.Create(path, nil, 0, jm.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("flinkemu: create %s: %w", path, err)
	}
	return nil
}

// deleteIfExists deletes a node; a missing one is fine.
func (jm *JobManager) deleteIfExists(path string) error {
	return jm.retry(func(int) error {
		err := jm.conn.Delete(path, -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

func (jm *JobManager) createPersistent(path string, data []byte) error {
	if err := jm.ensure(parent(path)); err != nil {
		return err
	}
	err := jm.retry(func(attempt int) error {
		_, err := jm.conn.Create(path, data, 0, jm.acl)
		if errors.Is(err, zk.ErrNodeExists) && attempt > 0 {
			if cur, _, gerr := jm.conn.Get(path); gerr == nil && bytes.Equal(cur, data) {
				return nil
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("flinkemu: create %s: %w", path, err)
	}
	return nil
}

func parent(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// NewJobID returns a random Flink JobID (32 hex digits).
func NewJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func isJobID(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// slogPrintf adapts go-zookeeper's logger to slog.
type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
