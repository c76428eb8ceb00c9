package flinkemu

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// Step is one step of writing a checkpoint, in Flink's order.
type Step struct {
	JobID string
	ID    int64
	Kind  StepKind
	// Path is the local file or directory the step writes or deletes, if
	// any.
	Path string
}

func (s Step) String() string {
	if s.Path == "" {
		return fmt.Sprintf("chk-%d %s", s.ID, s.Kind)
	}
	return fmt.Sprintf("chk-%d %s %s", s.ID, s.Kind, filepath.Base(s.Path))
}

// StepKind names the steps of CompleteCheckpoint.
type StepKind string

const (
	StepCounter  StepKind = "counter"    // take the id from the counter
	StepMkdir    StepKind = "mkdir"      // the JobManager creates chk-N
	StepState    StepKind = "state-file" // a task writes an exclusive file in chk-N
	StepShared   StepKind = "shared-file"
	StepMetadata StepKind = "metadata" // the JobManager writes _metadata (1.4: the externalized metadata file)
	StepHAFile   StepKind = "ha-file"
	StepPointer  StepKind = "pointer" // the pointer znode and its lock
	StepSubsume  StepKind = "subsume" // subsumption of older checkpoints
)

// CheckpointSpec shapes one checkpoint.
type CheckpointSpec struct {
	// StateSizes are the sizes of the exclusive state files in chk-N, one
	// subtask each of a keyed operator (default 1000 and 2000 bytes).
	StateSizes []int
	// SharedSizes adds an operator with a RocksDB-style incremental
	// handle: a meta file and a private file in chk-N, and new shared/
	// files of these sizes (1.4: in chk-N, there is no shared/). With
	// none, the checkpoint has no such operator.
	SharedSizes []int
	// KeepShared is how many of the previous checkpoint's shared files
	// this one references again (the others were compacted away), as an
	// incremental RocksDB checkpoint reuses unchanged SST files.
	KeepShared int
	// Timestamp is the trigger time (default now).
	Timestamp time.Time
}

// sharedFile is a shared/ file as Flink's SharedStateRegistry knows it.
type sharedFile struct {
	local, flink, localName string
	size                    int64
}

// Content returns the bytes of a state file: a deterministic function of
// its name (a fresh UUID) and size, so that a restore can check every
// byte it reads without a record of what was written.
func Content(name string, size int) []byte {
	seed := sha256.Sum256([]byte(name))
	r := rand.NewChaCha8(seed)
	b := make([]byte, size)
	_, _ = r.Read(b)
	return b
}

