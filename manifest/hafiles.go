package manifest

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
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
	at       int64 // when (unix ns) st was taken
	complete bool
	// chkDir is, for a checkpoint's HA file (completedCheckpoint<hex>),
	// the checkpoint directory it names, relative to the backing
	// directory ("" when it does not decode or names none here): the
	// deletion guard keeps the HA file with the checkpoint.
	chkDir string
	// legacy is, for the HA file of a Flink 1.3 or 1.4 checkpoint or a
	// 1.4 externalized metadata file, what it references: a description
	// of the checkpoint outside its directory (design §4.2.1).
	legacy *Manifest
}

// haScan is what one pass's scan of the HA state files found.
type haScan struct {
	// complete: the complete HA state files, by relative path.
	complete map[string]bool
	// judged: every file judged, for the next pass.
	judged map[string]haJudged
	// described: chk-N directory (relative) -> the verdict of the Flink
	// 1.3/1.4 HA file or externalized metadata describing it (§4.2.1).
	described map[string]*Verdict
}

// haCandidate reports whether the file name in the directory dir
// (relative) is one scanHAFiles judges.
func haCandidate(dir, name string) bool {
	return haFileKind(dir, name) != "" || strings.HasPrefix(name, "completedCheckpoint") || strings.HasPrefix(name, externalizedPrefix)
}

// haDir is a directory of HA state files this pass's search listed.
type haDir struct {
	rel   string
	files []dirent
}

