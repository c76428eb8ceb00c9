package manifest

import (
	"slices"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// scanner collects what metadata.Scan reports: a file for every reference
// (as FromMetadata makes it) and the entry of its path. Only new paths are
// copied and resolved, and handed to probes to be stat'ed while the scan
// goes on. A path the previous checkpoint listed costs a
// comparison when it comes in the same order as there (files shared
// between checkpoints mostly do), and a map lookup otherwise.
type scanner struct {
	cache    *cache
	res      *Resolver
	probes   *prober
	dir      string                // the checkpoint directory
	relative map[string]*pathEntry // its relative paths, resolved against dir
	sweeps   uint64                // cache.sweeps when the scan began
	files    []File
	entries  []*pathEntry // entries[i] is the path of files[i]

	// prev: the entries of the manifest parsed last (cache.last), which
	// were marked prevMark; next is where the next path is expected.
	prev     []*pathEntry
	prevMark uint64
	next     int
}

// bytesPerFile is a little less than what a reference to a shared file
// takes in _metadata (its path, mostly): it sizes the first file list.
const bytesPerFile = 96

func (v *Verifier) newScanner(dir string, metadataSize int64, probes *prober) *scanner {
	c := v.cache
	c.mu.Lock()
	defer c.mu.Unlock()
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
	s := &scanner{
		cache: c, res: v.cfg.Resolver, probes: probes, dir: dir, relative: make(map[string]*pathEntry), sweeps: c.sweeps,
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
	case s.next < len(s.prev) && !s.prev[s.next].relative && s.prev[s.next].path == string(r.Path):
		e = s.prev[s.next]
		s.next++
	default:
		var made bool
		var mark uint64
		var index int
		e, made, mark, index = s.cache.entryOf(s.res, r.Path)
		if made {
			s.probe(e)
		} else if mark == s.prevMark {
			s.next = index + 1
		}
	}
	kind := e.class
	if r.Tag != metadata.TagFileStream || r.Changelog {
		kind = r.Kind("")
	}
	n := len(s.files)
	if n == cap(s.files) {
		s.files = slices.Grow(s.files, 1)
	}
	s.files = s.files[:n+1]
	s.files[n].set(e.path, r.Relative(), kind, r.Size, r.MinLength())
	s.entries = append(s.entries, e)
}

// probe has a path met for the first time stat'ed, unless it lies outside
// the roots.
func (s *scanner) probe(e *pathEntry) {
	if s.probes != nil && e.err == nil {
		s.probes.probe(e)
	}
}

func (s *scanner) Restart() {
	s.files, s.entries = s.files[:0], s.entries[:0]
	clear(s.relative)
}

// distinct returns the manifest's files, with duplicates merged into their
// first occurrence, and their entries. The cache holds one entry per path,
// so equal paths have equal entries, unless a sweep removed one during the
// scan: then each path is looked up again.
func (s *scanner) distinct() ([]File, []*pathEntry) {
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marks++
	mark := c.marks
	swept := c.sweeps != s.sweeps
	n := 0
	for i := range s.files {
		e := s.entries[i]
		if swept && !e.relative {
			if cur, ok := c.paths[e.path]; ok {
				e = cur
			} else {
				c.paths[e.path] = e
			}
		}
		if e.mark == mark {
			s.files[e.index].absorb(&s.files[i])
			continue
		}
		e.mark, e.index = mark, n
		if n != i {
			s.files[n] = s.files[i]
		}
		s.entries[n] = e
		n++
	}
	clear(s.files[n:])
	clear(s.entries[n:])
	files, entries := s.files[:n:n], s.entries[:n:n]
	c.last, c.lastMark, c.lastSweeps = entries, mark, c.sweeps
	return files, entries
}