// CompleteCheckpoint does what Flink does when a checkpoint completes:
// takes the next id from the counter, creates chk-N, writes the tasks'
// exclusive state files and new shared/ files, then _metadata, the HA
// file, then the pointer with its lock in one multi, and subsumes
// checkpoints beyond Retained. Config.BeforeStep can stop it between any
// two steps.
//
// Flink 1.4 writes no _metadata: chk-N holds the state files alone,
// which the tasks reference by absolute FileStateHandles (there are no
// relative handles before 1.10), and only the HA file (the 1.4 field set)
// describes the checkpoint; a retained (externalized) one also gets its
// flat metadata file checkpoint_metadata-<12 hex> (format version 2) in
// <Storage>/checkpoints, written before the HA file.
func (jm *JobManager) CompleteCheckpoint(jobID string, spec CheckpointSpec) (*Checkpoint, error) {
	if err := jm.usable(); err != nil {
		return nil, err
	}
	jm.mu.Lock()
	prev, known := jm.jobs[jobID]
	jm.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("flinkemu: job %s was not submitted", jobID)
	}
	if len(spec.StateSizes) == 0 {
		spec.StateSizes = []int{1000, 2000}
	}
	if spec.Timestamp.IsZero() {
		spec.Timestamp = time.Now()
	}
	step := func(id int64, kind StepKind, path string) error {
		if jm.cfg.BeforeStep == nil {
			return nil
		}
		return jm.cfg.BeforeStep(Step{JobID: jobID, ID: id, Kind: kind, Path: path})
	}
	if err := step(-1, StepCounter, ""); err != nil {
		return nil, err
	}
	id, err := jm.nextCheckpointID(jobID)
	if err != nil {
		return nil, err
	}
	cp := &Checkpoint{JobID: jobID, ID: id, Timestamp: spec.Timestamp.Truncate(time.Millisecond)}
	cp.Dir = filepath.Join(jm.cfg.Storage, "checkpoints", jobID, fmt.Sprintf("chk-%d", id))
	cp.FlinkDir = jm.flinkPath("checkpoints", jobID, fmt.Sprintf("chk-%d", id))
	if err := step(id, StepMkdir, cp.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cp.Dir, 0o755); err != nil {
		return nil, err
	}
	legacy := jm.cfg.Layout == Flink1_4
	// writeExclusive writes a task's file into chk-N and returns its
	// relative handle (1.4: absolute).
	writeExclusive := func(n int) (*metadata.StreamHandle, error) {
		name := newUUID()
		file := filepath.Join(cp.Dir, name)
		if err := step(id, StepState, file); err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, Content(name, n), 0o644); err != nil {
			return nil, err
		}
		cp.StateFiles = append(cp.StateFiles, file)
		if legacy {
			return &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: cp.FlinkDir + "/" + name, Size: int64(n)}, nil
		}
		return &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: name, Size: int64(n)}, nil
	}
	keyed := metadata.Operator{IDLower: 0x1111, IDUpper: 0x2222, Parallelism: int32(len(spec.StateSizes)), MaxParallelism: 128}
	version := jm.cfg.metadataVersion()
	if version >= 5 { // operator names and uids are stored from version 5 on
		keyed.Name, keyed.UID = "keyed state", "flinkemu-keyed"
	}
	for i, n := range spec.StateSizes {
		h, err := writeExclusive(n)
		if err != nil {
			return nil, err
		}
		k := &metadata.KeyedHandle{
			Tag: metadata.TagKeyGroupsV2, KeyGroupStart: int32(i), KeyGroupCount: 1, Offsets: []int64{0},
			Delegate: h, StateHandleID: newUUID(),
		}
		if legacy { // KeyGroupsStateHandle had no StateHandleID yet
			k.Tag, k.StateHandleID = metadata.TagKeyGroups, ""
		}
		keyed.Subtasks = append(keyed.Subtasks, metadata.Subtask{Index: int32(i), ManagedKeyed: k})
	}
	m := &metadata.Metadata{Version: version, CheckpointID: id, Operators: []metadata.Operator{keyed, jm.sourceOperator(cp, version)}, ChannelLayout: metadata.ChannelLayout112}
	if version >= 4 {
		if m.Properties, err = jm.checkpointProperties(jobID); err != nil {
			return nil, err
		}
	}
	if len(spec.SharedSizes) > 0 {
		op, err := jm.writeIncremental(cp, spec, prev, writeExclusive, step)
		if err != nil {
			return nil, err
		}
		if version >= 5 {
			op.Name, op.UID = "rocksdb state", "flinkemu-rocksdb"
		}
		m.Operators = append(m.Operators, op)
	}

	var meta bytes.Buffer
	if err := metadata.Encode(&meta, m); err != nil {
		return nil, err
	}
	haSpec := flinkha.CheckpointSpec{
		FieldSet: jm.cfg.FieldSet(), Release: jm.cfg.releaseString(), JobID: jobID, CheckpointID: id,
		Timestamp: cp.Timestamp.UnixMilli(), CompletionTimestamp: cp.Timestamp.UnixMilli() + 150,
		ExternalPointer: cp.FlinkDir, MetadataSize: int64(meta.Len()), Metadata: m, Retention: jm.cfg.Retention,
	}
	switch {
	case legacy && jm.cfg.Retention == flinkha.RetainNever:
		// Not externalized: the HA file names neither a pointer nor
		// metadata.
		haSpec.ExternalPointer = ""
	case legacy:
		// SavepointStore.storeExternalizedCheckpointToHandle: a flat
		// file in state.checkpoints.dir, which is the pointer.
		if err := step(id, StepMetadata, filepath.Join(jm.cfg.Storage, "checkpoints")); err != nil {
			return nil, err
		}
		var flinkMeta string
		if cp.Metadata, flinkMeta, err = jm.writeNewFile([]string{"checkpoints"}, "checkpoint_metadata-", meta.Bytes()); err != nil {
			return nil, err
		}
		haSpec.ExternalPointer, haSpec.MetadataPath = flinkMeta, flinkMeta
	default:
		cp.Metadata = filepath.Join(cp.Dir, "_metadata")
		if err := step(id, StepMetadata, cp.Metadata); err != nil {
			return nil, err
		}
		if err := jm.writeMetadata(cp.Metadata, meta.Bytes()); err != nil {
			return nil, err
		}
	}
	ha, err := flinkha.EncodeCompletedCheckpoint(haSpec)
	if err != nil {
		return nil, err
	}
	if err := step(id, StepHAFile, ""); err != nil {
		return nil, err
	}
	if cp.HAFile, cp.HAFlinkPath, err = jm.writeHAFile("completedCheckpoint", ha); err != nil {
		return nil, err
	}
	st, err := jm.stateHandle(cp.HAFlinkPath, int64(len(ha)))
	if err != nil {
		return nil, err
	}
	cp.Znode = jm.p.pointer(jobID, id)
	if cp.Data, err = flinkha.EncodeStateHandle(st); err != nil {
		return nil, err
	}
	if err := step(id, StepPointer, ""); err != nil {
		return nil, err
	}
	if err := jm.addAndLock(cp.Znode, st, jm.checkpointLockID(jobID)); err != nil {
		return nil, err
	}
	jm.mu.Lock()
	jm.jobs[jobID] = append(jm.jobs[jobID], cp)
	var subsumed []*Checkpoint
	for len(jm.jobs[jobID]) > jm.cfg.Retained {
		subsumed = append(subsumed, jm.jobs[jobID][0])
		jm.jobs[jobID] = jm.jobs[jobID][1:]
	}
	jm.mu.Unlock()
	for _, old := range subsumed {
		if err := step(id, StepSubsume, old.Dir); err != nil {
			return nil, err
		}
		if err := jm.subsume(old); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// sourceOperator is a source's state, small enough that Flink keeps it
// inline (ByteStreamStateHandle, below the inline threshold) in _metadata
// and the HA file: the split enumerator's coordinator state, named by the
// operator id, and the reader's SourceReaderState, named by the file it
// would have been in chk-N.
func (jm *JobManager) sourceOperator(cp *Checkpoint, version int32) metadata.Operator {
	op := metadata.Operator{IDLower: 0x5555, IDUpper: 0x6666, Parallelism: 1, MaxParallelism: 128}
	if version >= 5 {
		op.Name, op.UID = "Source: flinkemu", "flinkemu-source"
	}
	if version >= 3 { // operator coordinators came with 1.11
		coordinator := Content(op.OperatorIDString(), 16)
		op.Coordinator = &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: op.OperatorIDString(), Data: coordinator, DataLen: int32(len(coordinator))}
	}
	name := cp.FlinkDir + "/" + newUUID()
	reader := Content(name, 64)
	op.Subtasks = []metadata.Subtask{{Index: 0, ManagedOperatorFlag: 1, ManagedOperator: &metadata.OperatorHandle{
		Tag:      metadata.TagPartitionableOperator,
		States:   []metadata.OperatorStateMeta{{Name: "SourceReaderState", Mode: 0, Offsets: []int64{0}}},
		Delegate: &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: name, Data: reader, DataLen: int32(len(reader))},
	}}}
	return op
}