// haDirs returns the directories with HA state files this pass's search
// reached, in order.
func (c *Catalog) haDirs() []haDir {
	var out []haDir
	for rel, w := range c.walked {
		if w.pass == c.passNo && len(w.ha) > 0 {
			out = append(out, haDir{rel: rel, files: w.ha})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

// scanHAFiles judges the HA state files in dirs (found by the search for
// job directories, down to MaxDepth+3: <storageDir>/<cluster>/blob/job_<job>).
// A file judged complete in prev keeps its judgement without a stat
// while its name names the same inode, until the audit's period
// (MaxAge/2) has passed since its last stat; any other is stat'ed, and
// judged again when its stat changed. The files a Flink 1.3/1.4 HA file
// references are checked on every pass.
func (c *Catalog) scanHAFiles(ctx context.Context, dirs []haDir, prev map[string]haJudged) haScan {
	complete, judged := map[string]bool{}, map[string]haJudged{}
	now := time.Now().UnixNano()
	period := (c.cfg.Verifier.cfg.MaxAge / 2).Nanoseconds()
	for _, d := range dirs {
		for _, f := range d.files {
			if ctx.Err() != nil {
				return haScan{complete: complete, judged: judged}
			}
			if !f.reg {
				continue
			}
			child := strings.TrimPrefix(d.rel+"/"+f.name, "/")
			j, ok := prev[child]
			if !(ok && j.complete && uint64(j.st.ino) == f.ino && now-j.at < period) {
				var sys unix.Stat_t
				if err := unix.Lstat(filepath.Join(c.cfg.Backing, child), &sys); err != nil || sys.Mode&unix.S_IFMT != unix.S_IFREG {
					continue
				}
				st := haStat{ino: int64(sys.Ino), size: sys.Size, mtime: sys.Mtim.Nano(), ctime: sys.Ctim.Nano()}
				if !ok || j.st != st {
					kind := haFileKind(d.rel, f.name)
					switch {
					case kind != "":
					case strings.HasPrefix(f.name, "completedCheckpoint"):
						kind = "checkpoint"
					default:
						kind = "externalized"
					}
					if kind == "checkpoint" || kind == "externalized" {
						j = c.judgeDescription(ctx, child, st)
					} else {
						j = haJudged{st: st, complete: c.judgeHAFile(ctx, child, kind)}
					}
				}
				j.at = now
			}
			judged[child] = j
			if j.complete {
				complete[child] = true
			}
		}
	}
	return haScan{complete: complete, judged: judged, described: c.describe(ctx, judged)}
}

// describe verifies what each description in judged (a Flink 1.3/1.4
// HA file or externalized metadata file) references and returns, by the
// chk-N directory it describes, its verdict: complete (L2 for an HA
// file, L1 for metadata) when every file is present with its size. A
// directory described by several files gets the best of their verdicts.
func (c *Catalog) describe(ctx context.Context, judged map[string]haJudged) map[string]*Verdict {
	out := map[string]*Verdict{}
	for _, j := range judged {
		if j.legacy == nil || j.chkDir == "" || ctx.Err() != nil {
			continue
		}
		v := &Verdict{CheckpointID: j.legacy.CheckpointID, Dir: filepath.Join(c.cfg.Backing, j.chkDir)}
		c.cfg.Verifier.verifyFiles(ctx, j.legacy, v)
		v.Files, v.Bytes = len(j.legacy.Files)+1, j.legacy.Bytes()+j.st.size
		if len(v.Problems) == 0 {
			// An HA file restores by ZooKeeper failover, externalized
			// metadata with flink run -s.
			v.Complete, v.Level = true, L2
			if j.legacy.Source == SourceMetadata {
				v.Level = L1
			}
		}
		if prev := out[j.chkDir]; prev == nil || better(v, prev) {
			out[j.chkDir] = v
		}
	}
	return out
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

// externalizedPrefix starts the name of a Flink 1.4 externalized
// checkpoint's metadata file, in a flat directory of all jobs
// (docs/flink-formats.md §2.9).
const externalizedPrefix = "checkpoint_metadata-"

// better reports whether verdict a outranks b: complete over
// incomplete, then the higher level.
func better(a, b *Verdict) bool {
	if a.Complete != b.Complete {
		return a.Complete
	}
	return a.Level > b.Level
}

// judgeDescription decodes a checkpoint's HA file, or a Flink 1.4
// externalized metadata file, rel (below the backing directory), whose
// stat is st. It returns the checkpoint directory the file names
// (relative to the backing directory) and, when the file is that
// checkpoint's only description (Flink 1.3/1.4), what it references. A
// file that could not be read is judged again on the next pass (its
// stat is not kept).
func (c *Catalog) judgeDescription(ctx context.Context, rel string, st haStat) haJudged {
	f, err := openRegularAt(c.cfg.Backing, rel)
	if err != nil {
		return haJudged{}
	}
	defer f.Close()
	data, err := f.readAll(ctx, MaxHAFileSize)
	if err != nil {
		return haJudged{}
	}
	j := haJudged{st: st}
	if strings.HasPrefix(path.Base(rel), externalizedPrefix) {
		if m, err := metadata.Decode(bytes.NewReader(data), int64(len(data)), metadata.Options{}); err == nil {
			j.legacy = FromMetadata(m, int64(len(data)))
		}
	} else if cc, err := flinkha.DecodeCompletedCheckpoint(data); err == nil {
		if cc.FieldSet != flinkha.FieldSet14 {
			j.chkDir = c.relative(cc.ExternalPointer)
			return j
		}
		j.legacy = haManifest(cc)
	}
	if j.legacy == nil {
		return j
	}
	// 1.4 names its directory only through the state files it
	// references: <dir>/<job>/chk-N/<uuid>.
	for _, ref := range j.legacy.Files {
		dir := path.Dir(c.relative(ref.Path))
		if id, ok := CheckpointIDFromDirName(path.Base(dir)); ok && id == j.legacy.CheckpointID {
			j.chkDir = dir
			break
		}
	}
	return j
}

// relative returns the Flink path p as a path relative to the backing
// directory, or "" when it maps outside it.
func (c *Catalog) relative(p string) string {
	if p == "" {
		return ""
	}
	local, err := c.cfg.Verifier.Resolver().Local(p)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(c.cfg.Backing, local)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return ""
	}
	return filepath.ToSlash(rel)
}

// holders returns the checkpoint directories (relative) that hold files
// of the complete checkpoints described outside their directories, with
// the highest such checkpoint's id (design §4.2.1: Flink 1.4's
// incremental RocksDB checkpoints reference sst files in the chk-M that
// uploaded them).
func (c *Catalog) holders(described map[string]*Verdict) map[string]int64 {
	out := map[string]int64{}
	for _, v := range described {
		if !v.Complete {
			continue
		}
		for _, f := range v.Manifest.Files {
			dir := path.Dir(c.relative(f.Path))
			if _, ok := CheckpointIDFromDirName(path.Base(dir)); ok && out[dir] < v.CheckpointID {
				out[dir] = v.CheckpointID
			}
		}
	}
	return out
}
