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
// relative to the backing directory.
type protection struct {
	// dirs: chk-N directory -> the checkpoint's description.
	dirs map[string]string
	// files: referenced file -> the checkpoint's description.
	files map[string]string
}

// protectionOf lists what the newest complete checkpoint of each job in
// found (job directory -> chk-N -> verdict) holds, with the HA files
// (judged by the HA scan) that name it.
func (c *Catalog) protectionOf(found map[string]map[string]*Verdict, judged map[string]haJudged) protection {
	p := protection{dirs: map[string]string{}, files: map[string]string{}}
	res := c.cfg.Verifier.Resolver()
	for job, chks := range found {
		var newest *Verdict
		var name string
		for n, v := range chks {
			if v.Complete && (newest == nil || v.CheckpointID > newest.CheckpointID) {
				newest, name = v, n
			}
		}
		if newest == nil {
			continue
		}
		dir := strings.TrimPrefix(job+"/"+name, "/")
		what := fmt.Sprintf("checkpoint %d of %s", newest.CheckpointID, strings.TrimPrefix(job, "/"))
		p.dirs[dir] = what
		if newest.Manifest == nil {
			continue
		}
		chkLocal := filepath.Join(c.cfg.Backing, dir)
		for _, f := range newest.Manifest.Files {
			var local string
			var err error
			if f.Relative {
				local, err = res.Join(chkLocal, f.Path)
			} else {
				local, err = res.Local(f.Path)
			}
			if err != nil {
				continue
			}
			if rel, err := filepath.Rel(c.cfg.Backing, local); err == nil && !strings.HasPrefix(rel, "..") {
				p.files[filepath.ToSlash(rel)] = what
			}
		}
	}
	for rel, j := range judged {
		if what, ok := p.dirs[j.chkDir]; ok && j.chkDir != "" {
			p.files[rel] = what + " (its HA file)"
		}
	}
	return p
}

// ProtectsDeletion implements DeletionGuard from the last pass.
func (c *Catalog) ProtectsDeletion(rel string) error {
	rel = strings.Trim(rel, "/")
	c.mu.RLock()
	p := c.protected
	c.mu.RUnlock()
	if what, ok := p.files[rel]; ok {
		return fmt.Errorf("%w: %s needs %s", ErrProtected, what, rel)
	}
	for d := rel; d != "." && d != ""; d = filepath.Dir(d) {
		if what, ok := p.dirs[d]; ok {
			return fmt.Errorf("%w: %s is in the directory of %s", ErrProtected, rel, what)
		}
	}
	return nil
}
