package flinkemu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// RestoreOptions shape a restore.
type RestoreOptions struct {
	// Attempts is how many times the whole recovery is tried before
	// giving up (default 3). Flink retries the same pointers forever,
	// restarting the JobManager each time; a test needs an end.
	Attempts int
	// Backoff is the pause between attempts (default 100ms).
	Backoff time.Duration
}

func (o *RestoreOptions) defaults() {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
}

// Restored is what a successful restore read.
type Restored struct {
	CheckpointID int64
	// Retained are the pointers recovered, ascending (the newest is
	// CheckpointID).
	Retained []int64
	// Files and Bytes count the files read and checked (the HA files,
	// _metadata and every state file of the restored checkpoint; 1.4 has
	// no _metadata).
	Files int
	Bytes int64
	// Failed holds the errors of the attempts before the one that
	// succeeded.
	Failed []error
}

// RestoreError is a recovery that failed on every attempt.
type RestoreError struct {
	JobID string
	// Attempts are the errors of every attempt, in order; Flink would go
	// on failing the same way.
	Attempts []error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("restore of job %s failed %d times, last: %v", e.JobID, len(e.Attempts), e.Attempts[len(e.Attempts)-1])
}

// Unwrap returns the last attempt's error.
func (e *RestoreError) Unwrap() error { return e.Attempts[len(e.Attempts)-1] }

// PointerError is one attempt's failure, at one pointer.
type PointerError struct {
	ID int64
	// Stage is "ha" (reading a retained pointer's HA file, which Flink
	// does for all of them) or "state" (reading the newest checkpoint's
	// _metadata and state files).
	Stage string
	Err   error
}

func (e *PointerError) Error() string {
	return fmt.Sprintf("checkpoint %d (%s): %v", e.ID, e.Stage, e.Err)
}
func (e *PointerError) Unwrap() error { return e.Err }

// ErrContent marks a file whose bytes are not what Flink wrote.
var ErrContent = errors.New("content differs from what was written")

// Restore recovers a job as a Flink JobManager does when it starts with
// ZooKeeper HA, reading cfg.Storage: it retrieves every retained pointer
// (1.15+: those with a locks child) and reads its HA file (one that does
// not read fails the recovery), then restores the newest: its _metadata
// and every state file the HA file references, each read whole and
// checked byte for byte (state files hold Content of their name). A
// failed attempt is retried with the same pointers, as Flink does.
// Restore only reads: it takes no lock.
//
// Flink 1.4 restores from the HA file alone: there is no _metadata, and
// an externalized checkpoint's metadata file, which the HA file names
// too, is not read (only flink run -s reads it); every state file the HA
// file references is.
func Restore(conn *zk.Conn, cfg Config, jobID string, opts RestoreOptions) (*Restored, error) {
	r, err := newRestorer(conn, cfg, jobID)
	if err != nil {
		return nil, err
	}
	res, _, err := r.run(opts)
	return res, err
}

type restorer struct {
	conn     *zk.Conn
	cfg      Config
	p        paths
	job      string
	resolver *manifest.Resolver
}

func newRestorer(conn *zk.Conn, cfg Config, jobID string) (*restorer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: cfg.FlinkStorage, Dir: cfg.Storage}}, nil)
	if err != nil {
		return nil, err
	}
	return &restorer{conn: conn, cfg: cfg, p: paths{l: cfg.Layout, ns: cfg.Namespace()}, job: jobID, resolver: res}, nil
}

// run tries the recovery up to opts.Attempts times; it also returns the
// HA files of the retained pointers of the successful attempt.
func (r *restorer) run(opts RestoreOptions) (*Restored, map[int64]*flinkha.CompletedCheckpoint, error) {
	opts.defaults()
	var failed []error
	for attempt := 0; attempt < opts.Attempts; attempt++ {
		if attempt > 0 {
			time.Sleep(opts.Backoff)
		}
		res, ccs, err := r.once()
		if err == nil {
			res.Failed = failed
			return res, ccs, nil
		}
		failed = append(failed, err)
	}
	return nil, nil, &RestoreError{JobID: r.job, Attempts: failed}
}

