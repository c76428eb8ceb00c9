package manifest

import (
	"slices"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// manifestBuilder builds a manifest from the references that
// metadata.DecodeReferences(Bytes) reports while it parses a _metadata:
// a file for every path (as FromMetadata makes it, repeated paths merged
// into their first file) and the entry of its path. Only new paths are
// copied and resolved, and handed to probes to be stat'ed while the
// parse goes on. A path the previous checkpoint listed costs a
// comparison with the path that came next there when it comes in the
// same order (files shared between checkpoints mostly do), and a map
// lookup that does not copy it otherwise. Each file is judged as it is
// met: need lists those that need a check, in order.
//
// A builder runs with cache.pathsMu held: it marks the entries it meets.
type manifestBuilder struct {
	cache    *cache
	res      *Resolver
	probes   *prober
	dir      string                // the checkpoint directory
	relative map[string]*pathEntry // its relative paths, resolved against dir
	mark     uint64                // marks the entries this build met
	judge    judge
	files    []File
	entries  []*pathEntry // entries[i] is the path of files[i]
	need     []int        // positions of the files that need a check, ascending
	bytes    int64        // the Bytes of files

	// prev: the entries of the manifest parsed last (cache.last), which
	// were marked prevMark; next is where the next path is expected, and
	// outOfOrder counts the paths of prev met elsewhere since one came
	// where expected.
	prev       []*pathEntry
	prevMark   uint64
	next       int
	outOfOrder int
}

// bytesPerFile is a little less than what a reference to a shared file
// takes in _metadata (its path, mostly): it sizes the first file list.
const bytesPerFile = 96

// newManifestBuilder returns a builder of the manifest of dir, whose
// _metadata has metadataSize bytes, for a verification that judges files
// with judge. The caller holds cache.pathsMu.
func (v *Verifier) newManifestBuilder(dir string, metadataSize int64, probes *prober, judge judge) *manifestBuilder {
	c := v.cache
	// The last checkpoint had about as many files (every slot is zeroed
	// and kept with the manifest, so little more); without one, guess
	// from the size, bounded so that inline state cannot inflate it.
	n := int(min(metadataSize/bytesPerFile, 1<<16))
	if len(c.last) > 0 {
		n = len(c.last) + len(c.last)/64 + 8
	}
	if len(c.paths) == 0 {
		// The first checkpoint sizes the path table.
		c.paths = make(map[string]*pathEntry, n)
	}
	c.marks++
	b := &manifestBuilder{
		cache: c, res: v.cfg.Resolver, probes: probes, dir: dir, relative: make(map[string]*pathEntry), mark: c.marks, judge: judge,
		files: make([]File, 0, n), entries: make([]*pathEntry, 0, n),
	}
	if c.lastSweeps == c.sweeps {
		// No entry of the last manifest was removed since: they are
		// still the entries of their paths.
		b.prev, b.prevMark = c.last, c.lastMark
	}
	return b
}

func (b *manifestBuilder) Reference(r *metadata.RawReference) {
	var e *pathEntry
	switch {
	case r.Relative():
		if e = b.relative[string(r.Path)]; e == nil {
			e = b.cache.newEntry(b.res, string(r.Path), true, b.dir)
			b.relative[e.path] = e
			b.probe(e)
		}
	case b.isExpected(r.Path):
		e = b.prev[b.next]
		b.next++
		b.outOfOrder = 0
	default:
		var made bool
		e, made = b.cache.entryOf(b.res, r.Path)
		if made {
			b.probe(e)
		} else if e.mark == b.prevMark {
			// Listed elsewhere last time: expect what followed it there.
			b.next = int(e.index) + 1
			b.outOfOrder++
		}
	}
	kind := e.class
	if r.Tag != metadata.TagFileStream || r.Changelog {
		kind = r.Kind("")
	}
	if e.mark == b.mark {
		// Met before in this build: the same file, which a later segment
		// of it may extend.
		b.again(e, kind, r)
		return
	}
	e.mark, e.index = b.mark, int32(len(b.files))
	n := len(b.files)
	if n == cap(b.files) {
		b.files = slices.Grow(b.files, 1)
	}
	b.files = b.files[:n+1]
	f := &b.files[n]
	f.set(e.path, r.Relative(), kind, r.Size, r.MinLength())
	b.bytes += f.knownBytes()
	b.entries = append(b.entries, e)
	if b.judge.needsCheck(f, e) {
		b.need = append(b.need, n)
	}
}

// expected returns the entry the next absolute path is expected to be,
// prev[next], or nil: a relative path of the last manifest is never
// expected (an absolute path spelt the same is another file). A wrong
// expectation costs a comparison, so once two known paths came out of
// order only every 16th is compared, to notice the order coming back.
func (b *manifestBuilder) expected() *pathEntry {
	if b.outOfOrder >= 2 && b.outOfOrder%16 != 0 || b.next >= len(b.prev) || b.prev[b.next].relative {
		return nil
	}
	return b.prev[b.next]
}

// isExpected reports whether path is the expected one.
func (b *manifestBuilder) isExpected(path []byte) bool {
	x := b.expected()
	return x != nil && string(path) == x.path
}

// again merges another reference to e's path into its file. A file that
// must now be longer is judged again.
func (b *manifestBuilder) again(e *pathEntry, kind metadata.Kind, r *metadata.RawReference) {
	f := &b.files[e.index]
	minLength, known := f.MinLength, f.knownBytes()
	g := fileOf(e.path, r.Relative(), kind, r.Size, r.MinLength())
	f.absorb(&g)
	if f.MinLength == minLength {
		return
	}
	b.bytes += f.knownBytes() - known
	if i, listed := slices.BinarySearch(b.need, int(e.index)); !listed && b.judge.needsCheck(f, e) {
		b.need = slices.Insert(b.need, i, int(e.index))
	}
}

// probe has a path met for the first time stat'ed, unless it lies outside
// the roots. Its file will be files[len(files)].
func (b *manifestBuilder) probe(e *pathEntry) {
	if b.probes != nil && e.dir != "" {
		b.probes.probe(e, len(b.files))
	}
}

// Restart forgets what the build collected: the same paths come again.
func (b *manifestBuilder) Restart() {
	b.files, b.entries, b.need, b.bytes = b.files[:0], b.entries[:0], b.need[:0], 0
	clear(b.relative)
	b.cache.marks++
	b.mark, b.next, b.outOfOrder = b.cache.marks, 0, 0
}

// finish puts the manifest's files, their entries and their Bytes into
// parsed, returns the positions of those that need a check, and keeps the
// entries as the last manifest parsed.
func (b *manifestBuilder) finish(parsed *manifestEntry) (need []int) {
	n := len(b.files)
	parsed.man.Files, parsed.entries, parsed.bytes = b.files[:n:n], b.entries[:n:n], b.bytes
	c := b.cache
	c.last, c.lastMark, c.lastSweeps = parsed.entries, b.mark, c.sweeps
	return b.need
}
