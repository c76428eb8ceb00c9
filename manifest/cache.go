package manifest

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// FileVersion identifies one version of a file: a file rewritten,
// replaced, grown or truncated gets a different one.
type FileVersion struct {
	ino   uint64
	size  int64
	mtime int64
	ctime int64
}

// VersionOf is the version of the file st describes.
func VersionOf(st *unix.Stat_t) FileVersion {
	return FileVersion{ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// Size is the file's size in bytes.
func (v FileVersion) Size() int64 { return v.size }

// pathEntry is what a Verifier knows about one path that checkpoints
// reference: where it is on this site, and when it was last found
// complete. Successive checkpoints share most of their files, so a new
// checkpoint finds most of its paths already resolved here, by a lookup
// that does not even copy the path.
type pathEntry struct {
	// Fields are in the order of use, so that what every verification
	// reads of an entry shares a cache line.

	// Set when the entry is made, never changed.
	path     string        // as checkpoints name it
	class    metadata.Kind // metadata.Classify(path, ""), absolute paths
	relative bool          // path is relative to one checkpoint directory
	inRound  bool          // GUARDED_BY(cache.pathsMu): in cache.round, the audit's

	// GUARDED_BY(cache.pathsMu).
	// INVARIANT: seen is non-zero only when a stat at seen found a file
	// of version ver (ver.size bytes) that satisfied a reference to
	// path, and nothing since said it may have changed (trust.go); then
	// ds is the state of its directory, which lists it at dsIndex.
	seen    int64 // unix nanoseconds
	used    int64 // unix nanoseconds of the last verification that listed it
	ver     FileVersion
	ds      *dirState
	dsIndex int32

	// GUARDED_BY(cache.pathsMu). The manifest build that last met the
	// entry, and the position of its file in that build's list: a build
	// merges a path it meets again into its first file, and the next
	// build finds where the previous manifest listed it.
	index int32
	mark  uint64

	// Set when the entry is made, never changed. dir is shared by the
	// entries of one directory (cache.dirNames), base is part of path
	// when it can be: a million files' paths are most of the memory (an
	// entry is 128 bytes; outside keeps it so).
	dir  string // the local directory that holds it; "" when outside the roots
	base string // its name in dir; when outside the roots, why
}

// outside returns why the entry's path lies outside the roots, or nil.
func (e *pathEntry) outside() error {
	if e.dir == "" {
		return errors.New(e.base)
	}
	return nil
}

// dstlSeen is a changelog file's version that was read and found to hold
// size bytes, flag byte included (the File.Size a changelog reference
// gives): a compressed one is not its handle's size long, and is read
// only once per version.
type dstlSeen struct {
	ver  FileVersion
	size int64
}

// cache remembers parsed manifests by the stamp (inode, size, mtime,
// ctime) of their _metadata, paths with where they resolve and when they
// were found complete, and checksums by the stamp of their file.
type cache struct {
	// pathsMu guards the path table and what verifications record in
	// its entries: when each was last found complete and last listed,
	// and the marks of manifest builds. A build holds it from start to
	// end, so that it can look paths up, merge repeated ones and judge
	// each file as it meets them; checkFiles holds it to judge the files
	// of a manifest parsed before and to record what its stats found; a
	// sweep holds it, so it cannot remove an entry a build holds.
	pathsMu sync.Mutex
	// paths: GUARDED_BY(pathsMu). Key: an absolute path as checkpoints
	// name it. INVARIANT: entries are only removed by sweep, and sweeps
	// counts the sweeps that removed some.
	paths  map[string]*pathEntry
	sweeps uint64
	// marks: GUARDED_BY(pathsMu). The last mark given to a build.
	marks uint64
	// last: GUARDED_BY(pathsMu). The entries of the manifest parsed
	// last, in its order, the mark they got and the sweeps then: the next
	// checkpoint likely lists most of them, in the same order.
	last       []*pathEntry
	lastMark   uint64
	lastSweeps uint64

	// dirs: GUARDED_BY(pathsMu). The directories holding trusted files,
	// by local path.
	dirs map[string]*dirState
	// round: GUARDED_BY(pathsMu). The files the audit stats again in
	// turn, from cursor; lastAudit is when it last ran (unix ns).
	round     []*pathEntry
	cursor    int
	lastAudit int64
	// auditSaw: GUARDED_BY(pathsMu). The versions the audit found
	// changed, and when (unix ns, after the stat): trust refuses an
	// older stat's other version (design §3.6). Dropped after MaxAge.
	auditSaw map[*pathEntry]auditSeen
	// reuse: GUARDED_BY(pathsMu). Complete verdicts that stand while
	// nothing they depend on changed, by checkpoint directory.
	reuse map[string]*reusable
	// dirNames: GUARDED_BY(pathsMu). One string per directory that
	// entries lie in; dstl: GUARDED_BY(pathsMu), what reading changelog
	// files found, by entry.
	dirNames map[string]string
	dstl     map[*pathEntry]dstlSeen

	// mu guards the other tables; never held with pathsMu.
	mu sync.Mutex
	// manifests: GUARDED_BY(mu). Key: local path of _metadata.
	manifests map[string]manifestEntry
	// checksums: GUARDED_BY(mu). Key: local path. The CRC-32C of the
	// version of the file given by stamp.
	checksums map[string]checksumEntry
}

type checksumEntry struct {
	stamp FileVersion
	sum   string
	used  time.Time
}

// manifestEntry is a parsed _metadata: its manifest and the entry of each
// of its files, or the problem that stopped the parse.
type manifestEntry struct {
	stamp   FileVersion
	man     *Manifest
	entries []*pathEntry // entries[i] is the path of man.Files[i]
	bytes   int64        // man.Bytes()
	prob    *Problem
}

func newCache() *cache {
	return &cache{manifests: make(map[string]manifestEntry), paths: make(map[string]*pathEntry), checksums: make(map[string]checksumEntry),
		dirs: make(map[string]*dirState), reuse: make(map[string]*reusable), dirNames: make(map[string]string), dstl: make(map[*pathEntry]dstlSeen),
		auditSaw: make(map[*pathEntry]auditSeen)}
}

func (c *cache) manifest(path string, s FileVersion) (manifestEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.manifests[path]
	return e, ok && e.stamp == s
}

func (c *cache) putManifest(path string, e manifestEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.manifests[path] = e
}

// entryOf returns the entry of an absolute path, making and storing it
// when there is none (made). path is copied only into a new entry. The
// caller holds pathsMu.
func (c *cache) entryOf(res *Resolver, path []byte) (e *pathEntry, made bool) {
	if e = c.paths[string(path)]; e != nil {
		return e, false
	}
	e = c.newEntry(res, string(path), false, "")
	c.paths[e.path] = e
	return e, true
}

// newEntry resolves a path: a relative one against the checkpoint
// directory dir, an absolute one (Flink path or URI) through the
// mappings. The caller holds pathsMu.
func (c *cache) newEntry(res *Resolver, path string, relative bool, dir string) *pathEntry {
	e := &pathEntry{path: path, relative: relative}
	var local string
	var err error
	if relative {
		local, err = res.Join(dir, path)
	} else {
		e.class = metadata.Classify(path, "")
		local, err = res.Local(path)
	}
	if err != nil {
		e.base = err.Error()
	} else {
		slash := strings.LastIndexByte(local, '/')
		d, base := local[:max(slash, 1)], local[slash+1:]
		if e.dir = c.dirNames[d]; e.dir == "" {
			e.dir = strings.Clone(d)
			c.dirNames[e.dir] = e.dir
		}
		if strings.HasSuffix(path, "/"+base) {
			e.base = path[len(path)-len(base):]
		} else {
			e.base = strings.Clone(base)
		}
	}
	return e
}

func (c *cache) checksum(path string, s FileVersion, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.checksums[path]
	if !ok || e.stamp != s {
		return "", false
	}
	e.used = now
	c.checksums[path] = e
	return e.sum, true
}

func (c *cache) putChecksum(path string, s FileVersion, sum string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checksums[path] = checksumEntry{stamp: s, sum: sum, used: now}
}

// sweep drops paths (when paths) and checksums not used since notBefore, and
// manifests and reusable verdicts whose path keep rejects, bounding the
// cache to what is still in use.
func (c *cache) sweep(notBefore time.Time, paths bool, keep func(metadataPath string) bool) {
	c.pathsMu.Lock()
	removed := false
	if paths {
		clear(c.dirNames)
	}
	for p, e := range c.paths {
		if !paths {
			break
		}
		if e.used < notBefore.UnixNano() {
			c.untrust(e)
			delete(c.paths, p)
			delete(c.dstl, e)
			delete(c.auditSaw, e)
			removed = true
			continue
		}
		if e.dir != "" {
			c.dirNames[e.dir] = e.dir
		}
	}
	if removed {
		c.sweeps++
	}
	if keep != nil {
		for dir, r := range c.reuse {
			if !keep(dir + "/" + MetadataFile) {
				c.forget(dir, r)
			}
		}
	}
	c.pathsMu.Unlock()

	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.checksums {
		if e.used.Before(notBefore) {
			delete(c.checksums, p)
		}
	}
	if keep != nil {
		for p := range c.manifests {
			if !keep(p) {
				delete(c.manifests, p)
			}
		}
	}
}

// Sweep forgets the parsed manifests and verdicts of checkpoint
// directories that keep rejects (for example, directories that no longer
// exist), and, every MaxAge, the paths that no verification listed within
// twice MaxAge: a reused verdict lists none of its paths, and is judged
// again within MaxAge. Long-running callers call it after each pass.
func (v *Verifier) Sweep(keepDir func(dir string) bool) {
	var keep func(string) bool
	if keepDir != nil {
		keep = func(metadataPath string) bool {
			return keepDir(metadataPath[:len(metadataPath)-len(MetadataFile)-1])
		}
	}
	now := v.cfg.Now()
	paths := now.Sub(v.lastPathSweep) >= v.cfg.MaxAge
	if paths {
		v.lastPathSweep = now
	}
	v.cache.sweep(now.Add(-2*v.cfg.MaxAge), paths, keep)
}

// eachLocalFile calls fn with the local directory and name of each file
// (or directory) man references, chkLocal being its checkpoint
// directory: from the entries its verification made, without a copy,
// where they are still kept, and resolved again where not. Paths outside
// the roots are left out.
func (v *Verifier) eachLocalFile(man *Manifest, chkLocal string, fn func(dir, base string)) {
	c := v.cache
	c.pathsMu.Lock()
	defer c.pathsMu.Unlock()
	for i := range man.Files {
		f := &man.Files[i]
		if !f.Relative {
			if e := c.paths[f.Path]; e != nil {
				if e.dir != "" {
					fn(e.dir, e.base)
				}
				continue
			}
		}
		var local string
		var err error
		if f.Relative {
			local, err = v.cfg.Resolver.Join(chkLocal, f.Path)
		} else {
			local, err = v.cfg.Resolver.Local(f.Path)
		}
		if err == nil {
			fn(filepath.Dir(local), filepath.Base(local))
		}
	}
}
