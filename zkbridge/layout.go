package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Generation is a family of Flink versions that share one ZooKeeper HA
// layout (docs/flink-formats.md §1.2).
type Generation int

const (
	// GenUnknown: not (yet) known.
	GenUnknown Generation = iota
	// Gen1_4 is Flink 1.4 (legacy JobManager mode): pointers as 1.5-1.13;
	// real 1.4.2 elects its JobManager under leader/<job 0>/
	// job_manager_lock and leaderlatch/<job 0>/job_manager_lock, as 1.5
	// and 1.6 do in legacy mode (legacyJobID). Latch children directly
	// under leaderlatch and a leader node that is leader itself are
	// older layouts, taken as 1.4's.
	Gen1_4
	// Gen1_5 is Flink 1.5-1.13: checkpoints/<job>/<%019d> with ephemeral
	// lock children, leaderlatch/<suffix> and leader/<suffix>.
	Gen1_5
	// Gen1_14 is Flink 1.14: jobs/<job>/checkpoints/<%019d> with ephemeral
	// lock children directly, leader/<component>/{latch,connection_info}
	// and jobs/<job>/leader/{latch,connection_info}.
	Gen1_14
	// Gen1_15 is Flink 1.15-1.17: the same pointer path with a persistent
	// locks child holding the ephemeral locks, one leader/latch,
	// leader/<component>/connection_info, job component <jobId>.
	Gen1_15
	// Gen1_18 is Flink 1.18-1.20: as 1.15, job component job-<jobId>.
	Gen1_18
	// Gen2 is Flink 2.x: as 1.18, execution-plans instead of jobgraphs.
	Gen2
)

var allGenerations = []Generation{Gen1_4, Gen1_5, Gen1_14, Gen1_15, Gen1_18, Gen2}

func (g Generation) String() string {
	switch g {
	case GenUnknown:
		return "unknown"
	case Gen1_4:
		return "1.4"
	case Gen1_5:
		return "1.5-1.13"
	case Gen1_14:
		return "1.14"
	case Gen1_15:
		return "1.15-1.17"
	case Gen1_18:
		return "1.18-1.20"
	case Gen2:
		return "2.x"
	}
	return fmt.Sprintf("Generation(%d)", int(g))
}

func (g Generation) valid() bool { return g >= Gen1_4 && g <= Gen2 }

// MarshalText writes String().
func (g Generation) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// ParseGeneration reads a Flink version ("1.13", "1.17.2", "2.1") or a
// generation name ("1.5-1.13", "1.4-1.13", "1.15-1.17", "2.x"). "" and
// "auto" are GenUnknown (detect).
func ParseGeneration(s string) (Generation, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "", "auto":
		return GenUnknown, nil
	case "1.4-1.13", "1.5-1.13":
		return Gen1_5, nil
	case "1.15-1.17":
		return Gen1_15, nil
	case "1.18-1.20":
		return Gen1_18, nil
	case "2", "2.x":
		return Gen2, nil
	}
	var major, minor int
	if n, err := fmt.Sscanf(s, "%d.%d", &major, &minor); err != nil || n != 2 {
		return GenUnknown, fmt.Errorf("Flink version %q: want for example 1.13, 1.17.2, 2.0 or auto", s)
	}
	switch {
	case major == 1 && minor == 4:
		return Gen1_4, nil
	case major == 1 && minor >= 5 && minor <= 13:
		return Gen1_5, nil
	case major == 1 && minor == 14:
		return Gen1_14, nil
	case major == 1 && minor >= 15 && minor <= 17:
		return Gen1_15, nil
	case major == 1 && minor >= 18 && minor <= 20:
		return Gen1_18, nil
	case major == 2:
		return Gen2, nil
	}
	return GenUnknown, fmt.Errorf("Flink version %q: ckptfs knows 1.4 to 2.x", s)
}

// LockStyle is how Flink locks a pointer znode.
type LockStyle int

