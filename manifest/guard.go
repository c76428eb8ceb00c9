package manifest

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ErrProtected: a deletion would remove part of the newest complete
// checkpoint of a job. After a takeover, Flink itself deletes what the
// failover depends on when a job reaches FAILED (its restart strategy
// exhausted by restores that fail for a reason ckptfs cannot see): its
// pointers, HA files and, without RETAIN_ON_CANCELLATION, the checkpoint
// data. A promoted mount refuses (or holds) such deletions for a grace
// period (fusefs, DeleteGuard).
var ErrProtected = errors.New("manifest: part of the newest complete checkpoint of a job")

// DeletionGuard decides whether removing a path would remove part of the
// newest complete checkpoint of a job.
type DeletionGuard interface {
	// ProtectsDeletion returns an error wrapping ErrProtected when
	// removing rel (relative to the backing directory, "/"-separated; a
	// directory removed recursively reaches it file by file) would take
	// something of the newest complete checkpoint of a job: its chk-N
	// directory or anything below it, a file it references elsewhere
	// (shared/ state of incremental checkpoints), or the HA file
	// (completedCheckpoint<hex>) that names it. Nil otherwise.
	ProtectsDeletion(rel string) error
}

var _ DeletionGuard = (*Catalog)(nil)

// protection is what the newest complete checkpoint of each job holds,
// relative to the backing directory. A job's files are kept from pass to
// pass: only a job whose newest complete checkpoint changed changes
// them.
type protection struct {
	// dirs: chk-N directory -> the checkpoint's description.
	dirs map[string]string
	// files: local directory -> the jobs whose newest checkpoint
	// references a file in it (jobProtection.files); usually one.
	files map[string][]*jobProtection
	// ha: an HA file that names a protected checkpoint -> its
	// description.
	ha map[string]string
}

// jobProtection is what the newest complete checkpoint of one job
// protects; made by protectionOf, before the catalog's lock is taken, and
// never changed after.
type jobProtection struct {
	man  *Manifest // nil: a checkpoint without one (Flink 1.3/1.4)
	dir  string
	what string
	// files: local directory -> the sorted names of the files man
	// references there, outside dir (dirs protects what is inside).
	// The strings are the verifier entries' (Verifier.eachLocalFile),
	// not copies: a protected file costs a string header. At a million
	// files, a map of copied paths was a quarter of the daemon's heap,
	// and a map of (directory, name) keys a sixth.
	files map[string][]string
}

// has reports whether jp protects the file name in the local directory
// dir.
func (jp *jobProtection) has(dir, name string) bool {
	_, ok := slices.BinarySearch(jp.files[dir], name)
	return ok
}

// protectionOf lists what the newest complete checkpoint of each job in
// found (job directory -> chk-N -> verdict) holds, with the HA files
// (judged by the HA scan) that name it. It returns the new directories
// and HA files, and the jobs whose newest checkpoint is another one now
// (nil: none). The caller holds refreshMu.
func (c *Catalog) protectionOf(found map[string]map[string]*Verdict, judged map[string]haJudged) (dirs, ha map[string]string, changed map[string]*jobProtection) {
	dirs, ha, changed = map[string]string{}, map[string]string{}, map[string]*jobProtection{}
	for job, chks := range found {
		var newest *Verdict
		var name string
		for n, v := range chks {
			if v.Complete && (newest == nil || v.CheckpointID > newest.CheckpointID) {
				newest, name = v, n
			}
		}
		if newest == nil {
			if c.jobProtections[job] != nil {
				changed[job] = nil
			}
			continue
		}
		dir := strings.TrimPrefix(job+"/"+name, "/")
		what := fmt.Sprintf("checkpoint %d of %s", newest.CheckpointID, strings.TrimPrefix(job, "/"))
		dirs[dir] = what
		if old := c.jobProtections[job]; old != nil && old.man == newest.Manifest && old.dir == dir {
			continue
		}
		changed[job] = c.jobProtection(newest.Manifest, dir, what)
	}
	for job := range c.jobProtections {
		if _, ok := found[job]; !ok {
			changed[job] = nil
		}
	}
	for rel, j := range judged {
		if what, ok := dirs[j.chkDir]; ok && j.chkDir != "" {
			ha[rel] = what + " (its HA file)"
		}
	}
	return dirs, ha, changed
}

// jobProtection is what the checkpoint man describes, in the directory
// dir of the backing directory, protects.
func (c *Catalog) jobProtection(man *Manifest, dir, what string) *jobProtection {
	jp := &jobProtection{man: man, dir: dir, what: what, files: map[string][]string{}}
	if man == nil {
		return jp
	}
	backing := filepath.Clean(c.cfg.Backing)
	chkLocal := filepath.Join(backing, dir)
	c.cfg.Verifier.eachLocalFile(man, chkLocal, func(d, base string) {
		if d != chkLocal && !isBelow(d, chkLocal) && (d == backing || isBelow(d, backing)) {
			jp.files[d] = append(jp.files[d], base)
		}
	})
	for d, names := range jp.files {
		slices.Sort(names)
		jp.files[d] = slices.Clip(slices.Compact(names))
	}
	return jp
}

// protect applies what protectionOf found: a few slice updates a job.
// The caller holds refreshMu and mu.
func (c *Catalog) protect(dirs, ha map[string]string, changed map[string]*jobProtection) {
	p := &c.protected
	if p.files == nil {
		p.files = map[string][]*jobProtection{}
	}
	for job, jp := range changed {
		if old := c.jobProtections[job]; old != nil {
			for d := range old.files {
				if jps := slices.DeleteFunc(p.files[d], func(x *jobProtection) bool { return x == old }); len(jps) > 0 {
					p.files[d] = jps
				} else {
					delete(p.files, d)
				}
			}
		}
		if jp == nil {
			delete(c.jobProtections, job)
			continue
		}
		c.jobProtections[job] = jp
		for d := range jp.files {
			p.files[d] = append(p.files[d], jp)
		}
	}
	p.dirs, p.ha = dirs, ha
}

// isBelow reports whether the clean path p lies below the directory dir.
func isBelow(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// ProtectsDeletion implements DeletionGuard from the last pass.
func (c *Catalog) ProtectsDeletion(rel string) error {
	rel = strings.Trim(rel, "/")
	local := filepath.Join(c.cfg.Backing, rel)
	c.mu.RLock()
	defer c.mu.RUnlock()
	p := &c.protected
	dir, name := filepath.Dir(local), filepath.Base(local)
	for _, jp := range p.files[dir] {
		if jp.has(dir, name) {
			return fmt.Errorf("%w: %s needs %s", ErrProtected, jp.what, rel)
		}
	}
	if what, ok := p.ha[rel]; ok {
		return fmt.Errorf("%w: %s needs %s", ErrProtected, what, rel)
	}
	for d := rel; d != "." && d != ""; d = filepath.Dir(d) {
		if what, ok := p.dirs[d]; ok {
			return fmt.Errorf("%w: %s is in the directory of %s", ErrProtected, rel, what)
		}
	}
	return nil
}
