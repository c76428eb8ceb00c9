package manifest

import (
	"slices"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// scanner collects what metadata.Scan or ScanBytes reports: a file for
// every path (as FromMetadata makes it, repeated paths merged into their
// first file) and the entry of its path. Only new paths are copied and
// resolved, and handed to probes to be stat'ed while the scan goes on. A
// path the previous checkpoint listed costs a comparison with the path
// that came next there when it comes in the same order (files shared
// between checkpoints mostly do), and a map lookup that does not copy it
// otherwise. Each file is judged as it is met: need lists those that
// need a check, in order.
//
// A scanner runs with cache.pathsMu held: it marks the entries it meets.
type scanner struct {
	cache    *cache
	res      *Resolver
	probes   *prober
	dir      string                // the checkpoint directory
	relative map[string]*pathEntry // its relative paths, resolved against dir
	mark     uint64                // marks the entries this scan met
	judge    judge
	files    []File
	entries  []*pathEntry // entries[i] is the path of files[i]
	need     []int        // positions of the files that need a check, ascending
	bytes    int64        // the Bytes of files

	// prev: the entries of the manifest parsed last (cache.last), which
	// were marked prevMark; the next absolute path is expected to be
	// prev[next], unless that is a relative one.
	prev     []*pathEntry
	prevMark uint64
	next     int
}

// bytesPerFile is a little less than what a reference to a shared file
// takes in _metadata (its path, mostly): it sizes the first file list.
const bytesPerFile = 96

// newScanner returns a scanner of the _metadata of dir, of metadataSize
// bytes, for a verification that judges files with judge. The caller
// holds cache.pathsMu.
func (v *Verifier) newScanner(dir string, metadataSize int64, probes *prober, judge judge) *scanner {
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
	s := &scanner{
		cache: c, res: v.cfg.Resolver, probes: probes, dir: dir, relative: make(map[string]*pathEntry), mark: c.marks, judge: judge,
		files: make([]File, 0, n), entries: make([]*pathEntry, 0, n),
	}
	if c.lastSweeps == c.sweeps {
		// No entry of the last manifest was removed since: they are
		// still the entries of their paths.
		s.prev, s.prevMark = c.last, c.lastMark
	}
	return s
}

func (s *scanner) Reference(r *metadata.RawReference) {
	var e *pathEntry
	switch {
	case r.Relative():
		if e = s.relative[string(r.Path)]; e == nil {
			e = newEntry(s.res, string(r.Path), true, s.dir)
			s.relative[e.path] = e
			s.probe(e)
		}
	case s.next < len(s.prev) && !s.prev[s.next].relative && string(r.Path) == s.prev[s.next].path:
		// Where the last manifest listed it.
		e = s.prev[s.next]
		s.next++
	default:
		var made bool
		e, made = s.cache.entryOf(s.res, r.Path)
		if made {
			s.probe(e)
		} else if e.mark == s.prevMark {
			// Listed elsewhere last time: expect what followed it there.
			s.next = e.index + 1
		}
	}
	kind := e.class
	if r.Tag != metadata.TagFileStream || r.Changelog {
		kind = r.Kind("")
	}
	if e.mark == s.mark {
		// Met before in this scan: the same file, which a later segment
		// of it may extend.
		s.again(e, kind, r)
		return
	}
	e.mark, e.index = s.mark, len(s.files)
	n := len(s.files)
	if n == cap(s.files) {
		s.files = slices.Grow(s.files, 1)
	}
	s.files = s.files[:n+1]
	f := &s.files[n]
	f.set(e.path, r.Relative(), kind, r.Size, r.MinLength())
	s.bytes += f.knownBytes()
	s.entries = append(s.entries, e)
	if s.judge.needsCheck(f, e) {
		s.need = append(s.need, n)
	}
}

// again merges another reference to e's path into its file. A file that
// must now be longer is judged again.
func (s *scanner) again(e *pathEntry, kind metadata.Kind, r *metadata.RawReference) {
	f := &s.files[e.index]
	minLength, known := f.MinLength, f.knownBytes()
	g := fileOf(e.path, r.Relative(), kind, r.Size, r.MinLength())
	f.absorb(&g)
	if f.MinLength == minLength {
		return
	}
	s.bytes += f.knownBytes() - known
	if i, listed := slices.BinarySearch(s.need, e.index); !listed && s.judge.needsCheck(f, e) {
		s.need = slices.Insert(s.need, i, e.index)
	}
}

// probe has a path met for the first time stat'ed, unless it lies outside
// the roots. Its file will be files[len(files)].
func (s *scanner) probe(e *pathEntry) {
	if s.probes != nil && e.err == nil {
		s.probes.probe(e, len(s.files))
	}
}

// Restart forgets what the scan collected: the same paths come again.
func (s *scanner) Restart() {
	s.files, s.entries, s.need, s.bytes = s.files[:0], s.entries[:0], s.need[:0], 0
	clear(s.relative)
	s.cache.marks++
	s.mark, s.next = s.cache.marks, 0
}

// finish puts the manifest's files, their entries and their Bytes into
// parsed, returns the positions of those that need a check, and keeps the
// entries as the last manifest parsed.
func (s *scanner) finish(parsed *manifestEntry) (need []int) {
	n := len(s.files)
	parsed.man.Files, parsed.entries, parsed.bytes = s.files[:n:n], s.entries[:n:n], s.bytes
	c := s.cache
	c.last, c.lastMark, c.lastSweeps = parsed.entries, s.mark, c.sweeps
	return s.need
}
