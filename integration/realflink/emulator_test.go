//go:build linux

package realflink

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// The emulator held against real Flink: TestEmulatorMatchesRealFlink runs
// integration/flinkemu as the release of each harvested fixture
// (testdata/<release>) into a real ZooKeeper, dumps what it wrote exactly
// as TestHarvest dumps real Flink (dumpZK, dumpFiles, writeFixture) and
// compares the two pictures:
//
//   - every znode of the namespace by its path up to ids (job id,
//     checkpoint ids %019d, latch names, lock ids), with its kind, whether
//     it is sequential, which session owns it, its data version and the
//     encoding of its data (empty, a state handle naming an HA file of the
//     right size, leader information with its address and leader session,
//     Curator's default data, a checkpoint counter);
//   - every file and directory below the storage root, up to ids, with
//     the encoding of every copied file (HA files, _metadata);
//   - what the retained checkpoints hold: which files their HA files and
//     _metadata reference, where and with which handle classes, what is
//     inline, the CheckpointProperties.
//
// A difference fails the test unless emulatorAllowed lists it with the
// reason it is accepted. Both pictures must also show Flink's write
// order (checkWriteOrder) and the emulator's steps must come in that order.

// emulatorCheckpoints is how many checkpoints the emulator completes: with
// num-retained 3, two are subsumed, as in the harvests.
const emulatorCheckpoints = 5

// orderSlack is how far apart ZooKeeper's millisecond times and the file
// system's nanosecond times may be and still count as in order (the
// ZooKeeper servers and the storage share one clock here; ZooKeeper
// truncates to milliseconds, the kernel's file times are coarse).
const orderSlack = 5 * time.Millisecond

// difference is one way the emulator's picture differs from real Flink's.
type difference struct {
	area   string // zk, files or checkpoints
	key    string // normalized znode path, file path or fact
	aspect string
	real   string // "" when absent
	emu    string
}

func (d difference) String() string {
	show := func(s string) string {
		if s == "" {
			return "(absent)"
		}
		return s
	}
	return fmt.Sprintf("%s %s [%s]\n      real Flink: %s\n      emulator:   %s", d.area, d.key, d.aspect, show(d.real), show(d.emu))
}

// allowance accepts one difference, with its reason. real and emu are
// patterns (anchored regular expressions) the two sides' values must
// match; "" matches only an absent side.
type allowance struct {
	release string // "" for every release
	area    string
	key     string
	aspect  string
	real    string
	emu     string
	reason  string
}

func (a allowance) matches(release string, d difference) bool {
	match := func(pattern, v string) bool { return regexp.MustCompile(`^(?:` + pattern + `)$`).MatchString(v) }
	return (a.release == "" || a.release == release) && a.area == d.area && a.key == d.key && a.aspect == d.aspect &&
		match(a.real, d.real) && match(a.emu, d.emu)
}

// timing is the reason for what only real Flink shows because the harvest
// stopped it at an arbitrary moment.
const timing = "timing: the harvest stopped real Flink at an arbitrary moment, here while it wrote the next checkpoint " +
	"(its chk-N may hold state files, a staged or a renamed _metadata) or before its asynchronous CheckpointsCleaner had " +
	"deleted a subsumed checkpoint's chk-N; the emulator's checkpoints are complete, and subsumed ones deleted, when " +
	"CompleteCheckpoint returns (it stages _metadata the same way, MetadataInProgress)"

// smallMeta113 is the reason for what the 1.13.6 fixture lacks in chk-N.
const smallMeta113 = "real 1.13.6's chk-N holds _metadata alone: the harvested 1.13 job (job/src-1.4, one ValueState) " +
	"has a RocksDB meta state below the harvest's 1 KiB inline threshold, so it is inline in _metadata and the HA file, " +
	"while 1.14.6's job writes 1072 bytes of it, a RelativeFileStateHandle beside _metadata, as the emulator does for " +
	"every release 1.11 on; and the job has no heap-backend state, whose files in chk-N the emulator adds (see the " +
	"key-groups allowance). Whether Flink keeps a handle inline depends on its size, not the release"

// rpcOrder is the reason for the RPC endpoints' suffixes: the
// ResourceManager's endpoint is made when it is granted leadership
// (ResourceManagerServiceImpl), so which of it and the Dispatcher takes
// suffix 0 is the order of two elections. Real 1.15.4 numbered the
// Dispatcher first, 1.13.6, 1.14.6, 1.20.5 and 2.3.0 the ResourceManager,
// as the emulator does; ckptfs never reads the endpoint's name.
const rpcOrder = "the order in which the Dispatcher's and the ResourceManager's RPC endpoints were made, which follows their leader elections"

