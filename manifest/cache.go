package manifest

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// stamp identifies one version of a file: a file rewritten, replaced,
// grown or truncated gets a different stamp.
type stamp struct {
	ino   uint64
	size  int64
	mtime int64
	ctime int64
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// cache remembers parsed manifests by the stamp (inode, size, mtime,
// ctime) of their _metadata, and files found complete with the size and the
// time they were seen.
type cache struct {
	mu sync.Mutex
	// manifests: GUARDED_BY(mu). Key: local path of _metadata.
	manifests map[string]manifestEntry
	// files: GUARDED_BY(mu). Key: local path. INVARIANT: an entry is only
	// stored for a file that satisfied a reference when it was seen.
	files map[string]fileEntry
	// checksums: GUARDED_BY(mu). Key: local path. The CRC-32C of the
	// version of the file given by stamp.
	checksums map[string]checksumEntry
}

type checksumEntry struct {
	stamp stamp
	sum   string
	used  time.Time
}

type manifestEntry struct {
	stamp stamp
	man   *Manifest
	prob  *Problem
}

type fileEntry struct {
	size int64
	seen time.Time
}

func newCache() *cache {
	return &cache{manifests: make(map[string]manifestEntry), files: make(map[string]fileEntry), checksums: make(map[string]checksumEntry)}
}

func (c *cache) manifest(path string, s stamp) (manifestEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.manifests[path]
	return e, ok && e.stamp == s
}

func (c *cache) putManifest(path string, s stamp, man *Manifest, prob *Problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.manifests[path] = manifestEntry{stamp: s, man: man, prob: prob}
}

// fresh reports whether path was seen complete for f since notBefore.
func (c *cache) fresh(path string, f *File, notBefore time.Time) bool {
	c.mu.Lock()
	e, ok := c.files[path]
	c.mu.Unlock()
	return ok && !e.seen.Before(notBefore) && f.Satisfied(e.size)
}

func (c *cache) putFile(path string, o *observation, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[path] = fileEntry{size: o.size, seen: now}
}

func (c *cache) checksum(path string, s stamp, now time.Time) (string, bool) {
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

func (c *cache) putChecksum(path string, s stamp, sum string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checksums[path] = checksumEntry{stamp: s, sum: sum, used: now}
}

// sweep drops files and checksums not used since notBefore and manifests
// whose path keep rejects, bounding the cache to what is still in use.
func (c *cache) sweep(notBefore time.Time, keep func(metadataPath string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.files {
		if e.seen.Before(notBefore) {
			delete(c.files, p)
		}
	}
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

// Sweep forgets files not seen within MaxAge and the parsed manifests of
// checkpoint directories that keep rejects (for example, directories that
// no longer exist). Long-running callers call it after each pass.
func (v *Verifier) Sweep(keepDir func(dir string) bool) {
	var keep func(string) bool
	if keepDir != nil {
		keep = func(metadataPath string) bool {
			return keepDir(metadataPath[:len(metadataPath)-len(MetadataFile)-1])
		}
	}
	v.cache.sweep(v.cfg.Now().Add(-v.cfg.MaxAge), keep)
}
