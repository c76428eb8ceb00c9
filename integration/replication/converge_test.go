package replication

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConverges: after the source stops changing, one final full pass makes
// the replica equal to the source, whatever changed in between (new,
// changed, deleted files and directories, type changes, links, .ckptfs).
func TestConverges(t *testing.T) {
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "nas1"), filepath.Join(dir, "nas2")
			writeFile(t, src, "job/chk-1/_metadata", "meta one", 1)
			writeFile(t, src, "job/chk-1/state", strings.Repeat("s", 1000), 2)
			writeFile(t, src, "job/shared/a", "shared a", 3)
			writeFile(t, src, ".ckptfs/manifests/job-1", "sealed", 4)
			writeFile(t, src, "ha/completedCheckpoint0001", "ha file", 5)
			if err := os.MkdirAll(filepath.Join(src, "job/taskowned"), 0o700); err != nil {
				t.Fatal(err)
			}
			// Must be copied as a link, never followed.
			if err := os.Symlink("../../../outside/secret", filepath.Join(src, "job/escape")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "outside/secret", "must not be read", 6)
			// Stale replica content that must go.
			writeFile(t, dst, "job/chk-0/_metadata", "old", 7)
			writeFile(t, dst, "job/shared/a", "shared A old", 8)

			r := k.make(t, Options{Source: src, Dest: dst, Rand: seeded(7), ChunkSize: 64})
			defer r.Stop()
			if err := k.settle(ctx, r); err != nil {
				t.Fatal(err)
			}
			assertSameTree(t, src, dst)

			// Change everything that can change, then converge again.
			writeFile(t, src, "job/chk-2/_metadata", "meta two", 10)
			writeFile(t, src, "job/shared/a", "shared a changed!", 11) // size and mtime
			writeFile(t, src, "job/shared/b", "shared b", 12)
			writeFile(t, src, "job/chk-1/state", strings.Repeat("t", 1000), 13) // mtime only
			if err := os.RemoveAll(filepath.Join(src, "job/chk-1")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, src, "job/chk-1", "now a file", 14) // directory -> file
			if err := os.Remove(filepath.Join(src, "ha/completedCheckpoint0001")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(src, "job/shared/b"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := k.settle(ctx, r); err != nil {
				t.Fatal(err)
			}
			assertSameTree(t, src, dst)
			if tmp := tempFiles(t, dst); len(tmp) > 0 {
				t.Fatalf("temporary files left after a clean pass: %v", tmp)
			}
			st := r.Stats()
			if st.Passes < 2 || st.FilesCopied == 0 || st.BytesCopied == 0 {
				t.Fatalf("implausible stats %+v", st)
			}
			if k.name != "Snapshot" && st.Deletions == 0 {
				t.Fatalf("no deletions counted: %+v", st)
			}
		})
	}
}

func TestOptionsRejected(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{
		{Source: dir},
		{Source: dir, Dest: filepath.Join(dir, "inside")},
		{Source: filepath.Join(dir, "inside"), Dest: dir},
		{Source: dir + "/a", Dest: dir + "/b", ChunkSize: -1},
	} {
		if _, err := NewFileLevel(o); err == nil {
			t.Errorf("NewFileLevel(%+v) accepted", o)
		}
	}
	if _, err := NewPerObject(PerObjectOptions{Options: Options{Source: dir + "/a", Dest: dir + "/b"}, MinDelay: 2, MaxDelay: 1}); err == nil {
		t.Error("inverted delay range accepted")
	}
}

func TestIsTempName(t *testing.T) {
	for name, want := range map[string]bool{
		".state.aB3xY9": true, "._metadata.000000": true, "state.aB3xY9": false,
		".state.aB3x-9": false, ".aB3xY9": false, ".x.aB3xY": false,
	} {
		if got := IsTempName(name); got != want {
			t.Errorf("IsTempName(%q) = %v, want %v", name, got, want)
		}
	}
}
