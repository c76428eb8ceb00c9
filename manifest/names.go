package manifest

import "github.com/ckptfs/ckptfs/manifest/internal/chkname"

// The names ckptfs gives a meaning to. Each rule is here once; fusefs,
// zkbridge and the commands use these, never their own copy.

// StateDir is the directory under the backing root where ckptfs keeps its
// own files (sealed manifests). Mounts never show it.
const StateDir = ".ckptfs"

// IsStateDir reports whether name, an entry of dir (relative to the
// backing root, "" for the root itself), is StateDir: hidden by every
// mount in every mode, and never changed through one.
func IsStateDir(dir, name string) bool { return dir == "" && name == StateDir }

// CheckpointIDFromDirName returns N for a directory named chk-N, as Flink
// names them: N in decimal, from 0 to the largest int64, without sign or
// leading zero (chk-007 is not a checkpoint directory).
func CheckpointIDFromDirName(name string) (int64, bool) { return chkname.ID(name) }

// IsSavepointDirName reports whether name is a savepoint directory's as
// Flink names them (savepoint-<6 hex of the job id>-<12 random hex>). A
// replica mount hides one until it is complete, as it hides chk-N.
func IsSavepointDirName(name string) bool { return chkname.IsSavepoint(name) }
