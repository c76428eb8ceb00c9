package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Resolver maps Flink paths to local paths inside the roots.
	Resolver *Resolver
	// MaxAge is how long a file once found complete may be trusted
	// without another stat. Zero trusts nothing: every verification stats
	// every file, and decisions that act on the result (takeover) verify
	// so. A mount's catalog trusts files (design §3.6): Observe and Audit
	// untrust those that may have changed, and Audit stats each again
	// every MaxAge/2, so that a steady pass costs what changed.
	MaxAge time.Duration
	// Workers bounds the stat calls issued in parallel: a NAS serves
	// many at once, each a round trip.
	Workers int
	// SealedRoot is the backing root under which sealed manifests are
	// looked for (StateDir); empty disables level L3.
	SealedRoot string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultVerifierConfig returns a configuration that trusts nothing from
// earlier verifications. The caller sets Resolver.
func DefaultVerifierConfig() VerifierConfig {
	return VerifierConfig{Workers: 32}
}

// Validate reports a configuration that cannot work.
func (c *VerifierConfig) Validate() error {
	switch {
	case c.Resolver == nil:
		return errors.New("manifest: VerifierConfig.Resolver is required")
	case c.MaxAge < 0:
		return fmt.Errorf("manifest: MaxAge %v is negative", c.MaxAge)
	case c.Workers < 1:
		return fmt.Errorf("manifest: Workers %d must be at least 1", c.Workers)
	}
	return nil
}

// Verifier checks checkpoints against a directory tree and remembers what
// it found, so that re-verification costs only what changed.
type Verifier struct {
	cfg   VerifierConfig
	cache *cache
	// checksummed counts the bytes read to check sealed checksums.
	checksummed atomic.Uint64
	// auditMu makes audits take turns.
	auditMu sync.Mutex
	// lastPathSweep: owned by the caller of Sweep.
	lastPathSweep time.Time
}

// NewVerifier returns a Verifier with an empty cache.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{cfg: cfg, cache: newCache()}, nil
}

// ChecksummedBytes is how many bytes v has read to check sealed
// checksums: about what was replicated to a replica, and close to
// nothing on a primary, whose Recorder teaches v what it read back.
func (v *Verifier) ChecksummedBytes() uint64 { return v.checksummed.Load() }

// Resolver returns the verifier's path resolver.
func (v *Verifier) Resolver() *Resolver { return v.cfg.Resolver }

// VerifyDir verifies the checkpoint whose _metadata lies in dir (a chk-N
// directory, or any savepoint or checkpoint directory) at level L1.
func (v *Verifier) VerifyDir(ctx context.Context, dir string) *Verdict {
	dir = filepath.Clean(dir)
	verdict := &Verdict{CheckpointID: -1, Dir: dir}
	nameID, isChk := CheckpointIDFromDirName(filepath.Base(dir))
	if isChk {
		verdict.CheckpointID = nameID
	}
	// Taken before any stat: a file is trusted from a moment it was
	// already complete.
	judge := v.judgeAt(ctx, v.cfg.Now().UnixNano())
	if judge.trust {
		if reused := v.cache.reused(dir, judge.now); reused != nil {
			return reused
		}
	}
	probes := v.newProber(ctx)
	defer probes.stop()
	parsed, need := v.loadManifest(dir, probes, judge)
	if parsed.prob != nil {
		verdict.addProblem(*parsed.prob)
		return verdict
	}
	man := parsed.man
	verdict.Manifest = man
	verdict.CheckpointID = man.CheckpointID
	if isChk && man.CheckpointID != nameID {
		verdict.addProblem(Problem{
			Path: MetadataFile, Kind: ProblemWrongCheckpointID,
			Detail:   fmt.Sprintf("directory %s holds checkpoint %d", filepath.Base(dir), man.CheckpointID),
			Expected: nameID, Found: man.CheckpointID,
		})
	}
	v.checkFiles(ctx, judge, probes, man.Files, parsed.entries, need, verdict)
	verdict.Files = len(man.Files) + 1
	verdict.Bytes = parsed.bytes + man.MetadataSize
	var sealedIno uint64
	var sealedSeen bool
	if len(verdict.Problems) == 0 {
		verdict.Complete = true
		verdict.Level = L1
		sealedIno, sealedSeen = v.checkSealed(ctx, dir, verdict)
	}
	if judge.trust && verdict.Complete {
		v.cache.remember(dir, verdict, parsed, judge, v.sealedWatch(dir, sealedIno, sealedSeen))
	}
	return verdict
}

