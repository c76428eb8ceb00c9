package fusefs

import (
	"context"
	"syscall"
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