// emulatorAllowed lists the differences between real Flink and the
// emulator that are accepted, each with its reason. Everything else the
// test finds fails it.
var emulatorAllowed = []allowance{
	{
		release: "1.15.4", area: "zk", key: "leader/dispatcher/connection_info", aspect: "data",
		real:   `leader information akka\.tcp://flink@\{host\}/user/rpc/dispatcher_0, \{leader-session-1\}`,
		emu:    `leader information akka\.tcp://flink@\{host\}/user/rpc/dispatcher_1, \{leader-session-1\}`,
		reason: rpcOrder,
	},
	{
		release: "1.15.4", area: "zk", key: "leader/resource_manager/connection_info", aspect: "data",
		real:   `leader information akka\.tcp://flink@\{host\}/user/rpc/resourcemanager_1, \{leader-session-1\}`,
		emu:    `leader information akka\.tcp://flink@\{host\}/user/rpc/resourcemanager_0, \{leader-session-1\}`,
		reason: rpcOrder,
	},
	{
		area: "checkpoints", key: "keyed state: key-groups handle, relative chk-{retained}/{uuid}", aspect: "present",
		real: ``, emu: `yes`,
		reason: "besides its RocksDB-style incremental operator the emulator writes a second keyed operator with " +
			"heap-backend state (KeyGroupsStateHandle, one plain file per subtask in chk-N), whose files the tests " +
			"remove and corrupt; the harvested job uses RocksDB only, and a real job has one state backend",
	},
	{release: "1.13.6", area: "files", key: "checkpoints/{job}/chk-{retained}/{uuid}", aspect: "present", real: ``, emu: `[0-9]+×`, reason: smallMeta113},
	{
		release: "1.13.6", area: "checkpoints", key: "HA file references checkpoints/{job}/chk-{retained}/{uuid} (RelativeFileStateHandle)",
		aspect: "present", real: ``, emu: `yes`, reason: smallMeta113,
	},
	{release: "1.13.6", area: "checkpoints", key: "keyed state: incremental (RocksDB), meta inline", aspect: "present", real: `yes`, emu: ``, reason: smallMeta113},
	{
		release: "1.13.6", area: "checkpoints", key: "keyed state: incremental (RocksDB), meta relative chk-{retained}/{uuid}",
		aspect: "present", real: ``, emu: `yes`, reason: smallMeta113,
	},
	{
		release: "1.13.6", area: "checkpoints", key: "coordinator state: inline", aspect: "present", real: ``, emu: `yes`,
		reason: "the harvested 1.13 job (job/src-1.4) reads with a SourceFunction, which has no operator coordinator; " +
			"the emulator's source is a FLIP-27 one, like the 1.14+ job's, whose enumerator 1.11 on checkpoints as " +
			"coordinator state, inline (real 1.14.6, 1.20.5 and 2.3.0 show it)",
	},
	{area: "files", key: "checkpoints/{job}/chk-{newer}", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{newer}/{uuid}", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{newer}/._metadata.inprogress.{uuid}", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{newer}/_metadata", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{subsumed}", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{subsumed}/{uuid}", aspect: "present", real: `[0-9]+×`, reason: timing},
	{area: "files", key: "checkpoints/{job}/chk-{subsumed}/_metadata", aspect: "present", real: `[0-9]+×`, reason: timing},
}

// TestEmulatorMatchesRealFlink compares what flinkemu writes with what
// real Flink wrote (the harvested fixtures), for each fixture's release.
func TestEmulatorMatchesRealFlink(t *testing.T) {
	fixtures := loadFixtures(t)
	c := zktest.StartCluster(t, 1)
	for _, real := range fixtures {
		t.Run(real.meta.Release, func(t *testing.T) {
			layout, err := flinkemu.LayoutOf(real.meta.Release)
			if err != nil {
				t.Fatalf("the fixture of Flink %s: %v", real.meta.Release, err)
			}
			emu, steps := runEmulator(t, c, real, layout)

			checkWriteOrder(t, "real Flink", real)
			checkWriteOrder(t, "emulator", emu)
			checkSteps(t, steps)

			rp, ep := describe(t, real), describe(t, emu)
			diffs := rp.diff(ep)
			used := map[int]bool{}
			var failed []difference
			for _, d := range diffs {
				i := slices.IndexFunc(emulatorAllowed, func(a allowance) bool { return a.matches(real.meta.Release, d) })
				if i < 0 {
					failed = append(failed, d)
					continue
				}
				used[i] = true
				t.Logf("accepted difference: %s\n      because: %s", d, emulatorAllowed[i].reason)
			}
			var facts []string
			for f := range rp.facts {
				facts = append(facts, f)
			}
			slices.Sort(facts)
			t.Logf("what real Flink %s's retained checkpoints hold:\n    %s", real.meta.Release, strings.Join(facts, "\n    "))
			for i, a := range emulatorAllowed {
				if !used[i] && a.reason != timing && (a.release == "" || a.release == real.meta.Release) {
					t.Logf("allow-list entry not needed for %s: %s %s [%s]", real.meta.Release, a.area, a.key, a.aspect)
				}
			}
			for _, d := range failed {
				t.Errorf("difference: %s", d)
			}
			t.Logf("%d znode paths, %d file paths and %d checkpoint facts compared; %d differences, %d accepted",
				len(rp.nodes), len(rp.files), len(rp.facts), len(diffs), len(diffs)-len(failed))
		})
	}
}

// runEmulator runs one emulated JobManager as the harvest ran Flink (its
// path root and cluster id, num-retained 3, externalized checkpoints
// retained on cancellation, RocksDB-style incremental checkpoints with,
// from 1.15 on, _metadata staged by the recoverable writer; Flink 1.4:
// the filesystem backend's state files and no externalized checkpoints,
// as the harness runs it, cluster.go's legacySettings), dumps it as
// TestHarvest does into a fixture directory and loads that. It returns
// the fixture and the steps the emulator took.
func runEmulator(t *testing.T, c *zktest.Cluster, real *fixture, layout flinkemu.Layout) (*fixture, []flinkemu.Step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmp := t.TempDir()
	root := filepath.Join(tmp, "flink")
	var steps []flinkemu.Step
	cfg := flinkemu.DefaultConfig()
	cfg.Servers = c.Servers()
	cfg.Layout = layout
	cfg.Release = real.meta.Release
	cfg.PathRoot = real.meta.PathRoot
	cfg.ClusterID = real.meta.ClusterID
	cfg.SessionTimeout = harvestSession
	cfg.Storage = root
	cfg.FlinkStorage = "file:" + root
	cfg.Host = harvestAddr + ":6123"
	cfg.Retained = harvestRetained
	legacy := layout == flinkemu.Flink1_4
	cfg.Retention = flinkha.RetainOnCancellation
	if legacy {
		cfg.Retention = flinkha.RetainNever
	}
	cfg.MetadataInProgress = Release{Version: real.meta.Release}.AtLeast(1, 15)
	cfg.BeforeStep = func(s flinkemu.Step) error { steps = append(steps, s); return nil }
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	spec := flinkemu.CheckpointSpec{StateSizes: []int{1500, 1500}, SharedSizes: []int{1300, 1300}, KeepShared: 1}
	if legacy {
		spec.SharedSizes, spec.KeepShared = nil, 0
	}
	for range emulatorCheckpoints {
		if _, err := jm.CompleteCheckpoint(job, spec); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // apart in time, as Flink's checkpoints are
	}
	var pointers []int64
	for _, cp := range jm.Checkpoints(job) {
		pointers = append(pointers, cp.ID)
	}

	ph := harvestPlaceholders{job: job, cluster: strings.Trim(cfg.ClusterID, "/"), root: root, tmp: tmp}
	zc := zktest.Connect(t, c.Servers())
	ns := cfg.Namespace()
	dump, err := dumpZK(zc.Conn, ns, ph)
	if err != nil {
		t.Fatal(err)
	}
	files, copies, err := dumpFiles(root, ph)
	if err != nil {
		t.Fatal(err)
	}
	meta := fixtureMeta{
		Release: real.meta.Release, JobID: job, ClusterID: cfg.ClusterID, PathRoot: cfg.PathRoot, Namespace: ns,
		StorageRoot: root, StorageRootURI: "file:" + root, TempDir: tmp, Pointers: pointers,
		Dump: fmt.Sprintf("flinkemu %s as Flink %s, the JobManager alive", layout, real.meta.Release),
	}
	dir := filepath.Join(tmp, "fixture")
	if err := writeFixture(dir, meta, dump, files, copies); err != nil {
		t.Fatal(err)
	}
	return loadFixture(t, dir), steps
}

// picture is a fixture reduced to what real Flink and the emulator must
// share: ids and sizes normalized away.
type picture struct {
	release string
	// nodes: by path below the namespace ("." for itself), normalized.
	nodes map[string]*shape
	// files: by path below the storage root, normalized.
	files map[string]*shape
	// facts about the retained checkpoints' contents.
	facts map[string]bool
}

// shape collects what the entries with one normalized path have: how
// many there are and, per aspect, the values they show.
type shape struct {
	count   int
	aspects map[string]map[string]bool
}

func (s *shape) add(aspect, value string) {
	if s.aspects[aspect] == nil {
		s.aspects[aspect] = map[string]bool{}
	}
	s.aspects[aspect][value] = true
}

func (s *shape) value(aspect string) string {
	var vs []string
	for v := range s.aspects[aspect] {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return strings.Join(vs, " | ")
}

func shapeOf(m map[string]*shape, key string) *shape {
	s := m[key]
	if s == nil {
		s = &shape{aspects: map[string]map[string]bool{}}
		m[key] = s
	}
	return s
}

var (
	reUUID      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rePointer   = regexp.MustCompile(`/[0-9]{19}(/|$)`)
	reLatch     = regexp.MustCompile(`/_c_` + reUUID.String() + `-latch-[0-9]{10}$`)
	reLock      = regexp.MustCompile(`/locks/(` + reUUID.String() + `)$`)
	reChk       = regexp.MustCompile(`/chk-([0-9]+)(/|$)`)
	reHAFile    = regexp.MustCompile(`/(completedCheckpoint|submittedJobGraph|submittedExecutionPlan)[0-9a-f]{12}$`)
	reBlob      = regexp.MustCompile(`/blob_p-[0-9a-f]{40}-[0-9a-f]{32}$`)
	reInProgres = regexp.MustCompile(`/\._metadata\.inprogress\.` + reUUID.String() + `$`)
	reRPCHost   = regexp.MustCompile(`^([a-z.]+://flink@)[^/]+(/.*)$`)
	reHTTPHost  = regexp.MustCompile(`^(https?://)[^/]+$`)
)

// describer builds the picture of one fixture.
type describer struct {
	t        *testing.T
	f        *fixture
	retained map[int64]bool
	lo, hi   int64 // the oldest and newest retained checkpoint
	locks    map[string]string
	leaders  map[string]string
}

// describe reduces a fixture to its picture.
func describe(t *testing.T, f *fixture) *picture {
	t.Helper()
	d := &describer{t: t, f: f, retained: map[int64]bool{}, locks: map[string]string{}, leaders: map[string]string{}}
	ps := f.pointers(t)
	for _, p := range ps {
		d.retained[p.id] = true
	}
	d.lo, d.hi = ps[0].id, ps[len(ps)-1].id
	pc := &picture{release: f.meta.Release, nodes: map[string]*shape{}, files: map[string]*shape{}, facts: map[string]bool{}}
	type keyed struct {
		key string
		n   fixtureZNode
	}
	nodes := make([]keyed, 0, len(f.zk.Nodes))
	for _, n := range f.zk.Nodes {
		nodes = append(nodes, keyed{d.znodeKey(n.Path), n})
	}
	// Leader sessions are numbered as their znodes are described: in
	// the order of their keys, not of ZooKeeper's listing (a hash order,
	// and the job's id sorts anywhere among the other leaders' names).
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].key < nodes[j].key })
	for _, kn := range nodes {
		key, n := kn.key, kn.n
		s := shapeOf(pc.nodes, key)
		s.count++
		s.add("kind", n.Kind)
		s.add("sequential", strconv.FormatBool(n.Sequential))
		owner := "none"
		if n.Ephemeral {
			owner = n.Session
		}
		s.add("owner", owner)
		data, counter := d.znodeData(key, n)
		s.add("data", data)
		if !counter {
			s.add("version", strconv.Itoa(int(n.Version)))
		}
	}
	for _, e := range f.files.Entries {
		key := d.fileKey(e.Path)
		s := shapeOf(pc.files, key)
		s.count++
		switch {
		case e.Dir:
			s.add("type", "directory")
		case e.Other != "":
			s.add("type", e.Other)
		default:
			s.add("type", "file")
		}
		if e.Copied {
			s.add("encoding", d.fileEncoding(key, f.ph.apply(e.Path)))
		}
	}
	d.checkpointFacts(pc.facts, ps)
	return pc
}

