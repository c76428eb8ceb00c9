//go:build linux

package realflink

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ClusterConfig is one site's Flink session cluster with ZooKeeper HA:
// what its configuration file says and where it runs.
type ClusterConfig struct {
	Dist Dist
	// Dir receives the configuration directory (conf/) and the logs.
	Dir string
	// Addr is the loopback address the cluster binds and announces.
	Addr string
	// RESTPort, RPCPort: the JobManager's REST and RPC ports.
	RESTPort, RPCPort int
	// StandbyRESTPort and StandbyRPCPort, when set, are a second
	// JobManager's (StartStandbyJobManager; Flink 1.4 only).
	StandbyRESTPort, StandbyRPCPort int
	// ZK is the connect string, PathRoot and ClusterID Flink's ZooKeeper
	// namespace (high-availability.zookeeper.path.root, cluster-id).
	ZK, PathRoot, ClusterID string
	// SessionTimeout is Flink's ZooKeeper session timeout.
	SessionTimeout time.Duration
	// CheckpointsDir and HADir are absolute paths in the site (under its
	// mount): state.checkpoints.dir and high-availability.storageDir.
	CheckpointsDir, HADir string
	// Interval is the checkpoint interval; Retained the checkpoints kept.
	Interval time.Duration
	Retained int
	// Extra settings, by key, written after (and so winning over) the
	// defaults.
	Extra map[string]string
}