func (v *Verdict) addProblem(p Problem) {
	v.Problems = append(v.Problems, p)
	if p.Kind == ProblemIOError {
		v.Unknown = true
	}
	v.Complete = false
	v.Level = LevelNone
}

// loadManifest parses dir/_metadata, or reuses what was parsed from the
// same file (same inode, size and times) before. It also returns the
// positions of the files that need a check, as judge decides. A parse
// hands the paths it meets for the first time to probes, and judges each
// file as it meets it.
func (v *Verifier) loadManifest(dir string, probes *prober, judge judge) (parsed manifestEntry, need []int) {
	local, err := v.cfg.Resolver.Confine(dir)
	if err != nil {
		return manifestEntry{prob: &Problem{Path: MetadataFile, Kind: ProblemOutsideRoot, Detail: err.Error()}}, nil
	}
	path := filepath.Join(local, MetadataFile)
	f, err := openRegular(v.cfg.Resolver, path)
	if err != nil {
		return manifestEntry{prob: fileProblem(MetadataFile, err)}, nil
	}
	defer f.Close()
	st := &f.st
	stamp := VersionOf(st)
	if e, ok := v.cache.manifest(path, stamp); ok {
		if e.man != nil {
			v.cache.pathsMu.Lock()
			need = judge.all(e.man.Files, e.entries)
			v.cache.pathsMu.Unlock()
		}
		return e, need
	}
	parsed, need = v.parse(local, f.File, st, probes, judge)
	if parsed.prob == nil || parsed.prob.Kind != ProblemIOError {
		// A read that failed says nothing about the file: read it again.
		v.cache.putManifest(path, parsed)
	}
	return parsed, need
}

// parse builds the manifest of the open _metadata of the checkpoint
// directory local, whose stat is st, holding cache.pathsMu: parses on one
// Verifier take turns. The file is read in before: a read that hangs (a
// failing NAS) holds up this verification only.
func (v *Verifier) parse(local string, f *os.File, st *unix.Stat_t, probes *prober, judge judge) (parsed manifestEntry, need []int) {
	parsed.stamp = VersionOf(st)
	m, err := mapMetadata(f, st.Size)
	if err != nil {
		parsed.prob = &Problem{Path: MetadataFile, Kind: ProblemIOError, Detail: err.Error()}
		return parsed, nil
	}
	defer m.close()
	v.cache.pathsMu.Lock()
	defer v.cache.pathsMu.Unlock()
	b := v.newManifestBuilder(local, st.Size, probes, judge)
	sum, err := m.decode(b)
	if err != nil {
		parsed.prob = parseProblem(err)
		return parsed, nil
	}
	parsed.man = &Manifest{
		CheckpointID:    sum.CheckpointID,
		Source:          SourceMetadata,
		MetadataVersion: sum.Version,
		MetadataSize:    st.Size,
		InlineCount:     sum.InlineCount,
		InlineBytes:     sum.InlineBytes,
	}
	need = b.finish(&parsed)
	return parsed, need
}

func parseProblem(err error) *Problem {
	p := &Problem{Path: MetadataFile, Kind: ProblemParseError, Detail: err.Error()}
	var pe *metadata.ParseError
	if errors.As(err, &pe) {
		p.Offset = pe.Offset
	} else {
		// Not a format error: reading failed.
		p.Kind = ProblemIOError
	}
	return p
}

// fileProblem is the problem of the file name whose open or read (of a
// regularFile) failed with err.
func fileProblem(name string, err error) *Problem {
	var tl *tooLargeError
	switch {
	case errors.Is(err, ErrOutsideRoot) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP):
		return &Problem{Path: name, Kind: ProblemOutsideRoot, Detail: err.Error()}
	case errors.Is(err, unix.ENOENT):
		return &Problem{Path: name, Kind: ProblemMissing}
	case errors.Is(err, unix.ENOTDIR):
		return &Problem{Path: name, Kind: ProblemMissing, Detail: "a path component is not a directory"}
	case errors.Is(err, errNotRegular):
		return &Problem{Path: name, Kind: ProblemMissing, Detail: errNotRegular.Error()}
	case errors.As(err, &tl):
		return &Problem{Path: name, Kind: ProblemParseError, Detail: err.Error()}
	case errors.Is(err, errChanged):
		return &Problem{Path: name, Kind: ProblemSizeMismatch, Detail: err.Error()}
	}
	return &Problem{Path: name, Kind: ProblemIOError, Detail: err.Error()}
}

// judge decides which files one verification must check.
type judge struct {
	now       int64 // unix nanoseconds
	notBefore int64 // a file found complete since then is trusted
	trust     bool  // MaxAge is not zero
	maxAge    int64 // nanoseconds
	cache     *cache
}