const (
	// LockStyleUnknown: the evidence does not tell (see Layout.Evidence).
	LockStyleUnknown LockStyle = iota
	// LockDirect: ephemeral <uuid> children directly under the pointer
	// (1.4-1.14). A childless pointer is live.
	LockDirect
	// LockChild: a persistent locks child holding ephemeral <uuid>
	// children (1.15+). A pointer without locks is marked for deletion
	// and invisible to Flink's recovery.
	LockChild
)

func (s LockStyle) String() string {
	switch s {
	case LockDirect:
		return "direct"
	case LockChild:
		return "locks-child"
	}
	return "unknown"
}

// MarshalText writes String().
func (s LockStyle) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// jobsLockStyle is the lock style of pointers under jobs/ when every
// candidate generation that uses jobs/ agrees on it.
func jobsLockStyle(cands []Generation) LockStyle {
	style := LockStyleUnknown
	for _, g := range cands {
		switch {
		case g < Gen1_14:
		case style == LockStyleUnknown:
			style = g.lockStyle()
		case style != g.lockStyle():
			return LockStyleUnknown
		}
	}
	return style
}

func (g Generation) lockStyle() LockStyle {
	switch {
	case g == GenUnknown:
		return LockStyleUnknown
	case g >= Gen1_15:
		return LockChild
	}
	return LockDirect
}

// Layout is what discovery found: Flink's namespace, the generation(s)
// consistent with what is in it, and every job.
type Layout struct {
	PathRoot  string `json:"path_root"`
	ClusterID string `json:"cluster_id"`
	// Namespace is <path.root>/<cluster-id> as Flink joined them.
	Namespace string `json:"namespace"`
	// Generation is the single generation the evidence allows, or
	// GenUnknown with Candidates listing several.
	Generation Generation   `json:"generation"`
	Candidates []Generation `json:"candidates"`
	// Overridden: Generation comes from Config.FlinkVersion.
	Overridden bool `json:"overridden,omitempty"`
	// Evidence lists what the decision rests on.
	Evidence []string `json:"evidence"`
	// JobsLockStyle is the lock style of pointers under jobs/ (1.14+),
	// when the evidence decides it.
	JobsLockStyle LockStyle   `json:"jobs_lock_style"`
	Jobs          []JobLayout `json:"jobs"`
}

// JobLayout is where one job's znodes are.
type JobLayout struct {
	JobID string `json:"job_id"`
	// PointerDir holds the <%019d> checkpoint pointers ("" when the job
	// has no checkpoint store yet).
	PointerDir string `json:"pointer_dir,omitempty"`
	// CounterPath is the checkpoint id counter.
	CounterPath string `json:"counter,omitempty"`
	// LockStyle of the pointers; a job's own pointers can decide it when
	// the namespace does not.
	LockStyle LockStyle `json:"lock_style"`
	// JobGraph is the job graph (execution plan) znode, "" if none.
	JobGraph string `json:"job_graph,omitempty"`
}

// Errors of discovery.
var (
	// ErrNoNamespace: no Flink namespace where one was expected.
	ErrNoNamespace = errors.New("zkbridge: no Flink namespace found")
	// ErrAmbiguousCluster: several children of the path root look like
	// Flink namespaces; pass the cluster id.
	ErrAmbiguousCluster = errors.New("zkbridge: several Flink clusters under the path root")
	// ErrAmbiguousLayout: the znodes do not tell Flink 1.14 from 1.15+
	// (which decides whether a childless pointer is live); pass the Flink
	// version.
	ErrAmbiguousLayout = errors.New("zkbridge: cannot tell the Flink version from ZooKeeper")
)

// legacyJobID is the job id under which Flink's legacy JobManager (1.4;
// 1.5 and 1.6 in legacy mode) elects itself:
// HighAvailabilityServices.DEFAULT_JOB_ID.
const legacyJobID = "00000000000000000000000000000000"