// Settings returns the configuration as Flink keys for the release: the
// keys Flink renamed are written in the release's own spelling.
func (c ClusterConfig) Settings() map[string]string {
	if c.Dist.Legacy() {
		return c.legacySettings()
	}
	r := c.Dist.Release
	v2 := r.AtLeast(2, 0)
	pick := func(old, current string, since bool) string {
		if since {
			return current
		}
		return old
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	s := map[string]string{
		"jobmanager.rpc.address":            c.Addr,
		"jobmanager.rpc.port":               fmt.Sprint(c.RPCPort),
		"jobmanager.bind-host":              c.Addr,
		"high-availability.jobmanager.port": fmt.Sprint(c.RPCPort),
		"rest.address":                      c.Addr,
		"rest.bind-address":                 c.Addr,
		"rest.port":                         fmt.Sprint(c.RESTPort),
		"taskmanager.host":                  c.Addr,
		"taskmanager.bind-host":             c.Addr,
		"taskmanager.numberOfTaskSlots":     "2",
		"jobmanager.memory.process.size":    "768m",
		"taskmanager.memory.process.size":   "1200m",
		"parallelism.default":               "1",
		// Flink's temporary files (RocksDB's working directories, the
		// web server's, 2.x's archivedApplicationStore) stay in the
		// cluster's directory rather than the machine's /tmp.
		"io.tmp.dirs": c.TmpDir(),
		"web.tmpdir":  c.TmpDir(),

		pick("high-availability", "high-availability.type", r.AtLeast(1, 17)): "zookeeper",

		pick("state.backend", "state.backend.type", r.AtLeast(1, 17)):                      "rocksdb",
		pick("state.backend.incremental", "execution.checkpointing.incremental", v2):       "true",
		pick("state.checkpoints.dir", "execution.checkpointing.dir", v2):                   "file://" + c.CheckpointsDir,
		pick("state.checkpoints.num-retained", "execution.checkpointing.num-retained", v2): fmt.Sprint(c.Retained),
		"execution.checkpointing.interval":                                                 ms(c.Interval),
		"execution.checkpointing.externalized-checkpoint-retention":                        "RETAIN_ON_CANCELLATION",
		pick("restart-strategy", "restart-strategy.type", r.AtLeast(1, 17)):                "fixed-delay",
		"restart-strategy.fixed-delay.attempts":                                            "1000000",
		"restart-strategy.fixed-delay.delay":                                               "500 ms",
		"heartbeat.timeout":                                                                "20000",
		// REST answers from an execution graph cached for this long
		// (default 3 s; apache/flink RestEndpointFactory
		// .createExecutionGraphCache): a test polling REST for RUNNING
		// would see it up to 3 s late, and the recovery times with it.
		"web.refresh-interval": "100",
	}
	return c.withExtra(s)
}

// legacySettings are Settings for Flink 1.4: its keys, and its memory
// settings for small JVMs. The state backend is the filesystem (heap)
// backend, the user's; its checkpoint directory is
// state.backend.fs.checkpointdir (1.4 reads state.checkpoints.dir only
// for externalized checkpoints' metadata), and state of 0 bytes or more
// goes to files, not inline into the HA file. 1.4 has no key for the
// checkpoint interval (the job sets it) and ignores the restart strategy
// of a job with checkpointing that sets none (it restarts for ever, 10 s
// apart).
func (c ClusterConfig) legacySettings() map[string]string {
	s := map[string]string{
		"jobmanager.rpc.address":            c.Addr,
		"jobmanager.rpc.port":               fmt.Sprint(c.RPCPort),
		"high-availability.jobmanager.port": c.legacyRPCPorts(),
		"web.address":                       c.Addr,
		"web.port":                          fmt.Sprint(c.RESTPort),
		"web.tmpdir":                        c.TmpDir(),
		"web.refresh-interval":              "100",
		"taskmanager.hostname":              c.Addr,
		"taskmanager.numberOfTaskSlots":     "2",
		"taskmanager.memory.size":           "32",
		"taskmanager.network.memory.min":    fmt.Sprint(8 << 20),
		"taskmanager.network.memory.max":    fmt.Sprint(8 << 20),
		"taskmanager.tmp.dirs":              c.TmpDir(),
		"parallelism.default":               "1",

		"high-availability": "zookeeper",

		"state.backend":                     "filesystem",
		"state.backend.fs.checkpointdir":    "file://" + c.CheckpointsDir,
		"state.backend.fs.memory-threshold": "0",
		"state.checkpoints.num-retained":    fmt.Sprint(c.Retained),
	}
	return c.withExtra(s)
}

// legacyRPCPorts is Flink 1.4's high-availability.jobmanager.port: a
// list a JobManager takes the first free port of, so that a standby
// JobManager of the same machine finds its own.
func (c ClusterConfig) legacyRPCPorts() string {
	if c.StandbyRPCPort == 0 {
		return fmt.Sprint(c.RPCPort)
	}
	return fmt.Sprintf("%d,%d", c.RPCPort, c.StandbyRPCPort)
}

// withExtra adds to s the ZooKeeper HA settings every release spells
// alike, then the Extra settings.
func (c ClusterConfig) withExtra(s map[string]string) map[string]string {
	s["high-availability.storageDir"] = "file://" + c.HADir
	s["high-availability.zookeeper.quorum"] = c.ZK
	s["high-availability.zookeeper.path.root"] = c.PathRoot
	s["high-availability.cluster-id"] = c.ClusterID
	s["high-availability.zookeeper.client.session-timeout"] = fmt.Sprint(c.SessionTimeout.Milliseconds())
	s["high-availability.zookeeper.client.connection-timeout"] = fmt.Sprint(c.SessionTimeout.Milliseconds())
	for k, v := range c.Extra {
		s[k] = v
	}
	return s
}

// ConfDir is the configuration directory the cluster's processes read.
func (c ClusterConfig) ConfDir() string { return filepath.Join(c.Dir, "conf") }

// TmpDir is the cluster's io.tmp.dirs.
func (c ClusterConfig) TmpDir() string { return filepath.Join(c.Dir, "tmp") }

// writeConf writes the configuration file (config.yaml from 1.19 on,
// flink-conf.yaml before) and a log4j configuration.
func (c ClusterConfig) writeConf() error {
	dir := c.ConfDir()
	for _, d := range []string{dir, c.TmpDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	s := c.Settings()
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, s[k])
	}
	name := "flink-conf.yaml"
	if c.Dist.AtLeast(1, 19) {
		name = "config.yaml"
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		return err
	}
	conf := log4j
	if !c.Dist.AtLeast(1, 11) {
		conf = log4j1
	}
	return os.WriteFile(filepath.Join(dir, "log4j.properties"), []byte(conf), 0o644)
}

