package manifest

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// SourceHA: the manifest lists what a checkpoint's HA file references.
const SourceHA Source = "ha"

// MaxHAFileSize bounds the HA files (checkpoints' and job graphs') read
// and decoded in memory: decoding one costs at most javaser.DecodeBudget
// of its size, 3 GiB at this bound. Flink's JobManager holds the same
// object in memory; a larger file is refused rather than read.
const MaxHAFileSize = 256 << 20

// PointerVerdict is the verdict on one checkpoint pointer (znode): the HA
// file it names with everything that file references (VerifyHA), and the
// checkpoint directory the HA file names (VerifyDir).
type PointerVerdict struct {
	// Verdict combines both parts. It is Complete at L2 (L3 when the
	// directory is also sealed) when both parts are complete: restorable
	// by ZooKeeper failover. When only the directory is complete it is
	// not Complete and its Level is L1: restorable with flink run -s.
	// Problems are those of both parts.
	Verdict *Verdict
	// HA is the HA part alone.
	HA *Verdict
	// Dir is the directory part; nil when the HA file could not be read,
	// or names no directory with _metadata (Flink 1.4).
	Dir *Verdict
	// HAFileReadable: the HA file exists with the size stored in the
	// znode, deserializes completely and names the pointer's checkpoint.
	// Since Flink 1.12.5/1.13.1 one unreadable HA file of any retained
	// pointer fails the whole recovery.
	HAFileReadable bool
	// Checkpoint is the decoded HA file when it is readable.
	Checkpoint *flinkha.CompletedCheckpoint
}

// L2Complete reports whether the pointer is restorable by ZooKeeper
// failover on this site: its HA file readable and complete, and the
// checkpoint directory it names complete (level L2 or above). This is
// the one definition of L2-completeness; a nil verdict is not complete.
func (pv *PointerVerdict) L2Complete() bool {
	return pv != nil && pv.HAFileReadable && pv.Verdict != nil && pv.Verdict.Complete && pv.Verdict.Level >= L2
}

// VerifyPointer verifies what the checkpoint pointer with id pointerID
// needs for a ZooKeeper failover on this site (L2, docs/design.md §3.2):
// the HA file named by the znode data and the files it references
// (VerifyHA), and at level L1 the checkpoint directory the HA file names,
// whose _metadata must hold checkpoint pointerID as well.
func (v *Verifier) VerifyPointer(ctx context.Context, pointerID int64, znode flinkha.StateHandle) *PointerVerdict {
	ha, cc, haSize := v.verifyHA(ctx, pointerID, znode)
	pv := &PointerVerdict{HA: ha, HAFileReadable: cc != nil, Checkpoint: cc}
	if cc != nil && cc.FieldSet != flinkha.FieldSet14 {
		pv.Dir = v.verifyPointerDir(ctx, pointerID, cc)
	}

	c := &Verdict{CheckpointID: pointerID, Dir: ha.Dir, Files: ha.Files, Bytes: ha.Bytes, Manifest: ha.Manifest, Unknown: ha.Unknown}
	c.Problems = append(c.Problems, ha.Problems...)
	if d := pv.Dir; d != nil {
		c.Problems = append(c.Problems, d.Problems...)
		c.Unknown = c.Unknown || d.Unknown
		// The HA file references the same state files as _metadata.
		c.Dir, c.Files, c.Bytes, c.Manifest = d.Dir, d.Files+1, d.Bytes+haSize, d.Manifest
	}
	dirComplete := pv.Dir == nil || pv.Dir.Complete
	switch {
	case ha.Complete && dirComplete:
		c.Complete, c.Level = true, L2
		if pv.Dir != nil && pv.Dir.Level == L3 {
			c.Level = L3
		}
	case pv.Dir != nil && pv.Dir.Complete:
		c.Level = L1
	}
	pv.Verdict = c
	return pv
}

