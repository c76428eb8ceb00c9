package zkbridge

import (
	"context"

	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// Verifier judges checkpoints on this site. NewSiteVerifier adapts a
// manifest.Verifier; tests use fakes.
type Verifier interface {
	// VerifyPointer judges the checkpoint a ZooKeeper pointer names at
	// level L2: its HA file and the chk-N directory the HA file names.
	VerifyPointer(ctx context.Context, ref PointerRef) *manifest.PointerVerdict
	// VerifyCheckpointDir judges a checkpoint directory, given as Flink
	// wrote it (a URI or absolute path), at level L1.
	VerifyCheckpointDir(ctx context.Context, flinkDir string) *manifest.Verdict
	// ListCheckpointDirs returns the ids of the chk-N directories in a
	// job's checkpoint directory (given as Flink wrote it), ascending.
	ListCheckpointDirs(flinkJobDir string) ([]int64, error)
	// VerifyJobHA judges what recovering a job reads besides its
	// pointers: the job graph HA file, the job's blobs, its job results.
	VerifyJobHA(ctx context.Context, ref manifest.JobHARef) *manifest.JobHAVerdict
	// HAFileChecksum is the CRC-32C of the HA file at a Flink path, which
	// must hold size bytes.
	HAFileChecksum(ctx context.Context, name string, size int64) (uint32, error)
}

// PointerRef is what a pointer znode says.
type PointerRef struct {
	JobID        string
	CheckpointID int64
	// Znode is the pointer's path, for messages.
	Znode string
	// Handle is the decoded znode data: the HA file and its size.
	Handle flinkha.StateHandle
}

// haReadable reports whether a pointer's HA file is readable here.
func haReadable(v *manifest.PointerVerdict) bool { return v != nil && v.HAFileReadable }

// checkpointOf returns the decoded HA file of a verified pointer, or nil.
func checkpointOf(v *manifest.PointerVerdict) *flinkha.CompletedCheckpoint {
	if v == nil {
		return nil
	}
	return v.Checkpoint
}