// checkpointProperties is the Java-serialized CheckpointProperties that
// _metadata holds from version 4 on: the HA file's props object (the same
// object in Flink), serialized on its own.
func (jm *JobManager) checkpointProperties(jobID string) ([]byte, error) {
	ha, err := flinkha.EncodeCompletedCheckpoint(flinkha.CheckpointSpec{
		FieldSet: jm.cfg.FieldSet(), Release: jm.cfg.releaseString(), JobID: jobID, ExternalPointer: jm.flinkPath("checkpoints", jobID, "chk-0"), Retention: jm.cfg.Retention,
	})
	if err != nil {
		return nil, err
	}
	s, err := javaser.Decode(ha)
	if err != nil {
		return nil, err
	}
	root, err := s.Object()
	if err != nil {
		return nil, err
	}
	props, err := javaser.FieldAs[*javaser.Object](root, "props")
	if err != nil {
		return nil, err
	}
	return javaser.Encode(javaser.NewStream(props))
}

// writeIncremental writes the RocksDB-style operator of a checkpoint: its
// new shared files under <checkpoints>/<job>/shared (absolute handles),
// reuses KeepShared of the previous checkpoint's, writes a private file
// (MANIFEST: into shared/ as well, absolute), keeps the tiny CURRENT
// inline, and writes the meta file in chk-N (relative). 1.4 has neither
// shared/ nor relative handles: its new files go to chk-N, where later
// checkpoints reference them, every handle absolute, in an
// IncrementalKeyedStateHandle without 1.16's checkpointed size and
// StateHandleID.
func (jm *JobManager) writeIncremental(cp *Checkpoint, spec CheckpointSpec, prev []*Checkpoint,
	writeExclusive func(int) (*metadata.StreamHandle, error), step func(int64, StepKind, string) error,
) (metadata.Operator, error) {
	legacy := jm.cfg.Layout == Flink1_4
	h := &metadata.KeyedHandle{
		Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: cp.ID, BackendID: newUUID(),
		KeyGroupStart: 0, KeyGroupCount: 128, StateHandleID: newUUID(),
	}
	if legacy {
		h.Tag, h.StateHandleID = metadata.TagIncrementalKeyGroups, ""
	}
	var reuse []*sharedFile
	if len(prev) > 0 {
		jm.mu.Lock()
		for _, local := range prev[len(prev)-1].SharedFiles {
			if f := jm.shared[cp.JobID][local]; f != nil && len(reuse) < spec.KeepShared {
				reuse = append(reuse, f)
			}
		}
		jm.mu.Unlock()
	}
	for _, f := range reuse {
		h.Shared = append(h.Shared, metadata.NamedHandle{LocalName: f.localName,
			Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: f.flink, Size: f.size}})
		cp.SharedFiles = append(cp.SharedFiles, f.local)
	}
	dir, flinkDir := filepath.Join(jm.cfg.Storage, "checkpoints", cp.JobID, "shared"), jm.flinkPath("checkpoints", cp.JobID, "shared")
	if legacy {
		dir, flinkDir = cp.Dir, cp.FlinkDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return metadata.Operator{}, err
	}
	for i, n := range spec.SharedSizes {
		name := newUUID()
		f := &sharedFile{
			local: filepath.Join(dir, name), flink: flinkDir + "/" + name,
			localName: fmt.Sprintf("%06d.sst", cp.ID*100+int64(i)), size: int64(n),
		}
		if err := step(cp.ID, StepShared, f.local); err != nil {
			return metadata.Operator{}, err
		}
		if err := os.WriteFile(f.local, Content(name, n), 0o644); err != nil {
			return metadata.Operator{}, err
		}
		jm.mu.Lock()
		jm.shared[cp.JobID][f.local] = f
		jm.mu.Unlock()
		h.Shared = append(h.Shared, metadata.NamedHandle{LocalName: f.localName,
			Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: f.flink, Size: f.size}})
		h.CheckpointedSize += f.size
		cp.SharedFiles = append(cp.SharedFiles, f.local)
		cp.NewSharedFiles = append(cp.NewSharedFiles, f.local)
	}
	privateDir := cp.Dir
	if jm.cfg.sharedPrivateFiles() {
		privateDir = dir
	}
	name := newUUID()
	privateFile := filepath.Join(privateDir, name)
	privateSize := 100 + int(cp.ID%50)
	kind := StepState
	if privateDir == dir && !legacy {
		kind = StepShared
	}
	if err := step(cp.ID, kind, privateFile); err != nil {
		return metadata.Operator{}, err
	}
	if err := os.WriteFile(privateFile, Content(name, privateSize), 0o644); err != nil {
		return metadata.Operator{}, err
	}
	cp.PrivateFiles = append(cp.PrivateFiles, privateFile)
	private := &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: name, Size: int64(privateSize)}
	if privateDir == dir || legacy {
		private = &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: flinkDir + "/" + name, Size: int64(privateSize)}
	}
	current := []byte("MANIFEST-000001\n")
	currentName := jm.flinkPath("checkpoints", cp.JobID, "shared", newUUID())
	if privateDir != dir || legacy {
		currentName = cp.FlinkDir + "/" + newUUID()
	}
	h.Private = []metadata.NamedHandle{
		{LocalName: "MANIFEST-000001", Handle: private},
		{LocalName: "CURRENT", Handle: &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: currentName, Data: current, DataLen: int32(len(current))}},
	}
	var err error
	if h.Meta, err = writeExclusive(300); err != nil {
		return metadata.Operator{}, err
	}
	return metadata.Operator{
		IDLower: 0x3333, IDUpper: 0x4444, Parallelism: 1, MaxParallelism: 128,
		Subtasks: []metadata.Subtask{{Index: 0, ManagedKeyed: h}},
	}, nil
}

