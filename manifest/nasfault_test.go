package manifest

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestWalkKeepsJobsBelowFailedDirs: the job directories a walk could not
// reach because a directory above them failed are kept (their
// checkpoints become unknown); others the walk did not find are gone.
func TestWalkKeepsJobsBelowFailedDirs(t *testing.T) {
	old := map[string]map[string]*Verdict{"a/j1": nil, "a/j2": nil, "b/j3": nil, "ab/j4": nil, "c": nil}
	cases := []struct {
		name string
		w    walkResult
		want []string
	}{
		{"nothing failed", walkResult{jobs: []string{"a/j1"}}, nil},
		{"a failed", walkResult{failed: []string{"a"}}, []string{"a/j1", "a/j2"}},
		{"a failed, one found", walkResult{jobs: []string{"a/j1"}, failed: []string{"a"}}, []string{"a/j2"}},
		{"the root failed", walkResult{failed: []string{""}}, []string{"a/j1", "a/j2", "ab/j4", "b/j3", "c"}},
		{"a job directory itself failed", walkResult{failed: []string{"c"}}, []string{"c"}},
	}
	for _, c := range cases {
		if got := c.w.keep(old); !slices.Equal(got, c.want) {
			t.Errorf("%s: keep %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRetryableSeal: a seal that failed on the NAS is tried again; one
// that failed on the checkpoint is not.
func TestRetryableSeal(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("seal x: %w", syscall.EIO), true},
		{fmt.Errorf("write: %w", syscall.ENOSPC), true},
		{errors.New("seal x: cannot verify it: io_error: _metadata"), true},
		{fmt.Errorf("seal x: %w", iofs.ErrNotExist), false},
		{fmt.Errorf("seal x: %w", syscall.ENOENT), false},
		{fmt.Errorf("seal x: %w: missing: f", ErrNotComplete), false},
		{fmt.Errorf("seal x: %w", &metadata.ParseError{Offset: 3}), false},
	}
	for _, c := range cases {
		if got := retryableSeal(c.err); got != c.want {
			t.Errorf("retryableSeal(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