func (v *Verifier) judgeAt(ctx context.Context, now int64) judge {
	trust := v.cfg.MaxAge > 0 && ctx.Value(withoutTrustKey{}) == nil
	return judge{now: now, notBefore: now - v.cfg.MaxAge.Nanoseconds(), trust: trust, maxAge: v.cfg.MaxAge.Nanoseconds(), cache: v.cache}
}

type withoutTrustKey struct{}

// WithoutTrust returns a context in which verifications trust nothing an
// earlier one found, as with MaxAge zero: every file is stat'ed. What
// acts on the result (a takeover, restore-pruned) verifies so, also
// with the verifier of a mount, which trusts what it found (design
// §3.6).
func WithoutTrust(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutTrustKey{}, true)
}

// needsCheck records that the verification lists f, whose path is e, and
// reports whether f needs a check: a stat, or a problem when it lies
// outside the roots. A file found complete within MaxAge does not. The
// caller holds cache.pathsMu.
func (j judge) needsCheck(f *File, e *pathEntry) bool {
	e.used = j.now
	// e.seen is only set for a path inside the roots (e.dir != "").
	trusted := j.trust && !f.IsDir() && e.seen != 0 && e.seen >= j.notBefore && j.cache.satisfies(e, f)
	return !trusted
}

// satisfies reports whether the file e was last found complete as
// satisfies f: a changelog file by what reading it found. The caller
// holds cache.pathsMu.
func (c *cache) satisfies(e *pathEntry, f *File) bool {
	if f.Kind == metadata.KindChangelog && f.Size > 0 {
		d := c.dstl[e]
		return d.size == f.Size && d.ver.size == e.ver.size
	}
	return f.Satisfied(e.ver.size)
}

// all returns the positions of the files that need a check (entries[i]
// is the path of files[i]). The caller holds cache.pathsMu.
func (j judge) all(files []File, entries []*pathEntry) []int {
	var need []int
	for i := range files {
		if j.needsCheck(&files[i], entries[i]) {
			need = append(need, i)
		}
	}
	return need
}

// target is a file to stat.
type target struct {
	file   *File
	index  int // of file in the manifest
	entry  *pathEntry
	obs    observation
	probed bool // obs holds what the parse's stat found
}

// observation is what one stat found.
type observation struct {
	err  error
	size int64
	mode uint32
	ver  FileVersion
}

// checkFiles checks the files at the positions need lists (entries[i] is
// the path of files[i]) as of the judge's time. It stats them, with
// probes, which may have stat'ed some already, except those outside the
// roots, which are never opened.
func (v *Verifier) checkFiles(ctx context.Context, judge judge, probes *prober, files []File, entries []*pathEntry, need []int, verdict *Verdict) {
	targets := make([]target, 0, len(need))
	for _, i := range need {
		f, e := &files[i], entries[i]
		if err := e.outside(); err != nil {
			verdict.addProblem(Problem{Path: f.Path, Kind: ProblemOutsideRoot, Detail: err.Error()})
			continue
		}
		targets = append(targets, target{file: f, index: i, entry: e})
	}
	if probed := probes.wait(); len(probed) > 0 {
		v.matchProbed(targets, entries, probed)
	}
	var rest []int
	for i := range targets {
		if !targets[i].probed {
			probes.probe(targets[i].entry, targets[i].index)
			rest = append(rest, i)
		}
	}
	if len(rest) > 0 {
		k := 0
		for _, b := range probes.wait() {
			for j := range b.entries {
				targets[rest[k]].obs = b.obs[j]
				k++
			}
		}
	}
	complete := 0
	for i := range targets {
		t := &targets[i]
		f := t.file
		o := &t.obs
		if o.err != nil {
			verdict.addProblem(*fileProblem(f.Path, o.err))
			continue
		}
		typ := o.mode & unix.S_IFMT
		if f.IsDir() {
			if typ != unix.S_IFDIR {
				verdict.addProblem(Problem{Path: f.Path, Kind: ProblemNotDirectory})
			}
			continue
		}
		switch {
		case typ == unix.S_IFLNK:
			verdict.addProblem(Problem{Path: f.Path, Kind: ProblemOutsideRoot, Detail: "symbolic link (not followed)"})
		case typ != unix.S_IFREG:
			verdict.addProblem(Problem{Path: f.Path, Kind: ProblemMissing, Detail: "not a regular file"})
		case f.Kind == metadata.KindChangelog && f.Size > 0:
			if p := v.checkChangelog(t); p != nil {
				verdict.addProblem(*p)
				continue
			}
			targets[complete] = *t
			complete++
		case !f.Satisfied(o.size):
			want := f.Size
			detail := fmt.Sprintf("expected %d bytes, found %d", f.Size, o.size)
			if f.MinLength > 0 {
				want = f.MinLength
				detail = fmt.Sprintf("expected at least %d bytes, found %d", f.MinLength, o.size)
			}
			verdict.addProblem(Problem{Path: f.Path, Kind: ProblemSizeMismatch, Detail: detail, Expected: want, Found: o.size})
		default:
			// Complete: keep it at the front for the cache.
			targets[complete] = *t
			complete++
		}
	}
	if judge.trust && complete > 0 {
		c := v.cache
		c.pathsMu.Lock()
		for i := range targets[:complete] {
			t := &targets[i]
			c.trust(t.entry, t.obs.ver, judge.now)
		}
		c.pathsMu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		verdict.addProblem(Problem{Path: ".", Kind: ProblemIOError, Detail: err.Error()})
	}
}

