package manifest

import (
	"fmt"
	"syscall"
	"testing"
)

// TestClassifyRefusal: a refused chk-N is a hidden checkpoint only when
// something by that name exists on the backing file system; other
// refused names never ask the backing file system.
func TestClassifyRefusal(t *testing.T) {
	torn := fmt.Errorf("torn: %w", ErrIncomplete)
	tests := []struct {
		name  string
		err   error
		lstat error // nil: the name exists
		want  Refusal
		asked bool
	}{
		{"chk-7", ErrIncomplete, nil, RefusedCheckpoint, true},
		{"chk-7", torn, nil, RefusedCheckpoint, true},
		{"chk-999", ErrIncomplete, syscall.ENOENT, RefusedAbsent, true},
		{"chk-999", ErrIncomplete, fmt.Errorf("lstat: %w", syscall.ENOENT), RefusedAbsent, true},
		{"chk-7", ErrIncomplete, syscall.EIO, RefusedCheckpoint, true},
		{"chk-7", ErrIncomplete, syscall.EACCES, RefusedCheckpoint, true},
		{"chk-007", ErrIncomplete, syscall.ENOENT, RefusedHidden, false},
		{"savepoint-1a2b3c-0123456789ab", ErrIncomplete, syscall.ENOENT, RefusedHidden, false},
		{"x.tmp", ErrHidden, syscall.ENOENT, RefusedHidden, false},
		{"chk-7", ErrHidden, syscall.ENOENT, RefusedHidden, false},
	}
	for _, tc := range tests {
		asked := false
		got := ClassifyRefusal(tc.name, tc.err, func() error { asked = true; return tc.lstat })
		if got != tc.want || asked != tc.asked {
			t.Errorf("ClassifyRefusal(%q, %v, lstat %v) = %v (lstat asked: %v), want %v (asked: %v)",
				tc.name, tc.err, tc.lstat, got, asked, tc.want, tc.asked)
		}
	}
}
