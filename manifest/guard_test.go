package manifest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// TestCatalogProtectsNewestComplete: the catalog protects the newest
// complete checkpoint of each job, its directory and everything below
// it; not an older one, not an incomplete newer one, not other files.
func TestCatalogProtectsNewestComplete(t *testing.T) {
	backing := t.TempDir()
	jobRel := "checkpoints/0123456789abcdef0123456789abcdef"
	job := filepath.Join(backing, jobRel)
	good := realCheckpoint(t, job)
	name := filepath.Base(good)
	older := filepath.Join(job, "chk-0")
	copyDir(t, good, older) // names another checkpoint: incomplete, older
	newer := filepath.Join(job, "chk-999999")
	copyDir(t, good, newer) // incomplete, newer
	os.MkdirAll(filepath.Join(job, "shared"), 0o755)
	os.WriteFile(filepath.Join(job, "shared", "other"), []byte("x"), 0o644)
	// The HA files of the newest complete checkpoint and of the older one.
	id, err := strconv.ParseInt(strings.TrimPrefix(name, "chk-"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	haRel := map[string]string{}
	for _, chk := range []string{name, "chk-0"} {
		cid := id
		if chk == "chk-0" {
			cid = 0
		}
		data, err := flinkha.EncodeCompletedCheckpoint(flinkha.CheckpointSpec{JobID: "0123456789abcdef0123456789abcdef", CheckpointID: cid,
			ExternalPointer: "file:" + filepath.Join(job, chk), MetadataSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		haRel[chk] = "ha/c1/completedCheckpoint" + chk
		writeFile(t, filepath.Join(backing, haRel[chk]), data)
	}
	c := newCatalog(t, backing)
	if err := c.ProtectsDeletion(jobRel + "/" + name); err != nil {
		t.Fatalf("before any pass nothing is known, and nothing protected: %v", err)
	}
	c.Refresh(context.Background())
	entries, _ := os.ReadDir(good)
	if len(entries) < 2 {
		t.Fatalf("checkpoint %s has %d entries", good, len(entries))
	}
	for _, rel := range []string{jobRel + "/" + name, jobRel + "/" + name + "/" + MetadataFile, jobRel + "/" + name + "/" + entries[len(entries)-1].Name(), haRel[name]} {
		if err := c.ProtectsDeletion(rel); !errors.Is(err, ErrProtected) || !strings.Contains(err.Error(), "checkpoint") {
			t.Errorf("%s: %v, want protected", rel, err)
		}
	}
	for _, rel := range []string{jobRel + "/chk-0", jobRel + "/chk-0/" + MetadataFile, jobRel + "/chk-999999/" + MetadataFile, jobRel + "/shared/other", jobRel, "checkpoints", haRel["chk-0"]} {
		if err := c.ProtectsDeletion(rel); err != nil {
			t.Errorf("%s: %v, want not protected", rel, err)
		}
	}
}

// TestJobProtectionFindsEveryFile: a job's protection finds each file its
// checkpoint references outside its directory, whatever order the
// checkpoint lists them in, and nothing inside its directory or outside
// the backing directory.
func TestJobProtectionFindsEveryFile(t *testing.T) {
	backing := t.TempDir()
	c := newCatalog(t, backing)
	shared := filepath.Join(backing, "job", "shared")
	man := &Manifest{}
	var names []string
	for i := 99; i >= 0; i-- {
		name := fmt.Sprintf("%02d.sst", i)
		names = append(names, name)
		man.Files = append(man.Files, File{Path: filepath.Join(shared, name), Size: -1})
	}
	man.Files = append(man.Files, File{Path: filepath.Join(backing, "job", "chk-7", "private"), Size: -1},
		File{Path: "private2", Relative: true, Size: -1}, File{Path: "/elsewhere/x.sst", Size: -1})
	jp := c.jobProtection(man, "job/chk-7", "checkpoint 7 of job")
	for _, name := range names {
		if !jp.has(shared, name) {
			t.Errorf("%s not protected", name)
		}
	}
	if n := len(jp.files[shared]); len(jp.files) != 1 || n != len(names) {
		t.Errorf("protects %d directories, %d names in shared; want 1 and %d", len(jp.files), n, len(names))
	}
}
