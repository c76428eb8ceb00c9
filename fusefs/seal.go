package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// The Sealer hooks. They tolerate a nil Sealer.

func (fsys *fileSystem) written(rel string, r *sealRecord) {
	if fsys.sealer == nil {
		return
	}
	fsys.stats.filesSealed.Add(1)
	fsys.sealer.FileWritten(rel, r.size, r.crc, r.at)
}

// writtenWithoutChecksum reports that rel changed through the mount in a
// way its checksum could not follow.
func (fsys *fileSystem) writtenWithoutChecksum(rel string) {
	if fsys.sealer == nil {
		return
	}
	fsys.stats.filesUnsealed.Add(1)
	fsys.sealer.FileWrittenWithoutChecksum(rel, fsys.now())
}

// removed reports that rel was deleted.
func (fsys *fileSystem) removed(rel string) {
	if fsys.sealer == nil {
		return
	}
	fsys.sealer.FileRemoved(rel)
}

func (fsys *fileSystem) committed(rel string) {
	if fsys.sealer == nil {
		return
	}
	fsys.stats.metadataCommits.Add(1)
	fsys.sealer.MetadataCommitted(rel)
}

// renamed reports a rename of a file or a directory (src). Renaming a
// file to .../_metadata commits the checkpoint.
func (fsys *fileSystem) renamed(oldRel string, src *fs.Inode, newRel string, flags uint32) {
	if fsys.sealer == nil {
		return
	}
	fsys.sealer.Renamed(oldRel, newRel, flags&unix.RENAME_EXCHANGE != 0)
	if src != nil && src.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG && isMetadata(newRel) {
		fsys.committed(newRel)
	}
}