// writeMetadata writes _metadata directly or, with MetadataInProgress,
// through a staged sibling renamed on commit.
func (jm *JobManager) writeMetadata(path string, data []byte) error {
	target := path
	if jm.cfg.MetadataInProgress {
		target = filepath.Join(filepath.Dir(path), "._metadata.inprogress."+newUUID())
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if target != path {
		return os.Rename(target, path)
	}
	return nil
}

// subsume removes a checkpoint as Flink's releaseAndTryRemove does:
// release the lock, delete locks (1.15+), delete the HA file, delete the
// node; then the checkpoint's files go (Flink's CheckpointsCleaner:
// metadata and exclusive state, the chk-N directory) and the shared files
// no retained checkpoint references any more (SharedStateRegistry). In
// 1.4 a checkpoint discards its files one by one, each FileStateHandle
// then deleting its directory if that is empty, and the sst files it
// wrote into its chk-N stay as long as a retained checkpoint references
// them (discard14).
func (jm *JobManager) subsume(cp *Checkpoint) error {
	lockParent := cp.Znode
	if jm.cfg.Layout.LocksChild() {
		lockParent += "/locks"
	}
	if err := jm.deleteIfExists(lockParent + "/" + jm.checkpointLockID(cp.JobID)); err != nil {
		return fmt.Errorf("flinkemu: release %s: %w", cp.Znode, err)
	}
	if jm.cfg.Layout.LocksChild() {
		if err := jm.deleteIfExists(lockParent); err != nil {
			return fmt.Errorf("flinkemu: delete %s: %w", lockParent, err)
		}
	}
	if err := os.Remove(cp.HAFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := jm.deleteIfExists(cp.Znode); err != nil {
		return fmt.Errorf("flinkemu: delete %s: %w", cp.Znode, err)
	}
	if jm.cfg.KeepSubsumedData {
		return nil
	}
	if jm.cfg.Layout == Flink1_4 {
		return jm.discard14(cp)
	}
	if err := os.RemoveAll(cp.Dir); err != nil {
		return err
	}
	for _, f := range cp.PrivateFiles {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	jm.mu.Lock()
	used := map[string]bool{}
	for _, kept := range jm.jobs[cp.JobID] {
		for _, f := range kept.SharedFiles {
			used[f] = true
		}
	}
	var unused []string
	for local := range jm.shared[cp.JobID] {
		if !used[local] && slices.Contains(cp.SharedFiles, local) {
			unused = append(unused, local)
			delete(jm.shared[cp.JobID], local)
		}
	}
	jm.mu.Unlock()
	slices.Sort(unused)
	for _, local := range unused {
		if err := os.Remove(local); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// discard14 deletes a subsumed 1.4 checkpoint's files as 1.4's
// CompletedCheckpoint.discardOnSubsume does: the externalized metadata
// file, then every state file no retained checkpoint references
// (SharedStateRegistry keeps the sst files a later checkpoint reuses),
// each FileStateHandle deleting its parent directory once that is empty
// (FileUtils.deletePathIfEmpty), so a chk-N goes with its last file.
func (jm *JobManager) discard14(cp *Checkpoint) error {
	jm.mu.Lock()
	used := map[string]bool{}
	for _, kept := range jm.jobs[cp.JobID] {
		for _, f := range kept.Files() {
			used[f] = true
		}
	}
	var unused []string
	for _, f := range cp.Files() {
		if !used[f] {
			unused = append(unused, f)
			delete(jm.shared[cp.JobID], f)
		}
	}
	jm.mu.Unlock()
	for _, f := range unused {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if dir := filepath.Dir(f); strings.HasPrefix(filepath.Base(dir), "chk-") {
			// Fails, and is ignored, while the directory holds files.
			_ = os.Remove(dir)
		}
	}
	// A checkpoint without state files leaves an empty chk-N.
	if err := os.Remove(cp.Dir); err != nil && !errors.Is(err, os.ErrNotExist) && !isNotEmpty(err) {
		return err
	}
	return nil
}

// isNotEmpty reports a directory that could not be removed because it
// holds files.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
