package mounttest_test

import (
	"errors"
	"testing"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

// TestVisibility: a verdict applies to exactly the name it was set for,
// at the root or below, and nil lifts it.
func TestVisibility(t *testing.T) {
	v := mounttest.NewVisibility()
	v.Set("chk-1", manifest.ErrIncomplete)
	v.Set("job/chk-2", manifest.ErrIncomplete)
	v.Set("job/chk-2/x.tmp", manifest.ErrHidden)
	for _, tc := range []struct {
		dir, name string
		want      error
	}{
		{"", "chk-1", manifest.ErrIncomplete},
		{"job", "chk-1", nil},
		{"job", "chk-2", manifest.ErrIncomplete},
		{"", "chk-2", nil},
		{"job/chk-2", "x.tmp", manifest.ErrHidden},
		{"job/chk-2", "y.tmp", nil},
	} {
		if got := v.Visible(tc.dir, tc.name); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("Visible(%q, %q) = %v, want %v", tc.dir, tc.name, got, tc.want)
		}
	}
	v.Set("job/chk-2", nil)
	if err := v.Visible("job", "chk-2"); err != nil {
		t.Errorf("after lifting the verdict: %v", err)
	}
}
