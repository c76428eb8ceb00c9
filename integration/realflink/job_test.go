package realflink

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeReport writes what the job reports after restoring a checkpoint
// whose next record is next, with edit applied to each key line.
func writeReport(t *testing.T, next int64, edit func(k int64, count *int64, hash *uint64, first *int64)) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("restore subtask=0 checkpoint=7\nrestore subtask=1 checkpoint=7\n")
	for i := range int64(keys) {
		first := next + i
		k := first % keys
		count, hash := StateBefore(k, keys, next)
		if edit != nil {
			edit(k, &count, &hash, &first)
		}
		fmt.Fprintf(&b, "key=%d first=%d count=%d hash=%d\n", k, first, count, hash)
	}
	b.WriteString("snapshot subtask=0 checkpoint=8 maxseen=-1\n")
	path := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckRestore(t *testing.T) {
	const next = 1000
	cases := []struct {
		name string
		edit func(k int64, count *int64, hash *uint64, first *int64)
		want string // "" for a valid restore
	}{
		{"exact", nil, ""},
		{"a lost update", func(k int64, c *int64, h *uint64, _ *int64) {
			if k == 3 {
				*c, *h = StateBefore(k, keys, next-keys)
			}
		}, "key 3: restored count"},
		{"a wrong hash", func(k int64, _ *int64, h *uint64, _ *int64) {
			if k == 5 {
				*h ^= 1
			}
		}, "key 5: restored count"},
		{"a replayed record", func(k int64, _ *int64, _ *uint64, f *int64) {
			if k == 9 {
				*f -= keys
			}
		}, "replayed"},
		{"lost records", func(k int64, _ *int64, _ *uint64, f *int64) {
			if k == 9 {
				*f += keys
			}
		}, "were lost"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := ReadReport(writeReport(t, next, c.edit))
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Restores) != 2 || rep.Restores[0] != 7 || len(rep.Keys) != keys {
				t.Fatalf("parsed %+v", rep)
			}
			err = rep.CheckRestore(keys, next)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("CheckRestore: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("CheckRestore = %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestStateBeforeMatchesTheJob pins the job's state function to values
// the Java job printed (Flink 1.20.5, 8 keys: key=5 first=22725).
func TestStateBeforeMatchesTheJob(t *testing.T) {
	count, hash := StateBefore(5, 8, 22725)
	if count != 2840 || hash != 8344148609337924293 {
		t.Fatalf("StateBefore(5, 8, 22725) = %d, %d; the job printed count=2840 hash=8344148609337924293", count, hash)
	}
}

func TestReadReportRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.txt")
	for _, bad := range []string{"key=1 first=x count=0 hash=0\n", "what\n", "snapshot checkpoint\n", "key=1 first=2 count=0 hash=-1\n"} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := ReadReport(path); err == nil {
			t.Errorf("ReadReport(%q) accepted it", bad)
		}
	}
}
