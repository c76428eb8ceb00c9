package manifest

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultHiddenPatterns match the temporary files of replication tools and
// of Flink itself; a replica mount never shows them (path.Match syntax,
// matched against the last path element).
var DefaultHiddenPatterns = []string{
	"._metadata.inprogress.*", // Flink's recoverable writer
	".*.[a-zA-Z0-9][a-zA-Z0-9][a-zA-Z0-9][a-zA-Z0-9][a-zA-Z0-9][a-zA-Z0-9]", // rsync: .<name>.XXXXXX
	"*.tmp",
	"*.partial",
	".~tmp~",
	".snapshot",
}

// CatalogConfig configures a Catalog.
type CatalogConfig struct {
	// Backing is the local directory the mount serves.
	Backing string
	// Verifier checks checkpoints; its roots must include Backing.
	Verifier *Verifier
	// Poll is the interval of full passes: a checkpoint that becomes
	// complete is visible within it. Polling is the source of truth;
	// Poke is only a fast path.
	Poll time.Duration
	// HiddenPatterns hide names everywhere (DefaultHiddenPatterns if nil).
	HiddenPatterns []string
	// MaxDepth bounds how deep below Backing job directories are looked for.
	MaxDepth int
	// BackingTimeout bounds how long a pass waits for the backing file
	// system: for the search of job directories, and for each job
	// directory (its listing and the verification of its checkpoints).
	// A job directory that does not answer in time (a hung or very slow
	// NAS) has its checkpoints made unknown, and the pass goes on with
	// the others; the work still waiting is not started again until it
	// ends (Stats.Hung says since when).
	BackingTimeout time.Duration
}

// DefaultCatalogConfig returns defaults; the caller sets Backing and
// Verifier.
func DefaultCatalogConfig() CatalogConfig {
	return CatalogConfig{Poll: 2 * time.Second, MaxDepth: 4, BackingTimeout: 30 * time.Second}
}