// Children of a namespace that only Flink creates.
var flinkNamespaceChildren = []string{
	"leaderlatch", "leader", "jobgraphs", "execution-plans", "checkpoints",
	"checkpoint-counter", "jobs", "running_job_registry",
}

func looksLikeNamespace(children []string) bool {
	for _, c := range children {
		if slices.Contains(flinkNamespaceChildren, c) {
			return true
		}
	}
	return false
}

// findNamespace applies the configured cluster id, or discovers it.
func (b *Bridge) findNamespace(ctx context.Context) (clusterID, ns string, err error) {
	root := b.cfg.PathRoot
	if b.cfg.ClusterID != "" {
		cands := namespaceCandidates(root, b.cfg.ClusterID)
		for _, ns := range cands {
			stat, err := b.zk.exists(ctx, ns)
			if err != nil {
				return "", "", err
			}
			if stat != nil {
				return b.cfg.ClusterID, ns, nil
			}
		}
		return "", "", fmt.Errorf("%w: %s does not exist (path root %s, cluster id %s)", ErrNoNamespace, strings.Join(cands, " or "), root, b.cfg.ClusterID)
	}
	names, _, err := b.zk.children(ctx, root)
	if errors.Is(err, zk.ErrNoNode) {
		return "", "", fmt.Errorf("%w: path root %s does not exist", ErrNoNamespace, root)
	}
	if err != nil {
		return "", "", err
	}
	var found []string
	for _, n := range names {
		kids, _, err := b.zk.children(ctx, join(root, n))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		if looksLikeNamespace(kids) {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 1:
		return found[0], join(root, found[0]), nil
	case 0:
		if looksLikeNamespace(names) {
			// Flink 1.15+ with an empty cluster id uses the root itself.
			return "", root, nil
		}
		return "", "", fmt.Errorf("%w: no child of %s holds Flink's znodes (leader, jobgraphs, checkpoints, jobs, ...); pass --cluster-id", ErrNoNamespace, root)
	}
	return "", "", fmt.Errorf("%w: %s holds %d (%s); pass --cluster-id", ErrAmbiguousCluster, root, len(found), strings.Join(found, ", "))
}

// evidence narrows the generations that can have produced a namespace.
type evidence struct {
	strong, weak []genClue
}

type genClue struct {
	gens []Generation
	why  string
}

func (e *evidence) add(strong bool, why string, gens ...Generation) {
	c := genClue{gens: gens, why: why}
	if strong {
		e.strong = append(e.strong, c)
	} else {
		e.weak = append(e.weak, c)
	}
}

// resolve intersects the clues: strong ones must agree; weak ones narrow
// further only where they do not contradict the strong ones.
func (e *evidence) resolve() (cands []Generation, notes []string) {
	cands = slices.Clone(allGenerations)
	for _, c := range e.strong {
		next := intersect(cands, c.gens)
		notes = append(notes, fmt.Sprintf("%s: %s", c.why, genList(c.gens)))
		if len(next) == 0 {
			notes = append(notes, "conflicting evidence (leftovers of an upgrade?): "+c.why)
			return nil, notes
		}
		cands = next
	}
	for _, c := range e.weak {
		next := intersect(cands, c.gens)
		if len(next) == 0 {
			notes = append(notes, fmt.Sprintf("%s: %s (ignored: contradicts stronger evidence)", c.why, genList(c.gens)))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: %s", c.why, genList(c.gens)))
		cands = next
	}
	return cands, notes
}

func intersect(a, b []Generation) []Generation {
	var out []Generation
	for _, g := range a {
		if slices.Contains(b, g) {
			out = append(out, g)
		}
	}
	return out
}

func genList(gs []Generation) string {
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = g.String()
	}
	return strings.Join(s, ", ")
}

func gensFrom(lo Generation) []Generation {
	var out []Generation
	for _, g := range allGenerations {
		if g >= lo {
			out = append(out, g)
		}
	}
	return out
}

func gensUpTo(hi Generation) []Generation {
	var out []Generation
	for _, g := range allGenerations {
		if g <= hi {
			out = append(out, g)
		}
	}
	return out
}

// Discover finds Flink's namespace, the generation of its layout and
// every job, by listing: nothing is assumed about the version.
func (b *Bridge) Discover(ctx context.Context) (*Layout, error) {
	return b.discover(ctx)
}

func (b *Bridge) discover(ctx context.Context) (*Layout, error) {
	clusterID, ns, err := b.findNamespace(ctx)
	if err != nil {
		return nil, err
	}
	l := &Layout{PathRoot: b.cfg.PathRoot, ClusterID: clusterID, Namespace: ns}
	top, _, err := b.zk.children(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("list namespace %s: %w", ns, err)
	}
	has := func(name string) bool { return slices.Contains(top, name) }
	var ev evidence

	// Jobs, from every place Flink keeps them.
	jobs := map[string]*JobLayout{}
	job := func(id string) *JobLayout {
		if jobs[id] == nil {
			jobs[id] = &JobLayout{JobID: id}
		}
		return jobs[id]
	}
	var modernJobs []string
	if has("jobs") {
		names, _, err := b.zk.children(ctx, join(ns, "jobs"))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		for _, id := range names {
			j := job(id)
			j.PointerDir = join(ns, "jobs", id, "checkpoints")
			j.CounterPath = join(ns, "jobs", id, "checkpoint_id_counter")
			modernJobs = append(modernJobs, id)
		}
		if len(names) > 0 {
			ev.add(false, "job data under jobs/<job>", gensFrom(Gen1_14)...)
		}
	}
	if has("checkpoints") {
		names, _, err := b.zk.children(ctx, join(ns, "checkpoints"))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		for _, id := range names {
			j := job(id)
			if j.PointerDir != "" {
				// Leftover of an upgrade: Flink 1.14+ reads jobs/<job>.
				continue
			}
			j.PointerDir = join(ns, "checkpoints", id)
			j.CounterPath = join(ns, "checkpoint-counter", id)
			j.LockStyle = LockDirect
		}
		if len(names) > 0 {
			ev.add(false, "checkpoint pointers under checkpoints/<job>", gensUpTo(Gen1_5)...)
		}
	}
	for _, dir := range []string{"jobgraphs", "execution-plans"} {
		if !has(dir) {
			continue
		}
		names, _, err := b.zk.children(ctx, join(ns, dir))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
		for _, id := range names {
			job(id).JobGraph = join(ns, dir, id)
		}
		if dir == "execution-plans" {
			ev.add(true, "execution-plans/ exists", Gen2)
		} else if len(names) > 0 {
			ev.add(false, "job graphs under jobgraphs/", gensUpTo(Gen1_18)...)
		}
	}

	// The leader layout.
	if err := b.leaderEvidence(ctx, ns, has, &ev); err != nil {
		return nil, err
	}
	// Lock children of job graphs and pointers: the strongest evidence,
	// but only present while a JobManager runs or, for locks, 1.15+.
	if err := b.lockEvidence(ctx, jobs, modernJobs, &ev); err != nil {
		return nil, err
	}

	cands, notes := ev.resolve()
	l.Evidence = notes
	if b.cfg.FlinkVersion != GenUnknown {
		if len(cands) > 0 && !slices.Contains(cands, b.cfg.FlinkVersion) {
			b.log.Warn("the configured Flink version contradicts ZooKeeper's layout", "configured", b.cfg.FlinkVersion.String(), "detected", genList(cands))
			l.Evidence = append(l.Evidence, "configured "+b.cfg.FlinkVersion.String()+" contradicts the evidence")
		}
		cands = []Generation{b.cfg.FlinkVersion}
		l.Overridden = true
	}
	l.Candidates = cands
	if len(cands) == 1 {
		l.Generation = cands[0]
	}
	style := jobsLockStyle(cands)
	l.JobsLockStyle = style
	for _, id := range modernJobs {
		if jobs[id].LockStyle == LockStyleUnknown {
			jobs[id].LockStyle = style
		}
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := jobs[id]
		if j.PointerDir == "" && l.Generation != GenUnknown {
			if l.Generation >= Gen1_14 {
				j.PointerDir = join(ns, "jobs", id, "checkpoints")
				j.CounterPath = join(ns, "jobs", id, "checkpoint_id_counter")
			} else {
				j.PointerDir = join(ns, "checkpoints", id)
				j.CounterPath = join(ns, "checkpoint-counter", id)
			}
			j.LockStyle = l.Generation.lockStyle()
		}
		l.Jobs = append(l.Jobs, *j)
	}
	return l, nil
}

// leaderEvidence reads the leader election znodes, which differ in every
// generation and stay (as persistent parents) after the JobManagers died.
// Every clue it gives is weak: Flink 1.15-1.17 with
// high-availability.use-old-ha-services elects leaders as 1.14 does but
// keeps 1.15's pointers, so the persistent locks child (lockEvidence)
// must decide where both are present.
func (b *Bridge) leaderEvidence(ctx context.Context, ns string, has func(string) bool, ev *evidence) error {
	if has("leaderlatch") {
		kids, _, err := b.zk.children(ctx, join(ns, "leaderlatch"))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		direct, perComponent, legacy := false, false, false
		for _, k := range kids {
			switch {
			case strings.Contains(k, "latch-"):
				direct = true
			case k == legacyJobID:
				legacy = true
			case strings.HasSuffix(k, "_lock") || isJobID(k):
				perComponent = true
			}
		}
		switch {
		case direct:
			ev.add(false, "latch nodes directly under leaderlatch", Gen1_4)
		case perComponent:
			ev.add(false, "leaderlatch/<component> exists", Gen1_5)
		case legacy:
			ev.add(false, "leaderlatch/<job 0> exists (the legacy JobManager)", Gen1_4, Gen1_5)
		default:
			ev.add(false, "leaderlatch/ exists", Gen1_4, Gen1_5)
		}
	}
	if has("leader") {
		kids, stat, err := b.zk.children(ctx, join(ns, "leader"))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		if stat != nil && (stat.EphemeralOwner != 0 || stat.DataLength > 0) {
			ev.add(false, "leader is itself a leader node", Gen1_4)
		}
		// The components' children at once (1.5-1.17 keep one per job),
		// judged in the order listed.
		leaf := func(k string) bool {
			return k == "latch" || strings.HasSuffix(k, "_lock") || strings.HasPrefix(k, "job-") && isJobID(k[4:])
		}
		subs, gone := make([][]string, len(kids)), make([]bool, len(kids))
		if _, err := forEachJob(ctx, len(kids), func(ctx context.Context, i int) (err error) {
			if leaf(kids[i]) {
				return nil
			}
			subs[i], _, err = b.zk.children(ctx, join(ns, "leader", kids[i]))
			if errors.Is(err, zk.ErrNoNode) {
				gone[i] = true
				return nil
			}
			return err
		}); err != nil {
			return err
		}
		for i, k := range kids {
			switch {
			case k == "latch":
				ev.add(false, "leader/latch exists (one latch per process)", gensFrom(Gen1_15)...)
				continue
			case strings.HasSuffix(k, "_lock"):
				ev.add(false, "leader/"+k+" exists", Gen1_5)
				continue
			case strings.HasPrefix(k, "job-") && isJobID(k[4:]):
				ev.add(false, "leader/job-<job> component", Gen1_18, Gen2)
				continue
			}
			if gone[i] {
				continue
			}
			sub := subs[i]
			switch {
			case slices.Contains(sub, "latch"):
				ev.add(false, "leader/"+k+"/latch exists (one latch per component)", Gen1_14)
			case slices.Contains(sub, "job_manager_lock") && k == legacyJobID:
				ev.add(false, "leader/<job 0>/job_manager_lock exists (the legacy JobManager)", Gen1_4, Gen1_5)
			case slices.Contains(sub, "job_manager_lock"):
				ev.add(false, "leader/"+k+"/job_manager_lock exists", Gen1_5)
			case slices.Contains(sub, "connection_info") && isJobID(k):
				ev.add(false, "leader/<job>/connection_info component", Gen1_15)
			case slices.Contains(sub, "connection_info"):
				ev.add(false, "leader/"+k+"/connection_info without a latch beside it", gensFrom(Gen1_15)...)
			case k == legacyJobID:
				// What is left of the legacy JobManager's
				// leader/<job 0>/job_manager_lock once it died.
				ev.add(false, "leader/<job 0> exists (the legacy JobManager)", Gen1_4, Gen1_5)
			case isJobID(k):
				// What is left of leader/<job>/job_manager_lock (1.5-1.13)
				// or leader/<job>/connection_info (1.15-1.17).
				ev.add(false, "leader/<job> component", Gen1_5, Gen1_15)
			}
		}
	}
	return nil
}

// lockEvidence looks at the children of job graph znodes and pointers: a
// persistent locks child exists only in 1.15+, and an ephemeral lock
// directly under the node only up to 1.14.
func (b *Bridge) lockEvidence(ctx context.Context, jobs map[string]*JobLayout, modernJobs []string, ev *evidence) error {
	classify := func(node string) (style LockStyle, err error) {
		kids, _, err := b.zk.children(ctx, node)
		if errors.Is(err, zk.ErrNoNode) {
			return LockStyleUnknown, nil
		}
		if err != nil {
			return LockStyleUnknown, err
		}
		for _, k := range kids {
			if k == "locks" {
				return LockChild, nil
			}
		}
		if len(kids) > 0 {
			return LockDirect, nil
		}
		return LockStyleUnknown, nil
	}
	// Every job's evidence is read at once; it is merged in the order of
	// the jobs, as if read one after another.
	graphs := make([]string, 0, len(jobs))
	for _, j := range jobs {
		if j.JobGraph != "" {
			graphs = append(graphs, j.JobGraph)
		}
	}
	graphStyle := make([]LockStyle, len(graphs))
	if _, err := forEachJob(ctx, len(graphs), func(_ context.Context, i int) (err error) {
		graphStyle[i], err = classify(graphs[i])
		return err
	}); err != nil {
		return err
	}
	sawGraph := map[LockStyle]bool{}
	for _, s := range graphStyle {
		sawGraph[s] = true
	}
	if sawGraph[LockChild] {
		ev.add(true, "a job graph has a persistent locks child", gensFrom(Gen1_15)...)
	}
	if sawGraph[LockDirect] {
		ev.add(true, "a job graph has a lock directly under it", gensUpTo(Gen1_14)...)
	}
	// The style of each modern job's first pointer that shows one.
	pointerStyle := make([]LockStyle, len(modernJobs))
	if _, err := forEachJob(ctx, len(modernJobs), func(ctx context.Context, i int) error {
		j := jobs[modernJobs[i]]
		names, _, err := b.zk.children(ctx, j.PointerDir)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, ok := parseCheckpointName(n); !ok {
				continue
			}
			s, err := classify(join(j.PointerDir, n))
			if err != nil {
				return err
			}
			if s != LockStyleUnknown {
				pointerStyle[i] = s
				return nil
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for i, id := range modernJobs {
		j, s := jobs[id], pointerStyle[i]
		if s == LockStyleUnknown {
			continue
		}
		if j.LockStyle == LockStyleUnknown {
			j.LockStyle = s
		} else if j.LockStyle != s {
			j.LockStyle = LockStyleUnknown
		}
		if s == LockChild {
			ev.add(true, "job "+id+": a pointer has a persistent locks child", gensFrom(Gen1_15)...)
		} else {
			ev.add(true, "job "+id+": a pointer has a lock directly under it", Gen1_14)
		}
	}
	return nil
}
