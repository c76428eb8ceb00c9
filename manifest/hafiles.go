package manifest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// A replica mount hides the HA state files of jobs that are not complete
// on its site, as it hides incomplete checkpoints (docs/design.md
// §5.5.1): a job graph or execution plan HA file that does not decode
// completely, a blob whose content does not have the SHA-1 its name
// holds, a job result store entry that is not complete JSON. The catalog
// judges them in its passes; a file is judged again only when its stat
// changes.

// haFileKind says which kind of HA state file a name is ("" for none).
func haFileKind(dir, name string) string {
	switch {
	case strings.HasPrefix(name, "submittedJobGraph"), strings.HasPrefix(name, "submittedExecutionPlan"):
		return "graph"
	case blobName.MatchString(name):
		return "blob"
	case strings.Contains("/"+dir+"/", "/job-result-store/"):
		if _, _, ok := flinkha.JobResultName(name); ok {
			return "result"
		}
	}
	return ""
}

// haFilesKey is the catalog's backing work of judging HA state files.
const haFilesKey = walkPrefix + "(HA state files)"

// blobName is BlobUtils' file name of a blob: blob_<p|t>-<sha1>-<random>.
var blobName = regexp.MustCompile(`^blob_[pt]-([0-9a-f]{40})-[0-9a-f]{32}$`)

// haStat identifies a version of a file, to judge it once.
type haStat struct {
	ino, size, mtime, ctime int64
}

// haJudged is a judged version of an HA state file.
type haJudged struct {
	st       haStat
	complete bool
	// chkDir is, for a checkpoint's HA file (completedCheckpoint<hex>),
	// the checkpoint directory it names, relative to the backing
	// directory ("" when it does not decode or names none here): the
	// deletion guard keeps the HA file with the checkpoint.
	chkDir string
}

// scanHAFiles finds and judges the HA state files below the backing
// directory, down to MaxDepth+3 (<storageDir>/<cluster>/blob/job_<job>),
// without descending into checkpoint, shared, task-owned or hidden
// directories. It returns the complete ones by relative path and what it
// judged, for the next pass.
func (c *Catalog) scanHAFiles(ctx context.Context, prev map[string]haJudged) (complete map[string]bool, judged map[string]haJudged) {
	complete, judged = map[string]bool{}, map[string]haJudged{}
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		if ctx.Err() != nil {
			return
		}
		entries, err := os.ReadDir(filepath.Join(c.cfg.Backing, rel))
		if err != nil {
			return
		}
		for _, e := range entries {
			name := e.Name()
			child := strings.TrimPrefix(rel+"/"+name, "/")
			if e.IsDir() {
				if _, ok := CheckpointIDFromDirName(name); ok || IsStateDir(rel, name) || name == "shared" || name == "taskowned" || c.isHiddenName(name) || depth >= c.cfg.MaxDepth+3 {
					continue
				}
				walk(child, depth+1)
				continue
			}
			kind := haFileKind(rel, name)
			if kind == "" && strings.HasPrefix(name, "completedCheckpoint") {
				kind = "checkpoint"
			}
			if kind == "" || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			sys, _ := fi.Sys().(*syscall.Stat_t)
			st := haStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
			if sys != nil {
				st.ino, st.ctime = int64(sys.Ino), sys.Ctim.Nano()
			}
			j, ok := prev[child]
			if !ok || j.st != st {
				if kind == "checkpoint" {
					j = haJudged{st: st, chkDir: c.haCheckpointDir(ctx, child)}
				} else {
					j = haJudged{st: st, complete: c.judgeHAFile(ctx, child, kind)}
				}
			}
			judged[child] = j
			if j.complete {
				complete[child] = true
			}
		}
	}
	walk("", 0)
	return complete, judged
}

// judgeHAFile reads the HA state file rel (below the backing directory)
// and decides whether it is complete. The listing showed a regular file;
// what is opened may be anything else by now.
func (c *Catalog) judgeHAFile(ctx context.Context, rel, kind string) bool {
	f, err := openRegularAt(c.cfg.Backing, rel)
	if err != nil {
		return false
	}
	defer f.Close()
	name := path.Base(rel)
	switch kind {
	case "blob":
		h := sha1.New()
		if _, err := f.copyTo(ctx, h); err != nil {
			return false
		}
		return hex.EncodeToString(h.Sum(nil)) == blobName.FindStringSubmatch(name)[1]
	case "graph":
		data, err := f.readAll(ctx, MaxHAFileSize)
		if err != nil {
			return false
		}
		_, err = flinkha.DecodeJobGraph(data)
		return err == nil
	case "result":
		data, err := f.readAll(ctx, flinkha.MaxJobResultSize)
		if err != nil {
			return false
		}
		jr, err := flinkha.DecodeJobResult(data)
		job, _, _ := flinkha.JobResultName(name)
		return err == nil && jr.JobID == job
	}
	return false
}

// haCheckpointDir decodes the checkpoint's HA file rel (below the backing
// directory) and returns the checkpoint directory it names, relative to
// the backing directory, or "".
func (c *Catalog) haCheckpointDir(ctx context.Context, rel string) string {
	f, err := openRegularAt(c.cfg.Backing, rel)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, err := f.readAll(ctx, MaxHAFileSize)
	if err != nil {
		return ""
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(data)
	if err != nil || cc.ExternalPointer == "" {
		return ""
	}
	dir, err := c.cfg.Verifier.Resolver().Local(cc.ExternalPointer)
	if err != nil {
		return ""
	}
	rel, err = filepath.Rel(c.cfg.Backing, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return filepath.ToSlash(rel)
}
