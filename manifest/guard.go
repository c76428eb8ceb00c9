package manifest

import (
	"errors"
	"fmt"
	"path/filepath"
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
// relative to the backing directory. files is kept from pass to pass:
// only a job whose newest complete checkpoint changed changes it.
type protection struct {
	// dirs: chk-N directory -> the checkpoint's description.
	dirs map[string]string
	// files: referenced file -> the newest checkpoint of a job that
	// needs it, and how many jobs' newest checkpoints do.
	files map[fileKey]protectedFile
	// ha: an HA file that names a protected checkpoint -> its
	// description.
	ha map[string]string
}

// fileKey is a local file as its directory and its name. The verifier's
// entries hold both already (the directory shared by its files), so a
// protected file costs a map slot rather than a copy of its path: at a
// million files, the copies were a quarter of the daemon's heap.
type fileKey struct{ dir, base string }

type protectedFile struct {
	by   *jobProtection
	jobs int32
}

// jobProtection is what the newest complete checkpoint of one job
// protects; owned by the pass. Its files are those man references
// (Verifier.eachLocalFile), found again when it is replaced.
type jobProtection struct {
	man  *Manifest // nil: a checkpoint without one (Flink 1.3/1.4)
	dir  string
	what string
}

// protectionChange is how one job's protection changes in a pass: the
// checkpoint it protects now (nil: none), the files its previous one
// protected and those its new one protects. The keys are found before
// the catalog's lock is taken (protectionOf), so that lookups through
// the mount never wait on a million path resolutions.
type protectionChange struct {
	jp        *jobProtection
	drop, add []fileKey
}

// protectionOf lists what the newest complete checkpoint of each job in
// found (job directory -> chk-N -> verdict) holds, with the HA files
// (judged by the HA scan) that name it. It returns the new directories
// and HA files, and what changes in files: the jobs whose newest
// checkpoint is another one now (or none). The caller holds refreshMu.
func (c *Catalog) protectionOf(found map[string]map[string]*Verdict, judged map[string]haJudged) (dirs, ha map[string]string, changed map[string]protectionChange) {
	dirs, ha, changed = map[string]string{}, map[string]string{}, map[string]protectionChange{}
	change := func(job string, jp *jobProtection) {
		ch := protectionChange{jp: jp}
		if old := c.jobProtections[job]; old != nil {
			c.eachProtectedFile(old, func(k fileKey) { ch.drop = append(ch.drop, k) })
		}
		if jp != nil {
			c.eachProtectedFile(jp, func(k fileKey) { ch.add = append(ch.add, k) })
		}
		changed[job] = ch
	}
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
				change(job, nil)
			}
			continue
		}
		dir := strings.TrimPrefix(job+"/"+name, "/")
		what := fmt.Sprintf("checkpoint %d of %s", newest.CheckpointID, strings.TrimPrefix(job, "/"))
		dirs[dir] = what
		if old := c.jobProtections[job]; old != nil && old.man == newest.Manifest && old.dir == dir {
			continue
		}
		change(job, &jobProtection{man: newest.Manifest, dir: dir, what: what})
	}
	for job := range c.jobProtections {
		if _, ok := found[job]; !ok {
			change(job, nil)
		}
	}
	for rel, j := range judged {
		if what, ok := dirs[j.chkDir]; ok && j.chkDir != "" {
			ha[rel] = what + " (its HA file)"
		}
	}
	return dirs, ha, changed
}

// protect applies what protectionOf found: map updates only. The caller
// holds refreshMu and mu.
func (c *Catalog) protect(dirs, ha map[string]string, changed map[string]protectionChange) {
	p := &c.protected
	if p.files == nil {
		p.files = map[fileKey]protectedFile{}
	}
	for job, ch := range changed {
		for _, k := range ch.drop {
			if pf := p.files[k]; pf.jobs <= 1 {
				delete(p.files, k)
			} else {
				pf.jobs--
				p.files[k] = pf
			}
		}
		if ch.jp == nil {
			delete(c.jobProtections, job)
			continue
		}
		c.jobProtections[job] = ch.jp
		for _, k := range ch.add {
			pf := p.files[k]
			p.files[k] = protectedFile{by: ch.jp, jobs: pf.jobs + 1}
		}
	}
	p.dirs, p.ha = dirs, ha
}

// eachProtectedFile calls fn with each file of the backing directory
// that jp's checkpoint references outside its own directory (dirs
// protects what is inside). It finds the same files each time it is
// called for the same jp.
func (c *Catalog) eachProtectedFile(jp *jobProtection, fn func(fileKey)) {
	if jp.man == nil {
		return
	}
	backing := filepath.Clean(c.cfg.Backing)
	chkLocal := filepath.Join(backing, jp.dir)
	c.cfg.Verifier.eachLocalFile(jp.man, chkLocal, func(dir, base string) {
		if dir != chkLocal && !isBelow(dir, chkLocal) && (dir == backing || isBelow(dir, backing)) {
			fn(fileKey{dir, base})
		}
	})
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
	if pf, ok := p.files[fileKey{filepath.Dir(local), filepath.Base(local)}]; ok {
		return fmt.Errorf("%w: %s needs %s", ErrProtected, pf.by.what, rel)
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
