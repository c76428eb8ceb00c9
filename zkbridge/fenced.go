package zkbridge

import (
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"
)

// txOp is one operation of a fenced multi, named so that a refusal says
// which operation failed, not where it stood in the multi.
type txOp struct {
	// name says what the operation is for ("epoch", "takeover lock",
	// "backup", "pointer", ...).
	name string
	// op is a *zk.CreateRequest, *zk.DeleteRequest, *zk.SetDataRequest
	// or *zk.CheckVersionRequest.
	op any
	// fence is set on a guard: the error its refusal means, that the
	// write is fenced off (ErrEpochChanged or ErrLockLost).
	fence error
}

// epochGuard holds while the epoch is at the version read: no other
// site took over since.
func epochGuard(paths ckptfsPaths, ep epochState) txOp {
	return txOp{name: "epoch", op: &zk.CheckVersionRequest{Path: paths.epoch(), Version: ep.version}, fence: ErrEpochChanged}
}

// epochBump moves the epoch from the version read to next, and is the
// epoch guard of the multi it is in.
func epochBump(paths ckptfsPaths, ep epochState, next []byte) txOp {
	return txOp{name: "epoch", op: &zk.SetDataRequest{Path: paths.epoch(), Data: next, Version: ep.version}, fence: ErrEpochChanged}
}

// activeGuard holds while active-site is at the version read: no
// takeover activated another site since (a restore runs only on the
// active site).
func activeGuard(paths ckptfsPaths, stat *zk.Stat) txOp {
	return txOp{name: "active-site", op: &zk.CheckVersionRequest{Path: paths.activeSite(), Version: stat.Version}, fence: ErrNotActiveSite}
}

// guard holds while the lock node exists (version 0: it is never
// written), that is while the session that took the lock lives.
func (l *takeoverLock) guard() txOp {
	return txOp{name: "takeover lock", op: &zk.CheckVersionRequest{Path: l.node, Version: 0}, fence: ErrLockLost}
}

// refusedError is a fenced multi that ZooKeeper refused: nothing of it
// was applied.
type refusedError struct {
	what string // the write, as "retract /flink/..."
	op   txOp   // the operation that failed
	err  error  // ZooKeeper's error for it
}

func (e *refusedError) Error() string {
	if e.op.fence != nil {
		return fmt.Sprintf("%s: guard %q failed: %v: %v", e.what, e.op.name, e.op.fence, e.err)
	}
	return fmt.Sprintf("%s: %s: %v", e.what, e.op.name, e.err)
}

// Unwrap gives a guard's fence error and ZooKeeper's error.
func (e *refusedError) Unwrap() []error {
	if e.op.fence != nil {
		return []error{e.op.fence, e.err}
	}
	return []error{e.err}
}

// refusedBy names the operation that refused a fenced multi, "" if err
// is not such a refusal.
func refusedBy(err error) string {
	var r *refusedError
	if errors.As(err, &r) {
		return r.op.name
	}
	return ""
}

// fencedMulti runs ops in one multi, once; what names the write in
// errors. ops must hold the epoch guard and the takeover lock's guard:
// every write ckptfs makes in Flink's namespace, or to the epoch and
// active-site, is fenced by both (docs/design.md §5). It returns nil when
// the multi applied; an error wrapping errOutcomeUnknown when its reply
// was lost (the caller decides by reading); or a *refusedError naming
// the operation that failed, which wraps ZooKeeper's error for it and,
// when it is a guard, ErrEpochChanged or ErrLockLost.
func (b *Bridge) fencedMulti(what string, ops ...txOp) error {
	if !hasFence(ops, ErrEpochChanged) || !hasFence(ops, ErrLockLost) {
		return fmt.Errorf("%s: not fenced by both the epoch and the takeover lock", what)
	}
	reqs := make([]any, len(ops))
	for i, o := range ops {
		reqs[i] = o.op
	}
	failed, err := b.zk.multi(reqs...)
	switch {
	case err == nil:
		return nil
	case failed < 0 || failed >= len(ops):
		return fmt.Errorf("%s: %w", what, err)
	}
	return &refusedError{what: what, op: ops[failed], err: err}
}

func hasFence(ops []txOp, fence error) bool {
	for _, o := range ops {
		if o.fence == fence {
			return true
		}
	}
	return false
}