// checkChangelog reads the changelog file t names (changelogChanges)
// unless its version was found complete before, and returns why it does
// not hold the changes its handles count, or nil. t's observation
// becomes what the open file's stat found.
func (v *Verifier) checkChangelog(t *target) *Problem {
	f, e := t.file, t.entry
	c := v.cache
	c.pathsMu.Lock()
	d := c.dstl[e]
	known := d.size == f.Size && d.ver == t.obs.ver
	c.pathsMu.Unlock()
	if known {
		return nil
	}
	file, err := openRegular(v.cfg.Resolver, filepath.Join(e.dir, e.base))
	if err != nil {
		return fileProblem(f.Path, err)
	}
	defer file.Close()
	st := &file.st
	t.obs.size, t.obs.ver = st.Size, VersionOf(st)
	want := f.Size - 1 // the flag byte
	compressed, changes, err := changelogChanges(file.File, st.Size, want)
	var de *dstlError
	switch {
	case errors.As(err, &de):
		p := &Problem{Path: f.Path, Kind: ProblemParseError, Detail: "changelog file " + de.Error(), Offset: de.Offset}
		if de.Short {
			p.Kind, p.Expected, p.Found = ProblemSizeMismatch, f.Size, st.Size
		}
		return p
	case err != nil:
		return &Problem{Path: f.Path, Kind: ProblemIOError, Detail: err.Error()}
	case !compressed && changes != want:
		return &Problem{Path: f.Path, Kind: ProblemSizeMismatch, Detail: fmt.Sprintf("expected %d bytes, found %d", f.Size, st.Size), Expected: f.Size, Found: st.Size}
	case changes != want:
		return &Problem{Path: f.Path, Kind: ProblemSizeMismatch, Expected: f.Size, Found: changes + 1,
			Detail: fmt.Sprintf("Snappy-compressed changelog file of %d bytes holds %d bytes of changes, its handle %d", st.Size, changes, want)}
	}
	c.pathsMu.Lock()
	c.dstl[e] = dstlSeen{ver: t.obs.ver, size: f.Size}
	c.pathsMu.Unlock()
	return nil
}

// matchProbed gives targets (in ascending file order) what the parse's
// stats found. A stat is matched to its file by the position the builder
// gave it, which holds as long as entries still has the entry there; a
// file it does not match (the parse was restarted) is stat'ed again. A
// builder probes in ascending positions, so both lists are walked
// together, from the start again after a restart.
func (v *Verifier) matchProbed(targets []target, entries []*pathEntry, probed []*probeBatch) {
	t, last := 0, -1
	for _, b := range probed {
		for j, e := range b.entries {
			i := b.index[j]
			if i < last {
				t = 0 // the parse restarted
			}
			last = i
			for t < len(targets) && targets[t].index < i {
				t++
			}
			if t < len(targets) && targets[t].index == i && entries[i] == e {
				targets[t].obs, targets[t].probed = b.obs[j], true
			}
		}
	}
}

// openBeneathFd opens path (a directory: probes stat below it) with
// openAt beneath the root that contains it.
func openBeneathFd(res *Resolver, path string) (int, error) {
	root, rel, err := res.split(path)
	if err != nil {
		return -1, err
	}
	fd, _, err := openAt(root, rel)
	return fd, err
}

// split returns the root that contains path and path relative to it.
func (r *Resolver) split(path string) (root, rel string, err error) {
	clean, err := r.Confine(path)
	if err != nil {
		return "", "", err
	}
	best := ""
	for _, root := range r.roots {
		if _, ok := cutPathPrefix(clean, root); ok && len(root) > len(best) {
			best = root
		}
	}
	rel, _ = cutPathPrefix(clean, best)
	return best, rel, nil
}