func (r *restorer) once() (*Restored, map[int64]*flinkha.CompletedCheckpoint, error) {
	ids, err := r.pointers()
	if err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, nil, errors.New("no checkpoint pointer: the job would start without state")
	}
	res := &Restored{Retained: ids, CheckpointID: ids[len(ids)-1]}
	ccs := map[int64]*flinkha.CompletedCheckpoint{}
	for _, id := range ids {
		cc, n, err := r.readHA(id)
		if err != nil {
			return nil, nil, &PointerError{ID: id, Stage: "ha", Err: err}
		}
		ccs[id] = cc
		res.Files++
		res.Bytes += n
	}
	cc := ccs[res.CheckpointID]
	fail := func(err error) (*Restored, map[int64]*flinkha.CompletedCheckpoint, error) {
		return nil, nil, &PointerError{ID: res.CheckpointID, Stage: "state", Err: err}
	}
	if r.cfg.Layout == Flink1_4 {
		if err := r.readStateFiles(res, cc); err != nil {
			return fail(err)
		}
		return res, ccs, nil
	}
	if cc.Metadata == nil {
		return fail(errors.New("the HA file names no _metadata"))
	}
	meta, err := r.read(cc.Metadata.Path, cc.Metadata.Size)
	if err != nil {
		return fail(err)
	}
	m, err := metadata.Decode(bytes.NewReader(meta), int64(len(meta)), metadata.Options{})
	if err != nil {
		return fail(fmt.Errorf("_metadata: %w", err))
	}
	if m.CheckpointID != res.CheckpointID {
		return fail(fmt.Errorf("_metadata holds checkpoint %d", m.CheckpointID))
	}
	res.Files++
	res.Bytes += int64(len(meta))
	if err := r.readStateFiles(res, cc); err != nil {
		return fail(err)
	}
	return res, ccs, nil
}

// externalizedMetadata reports a 1.4 externalized metadata file
// (checkpoint_metadata-<hex>), which a 1.4 HA file names beside the
// state files.
func externalizedMetadata(f flinkha.FileRef) bool {
	return strings.HasPrefix(path.Base(f.Path), "checkpoint_metadata-")
}

// readStateFiles reads every state file the HA file references, whole,
// and checks its bytes, as the tasks do when they restore; a 1.4
// externalized metadata file is not read.
func (r *restorer) readStateFiles(res *Restored, cc *flinkha.CompletedCheckpoint) error {
	for _, f := range cc.Files {
		if r.cfg.Layout == Flink1_4 && externalizedMetadata(f) {
			continue
		}
		data, err := r.read(f.Path, f.Size)
		if err != nil {
			return err
		}
		if string(data) != string(Content(path.Base(f.Path), len(data))) {
			return fmt.Errorf("%s: %w", f.Path, ErrContent)
		}
		res.Files++
		res.Bytes += int64(len(data))
	}
	return nil
}