// znodeKey is a znode's path below the namespace with its ids replaced.
func (d *describer) znodeKey(p string) string {
	rel := strings.TrimPrefix(p, d.f.zk.Namespace)
	rel = rePointer.ReplaceAllString(rel, "/{cp}$1")
	rel = reLatch.ReplaceAllString(rel, "/_c_{uuid}-latch-{seq}")
	if m := reLock.FindStringSubmatch(rel); m != nil {
		if d.locks[m[1]] == "" {
			d.locks[m[1]] = fmt.Sprintf("{lock-%d}", len(d.locks)+1)
		}
		rel = strings.TrimSuffix(rel, m[1]) + d.locks[m[1]]
	}
	rel = reUUID.ReplaceAllString(rel, "{uuid}")
	if rel = strings.TrimPrefix(rel, "/"); rel == "" {
		return "."
	}
	return rel
}

// fileKey is a path below the storage root with its ids replaced; chk-N
// becomes chk-{retained}, chk-{newer} (after the newest retained
// checkpoint: in progress) or chk-{subsumed}.
func (d *describer) fileKey(p string) string {
	p = "/" + p
	if m := reChk.FindStringSubmatch(p); m != nil {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		which := "subsumed"
		switch {
		case d.retained[id]:
			which = "retained"
		case id > d.hi:
			which = "newer"
		}
		p = reChk.ReplaceAllString(p, "/chk-{"+which+"}$2")
	}
	p = reHAFile.ReplaceAllString(p, "/$1{hex12}")
	p = reBlob.ReplaceAllString(p, "/blob_p-{sha1}-{random}")
	p = reInProgres.ReplaceAllString(p, "/._metadata.inprogress.{uuid}")
	p = reUUID.ReplaceAllString(p, "{uuid}")
	return strings.TrimPrefix(p, "/")
}

