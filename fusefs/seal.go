package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// The Sealer hooks. Callers check fsys.sealing() or tolerate a nil
// Sealer through these helpers.

func (fsys *fileSystem) written(rel string, r *sealRecord) {
	if fsys.sealer == nil {
		return
	}
	fsys.stats.filesSealed.Add(1)
	fsys.sealer.FileWritten(rel, r.size, r.crc, r.at)
}

// forget withdraws anything reported for rel: the file is gone, or its
// content changed in a way the checksum could not follow.
func (fsys *fileSystem) forget(rel string) {
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

// renamed moves what was reported for src (and, for an exchange, dst)
// to its new name. Renaming a file to .../_metadata commits the
// checkpoint, after FileWritten for the new name.
func (fsys *fileSystem) renamed(oldRel string, src *fs.Inode, newRel string, dst *fs.Inode, flags uint32) {
	if fsys.sealer == nil || src == nil || src.IsDir() {
		return
	}
	srcRec := sealedOf(src)
	var dstRec *sealRecord
	exchange := flags&unix.RENAME_EXCHANGE != 0
	if exchange {
		dstRec = sealedOf(dst)
	} else if d := nodeOf(dst); d != nil {
		d.setSealed(nil) // replaced: that inode has no name any more
	}
	fsys.forget(oldRel)
	if exchange && dstRec != nil {
		fsys.written(oldRel, dstRec)
	}
	if srcRec != nil {
		fsys.written(newRel, srcRec)
	} else {
		fsys.forget(newRel)
	}
	if src.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFREG && isMetadata(newRel) {
		fsys.committed(newRel)
	}
}

func nodeOf(in *fs.Inode) *node {
	if in == nil {
		return nil
	}
	n, _ := in.Operations().(*node)
	return n
}

func sealedOf(in *fs.Inode) *sealRecord {
	if n := nodeOf(in); n != nil {
		return n.sealedRecord()
	}
	return nil
}