// pointers lists the job's retained pointer ids, ascending.
func (r *restorer) pointers() ([]int64, error) {
	dir := r.p.pointerDir(r.job)
	// A read on another session may lag the leader: catch up first.
	if _, err := r.conn.Sync(dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("sync %s: %w", dir, err)
	}
	names, _, err := r.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var ids []int64
	for _, n := range names {
		id, err := strconv.ParseInt(n, 10, 64)
		if err != nil || len(n) != 19 {
			continue
		}
		if r.cfg.Layout.LocksChild() {
			ok, _, err := r.conn.Exists(r.p.pointer(r.job, id) + "/locks")
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

func (r *restorer) readHA(id int64) (*flinkha.CompletedCheckpoint, int64, error) {
	data, _, err := r.conn.Get(r.p.pointer(r.job, id))
	if err != nil {
		return nil, 0, err
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		return nil, 0, err
	}
	ha, err := r.read(h.URI, h.Size)
	if err != nil {
		return nil, 0, err
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(ha)
	if err != nil {
		return nil, 0, err
	}
	if cc.CheckpointID != id || cc.JobID != r.job {
		return nil, 0, fmt.Errorf("HA file %s holds checkpoint %d of job %s", h.URI, cc.CheckpointID, cc.JobID)
	}
	return cc, int64(len(ha)), nil
}

// ErrShort marks a file shorter than its handle says.
var ErrShort = errors.New("file shorter than recorded")

// read reads a file by its Flink path, whole, as Flink's input streams
// do, and fails when it is shorter than size.
func (r *restorer) read(flinkPath string, size int64) ([]byte, error) {
	local, err := r.resolver.Local(flinkPath)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(local)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if size >= 0 && int64(len(data)) < size {
		return nil, fmt.Errorf("%s: %w: %d of %d bytes", local, ErrShort, len(data), size)
	}
	return data, nil
}

// Recover makes this JobManager the job's new master after a failover:
// it restores the job from cfg.Storage as Restore does, then locks the
// retained pointers with its own session (Flink's getAllAndLock) and
// adopts them, so that its next checkpoints continue the id sequence and
// subsume them, shared files included.
func (jm *JobManager) Recover(jobID string, opts RestoreOptions) (*Restored, error) {
	if err := jm.usable(); err != nil {
		return nil, err
	}
	r, err := newRestorer(jm.conn, jm.cfg, jobID)
	if err != nil {
		return nil, err
	}
	// Flink restores inside the JobMaster's constructor, which has named
	// the endpoint already: a failed restore uses a name too. The legacy
	// JobManager of 1.4 has no JobMaster per job.
	var endpoint string
	if jm.p.jobLeader() {
		endpoint = jm.rpcName("jobmanager")
	}
	res, ccs, err := r.run(opts)
	if err != nil {
		return nil, err
	}
	if jm.p.jobLeader() {
		if err := jm.elect(jm.p.jobComponent(jobID, jm.cfg.Host, endpoint)); err != nil {
			return nil, err
		}
	}
	var adopted []*Checkpoint
	shared := map[string]*sharedFile{}
	for _, id := range res.Retained {
		if err := jm.lock(jobID, id); err != nil {
			return nil, err
		}
		cp, err := jm.adopt(r, jobID, id, ccs[id], shared)
		if err != nil {
			return nil, err
		}
		adopted = append(adopted, cp)
	}
	jm.mu.Lock()
	jm.jobs[jobID] = adopted
	jm.shared[jobID] = shared
	jm.mu.Unlock()
	return res, nil
}

// lock adds this JobManager's lock to a pointer (1.15+: under locks/).
func (jm *JobManager) lock(jobID string, id int64) error {
	node := jm.p.pointer(jobID, id)
	if jm.cfg.Layout.LocksChild() {
		node += "/locks"
	}
	return jm.retry(func(int) error {
		_, err := jm.conn.Create(node+"/"+jm.checkpointLockID(jobID), jm.cfg.curatorData(), zk.FlagEphemeral, jm.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

// adopt rebuilds a Checkpoint from its HA file and registers its shared
// files. A 1.4 HA file names no chk-N: the checkpoint's directory is
// where 1.4 writes it, its files there are its state files, and the files
// it references in another chk-M are the sst files it shares (discard14
// keeps every file a retained checkpoint references).
func (jm *JobManager) adopt(r *restorer, jobID string, id int64, cc *flinkha.CompletedCheckpoint, shared map[string]*sharedFile) (*Checkpoint, error) {
	data, _, err := jm.conn.Get(jm.p.pointer(jobID, id))
	if err != nil {
		return nil, err
	}
	h, err := flinkha.DecodeStateHandle(data)
	if err != nil {
		return nil, err
	}
	cp := &Checkpoint{
		JobID: jobID, ID: id, FlinkDir: cc.ExternalPointer, HAFlinkPath: h.URI,
		Znode: jm.p.pointer(jobID, id), Data: data, Timestamp: time.UnixMilli(cc.Timestamp),
	}
	local := func(p string) (string, error) { return r.resolver.Local(p) }
	if cp.HAFile, err = local(h.URI); err != nil {
		return nil, err
	}
	sharedDir := filepath.Join(jm.cfg.Storage, "checkpoints", jobID, "shared") + string(filepath.Separator)
	legacy := jm.cfg.Layout == Flink1_4
	if legacy {
		cp.FlinkDir = jm.flinkPath("checkpoints", jobID, fmt.Sprintf("chk-%d", id))
		cp.Dir = filepath.Join(jm.cfg.Storage, "checkpoints", jobID, fmt.Sprintf("chk-%d", id))
	} else {
		if cp.Dir, err = local(cc.ExternalPointer); err != nil {
			return nil, err
		}
		cp.Metadata = filepath.Join(cp.Dir, "_metadata")
	}
	for _, f := range cc.Files {
		l, err := local(f.Path)
		if err != nil {
			return nil, err
		}
		if legacy && externalizedMetadata(f) {
			cp.Metadata = l
			continue
		}
		if legacy && filepath.Dir(l) == cp.Dir || !legacy && !strings.HasPrefix(l, sharedDir) {
			cp.StateFiles = append(cp.StateFiles, l)
			continue
		}
		cp.SharedFiles = append(cp.SharedFiles, l)
		shared[l] = &sharedFile{local: l, flink: f.Path, localName: path.Base(f.Path), size: f.Size}
	}
	return cp, nil
}