// Validate reports a configuration that cannot work.
func (c *CatalogConfig) Validate() error {
	var errs []error
	if !filepath.IsAbs(c.Backing) {
		errs = append(errs, fmt.Errorf("catalog: Backing %q must be an absolute path", c.Backing))
	}
	if c.Verifier == nil {
		errs = append(errs, errors.New("catalog: Verifier is required"))
	}
	if c.Poll <= 0 {
		errs = append(errs, fmt.Errorf("catalog: Poll %v must be positive", c.Poll))
	}
	if c.BackingTimeout <= 0 {
		errs = append(errs, fmt.Errorf("catalog: BackingTimeout %v must be positive", c.BackingTimeout))
	}
	if c.MaxDepth < 1 {
		errs = append(errs, fmt.Errorf("catalog: MaxDepth %d must be at least 1", c.MaxDepth))
	}
	for _, p := range c.HiddenPatterns {
		if err := CheckHiddenPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("catalog: hidden pattern %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// CheckHiddenPattern refuses a pattern HiddenPatterns cannot hold.
func CheckHiddenPattern(p string) error {
	_, err := path.Match(p, "")
	return err
}

// Change says that a checkpoint or savepoint directory's visibility
// changed, or why it stays hidden: its contents differ from what the
// primary sealed.
type Change struct {
	// Dir is the job directory (or the directory holding savepoints)
	// relative to Backing; Name is chk-N (or savepoint-...).
	Dir, Name string
	Visible   bool
	// Mismatch is the first of the checksum mismatches that hide it and
	// Mismatches their count (nil, 0: none). A Change with them is sent
	// once per set of mismatches, also while it stays hidden.
	Mismatch   *Problem
	Mismatches int
}

// JobState is what a catalog knows about one job directory.
type JobState struct {
	// Dir is the job directory relative to Backing.
	Dir string
	// Checkpoints are the verdicts in ascending id order.
	Checkpoints []*Verdict
}

// NewestComplete returns the complete verdict with the highest id, or nil.
func (j *JobState) NewestComplete() *Verdict {
	r := JobReport{Checkpoints: j.Checkpoints}
	return r.NewestComplete()
}

// Catalog verifies the checkpoints under a backing directory in the
// background and answers, from memory, which checkpoint directories a
// replica mount may show. It implements Visibility.
type Catalog struct {
	cfg   CatalogConfig
	pokec chan struct{}
	// judged is closed once the first pass has published its verdicts
	// (or ended with its context).
	judged     chan struct{}
	judgedOnce sync.Once
	hidden     []hiddenPattern

	mu sync.RWMutex
	// jobs: GUARDED_BY(mu). Job directory (relative) -> chk-N name ->
	// verdict. INVARIANT: a name is visible only if shown(verdict).
	jobs map[string]map[string]*Verdict
	// savepoints: GUARDED_BY(mu). Directory holding savepoint
	// directories (relative) -> savepoint-... name -> verdict; the same
	// INVARIANT. Kept apart from jobs: they are no job's checkpoints.
	savepoints map[string]map[string]*Verdict
	// listeners: GUARDED_BY(mu).
	listeners []func(Change)
	// stats: GUARDED_BY(mu). Counters of completed full passes.
	stats CatalogStats
	// protected: GUARDED_BY(mu). What the newest complete checkpoint of
	// each job holds (DeletionGuard).
	protected protection
	// haComplete: GUARDED_BY(mu). The HA state files (job graphs, blobs,
	// job results) found complete, by relative path; haJudged what the
	// last pass judged, so that a file is judged again only when it
	// changed.
	haComplete map[string]bool
	haJudged   map[string]haJudged

	// backing bounds the waits for the backing file system, by job
	// directory (walkPrefix: the search for job directories).
	backing *BackingWaits

	// refreshMu makes passes take turns; passNo counts them; walked:
	// GUARDED_BY(refreshMu),
	// what the search for job directories found in each directory it
	// read, relative to Backing, by the stamp it had then.
	refreshMu sync.Mutex
	passNo    uint64
	walked    map[string]*walkedDir
	// jobProtections: GUARDED_BY(refreshMu), written with mu held too.
	// What protected holds of each job.
	jobProtections map[string]*jobProtection
}

// walkedDir is what the last listing of a directory the search reads
// found: it is listed again only when its stamp says that its names may
// have changed (design §3.6).
type walkedDir struct {
	watch   *dirWatch
	subdirs []string        // to search further (savepoint directories too)
	chks    []CheckpointDir // by id: a job directory when not empty
	saves   []string        // its savepoint directories' names
	ha      []dirent        // its HA state files (haFileKind, HA checkpoint files)
	pass    uint64          // the pass that last reached it
	listed  uint64          // the pass that last listed it
}

// walkPrefix starts the work key of a listing by the search for job
// directories (a relative directory name never starts with it).
const walkPrefix = "\x00"

// savepointPrefix starts the work key of verifying a directory's
// savepoints.
const savepointPrefix = "\x01"

// jobsAtOnce job directories are verified at once: while some parse a
// _metadata, the others' stats keep the NAS busy.
const jobsAtOnce = 16

// HungWork is backing work that has not ended within BackingTimeout.
type HungWork struct {
	// Dir is the directory (relative to Backing); Walk says the search
	// for job directories waits for its listing, otherwise it is a job
	// directory being verified.
	Dir   string
	Walk  bool
	Since time.Time
}

// CatalogStats counts what a catalog's passes did.
type CatalogStats struct {
	// Passes counts completed full passes; LastPass is when the last one
	// ended and LastPassDuration how long it took.
	Passes           uint64
	LastPass         time.Time
	LastPassDuration time.Duration
	// Complete, Incomplete and Unknown count the checkpoint verifications
	// of completed passes by result (every pass verifies every
	// checkpoint directory, incrementally). Unknown ones (an I/O error)
	// are not counted as Incomplete.
	Complete, Incomplete, Unknown uint64
	// ChecksummedBytes is what the Verifier read to check sealed
	// checksums (Verifier.ChecksummedBytes).
	ChecksummedBytes uint64
	// Audited counts the trusted files the audit stat'ed again (design
	// §3.6), AuditChanged those found changed or gone.
	Audited, AuditChanged uint64
	// BackingTimeouts counts the times a pass gave up waiting for the
	// backing file system (BackingTimeout), or found it still busy with
	// work it had given up on.
	BackingTimeouts uint64
	// Hung is the backing work waiting longer than BackingTimeout now,
	// oldest first.
	Hung []HungWork
}

var _ Visibility = (*Catalog)(nil)

// NewCatalog returns a catalog that knows nothing yet: every checkpoint
// directory stays hidden until a pass has verified it.
func NewCatalog(cfg CatalogConfig) (*Catalog, error) {
	if cfg.HiddenPatterns == nil {
		cfg.HiddenPatterns = DefaultHiddenPatterns
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Backing = filepath.Clean(cfg.Backing)
	c := &Catalog{cfg: cfg, pokec: make(chan struct{}, 1), judged: make(chan struct{}), jobs: map[string]map[string]*Verdict{}, backing: NewBackingWaits(cfg.BackingTimeout), savepoints: map[string]map[string]*Verdict{},
		walked: map[string]*walkedDir{}, jobProtections: map[string]*jobProtection{}}
	for _, p := range cfg.HiddenPatterns {
		c.hidden = append(c.hidden, compileHidden(p))
	}
	return c, nil
}

// hiddenPattern is a path.Match pattern with its literal prefix and
// suffix, which reject most names (UUIDs) without running the matcher: a
// listing of shared/ asks about every entry.
type hiddenPattern struct {
	pattern, prefix, suffix string
}

func compileHidden(p string) hiddenPattern {
	first := strings.IndexAny(p, `*?[\`)
	if first < 0 {
		return hiddenPattern{pattern: p, prefix: p, suffix: p}
	}
	last := strings.LastIndexAny(p, `*?]\`)
	return hiddenPattern{pattern: p, prefix: p[:first], suffix: p[last+1:]}
}

func (h *hiddenPattern) match(name string) bool {
	if !strings.HasPrefix(name, h.prefix) || !strings.HasSuffix(name, h.suffix) {
		return false
	}
	ok, _ := path.Match(h.pattern, name)
	return ok
}

// Visible implements Visibility.
func (c *Catalog) Visible(dir, name string) error {
	if IsStateDir(dir, name) {
		return ErrHidden
	}
	if c.isHiddenName(name) {
		return ErrHidden
	}
	if haFileKind(dir, name) != "" {
		c.mu.RLock()
		ok := c.haComplete[strings.TrimPrefix(dir+"/"+name, "/")]
		c.mu.RUnlock()
		if !ok {
			return ErrIncomplete
		}
		return nil
	}
	verdicts := &c.jobs
	if _, ok := CheckpointIDFromDirName(name); !ok {
		if !IsSavepointDirName(name) {
			return nil
		}
		verdicts = &c.savepoints
	}
	c.mu.RLock()
	v := (*verdicts)[dir][name]
	c.mu.RUnlock()
	if !shown(v) {
		return ErrIncomplete
	}
	return nil
}

// shown is the one rule of what a replica shows of a checkpoint or
// savepoint directory: a complete one, and one holding files a complete
// checkpoint needs (HoldsFilesOf, design §4.2.1).
func shown(v *Verdict) bool {
	return v != nil && (v.Complete || v.HoldsFilesOf != 0)
}

// applyDescriptions replaces, in found (job directory -> chk-N ->
// verdict), the verdict of each chk-N that has no _metadata by the
// verdict of the Flink 1.3/1.4 HA file describing it, and marks the
// incomplete directories that hold files of a complete one (design
// §4.2.1).
func (c *Catalog) applyDescriptions(found map[string]map[string]*Verdict, described map[string]*Verdict) {
	split := func(dir string) (string, string) {
		job, name := path.Split(dir)
		return strings.TrimSuffix(job, "/"), name
	}
	for dir, d := range described {
		job, name := split(dir)
		if own := found[job][name]; own != nil && !own.Complete && lacksMetadata(own) {
			found[job][name] = d
		}
	}
	for dir, id := range c.holders(described) {
		job, name := split(dir)
		if own := found[job][name]; own != nil && !own.Complete {
			held := *own
			held.HoldsFilesOf = id
			found[job][name] = &held
		}
	}
}

// lacksMetadata reports whether a directory verdict failed only because
// the directory has no _metadata.
func lacksMetadata(v *Verdict) bool {
	return len(v.Problems) == 1 && v.Problems[0].Kind == ProblemMissing && v.Problems[0].Path == MetadataFile
}

func (c *Catalog) isHiddenName(name string) bool {
	for i := range c.hidden {
		if c.hidden[i].match(name) {
			return true
		}
	}
	return false
}

// OnChange registers fn to be called (from the pass that noticed it) when
// a checkpoint directory becomes visible or invisible.
func (c *Catalog) OnChange(fn func(Change)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
}

// Poke asks for a pass soon (a file system event was seen).
func (c *Catalog) Poke() {
	select {
	case c.pokec <- struct{}{}:
	default:
	}
}

// Passes returns how many full passes have completed.
func (c *Catalog) Passes() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.stats.Passes
}

// Stats returns the counters of the passes so far.
func (c *Catalog) Stats() CatalogStats {
	c.mu.RLock()
	st := c.stats
	c.mu.RUnlock()
	st.ChecksummedBytes = c.cfg.Verifier.ChecksummedBytes()
	st.Hung = c.hung(time.Now())
	return st
}

// Jobs returns what the last pass found, by job directory.
func (c *Catalog) Jobs() []JobState {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]JobState, 0, len(c.jobs))
	for dir, chks := range c.jobs {
		js := JobState{Dir: dir}
		for _, v := range chks {
			js.Checkpoints = append(js.Checkpoints, v)
		}
		sort.Slice(js.Checkpoints, func(i, j int) bool { return js.Checkpoints[i].CheckpointID < js.Checkpoints[j].CheckpointID })
		out = append(out, js)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// Run makes a pass now, then every Poll and whenever poked, and audits
// four times a Poll beside the passes, until ctx ends.
func (c *Catalog) Run(ctx context.Context) error {
	audits := make(chan struct{})
	go func() {
		defer close(audits)
		t := time.NewTicker(max(c.cfg.Poll/4, time.Millisecond)) // small shares, not bursts
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.Audit(ctx)
			}
		}
	}()
	defer func() { <-audits }()
	t := time.NewTicker(c.cfg.Poll)
	defer t.Stop()
	for {
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-c.pokec:
		}
	}
}

// Judged is closed once the first pass has published its verdicts and
// told its changes to OnChange's functions (or once a first pass ended
// with its context): until then, Visible says ErrIncomplete of every
// checkpoint for want of a verdict.
func (c *Catalog) Judged() <-chan struct{} { return c.judged }

func (c *Catalog) markJudged() { c.judgedOnce.Do(func() { close(c.judged) }) }

// Refresh makes one full pass: it finds every job directory and verifies
// every checkpoint directory in it (incrementally), then publishes the new
// state and the changes. A job directory the backing file system fails
// (an error other than "gone", or no answer within BackingTimeout) keeps
// the checkpoints the last pass knew, all unknown: hidden, and still
// listed as the job's.
func (c *Catalog) Refresh(ctx context.Context) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	defer c.markJudged() // a first pass its context ended
	start := time.Now()
	v := c.cfg.Verifier
	c.mu.RLock()
	old := c.jobs
	c.mu.RUnlock()
	found := map[string]map[string]*Verdict{}
	// A directory that does not answer within BackingTimeout is hung;
	// listing a large one that answers may take longer than that in all.
	timeouts := uint64(v.Observe(ctx, c.cfg.BackingTimeout))
	jobs := c.findJobDirs(ctx)
	if ctx.Err() != nil {
		return
	}
	timeouts += jobs.timeouts
	jobs.jobs = append(jobs.jobs, jobs.keep(old)...)
	var foundMu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobsAtOnce)
	for _, job := range jobs.jobs {
		chks := c.listed(job)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			verdicts, err := Bounded(ctx, c.backing, job, func(ctx context.Context) (map[string]*Verdict, error) { return c.verifyJob(ctx, chks) })
			foundMu.Lock()
			defer foundMu.Unlock()
			switch {
			case ctx.Err() != nil:
			case err == nil:
				found[job] = verdicts
			case errors.Is(err, iofs.ErrNotExist):
				// Gone: its checkpoints with it.
			default:
				if errors.Is(err, ErrBackingTimeout) {
					timeouts++
				}
				found[job] = unknownVerdicts(old[job], err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	savepoints := map[string]map[string]*Verdict{}
	for _, holder := range jobs.holders {
		names := c.walked[holder].saves
		verdicts, err := Bounded(ctx, c.backing, savepointPrefix+holder, func(ctx context.Context) (map[string]*Verdict, error) {
			return c.verifySavepoints(ctx, holder, names)
		})
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			savepoints[holder] = verdicts
		case errors.Is(err, ErrBackingTimeout):
			timeouts++ // its savepoints stay hidden
		}
	}
	v.Sweep(func(dir string) bool {
		rel, err := filepath.Rel(c.cfg.Backing, filepath.Dir(dir))
		if rel == "." {
			rel = ""
		}
		name := filepath.Base(dir)
		return err == nil && (found[rel][name] != nil || savepoints[rel][name] != nil)
	})

	c.mu.RLock()
	prevHA := c.haJudged
	c.mu.RUnlock()
	haDirs := c.haDirs()
	ha, haErr := Bounded(ctx, c.backing, haFilesKey, func(ctx context.Context) (haScan, error) {
		return c.scanHAFiles(ctx, haDirs, prevHA), ctx.Err()
	})
	if ctx.Err() != nil {
		return
	}
	if errors.Is(haErr, ErrBackingTimeout) {
		timeouts++
	}
	judged := prevHA
	if haErr == nil {
		judged = ha.judged
		c.applyDescriptions(found, ha.described)
	}
	protectDirs, protectHA, protectChanged := c.protectionOf(found, judged)
	c.mu.Lock()
	oldSavepoints := c.savepoints
	old = c.jobs
	c.jobs, c.savepoints = found, savepoints
	c.protect(protectDirs, protectHA, protectChanged)
	if haErr == nil {
		c.haComplete, c.haJudged = ha.complete, ha.judged
	}
	c.stats.Passes++
	c.stats.BackingTimeouts += timeouts
	c.stats.LastPass = time.Now()
	c.stats.LastPassDuration = c.stats.LastPass.Sub(start)
	for _, chks := range found {
		for _, v := range chks {
			switch {
			case v.Complete:
				c.stats.Complete++
			case v.Unknown:
				c.stats.Unknown++
			default:
				c.stats.Incomplete++
			}
		}
	}
	listeners := slices.Clone(c.listeners)
	c.mu.Unlock()

	for _, ch := range append(diffVisibility(old, found), diffVisibility(oldSavepoints, savepoints)...) {
		for _, fn := range listeners {
			fn(ch)
		}
	}
	c.markJudged()
}

// Audit stats again the share of the trusted files that is due
// (Verifier.Audit) and pokes a pass when one changed, so that what
// needed it is judged again at once. Run calls it four times a poll
// interval, beside the passes: never on the path of a new checkpoint.
func (c *Catalog) Audit(ctx context.Context) {
	audited, changed := c.cfg.Verifier.Audit(ctx, c.cfg.BackingTimeout)
	c.mu.Lock()
	c.stats.Audited += uint64(audited)
	c.stats.AuditChanged += uint64(changed)
	c.mu.Unlock()
	if changed > 0 {
		c.Poke()
	}
}

// listed returns the checkpoint directories this pass's search listed in
// job, or nil.
func (c *Catalog) listed(job string) []CheckpointDir {
	if w := c.walked[job]; w != nil && w.pass == c.passNo {
		return w.chks
	}
	return nil
}

// verifyJob verifies the checkpoint directories chks of a job, the
// newest first; none: the search could not list the job directory.
func (c *Catalog) verifyJob(ctx context.Context, chks []CheckpointDir) (map[string]*Verdict, error) {
	if len(chks) == 0 {
		return nil, errors.New("the job directory could not be listed")
	}
	verdicts := make(map[string]*Verdict, len(chks))
	for i := len(chks) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		verdicts[filepath.Base(chks[i].Dir)] = c.cfg.Verifier.VerifyDir(ctx, chks[i].Dir)
	}
	return verdicts, nil
}

// unknownVerdicts are the verdicts of checkpoints known before, made
// unknown by err.
func unknownVerdicts(old map[string]*Verdict, err error) map[string]*Verdict {
	out := make(map[string]*Verdict, len(old))
	for name, v := range old {
		u := &Verdict{CheckpointID: v.CheckpointID, Dir: v.Dir}
		u.addProblem(Problem{Path: ".", Kind: ProblemIOError, Detail: err.Error()})
		out[name] = u
	}
	return out
}

// hung lists the work older than BackingTimeout, oldest first.
func (c *Catalog) hung(now time.Time) []HungWork {
	var out []HungWork
	for _, p := range c.backing.Pending(now) {
		h := HungWork{Dir: p.Key, Since: p.Since}
		if rel, ok := strings.CutPrefix(p.Key, walkPrefix); ok {
			h = HungWork{Dir: rel, Walk: true, Since: p.Since}
		} else if rel, ok := strings.CutPrefix(p.Key, savepointPrefix); ok {
			h = HungWork{Dir: rel, Since: p.Since}
		}
		out = append(out, h)
	}
	return out
}

func diffVisibility(old, cur map[string]map[string]*Verdict) []Change {
	var out []Change
	visible := func(m map[string]map[string]*Verdict, dir, name string) bool {
		return shown(m[dir][name])
	}
	for dir, chks := range cur {
		for name, v := range chks {
			now := visible(cur, dir, name)
			ch := Change{Dir: dir, Name: name, Visible: now}
			mm := mismatches(v)
			if !now && len(mm) > 0 {
				ch.Mismatch, ch.Mismatches = &mm[0], len(mm)
			}
			if now != visible(old, dir, name) || ch.Mismatch != nil && !slices.Equal(mm, mismatches(old[dir][name])) {
				out = append(out, ch)
			}
		}
	}
	for dir, chks := range old {
		for name := range chks {
			if visible(old, dir, name) && cur[dir][name] == nil {
				out = append(out, Change{Dir: dir, Name: name, Visible: false})
			}
		}
	}
	return out
}

// mismatches are the checksum mismatches among v's problems.
func mismatches(v *Verdict) []Problem {
	if v == nil {
		return nil
	}
	var out []Problem
	for _, p := range v.Problems {
		if p.Kind == ProblemChecksumMismatch {
			out = append(out, p)
		}
	}
	return out
}

// walkResult is what findJobDirs found: the job directories, and the
// directories it could not list (other than gone ones).
type walkResult struct {
	jobs     []string
	holders  []string // directories holding savepoint directories
	failed   []string
	timeouts uint64
}

// keep returns the job directories of old that the walk could not reach
// because a directory above them failed: their checkpoints are not gone,
// only unknown.
func (w walkResult) keep(old map[string]map[string]*Verdict) []string {
	if len(w.failed) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(w.jobs))
	for _, j := range w.jobs {
		seen[j] = true
	}
	var out []string
	for job := range old {
		if seen[job] {
			continue
		}
		for _, f := range w.failed {
			if f == "" || job == f || strings.HasPrefix(job, f+"/") {
				out = append(out, job)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// findJobDirs lists the directories (relative to Backing) that hold chk-N
// directories, and those that hold savepoint directories, down to
// MaxDepth, without descending into checkpoint, savepoint, shared,
// task-owned or hidden directories; and, for the scan of HA state files,
// the files of each directory down to MaxDepth+3, savepoint directories
// too. A directory is listed again only when its stamp changed
// (walkedDir); each observation is bounded by BackingTimeout: one that
// hangs fails alone.
func (c *Catalog) findJobDirs(ctx context.Context) walkResult {
	c.passNo++
	now := time.Now().UnixNano()
	res := c.cfg.Verifier.Resolver()
	var out walkResult
	type visit struct {
		rel         string
		inSavepoint bool
		w, listed   *walkedDir
		err         error
	}
	// Level by level, the directories of a level observed at once: a job
	// directory's stamp is a round trip, and there are hundreds.
	level := []*visit{{rel: ""}}
	for depth := 0; len(level) > 0 && ctx.Err() == nil; depth++ {
		sem := make(chan struct{}, c.cfg.Verifier.workers())
		var wg sync.WaitGroup
		for _, v := range level {
			v.w = c.walked[v.rel]
			if v.w == nil {
				v.w = &walkedDir{watch: newDirWatch(filepath.Join(c.cfg.Backing, v.rel))}
				c.walked[v.rel] = v.w
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				w := v.w
				v.listed, v.err = Bounded(ctx, c.backing, walkPrefix+v.rel, func(context.Context) (*walkedDir, error) {
					return c.listWalked(w, res, now)
				})
			}()
		}
		wg.Wait()
		var next []*visit
		for _, v := range level {
			w := v.w
			if err := v.err; err != nil {
				if errors.Is(err, ErrBackingTimeout) {
					out.timeouts++
				}
				if errors.Is(err, ErrBackingTimeout) || ctx.Err() != nil {
					// Its watch may still be in use, and is left to the
					// work: another one next time.
					delete(c.walked, v.rel)
				}
				if !errors.Is(err, iofs.ErrNotExist) {
					out.failed = append(out.failed, v.rel)
				}
				continue
			}
			if v.listed != w {
				w.subdirs, w.chks, w.saves, w.ha, w.listed = v.listed.subdirs, v.listed.chks, v.listed.saves, v.listed.ha, c.passNo
			}
			w.pass = c.passNo
			if !v.inSavepoint && depth <= c.cfg.MaxDepth {
				if len(w.chks) > 0 {
					out.jobs = append(out.jobs, v.rel)
				}
				if len(w.saves) > 0 {
					out.holders = append(out.holders, v.rel)
				}
			}
			if depth >= c.cfg.MaxDepth+3 {
				continue
			}
			for _, sub := range w.subdirs {
				next = append(next, &visit{rel: strings.TrimPrefix(v.rel+"/"+sub, "/"), inSavepoint: v.inSavepoint || IsSavepointDirName(sub)})
			}
		}
		level = next
	}
	if ctx.Err() != nil {
		return out
	}
	for rel, w := range c.walked {
		if w.pass != c.passNo {
			// Gone, failed or out of reach: listed anew if met again.
			w.watch.close()
			delete(c.walked, rel)
		}
	}
	sort.Strings(out.jobs)
	sort.Strings(out.holders)
	return out
}

// listWalked returns what the directory of w holds, listing it again
// only when its stamp says that its names may have changed.
func (c *Catalog) listWalked(w *walkedDir, res *Resolver, now int64) (*walkedDir, error) {
	list, err := w.watch.observe(res, now)
	if err != nil {
		return nil, err
	}
	if !list {
		return w, nil
	}
	entries, err := w.watch.list()
	if err != nil {
		w.watch.forget()
		return nil, err
	}
	out := &walkedDir{}
	rel, _ := filepath.Rel(c.cfg.Backing, w.watch.path)
	if rel == "." {
		rel = ""
	}
	for _, e := range entries {
		name := e.name
		if !e.dir {
			if haCandidate(rel, name) && !c.isHiddenName(name) {
				out.ha = append(out.ha, e)
			}
			continue
		}
		if id, ok := CheckpointIDFromDirName(name); ok {
			out.chks = append(out.chks, CheckpointDir{ID: id, Dir: filepath.Join(w.watch.path, name)})
			continue
		}
		if IsStateDir(rel, name) || name == "shared" || name == "taskowned" || c.isHiddenName(name) {
			continue
		}
		if IsSavepointDirName(name) {
			out.saves = append(out.saves, name)
		}
		out.subdirs = append(out.subdirs, name)
	}
	sort.Slice(out.chks, func(i, j int) bool { return out.chks[i].ID < out.chks[j].ID })
	return out, nil
}

// verifySavepoints verifies the savepoint directories names of holder.
func (c *Catalog) verifySavepoints(ctx context.Context, holder string, names []string) (map[string]*Verdict, error) {
	verdicts := make(map[string]*Verdict, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		verdicts[name] = c.cfg.Verifier.VerifyDir(ctx, filepath.Join(c.cfg.Backing, holder, name))
	}
	return verdicts, nil
}
