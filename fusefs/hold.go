package fusefs

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"
)

// Gate admits opens and opendirs. It is the daemon's policy (a replica
// of a standby site holds Flink's reads of its HA and checkpoint
// directories until the site's takeover decided, design §5.12); the
// mount only asks it and translates its answer: Admit may block, until
// ctx ends (the kernel interrupted the request: EINTR) or it decides; its
// error becomes the request's errno through the one errno mapping, so a
// gate that gives up says which errno it means by wrapping one.
type Gate interface {
	Admit(ctx context.Context, rel string) error
}

// passGate asks the gate, if any, about rel (relative to the mount).
func (fsys *fileSystem) passGate(ctx context.Context, rel string) syscall.Errno {
	if fsys.gate == nil {
		return 0
	}
	if err := fsys.gate.Admit(ctx, rel); err != nil {
		fsys.stats.gateRefusals.Add(1)
		return fsys.errnoFor(err)
	}
	return 0
}

// CloseGate holds the close of files written through a primary mount.
// It is the daemon's policy (synchronous replication holds the close of
// an HA file until another site holds its checkpoint, design §4.8); the
// mount asks it at FLUSH, after the file's report to the Sealer, and
// translates its answer through the one errno mapping, as for Gate.
type CloseGate interface {
	// Claims reports whether the gate holds the close of the file at rel
	// (relative to the mount).
	Claims(rel string) bool
	// Hold returns when the close may end: nil, or why it fails. fd is
	// the backing file, open for reading (the writer's may be
	// write-only); the mount closes it afterwards.
	Hold(ctx context.Context, rel string, fd int) error
}

// holdClose asks the close gate about a written file at rel.
func (fsys *fileSystem) holdClose(ctx context.Context, rel string, fd int) syscall.Errno {
	if !fsys.closeGate.Claims(rel) {
		return 0
	}
	fsys.stats.closesHeld.Add(1)
	rfd, err := reopen(fd)
	if err == nil {
		err = fsys.closeGate.Hold(ctx, rel, rfd)
		unix.Close(rfd)
	}
	if err != nil {
		fsys.stats.closesFailed.Add(1)
		return fsys.errnoFor(err)
	}
	return 0
}