// flinkFileKey is fileKey of a Flink path (a URI below the storage root).
func (d *describer) flinkFileKey(p string) string {
	rel, ok := d.f.rel(p)
	if !ok {
		return "outside the storage root: " + p
	}
	return d.fileKey(d.f.ph.replace(rel))
}

// znodeData says how a znode's data is encoded; counter reports the
// checkpoint counter (whose data version counts its increments).
func (d *describer) znodeData(key string, n fixtureZNode) (string, bool) {
	// jobs/<job>/checkpoint_id_counter from 1.14 on, checkpoint-counter/
	// <job> before.
	if strings.HasSuffix(key, "/checkpoint_id_counter") || strings.HasPrefix(key, "checkpoint-counter/") {
		if len(n.Data) != 4 {
			return fmt.Sprintf("checkpoint counter of %d bytes", len(n.Data)), true
		}
		next := int64(n.Data[0])<<24 | int64(n.Data[1])<<16 | int64(n.Data[2])<<8 | int64(n.Data[3])
		s := "checkpoint counter: 4-byte big-endian next id"
		if next <= d.hi {
			s += fmt.Sprintf(", NOT above the newest pointer %d", d.hi)
		}
		if int64(n.Version) != next-1 {
			s += fmt.Sprintf(", data version %d is not next id - 1 (SharedCount's increments from 1)", n.Version)
		}
		return s, true
	}
	if len(n.Data) == 0 {
		return "empty", false
	}
	if h, err := flinkha.DecodeStateHandle(n.Data); err == nil {
		p, _ := h.Path()
		size := "its size"
		if rel, ok := d.f.rel(p); !ok || d.f.byPath[rel].Size != h.Size {
			size = fmt.Sprintf("size %d, not its size", h.Size)
		}
		return fmt.Sprintf("RetrievableStreamStateHandle of %s (%s)", d.flinkFileKey(p), size), false
	}
	if li, err := flinkha.DecodeLeaderInfo(n.Data); err == nil && li != nil {
		addr := reRPCHost.ReplaceAllString(li.Address, "$1{host}$2")
		addr = reHTTPHost.ReplaceAllString(addr, "$1{host}")
		if d.leaders[li.SessionID] == "" {
			d.leaders[li.SessionID] = fmt.Sprintf("{leader-session-%d}", len(d.leaders)+1)
		}
		return fmt.Sprintf("leader information %s, %s", addr, d.leaders[li.SessionID]), false
	}
	if net.ParseIP(string(n.Data)) != nil {
		return "an IP address (Curator's default data)", false
	}
	if fixturePrintable(n.Data) {
		return fmt.Sprintf("text %q", n.Data), false
	}
	return fmt.Sprintf("%d bytes of no known encoding", len(n.Data)), false
}

