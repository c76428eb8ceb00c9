package manifest

import (
	"testing"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

func TestCheckpointIDFromDirName(t *testing.T) {
	tests := []struct {
		name string
		id   int64
		ok   bool
	}{
		{"chk-0", 0, true},
		{"chk-7", 7, true},
		{"chk-9223372036854775807", 9223372036854775807, true},
		{"chk-007", 0, false},
		{"chk-00", 0, false},
		{"chk-", 0, false},
		{"chk-9223372036854775808", 0, false},
		{"chk-+1", 0, false},
		{"chk--1", 0, false},
		{"chk-1a", 0, false},
		{"chk-\u0663", 0, false},
		{"CHK-1", 0, false},
		{"xchk-1", 0, false},
	}
	for _, tc := range tests {
		if id, ok := CheckpointIDFromDirName(tc.name); id != tc.id || ok != tc.ok {
			t.Errorf("CheckpointIDFromDirName(%q) = %d, %v; want %d, %v", tc.name, id, ok, tc.id, tc.ok)
		}
	}
}

// TestClassifyAsCheckpointIDFromDirName: metadata classifies a file as
// exclusive to a checkpoint by its directory's name with the same rule.
func TestClassifyAsCheckpointIDFromDirName(t *testing.T) {
	for _, name := range []string{"chk-0", "chk-42", "chk-007", "chk-", "chk-9223372036854775808", "chk-+1", "chk-1a"} {
		_, isChk := CheckpointIDFromDirName(name)
		kind := metadata.Classify("/flink/checkpoints/job/"+name+"/state", "")
		if (kind == metadata.KindExclusive) != isChk {
			t.Errorf("a file in %s is %s; manifest takes %s for chk-N: %v", name, kind, name, isChk)
		}
	}
}

func TestIsStateDir(t *testing.T) {
	for _, tc := range []struct {
		dir, name string
		want      bool
	}{
		{"", ".ckptfs", true},
		{"job", ".ckptfs", false},
		{"", ".ckptfs2", false},
		{"", "ckptfs", false},
	} {
		if got := IsStateDir(tc.dir, tc.name); got != tc.want {
			t.Errorf("IsStateDir(%q, %q) = %v, want %v", tc.dir, tc.name, got, tc.want)
		}
	}
}
