package zkbridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestFencedMultiNeedsBothGuards: a multi without the epoch guard or the
// lock's guard is refused before anything is sent (the Bridge has no
// connection: sending would panic).
func TestFencedMultiNeedsBothGuards(t *testing.T) {
	b := &Bridge{}
	paths := newCkptfsPaths("/ckptfs", "c")
	lock := &takeoverLock{node: "/ckptfs/c/takeover/_c_x-lock-0000000001"}
	pointer := txOp{name: "pointer", op: &zk.DeleteRequest{Path: "/flink/c/p", Version: 3}}
	for name, ops := range map[string][]txOp{
		"none":       {pointer},
		"epoch only": {epochGuard(paths, epochState{version: 2}), pointer},
		"lock only":  {lock.guard(), pointer},
	} {
		err := b.fencedMulti("retract /flink/c/p", ops...)
		if err == nil || !strings.Contains(err.Error(), "not fenced") {
			t.Errorf("%s: %v, want a refusal to send an unfenced multi", name, err)
		}
	}
}

// TestRefusedError: a refusal names the operation that failed, and
// wraps the fence error of a guard and ZooKeeper's error.
func TestRefusedError(t *testing.T) {
	paths := newCkptfsPaths("/ckptfs", "c")
	lock := &takeoverLock{node: "/ckptfs/c/takeover/_c_x-lock-0000000001"}
	tests := []struct {
		op       txOp
		zkErr    error
		wantName string
		fence    error
		want     string
	}{
		{epochGuard(paths, epochState{version: 2}), zk.ErrBadVersion, "epoch", ErrEpochChanged, `restore /p: guard "epoch" failed: ` + ErrEpochChanged.Error()},
		{epochBump(paths, epochState{version: 2}, []byte("3")), zk.ErrBadVersion, "epoch", ErrEpochChanged, `guard "epoch" failed`},
		{lock.guard(), zk.ErrNoNode, "takeover lock", ErrLockLost, `restore /p: guard "takeover lock" failed: ` + ErrLockLost.Error()},
		{txOp{name: "backup", op: &zk.DeleteRequest{Path: "/b", Version: 1}}, zk.ErrBadVersion, "backup", nil, "restore /p: backup: " + zk.ErrBadVersion.Error()},
	}
	for _, tc := range tests {
		err := error(&refusedError{what: "restore /p", op: tc.op, err: tc.zkErr})
		if got := refusedBy(err); got != tc.wantName {
			t.Errorf("refusedBy(%v) = %q, want %q", err, got, tc.wantName)
		}
		if !errors.Is(err, tc.zkErr) {
			t.Errorf("%v does not wrap %v", err, tc.zkErr)
		}
		for _, fence := range []error{ErrEpochChanged, ErrLockLost} {
			if errors.Is(err, fence) != (fence == tc.fence) {
				t.Errorf("%v: errors.Is(%v) = %v", err, fence, errors.Is(err, fence))
			}
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("message %q, want it to contain %q", err, tc.want)
		}
	}
	if got := refusedBy(errors.New("other")); got != "" {
		t.Errorf("refusedBy(other) = %q, want \"\"", got)
	}
}