// verifyPointerDir verifies the checkpoint directory an HA file names.
func (v *Verifier) verifyPointerDir(ctx context.Context, pointerID int64, cc *flinkha.CompletedCheckpoint) *Verdict {
	if cc.ExternalPointer == "" {
		d := &Verdict{CheckpointID: pointerID}
		d.addProblem(Problem{Path: "", Kind: ProblemParseError, Detail: "the HA file names no checkpoint directory"})
		return d
	}
	local, err := v.cfg.Resolver.Local(cc.ExternalPointer)
	if err != nil {
		d := &Verdict{CheckpointID: pointerID, Dir: cc.ExternalPointer}
		d.addProblem(Problem{Path: cc.ExternalPointer, Kind: ProblemOutsideRoot, Detail: err.Error()})
		return d
	}
	d := v.VerifyDir(ctx, local)
	if d.Manifest != nil && d.Manifest.CheckpointID != pointerID {
		d.addProblem(Problem{
			Path: MetadataFile, Kind: ProblemWrongCheckpointID,
			Detail:   fmt.Sprintf("the pointer is checkpoint %d, %s holds %d", pointerID, cc.ExternalPointer, d.Manifest.CheckpointID),
			Expected: pointerID, Found: d.Manifest.CheckpointID,
		})
	}
	return d
}

// VerifyHA verifies the HA part of level L2 for the checkpoint pointer
// with id pointerID whose znode holds znode: the HA file exists with
// exactly the size the znode records, deserializes completely, names
// checkpoint pointerID, and the _metadata handle and every file its state
// handles reference are present with their sizes (file-merging segments:
// at least their end). The verdict is Complete at level L2 when all that
// holds; it says nothing about the checkpoint directory (VerifyPointer
// checks both). The decoded HA file is returned when it is readable (all
// but the last check passed), nil otherwise.
func (v *Verifier) VerifyHA(ctx context.Context, pointerID int64, znode flinkha.StateHandle) (*Verdict, *flinkha.CompletedCheckpoint) {
	verdict, cc, _ := v.verifyHA(ctx, pointerID, znode)
	return verdict, cc
}

// verifyHA is VerifyHA, also returning the HA file's size.
func (v *Verifier) verifyHA(ctx context.Context, pointerID int64, znode flinkha.StateHandle) (*Verdict, *flinkha.CompletedCheckpoint, int64) {
	verdict := &Verdict{CheckpointID: pointerID}
	name, err := znode.Path()
	if err != nil {
		verdict.addProblem(Problem{Path: znode.URI, Kind: ProblemParseError, Detail: "znode: " + err.Error()})
		return verdict, nil, 0
	}
	if err := ctx.Err(); err != nil {
		verdict.addProblem(Problem{Path: name, Kind: ProblemIOError, Detail: err.Error()})
		return verdict, nil, 0
	}
	data, prob := v.readHAFile(ctx, name, znode.Size)
	if prob != nil {
		verdict.addProblem(*prob)
		return verdict, nil, 0
	}
	cc, err := flinkha.DecodeCompletedCheckpoint(data)
	if err != nil {
		p := Problem{Path: name, Kind: ProblemParseError, Detail: err.Error()}
		var de *javaser.DecodeError
		if errors.As(err, &de) {
			p.Offset = de.Offset
		}
		verdict.addProblem(p)
		return verdict, nil, int64(len(data))
	}
	if cc.ExternalPointer != "" {
		if local, err := v.cfg.Resolver.Local(cc.ExternalPointer); err == nil {
			verdict.Dir = local
		}
	}
	if cc.CheckpointID != pointerID {
		verdict.addProblem(Problem{
			Path: name, Kind: ProblemWrongCheckpointID,
			Detail:   fmt.Sprintf("the pointer is checkpoint %d, its HA file holds %d", pointerID, cc.CheckpointID),
			Expected: pointerID, Found: cc.CheckpointID,
		})
		return verdict, nil, int64(len(data))
	}
	man := haManifest(cc)
	v.verifyFiles(ctx, man, verdict)
	verdict.Files = len(man.Files) + 1
	verdict.Bytes = man.Bytes() + int64(len(data))
	if len(verdict.Problems) == 0 {
		verdict.Complete = true
		verdict.Level = L2
	}
	return verdict, cc, int64(len(data))
}