// log4j1 is log4j's configuration for Flink 1.4 to 1.10, which log
// through log4j 1.2.
const log4j1 = `log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.file=${log.file}
log4j.appender.file.append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d{HH:mm:ss,SSS} %-5p %c{1} [%t] - %m%n
log4j.logger.org.apache.flink.shaded.zookeeper=WARN
log4j.logger.org.apache.flink.shaded.curator=WARN
`

const log4j = `rootLogger.level = INFO
rootLogger.appenderRef.file.ref = File
appender.file.name = File
appender.file.type = File
appender.file.fileName = ${sys:log.file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} [%t] - %m%n
logger.zk.name = org.apache.flink.shaded.zookeeper3
logger.zk.level = WARN
logger.curator.name = org.apache.flink.shaded.curator5
logger.curator.level = WARN
`

// Cluster is a site's Flink processes.
type Cluster struct {
	Config ClusterConfig
	Site   *Site
	REST   *REST
}

// NewCluster writes the configuration of a cluster in a site; start its
// processes with StartJobManager and StartTaskManager.
func NewCluster(site *Site, cfg ClusterConfig) (*Cluster, error) {
	if err := cfg.writeConf(); err != nil {
		return nil, err
	}
	rest := NewREST(fmt.Sprintf("http://%s:%d", cfg.Addr, cfg.RESTPort))
	rest.legacy = cfg.Dist.Legacy()
	return &Cluster{Config: cfg, Site: site, REST: rest}, nil
}

// StartJobManager starts a JobManager (StandaloneSessionClusterEntrypoint,
// what bin/jobmanager.sh start-foreground runs; in Flink 1.4 the
// JobManager actor of bin/jobmanager.sh start cluster) in the site. name
// tells its log apart from an earlier one's.
func (c *Cluster) StartJobManager(name string) (*Process, error) {
	if c.Config.Dist.Legacy() {
		return c.start(name, "", "org.apache.flink.runtime.jobmanager.JobManager", "--executionMode", "cluster")
	}
	return c.start(name, "GET_JM_RESOURCE_PARAMS", "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint")
}

// StartStandbyJobManager starts a second JobManager of a Flink 1.4
// cluster in the site, on StandbyRESTPort (its web monitor) and
// StandbyRPCPort, as a user's second machine runs one: it leads when
// the first loses ZooKeeper's leader election.
func (c *Cluster) StartStandbyJobManager(name string) (*Process, error) {
	if !c.Config.Dist.Legacy() || c.Config.StandbyRESTPort == 0 || c.Config.StandbyRPCPort == 0 {
		return nil, fmt.Errorf("a standby JobManager needs Flink 1.4 and StandbyRESTPort and StandbyRPCPort (Flink %s)", c.Config.Dist.Version)
	}
	return c.start(name, "", "org.apache.flink.runtime.jobmanager.JobManager", "--executionMode", "cluster", "--webui-port", fmt.Sprint(c.Config.StandbyRESTPort))
}

