package mounttest

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT records Skip and Fatal instead of ending the test.
type fakeT struct {
	testing.TB
	skipped, failed bool
	msg             string
}

type stop struct{}

func (f *fakeT) Helper() {}
func (f *fakeT) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	panic(stop{})
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	panic(stop{})
}

func runRequire(t *testing.T, short bool, euid int, dev string) *fakeT {
	ft := &fakeT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stop); !ok {
					panic(r)
				}
			}
		}()
		requireFUSE(ft, short, euid, dev)
	}()
	return ft
}

func TestRequireFUSE(t *testing.T) {
	tests := []struct {
		name        string
		short       bool
		euid        int
		dev         string
		require     string
		wantSkip    bool
		wantFail    bool
		wantMessage string
	}{
		{"not root skips", false, 1000, "/dev/null", "", true, false, "SKIPPED"},
		{"no device skips", false, 0, "/nonexistent/fuse", "", true, false, "SKIPPED"},
		{"not root fails when required", false, 1000, "/dev/null", "1", false, true, RequireEnv},
		{"no device fails when required", false, 0, "/nonexistent/fuse", "1", false, true, RequireEnv},
		{"usable", false, 0, "/dev/null", "1", false, false, ""},
		{"-short skips even when required", true, 0, "/dev/null", "1", true, false, "-short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tc.require)
			ft := runRequire(t, tc.short, tc.euid, tc.dev)
			if ft.skipped != tc.wantSkip || ft.failed != tc.wantFail {
				t.Errorf("skipped=%v failed=%v, want %v %v", ft.skipped, ft.failed, tc.wantSkip, tc.wantFail)
			}
			if !strings.Contains(ft.msg, tc.wantMessage) {
				t.Errorf("message %q lacks %q", ft.msg, tc.wantMessage)
			}
		})
	}
}
