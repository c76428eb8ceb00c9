package manifest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// ProblemWrongJob: a job's HA file or job result names another job.
const ProblemWrongJob ProblemKind = "wrong_job"

// JobHARef is what ZooKeeper and the configuration say about the HA state
// of one job besides its checkpoint pointers.
type JobHARef struct {
	// JobID is the job, 32 hex digits.
	JobID string
	// Graph is the job graph (execution plan) znode's data: the HA file
	// and its size. Nil when the job has no job graph znode.
	Graph *flinkha.StateHandle
	// JobResultStore is Flink's job-result-store.storage-path. Empty means
	// Flink's default, <high-availability.storageDir>/job-result-store/
	// <cluster-id>, found beside the directory of the job graph's HA file
	// (<storageDir>/<cluster-id>), which holds when the cluster id is one
	// path element.
	JobResultStore string
	// ClusterID is Flink's high-availability.cluster-id. Before 1.10
	// the job graph's HA file lies in the storage directory itself, and
	// the blobs below <storageDir>/<cluster-id> as from 1.10 on.
	ClusterID string
}

// JobHAVerdict is the verdict on what a JobManager recovering a job reads
// besides its checkpoint pointers (docs/design.md §5.5.1). A part that does
// not apply (no job graph znode, no result store entry) is complete.
type JobHAVerdict struct {
	JobID string `json:"job_id"`
	// Graph is the job graph or execution plan HA file: present with the
	// size its znode records, deserializing completely as this job's
	// JobGraph or StreamGraph. Nil when the job has no job graph znode.
	Graph *Verdict `json:"job_graph,omitempty"`
	// JobGraph is the decoded HA file when Graph is complete.
	JobGraph *flinkha.JobGraph `json:"-"`
	// Blobs are the job's blobs in the HA blob store, each present with
	// the SHA-1 its key names. Nil when the job graph could not be read.
	Blobs *Verdict `json:"blobs,omitempty"`
	// Results are the job's entries in the job result store, each
	// decoding completely. Nil when it has none.
	Results *Verdict `json:"job_results,omitempty"`
	// BlobDir and ResultDir are where blobs and results were looked for
	// (Flink paths).
	BlobDir   string `json:"blob_dir,omitempty"`
	ResultDir string `json:"job_result_store,omitempty"`
}

// GraphComplete, BlobsComplete and ResultsComplete report each part;
// Complete all three.
func (jv *JobHAVerdict) GraphComplete() bool {
	return jv != nil && (jv.Graph == nil || jv.Graph.Complete)
}
func (jv *JobHAVerdict) BlobsComplete() bool {
	return jv != nil && jv.GraphComplete() && (jv.Blobs == nil || jv.Blobs.Complete)
}
func (jv *JobHAVerdict) ResultsComplete() bool {
	return jv != nil && (jv.Results == nil || jv.Results.Complete)
}
func (jv *JobHAVerdict) Complete() bool {
	return jv.GraphComplete() && jv.BlobsComplete() && jv.ResultsComplete()
}

// VerifyJobHA verifies, for one job, the job graph (execution plan) HA
// file, the job's blobs and its job result store entries, as a
// JobManager recovering the job reads them:
//
//   - the HA file as ZooKeeperStateHandleStore and
//     FileSystemStateStorageHelper read it: present with the size in the
//     znode, one JobGraph or StreamGraph of this job and nothing after it;
//   - every blob key of the graph (user jars, artifacts) as
//     FileSystemBlobStore names and checks it: the file
//     <storageDir>/<cluster-id>/blob/job_<job>/blob_p-<sha1>-<random>
//     whose content has that SHA-1 (Flink records no size; it fails the
//     copy with "Detected data corruption during transfer");
//   - each of <job>_DIRTY.json and <job>.json in the job result store that
//     exists: a complete JSON entry of this job (FileSystemJobResultStore).
func (v *Verifier) VerifyJobHA(ctx context.Context, ref JobHARef) *JobHAVerdict {
	jv := &JobHAVerdict{JobID: ref.JobID}
	haDir := ""
	if ref.Graph != nil {
		name, err := ref.Graph.Path()
		jv.Graph = &Verdict{CheckpointID: -1}
		if err != nil {
			jv.Graph.addProblem(Problem{Path: ref.Graph.URI, Kind: ProblemParseError, Detail: "znode: " + err.Error()})
		} else {
			haDir = path.Dir(name)
			jv.JobGraph = v.verifyGraphFile(ctx, ref.JobID, name, ref.Graph.Size, jv.Graph)
		}
	}
	if jv.JobGraph != nil {
		blobs := haDir
		if jv.JobGraph.Submitted {
			blobs += "/" + strings.Trim(ref.ClusterID, "/")
		}
		jv.BlobDir = blobs + "/blob/job_" + ref.JobID
		jv.Blobs = v.verifyBlobs(ctx, jv.BlobDir, jv.JobGraph.Blobs)
	}
	jv.ResultDir = ref.JobResultStore
	if jv.ResultDir == "" && haDir != "" {
		jv.ResultDir = path.Dir(haDir) + "/job-result-store/" + path.Base(haDir)
	}
	if jv.ResultDir != "" {
		jv.Results = v.verifyJobResults(ctx, strings.TrimRight(jv.ResultDir, "/"), ref.JobID)
	}
	return jv
}