// StartTaskManager starts a TaskManager (TaskManagerRunner, what
// bin/taskmanager.sh start-foreground runs; in Flink 1.4 the TaskManager
// actor) in the site.
func (c *Cluster) StartTaskManager(name string) (*Process, error) {
	if c.Config.Dist.Legacy() {
		return c.start(name, "", "org.apache.flink.runtime.taskmanager.TaskManager")
	}
	return c.start(name, "GET_TM_RESOURCE_PARAMS", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner")
}

// legacyHeap is the heap of Flink 1.4's processes, which its scripts
// take from jobmanager.heap.mb and taskmanager.heap.mb: the processes
// themselves do not read those keys.
var legacyHeap = map[string]string{"org.apache.flink.runtime.jobmanager.JobManager": "-Xmx384m", "org.apache.flink.runtime.taskmanager.TaskManager": "-Xmx512m"}

// start runs class in the site: with the JVM flags and dynamic properties
// BashJavaUtils gives for params, or for Flink 1.4 (params "") with its
// scripts' flags and log4j 1.2's configuration, and args after the
// configuration directory.
func (c *Cluster) start(name, params, class string, args ...string) (*Process, error) {
	d := c.Config.Dist
	var jvm, dynamic []string
	logConf := "-Dlog4j.configurationFile=file:"
	if !d.AtLeast(1, 11) {
		logConf = "-Dlog4j.configuration=file:"
	}
	if params == "" {
		jvm = []string{legacyHeap[class]}
	} else {
		var err error
		if jvm, dynamic, err = c.resourceParams(params); err != nil {
			return nil, err
		}
		jvm = append(slices.Clone(jvmModuleFlags), jvm...)
	}
	cp, err := d.Classpath()
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(c.Site.logDir, name+".flink.log")
	argv := []string{d.Java}
	argv = append(argv, jvm...)
	argv = append(argv, "-Dlog.file="+logFile, logConf+filepath.Join(c.Config.ConfDir(), "log4j.properties"),
		"-classpath", cp, class, "--configDir", c.Config.ConfDir())
	argv = append(argv, args...)
	argv = append(argv, dynamic...)
	cmd := c.Site.Command(argv...)
	cmd.Env = append(os.Environ(), "FLINK_CONF_DIR="+c.Config.ConfDir(), "FLINK_HOME="+d.Home)
	p, err := c.Site.Start(name, cmd, 0)
	if err != nil {
		return nil, err
	}
	p.FlinkLog = logFile
	return p, nil
}

// resources caches BashJavaUtils' answers by release and settings: each
// answer costs a JVM start (seconds on a loaded machine) before every
// JobManager and TaskManager, and derives only memory and CPU from the
// settings. The key leaves out what names where a cluster runs, which
// changes with every run and cannot size a process.
var resources sync.Map // key -> *resourceAnswer

type resourceAnswer struct {
	mu           sync.Mutex
	done         bool     // GUARDED_BY(mu)
	jvm, dynamic []string // GUARDED_BY(mu)
}

// placeKeys are parts of the names of settings that say where a cluster
// runs (addresses, ports, directories, ZooKeeper).
var placeKeys = []string{"address", "port", "host", "dir", "zookeeper", "cluster-id", "path"}

// resourceParams is Dist.resourceParams, asked once per release, what and
// settings but for where the cluster runs.
func (c *Cluster) resourceParams(what string) (jvm, dynamic []string, err error) {
	d := c.Config.Dist
	v, _ := resources.LoadOrStore(resourceKey(c.Config, what), &resourceAnswer{})
	a := v.(*resourceAnswer)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.done {
		if a.jvm, a.dynamic, err = d.resourceParams(c.Config.ConfDir(), what); err != nil {
			return nil, nil, err
		}
		a.done = true
	}
	return slices.Clone(a.jvm), slices.Clone(a.dynamic), nil
}

func resourceKey(cfg ClusterConfig, what string) string {
	key := []string{cfg.Dist.Java, cfg.Dist.Home, what}
	settings := cfg.Settings()
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		lk := strings.ToLower(k)
		if !slices.ContainsFunc(placeKeys, func(p string) bool { return strings.Contains(lk, p) }) {
			key = append(key, k+"="+settings[k])
		}
	}
	return strings.Join(key, "\x00")
}

// Chain is the exception chain of the error logged on lines[i]: the
// exception that follows it and each "Caused by", outermost first.
func Chain(lines []string, i int) []string {
	var chain []string
	for _, m := range lines[i+1:] {
		if m != "" && m[0] != '\t' && !strings.HasPrefix(m, "Caused by") && !strings.HasPrefix(m, "java.") && !strings.HasPrefix(m, "org.") {
			break
		}
		switch c, ok := strings.CutPrefix(m, "Caused by: "); {
		case ok:
			chain = append(chain, c)
		case m != "" && m[0] != '\t' && len(chain) == 0:
			chain = append(chain, m)
		}
	}
	return chain
}

// Cause is what a Flink log says caused the error logged on lines[i]:
// the innermost "Caused by" of the stack trace that follows it, or the
// line itself.
func Cause(lines []string, i int) string {
	cause := strings.TrimSpace(lines[i])
	for _, m := range lines[i+1:] {
		if m != "" && m[0] != '\t' && !strings.HasPrefix(m, "Caused by") && !strings.HasPrefix(m, "java.") && !strings.HasPrefix(m, "org.") {
			break
		}
		if c, ok := strings.CutPrefix(m, "Caused by: "); ok {
			cause = c
		}
	}
	return cause
}