// verifyFiles sets man as verdict's manifest and checks that every file
// it lists (by absolute path) is present with its size, adding a problem
// for each that is not.
func (v *Verifier) verifyFiles(ctx context.Context, man *Manifest, verdict *Verdict) {
	verdict.Manifest = man
	judge := v.judgeAt(ctx, v.cfg.Now().UnixNano())
	entries := make([]*pathEntry, len(man.Files))
	v.cache.pathsMu.Lock()
	for i := range man.Files {
		entries[i], _ = v.cache.entryOf(v.cfg.Resolver, []byte(man.Files[i].Path))
	}
	need := judge.all(man.Files, entries)
	v.cache.pathsMu.Unlock()
	probes := v.newProber(ctx)
	defer probes.stop()
	v.checkFiles(ctx, judge, probes, man.Files, entries, need, verdict)
}

// HAFileChecksum returns the CRC-32C of the HA file at the Flink path
// name, which must be a regular file of exactly size bytes: what a
// site's acknowledgement of a synchronous request compares with the
// bytes the primary wrote (design §4.8).
func (v *Verifier) HAFileChecksum(ctx context.Context, name string, size int64) (uint32, error) {
	data, prob := v.readHAFile(ctx, name, size)
	if prob != nil {
		return 0, errors.New(prob.String())
	}
	return Checksum(data), nil
}

// readHAFile reads the HA file at the Flink path name, which must be a
// regular file of exactly size bytes (any size when size is -1), and at
// most MaxHAFileSize.
func (v *Verifier) readHAFile(ctx context.Context, name string, size int64) ([]byte, *Problem) {
	local, err := v.cfg.Resolver.Local(name)
	if err != nil {
		return nil, &Problem{Path: name, Kind: ProblemOutsideRoot, Detail: err.Error()}
	}
	f, err := openRegular(v.cfg.Resolver, local)
	if err != nil {
		return nil, fileProblem(name, err)
	}
	defer f.Close()
	if size >= 0 && f.size() != size {
		return nil, &Problem{Path: name, Kind: ProblemSizeMismatch, Expected: size, Found: f.size(),
			Detail: fmt.Sprintf("the znode records %d bytes, found %d", size, f.size())}
	}
	data, err := f.readAll(ctx, MaxHAFileSize)
	if err != nil {
		return nil, fileProblem(name, err)
	}
	return data, nil
}

// haManifest lists what an HA file references: its _metadata handle and
// the distinct files of its state handles. Several segments of one
// physical file become one entry with the largest end.
func haManifest(cc *flinkha.CompletedCheckpoint) *Manifest {
	man := &Manifest{CheckpointID: cc.CheckpointID, Source: SourceHA, InlineBytes: cc.InlineBytes}
	refs := cc.Files
	if cc.Metadata != nil {
		man.MetadataSize = cc.Metadata.Size
		refs = append([]flinkha.FileRef{*cc.Metadata}, refs...)
	}
	type key struct {
		path string
		kind metadata.Kind
		size int64
	}
	index := make(map[key]int)
	for _, r := range refs {
		f := File{Path: r.Path, Kind: metadata.KindOther, Size: r.Size}
		switch {
		case r.Changelog:
			f.Kind, f.Size = metadata.KindChangelog, metadata.FileSize(r.Size, true)
		case r.Dir:
			f.Kind, f.Size = metadata.KindDirectory, -1
		case r.Segment:
			f.Kind, f.Size = metadata.KindSegment, -1
			if r.Size >= 0 {
				f.MinLength = r.Offset + r.Size
			}
		}
		k := key{f.Path, f.Kind, f.Size}
		if i, ok := index[k]; ok {
			man.Files[i].MinLength = max(man.Files[i].MinLength, f.MinLength)
			continue
		}
		index[k] = len(man.Files)
		man.Files = append(man.Files, f)
	}
	return man
}