// fileEncoding says how a copied file is encoded.
func (d *describer) fileEncoding(key, rel string) string {
	data := d.f.content(d.t, rel)
	switch base := path.Base(key); {
	case base == "_metadata":
		m, err := metadata.Decode(bytes.NewReader(data), int64(len(data)), metadata.Options{})
		if err != nil {
			return "_metadata that does not decode: " + err.Error()
		}
		s := fmt.Sprintf("_metadata version %d", m.Version)
		if len(m.Properties) > 0 {
			s += ", " + propsSummary(m.Properties)
		}
		return s
	case strings.HasPrefix(base, "completedCheckpoint"):
		cc, err := flinkha.DecodeCompletedCheckpoint(data)
		if err != nil {
			return "CompletedCheckpoint that does not decode: " + err.Error()
		}
		props, _ := haProps(data)
		return fmt.Sprintf("Java-serialized CompletedCheckpoint, field set %s, %s", cc.FieldSet, propsSummary(props))
	}
	s, err := javaser.Decode(data)
	if err != nil {
		return "not Java serialization"
	}
	o, err := s.Object()
	if err != nil {
		return "Java serialization without one root object"
	}
	return "Java-serialized " + o.ClassName()
}

// haProps returns the HA file's CheckpointProperties, serialized on its own
// as _metadata keeps them.
func haProps(ha []byte) ([]byte, error) {
	s, err := javaser.Decode(ha)
	if err != nil {
		return nil, err
	}
	root, err := s.Object()
	if err != nil {
		return nil, err
	}
	props, err := javaser.FieldAs[*javaser.Object](root, "props")
	if err != nil || props == nil {
		return nil, fmt.Errorf("no props: %v", err)
	}
	return javaser.Encode(javaser.NewStream(props))
}