// verifyGraphFile checks the job graph HA file into verdict and returns
// the decoded graph when it is complete.
func (v *Verifier) verifyGraphFile(ctx context.Context, job, name string, size int64, verdict *Verdict) *flinkha.JobGraph {
	if err := ctx.Err(); err != nil {
		verdict.addProblem(Problem{Path: name, Kind: ProblemIOError, Detail: err.Error()})
		return nil
	}
	data, prob := v.readHAFile(ctx, name, size)
	if prob != nil {
		verdict.addProblem(*prob)
		return nil
	}
	verdict.Files, verdict.Bytes = 1, int64(len(data))
	jg, err := flinkha.DecodeJobGraph(data)
	if err != nil {
		p := Problem{Path: name, Kind: ProblemParseError, Detail: err.Error()}
		var de *javaser.DecodeError
		if errors.As(err, &de) {
			p.Offset = de.Offset
		}
		verdict.addProblem(p)
		return nil
	}
	if jg.JobID != job {
		verdict.addProblem(Problem{Path: name, Kind: ProblemWrongJob, Detail: fmt.Sprintf("the znode is job %s, its HA file holds job %s", job, jg.JobID)})
		return nil
	}
	verdict.Complete, verdict.Level = true, L2
	return jg
}

// verifyBlobs checks that every blob is present with the SHA-1 its key
// names.
func (v *Verifier) verifyBlobs(ctx context.Context, dir string, blobs []flinkha.BlobKey) *Verdict {
	verdict := &Verdict{CheckpointID: -1, Dir: dir}
	for _, k := range blobs {
		name := dir + "/" + k.FileName()
		n, prob := v.checkBlob(ctx, name, k.Hash)
		if prob != nil {
			if k.Artifact != "" {
				prob.Detail = strings.TrimPrefix(prob.Detail+"; ", "; ") + "user artifact " + k.Artifact
			}
			verdict.addProblem(*prob)
			continue
		}
		verdict.Files++
		verdict.Bytes += n
	}
	if len(verdict.Problems) == 0 {
		verdict.Complete, verdict.Level = true, L2
	}
	return verdict
}

// checkBlob reads one blob and compares its SHA-1.
func (v *Verifier) checkBlob(ctx context.Context, name, wantHash string) (int64, *Problem) {
	local, err := v.cfg.Resolver.Local(name)
	if err != nil {
		return 0, &Problem{Path: name, Kind: ProblemOutsideRoot, Detail: err.Error()}
	}
	f, err := openRegular(v.cfg.Resolver, local)
	if err != nil {
		return 0, fileProblem(name, err)
	}
	defer f.Close()
	h := sha1.New()
	n, err := f.copyTo(ctx, h)
	v.checksummed.Add(uint64(n))
	if err != nil {
		return 0, fileProblem(name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantHash {
		return 0, &Problem{Path: name, Kind: ProblemChecksumMismatch, Found: n,
			Detail: fmt.Sprintf("SHA-1 of its %d bytes is %s, its blob key names %s", n, got, wantHash)}
	}
	return n, nil
}

// verifyJobResults checks the job's entries in the job result store; nil
// when it has none.
func (v *Verifier) verifyJobResults(ctx context.Context, dir, job string) *Verdict {
	var verdict *Verdict
	for _, suffix := range []string{flinkha.JobResultDirtySuffix, flinkha.JobResultCleanSuffix} {
		name := dir + "/" + job + suffix
		local, err := v.cfg.Resolver.Local(name)
		if err != nil {
			return &Verdict{CheckpointID: -1, Dir: dir, Problems: []Problem{{Path: name, Kind: ProblemOutsideRoot, Detail: err.Error()}}}
		}
		f, err := openRegular(v.cfg.Resolver, local)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if verdict == nil {
			verdict = &Verdict{CheckpointID: -1, Dir: dir}
		}
		if err != nil {
			verdict.addProblem(*fileProblem(name, err))
			continue
		}
		data, err := f.readAll(ctx, flinkha.MaxJobResultSize)
		f.Close()
		if err != nil {
			verdict.addProblem(*fileProblem(name, err))
			continue
		}
		verdict.Files++
		verdict.Bytes += int64(len(data))
		jr, err := flinkha.DecodeJobResult(data)
		switch {
		case err != nil:
			verdict.addProblem(Problem{Path: name, Kind: ProblemParseError, Detail: err.Error()})
		case jr.JobID != job:
			verdict.addProblem(Problem{Path: name, Kind: ProblemWrongJob, Detail: "the entry is job " + jr.JobID})
		}
	}
	if verdict != nil && len(verdict.Problems) == 0 {
		verdict.Complete, verdict.Level = true, L2
	}
	return verdict
}
