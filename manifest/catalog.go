package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
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
}

// DefaultCatalogConfig returns defaults; the caller sets Backing and
// Verifier.
func DefaultCatalogConfig() CatalogConfig {
	return CatalogConfig{Poll: 2 * time.Second, MaxDepth: 4}
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

// Change says that a checkpoint directory's visibility changed.
type Change struct {
	// Dir is the job directory relative to Backing; Name is chk-N.
	Dir, Name string
	Visible   bool
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
	cfg    CatalogConfig
	pokec  chan struct{}
	hidden []hiddenPattern

	mu sync.RWMutex
	// jobs: GUARDED_BY(mu). Job directory (relative) -> chk-N name ->
	// verdict. INVARIANT: a name is visible only if its verdict is
	// complete.
	jobs map[string]map[string]*Verdict
	// listeners: GUARDED_BY(mu).
	listeners []func(Change)
	// stats: GUARDED_BY(mu). Counters of completed full passes.
	stats CatalogStats
	// protected: GUARDED_BY(mu). What the newest complete checkpoint of
	// each job holds (DeletionGuard).
	protected protection
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
	c := &Catalog{cfg: cfg, pokec: make(chan struct{}, 1), jobs: map[string]map[string]*Verdict{}}
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
	if _, ok := CheckpointIDFromDirName(name); !ok {
		return nil
	}
	c.mu.RLock()
	v := c.jobs[dir][name]
	c.mu.RUnlock()
	if v == nil || !v.Complete {
		return ErrIncomplete
	}
	return nil
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

// Run makes a pass now, then every Poll and whenever poked, until ctx ends.
func (c *Catalog) Run(ctx context.Context) error {
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

// Refresh makes one full pass: it finds every job directory and verifies
// every checkpoint directory in it (incrementally), then publishes the new
// state and the changes.
func (c *Catalog) Refresh(ctx context.Context) {
	start := time.Now()
	found := map[string]map[string]*Verdict{}
	for _, job := range c.findJobDirs() {
		chks, err := ListCheckpoints(filepath.Join(c.cfg.Backing, job))
		if err != nil {
			continue // vanished or unreadable: its checkpoints stay hidden
		}
		verdicts := make(map[string]*Verdict, len(chks))
		for _, chk := range chks {
			if ctx.Err() != nil {
				return
			}
			verdicts[filepath.Base(chk.Dir)] = c.cfg.Verifier.VerifyDir(ctx, chk.Dir)
		}
		found[job] = verdicts
	}
	c.cfg.Verifier.Sweep(func(dir string) bool {
		rel, err := filepath.Rel(c.cfg.Backing, filepath.Dir(dir))
		if rel == "." {
			rel = ""
		}
		return err == nil && found[rel][filepath.Base(dir)] != nil
	})

	protected := c.protectionOf(found)
	c.mu.Lock()
	old := c.jobs
	c.jobs = found
	c.protected = protected
	c.stats.Passes++
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

	for _, ch := range diffVisibility(old, found) {
		for _, fn := range listeners {
			fn(ch)
		}
	}
}

func diffVisibility(old, cur map[string]map[string]*Verdict) []Change {
	var out []Change
	visible := func(m map[string]map[string]*Verdict, dir, name string) bool {
		v := m[dir][name]
		return v != nil && v.Complete
	}
	for dir, chks := range cur {
		for name := range chks {
			if now := visible(cur, dir, name); now != visible(old, dir, name) {
				out = append(out, Change{Dir: dir, Name: name, Visible: now})
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

// findJobDirs lists the directories (relative to Backing) that hold chk-N
// directories, down to MaxDepth, without descending into checkpoint,
// shared, task-owned or hidden directories.
func (c *Catalog) findJobDirs() []string {
	var jobs []string
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		entries, err := os.ReadDir(filepath.Join(c.cfg.Backing, rel))
		if err != nil {
			return
		}
		isJob := false
		var subdirs []string
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			if _, ok := CheckpointIDFromDirName(name); ok {
				isJob = true
				continue
			}
			if IsStateDir(rel, name) || name == "shared" || name == "taskowned" || c.isHiddenName(name) {
				continue
			}
			subdirs = append(subdirs, name)
		}
		if isJob {
			jobs = append(jobs, rel)
		}
		if depth >= c.cfg.MaxDepth {
			return
		}
		for _, s := range subdirs {
			walk(strings.TrimPrefix(rel+"/"+s, "/"), depth+1)
		}
	}
	walk("", 0)
	return jobs
}