// propsSummary renders a serialized CheckpointProperties.
func propsSummary(data []byte) string {
	s, err := javaser.Decode(data)
	if err != nil {
		return "properties that do not decode"
	}
	o, err := s.Object()
	if err != nil {
		return "properties without one object"
	}
	var parts []string
	for _, name := range []string{"discardSubsumed", "discardFinished", "discardCancelled", "discardFailed", "discardSuspended", "forced", "unclaimed"} {
		if v, ok := o.Field(name); ok {
			parts = append(parts, fmt.Sprintf("%s=%v", name, v))
		}
	}
	if v, ok := o.Field("checkpointType"); ok {
		switch ct := v.(type) {
		case *javaser.Object:
			name, _ := ct.StringField("name")
			parts = append(parts, fmt.Sprintf("checkpointType=%s(%s)", path.Ext(ct.ClassName())[1:], name))
		case *javaser.Enum:
			parts = append(parts, "checkpointType="+ct.Name())
		}
	}
	return fmt.Sprintf("%s (serialVersionUID %d) {%s}", path.Ext(o.ClassName())[1:], o.SerialVersionUID(), strings.Join(parts, ", "))
}

// checkpointFacts records what the retained checkpoints hold.
func (d *describer) checkpointFacts(facts map[string]bool, ps []fixturePointer) {
	f := d.f
	seenShared := map[string]int64{}
	for _, p := range ps {
		ha := f.content(d.t, p.haRel)
		cc := f.checkpoint(d.t, p)
		consistent := cc.CheckpointID == p.id && cc.JobID == f.meta.JobID && cc.Metadata != nil
		if rel, ok := f.rel(cc.ExternalPointer); !ok || rel != f.chkDir(p.id) {
			consistent = false
		}
		if cc.Metadata != nil && (d.flinkFileKey(cc.Metadata.Path) != "checkpoints/{job}/chk-{retained}/_metadata" || !strings.HasSuffix(cc.Metadata.Class, ".FileStateHandle")) {
			consistent = false
		}
		facts[fmt.Sprintf("HA file names its checkpoint id, the job, chk-N and chk-N/_metadata (FileStateHandle): %v", consistent)] = true
		if cc.InlineBytes > 0 {
			facts["HA file holds inline state"] = true
		}
		for _, r := range cc.Files {
			key := d.flinkFileKey(r.Path)
			facts[fmt.Sprintf("HA file references %s (%s)", key, path.Ext(r.Class)[1:])] = true
			if strings.Contains(key, "/shared/") {
				if first, ok := seenShared[key+"\x00"+r.Path]; ok && first != p.id {
					facts["a retained checkpoint references a shared/ file an older retained one references too"] = true
				} else if !ok {
					seenShared[key+"\x00"+r.Path] = p.id
				}
			}
		}
		if cc.Metadata == nil {
			continue
		}
		rel, _ := f.rel(cc.Metadata.Path)
		data := f.content(d.t, rel)
		m, err := metadata.Decode(bytes.NewReader(data), int64(len(data)), metadata.Options{})
		if err != nil {
			facts["_metadata does not decode: "+err.Error()] = true
			continue
		}
		if props, err := haProps(ha); err == nil && len(m.Properties) > 0 {
			facts[fmt.Sprintf("_metadata's CheckpointProperties are the HA file's, byte for byte: %v", bytes.Equal(props, m.Properties))] = true
		}
		facts[fmt.Sprintf("_metadata master states: %d", len(m.MasterStates))] = true
		for _, op := range m.Operators {
			facts[fmt.Sprintf("operator names and uids stored: %v", op.Name != "" || op.UID != "")] = true
			if op.Coordinator != nil {
				facts["coordinator state: "+d.handleKey(op.Coordinator)] = true
			}
			for _, st := range op.Subtasks {
				if h := st.ManagedOperator; h != nil {
					facts["operator state: "+d.handleKey(h.Delegate)] = true
				}
				if h := st.RawOperator; h != nil {
					facts["raw operator state: "+d.handleKey(h.Delegate)] = true
				}
				if len(st.InputChannels)+len(st.OutputChannels) > 0 {
					facts["channel state (unaligned checkpoint)"] = true
				}
				for _, h := range []*metadata.KeyedHandle{st.ManagedKeyed, st.RawKeyed} {
					if h == nil {
						continue
					}
					switch h.Tag {
					case metadata.TagIncrementalKeyGroups, metadata.TagIncrementalKeyGroupsV2:
						facts["keyed state: incremental (RocksDB), meta "+d.handleKey(h.Meta)] = true
						for _, n := range h.Shared {
							facts["keyed state: incremental (RocksDB), shared "+d.handleKey(n.Handle)] = true
						}
						for _, n := range h.Private {
							facts["keyed state: incremental (RocksDB), private "+d.handleKey(n.Handle)] = true
						}
					case metadata.TagKeyGroups, metadata.TagKeyGroupsV2, metadata.TagSavepointKeyGroups:
						facts["keyed state: key-groups handle, "+d.handleKey(h.Delegate)] = true
					default:
						facts[fmt.Sprintf("keyed state: handle tag %d", h.Tag)] = true
					}
				}
			}
		}
	}
}

