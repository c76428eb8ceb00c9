package manifest

import (
	"errors"
	"time"
)

// Errors that a mount translates into errno values (fusefs keeps the one
// mapping): ErrHidden and ErrIncomplete become ENOENT, ErrReadOnly EROFS.
var (
	// ErrHidden: a name the mount never shows (.ckptfs, replication
	// temporary files, Flink's in-progress _metadata).
	ErrHidden = errors.New("hidden by ckptfs")
	// ErrIncomplete: a checkpoint directory that is not complete on this
	// site (or not verified yet).
	ErrIncomplete = errors.New("checkpoint not complete on this site")
	// ErrReadOnly: this mount may not write (a replica, or a primary whose
	// site is no longer active).
	ErrReadOnly = errors.New("read-only: this site is not the active site")
)

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

// Sealer receives what a primary mount saw written, and seals manifests.
// Its methods run inside close(2), unlink(2) and rename(2) of the
// writer: they must return quickly.
type Sealer interface {
	// FileWritten records that the file at rel (relative to the mount root)
	// was closed after this mount wrote all of its size bytes
	// sequentially from offset 0, with the given CRC-32C (Castagnoli).
	FileWritten(rel string, size int64, crc32c uint32, at time.Time)
	// FileRemoved forgets rel: deleted, renamed away, or written in a way
	// that left its checksum unknown (the mount then seals its size only).
	FileRemoved(rel string)
	// MetadataCommitted reports that rel (".../chk-N/_metadata") was
	// closed after writing or renamed into place. It must return quickly:
	// sealing happens in the background.
	MetadataCommitted(rel string)
}
