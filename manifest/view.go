package manifest

import (
	"errors"
	iofs "io/fs"
	"time"
)

// Errors that a mount translates into errno values (fusefs keeps the one
// mapping): ErrHidden and ErrIncomplete become ENOENT. Whether a mount
// may write is its mode, not a verdict of this package: fusefs answers
// EROFS itself.
var (
	// ErrHidden: a name the mount never shows (.ckptfs, replication
	// temporary files, Flink's in-progress _metadata).
	ErrHidden = errors.New("hidden by ckptfs")
	// ErrIncomplete: a checkpoint directory that is not complete on this
	// site (or not verified yet).
	ErrIncomplete = errors.New("checkpoint not complete on this site")
)

// Refusal is what a lookup that Visible refused was. The mount answers
// ENOENT to every one; it counts and logs only RefusedCheckpoint.
type Refusal int

const (
	// RefusedHidden: a name the mount hides that is not a checkpoint
	// directory (ErrHidden, an HA file, a savepoint).
	RefusedHidden Refusal = iota
	// RefusedCheckpoint: a chk-N directory that exists here but is not
	// complete: Flink asked for a checkpoint this site does not hold.
	RefusedCheckpoint
	// RefusedAbsent: a chk-N name with nothing by that name on the
	// backing file system. The lookup fails as it would without ckptfs:
	// nothing was hidden.
	RefusedAbsent
)

// ClassifyRefusal says what a lookup of name that Visible refused with
// err was. lstat looks the name up on the backing file system; it is
// called only for a chk-N name refused as incomplete, and only a
// not-exist error makes the name absent (one it cannot rule out is a
// hidden checkpoint).
func ClassifyRefusal(name string, err error, lstat func() error) Refusal {
	if _, ok := CheckpointIDFromDirName(name); !ok || !errors.Is(err, ErrIncomplete) {
		return RefusedHidden
	}
	if errors.Is(lstat(), iofs.ErrNotExist) {
		return RefusedAbsent
	}
	return RefusedCheckpoint
}

// Visibility decides what a replica mount shows. dir is the directory
// relative to the mount root ("" for the root, no leading or trailing
// slash) and name one entry in it. Visible returns nil, or an error
// wrapping ErrHidden or ErrIncomplete. It only reads state that a
// background verifier keeps current: it never touches the file system, so
// FUSE operations never wait on verification. It runs inside FUSE
// requests and must not call back into the mount (Server.Invalidate from
// there would deadlock the kernel).
type Visibility interface {
	Visible(dir, name string) error
}

// Sealer receives what a primary mount saw happen to files, and seals
// manifests. The mount reports in the order things happened (a file
// closed before it was renamed is reported written before renamed),
// from one goroutine, off the request path of the writer; still, each
// call should return quickly, since reports queue behind it.
type Sealer interface {
	// FileWritten records that the file at rel (relative to the mount
	// root) was written through this mount and, once its writer closed
	// it, held the given CRC-32C (Castagnoli): the mount read it back and
	// found it still at version v (VersionOf its fstat) at the end.
	FileWritten(rel string, v FileVersion, crc32c uint32, at time.Time)
	// FileWrittenWithoutChecksum records that rel was written through this
	// mount but its checksum is unknown (it changed while being read back,
	// could not be read, or was cut off by fencing). Whatever was recorded
	// for rel before no longer holds.
	FileWrittenWithoutChecksum(rel string, at time.Time)
	// FileRemoved forgets rel: it was deleted.
	FileRemoved(rel string)
	// Renamed records that oldRel, a file or a directory, is now newRel:
	// what was recorded for it, and for everything below it, moves along,
	// and what was recorded for newRel before is gone. With exchange the
	// two names swapped (renameat2 RENAME_EXCHANGE).
	Renamed(oldRel, newRel string, exchange bool)
	// MetadataCommitted reports that rel (".../chk-N/_metadata") was
	// closed after writing or renamed into place, after the FileWritten
	// (or FileWrittenWithoutChecksum) for it. Sealing happens in the
	// background.
	MetadataCommitted(rel string)
}