// handleKey says what a stream handle of _metadata is and where it
// points, ids normalized.
func (d *describer) handleKey(h *metadata.StreamHandle) string {
	switch {
	case h == nil:
		return "none"
	case h.Tag == metadata.TagByteStream:
		return "inline"
	case h.Tag == metadata.TagRelativeStream:
		return "relative chk-{retained}/" + reUUID.ReplaceAllString(h.Path, "{uuid}")
	case h.Tag == metadata.TagFileStream:
		return "file " + d.flinkFileKey(h.Path)
	}
	return fmt.Sprintf("handle tag %d", h.Tag)
}

// diff lists how q (the emulator) differs from p (real Flink).
func (p *picture) diff(q *picture) []difference {
	var out []difference
	compare := func(area string, a, b map[string]*shape, counted func(string) bool) {
		keys := map[string]bool{}
		for k := range a {
			keys[k] = true
		}
		for k := range b {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			sa, sb := a[k], b[k]
			switch {
			case sa == nil:
				out = append(out, difference{area: area, key: k, aspect: "present", emu: fmt.Sprintf("%d×", sb.count)})
				continue
			case sb == nil:
				out = append(out, difference{area: area, key: k, aspect: "present", real: fmt.Sprintf("%d×", sa.count)})
				continue
			}
			if counted(k) && sa.count != sb.count {
				out = append(out, difference{area: area, key: k, aspect: "count", real: strconv.Itoa(sa.count), emu: strconv.Itoa(sb.count)})
			}
			aspects := map[string]bool{}
			for asp := range sa.aspects {
				aspects[asp] = true
			}
			for asp := range sb.aspects {
				aspects[asp] = true
			}
			var names []string
			for asp := range aspects {
				names = append(names, asp)
			}
			slices.Sort(names)
			for _, asp := range names {
				if va, vb := sa.value(asp), sb.value(asp); va != vb {
					out = append(out, difference{area: area, key: k, aspect: asp, real: va, emu: vb})
				}
			}
		}
	}
	compare("zk", p.nodes, q.nodes, func(string) bool { return true })
	// How many state files a checkpoint has depends on the job.
	compare("files", p.files, q.files, func(k string) bool { return !strings.Contains(k, "{uuid}") })
	var facts []string
	for f := range p.facts {
		facts = append(facts, f)
	}
	for f := range q.facts {
		if !p.facts[f] {
			facts = append(facts, f)
		}
	}
	slices.Sort(facts)
	for _, f := range facts {
		switch {
		case !q.facts[f]:
			out = append(out, difference{area: "checkpoints", key: f, aspect: "present", real: "yes"})
		case !p.facts[f]:
			out = append(out, difference{area: "checkpoints", key: f, aspect: "present", emu: "yes"})
		}
	}
	return out
}

// checkWriteOrder checks Flink's write order in a dump, from ZooKeeper's
// and the file system's times: for every retained checkpoint, each file
// its HA file references and its _metadata are older than its HA file,
// which is older than its pointer; the pointer, its locks and its lock
// were made in one multi; pointers were added in id order; the newest
// pointer was added before a subsumed one was removed (the pointer
// directory's children changed after it was made); and the job graph's
// blob and HA file are older than its znode.
func checkWriteOrder(t *testing.T, who string, f *fixture) {
	t.Helper()
	nodes := map[string]fixtureZNode{}
	for _, n := range f.zk.Nodes {
		nodes[f.ph.apply(n.Path)] = n
	}
	mtime := func(flinkPath string) (time.Time, bool) {
		rel, ok := f.rel(flinkPath)
		if !ok {
			return time.Time{}, false
		}
		e, ok := f.byPath[rel]
		return time.Unix(0, e.Mtime), ok && e.Mtime != 0
	}
	ms := func(v int64) time.Time { return time.UnixMilli(v) }
	before := func(what string, a time.Time, b time.Time, bWhat string) {
		t.Helper()
		if a.After(b.Add(orderSlack)) {
			t.Errorf("%s: %s (%s) is newer than %s (%s) by %v", who, what, a.Format("15:04:05.000000"), bWhat, b.Format("15:04:05.000000"), a.Sub(b))
		}
	}
	ps := f.pointers(t)
	var lastCzxid int64
	for _, p := range ps {
		n := nodes[p.znode]
		if n.Ctime == 0 || n.Czxid == 0 {
			t.Fatalf("%s: pointer %d has no ZooKeeper times: a fixture from before the harvest recorded them", who, p.id)
		}
		pointer := ms(n.Ctime)
		haTime, ok := mtime(f.meta.StorageRootURI + "/" + p.haRel)
		if !ok {
			t.Errorf("%s: pointer %d: no time for its HA file %s", who, p.id, p.haRel)
			continue
		}
		before(fmt.Sprintf("checkpoint %d's HA file", p.id), haTime, pointer, "its pointer znode")
		cc := f.checkpoint(t, p)
		refs := []string{}
		if cc.Metadata != nil {
			refs = append(refs, cc.Metadata.Path)
		}
		for _, r := range cc.Files {
			refs = append(refs, r.Path)
		}
		newest, newestPath := time.Time{}, ""
		for _, r := range refs {
			mt, ok := mtime(r)
			if !ok {
				t.Errorf("%s: checkpoint %d: no time for %s", who, p.id, r)
				continue
			}
			if mt.After(newest) {
				newest, newestPath = mt, r
			}
		}
		before(fmt.Sprintf("checkpoint %d's newest file %s", p.id, path.Base(newestPath)), newest, haTime, "its HA file")
		var lockNodes []string
		for np, ln := range nodes {
			if strings.HasPrefix(np, p.znode+"/") {
				lockNodes = append(lockNodes, np)
				if ln.Czxid != n.Czxid {
					t.Errorf("%s: %s was made in transaction %#x, its pointer in %#x: not in one multi", who, np, ln.Czxid, n.Czxid)
				}
			}
		}
		if len(lockNodes) == 0 {
			t.Errorf("%s: pointer %d has no lock nodes", who, p.id)
		}
		if n.Czxid <= lastCzxid {
			t.Errorf("%s: pointer %d was made in transaction %#x, not after the older pointer's %#x", who, p.id, n.Czxid, lastCzxid)
		}
		lastCzxid = n.Czxid
		t.Logf("%s: checkpoint %d: newest referenced file %s, HA file %s, pointer %s (transaction %#x)", who, p.id,
			newest.Format("15:04:05.000000"), haTime.Format("15:04:05.000000"), pointer.Format("15:04:05.000"), n.Czxid)
	}
	newest := ps[len(ps)-1]
	dir := nodes[path.Dir(newest.znode)]
	if dir.Pzxid <= nodes[newest.znode].Czxid {
		t.Errorf("%s: the pointer directory's children last changed in transaction %#x, not after the newest pointer was added (%#x): no subsumed pointer was removed after it", who, dir.Pzxid, nodes[newest.znode].Czxid)
	} else {
		t.Logf("%s: the pointer directory's children last changed in transaction %#x, after the newest pointer's %#x: a subsumed pointer was removed after it was added", who, dir.Pzxid, nodes[newest.znode].Czxid)
	}
	for np, n := range nodes {
		rel := strings.TrimPrefix(np, f.meta.Namespace+"/")
		if rel != "jobgraphs/"+f.meta.JobID && rel != "execution-plans/"+f.meta.JobID {
			continue
		}
		h, err := flinkha.DecodeStateHandle(n.Data)
		if err != nil {
			t.Errorf("%s: %s: %v", who, np, err)
			continue
		}
		hp, _ := h.Path()
		graph, ok := mtime(hp)
		if !ok {
			t.Errorf("%s: no time for the job graph's HA file %s", who, hp)
			continue
		}
		before("the job graph's HA file", graph, ms(n.Ctime), "its znode")
		blobDir := fmt.Sprintf("ha/%s/blob/job_%s/", strings.Trim(f.meta.ClusterID, "/"), f.meta.JobID)
		blobs := 0
		for rel, e := range f.byPath {
			if strings.HasPrefix(rel, blobDir) && !e.Dir {
				blobs++
				before("the job's blob "+path.Base(rel), time.Unix(0, e.Mtime), graph, "the job graph's HA file")
			}
		}
		if blobs == 0 {
			t.Errorf("%s: no blob in %s", who, blobDir)
		}
	}
}

// checkSteps checks the order of the emulator's steps: within each
// checkpoint the state files, then _metadata, the HA file and the
// pointer, and only then the subsumption of older checkpoints.
func checkSteps(t *testing.T, steps []flinkemu.Step) {
	t.Helper()
	rank := map[flinkemu.StepKind]int{
		flinkemu.StepMkdir: 0, flinkemu.StepState: 1, flinkemu.StepShared: 1, flinkemu.StepMetadata: 2,
		flinkemu.StepHAFile: 3, flinkemu.StepPointer: 4, flinkemu.StepSubsume: 5,
	}
	last := map[int64]int{}
	kinds := map[int64][]string{}
	for _, s := range steps {
		if s.ID < 0 {
			continue
		}
		r, ok := rank[s.Kind]
		if !ok {
			t.Errorf("emulator: unknown step %s", s)
			continue
		}
		if r < last[s.ID] {
			t.Errorf("emulator: step %s comes after a later kind of step of the same checkpoint", s)
		}
		last[s.ID] = r
		if k := kinds[s.ID]; len(k) == 0 || k[len(k)-1] != string(s.Kind) {
			kinds[s.ID] = append(k, string(s.Kind))
		}
	}
	for id, k := range kinds {
		if !slices.Contains(k, string(flinkemu.StepPointer)) {
			t.Errorf("emulator: checkpoint %d has no pointer step: %v", id, k)
		}
	}
	ids := make([]int64, 0, len(kinds))
	for id := range kinds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	t.Logf("emulator: steps of checkpoint %d: %v", ids[len(ids)-1], kinds[ids[len(ids)-1]])
}
