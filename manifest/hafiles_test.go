package manifest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogHidesIncompleteHAFiles: a replica mount shows a job graph
// only when it decodes completely, a blob only with the SHA-1 its name
// holds, a job result entry only when it is complete JSON of its job;
// other files are not its business. A file that becomes complete shows.
func TestCatalogHidesIncompleteHAFiles(t *testing.T) {
	s := newJobHASite(t, "1.20.5")
	backing := s.root
	rel := func(p string) (string, string) {
		r, err := filepath.Rel(backing, p)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Dir(r), filepath.Base(r)
	}
	job := s.job
	results := s.results
	writeFile(t, filepath.Join(results, job+".json"), []byte(strings.ReplaceAll(jobResultOf, "%s", job)))
	torn := filepath.Join(results, strings.Repeat("ab", 16)+"_DIRTY.json")
	writeFile(t, torn, []byte(`{"result":{"id":"`))
	tornGraph := filepath.Join(filepath.Dir(s.haFile), "submittedJobGraph0badc0ffee00")
	writeFile(t, tornGraph, s.graph[:len(s.graph)/2])
	sum := sha1.Sum([]byte("other"))
	wrongBlob := filepath.Join(filepath.Dir(s.blob), "blob_p-"+hex.EncodeToString(sum[:])+"-"+strings.Repeat("0", 32))
	writeFile(t, wrongBlob, []byte("not other"))
	plain := filepath.Join(filepath.Dir(s.haFile), "completedCheckpoint0a1b2c3d4e5f")
	writeFile(t, plain, []byte("x"))

	c := newCatalog(t, backing)
	for _, p := range []string{s.haFile, s.blob} {
		if err := c.Visible(rel(p)); !errors.Is(err, ErrIncomplete) {
			t.Errorf("%s before any pass: %v, want hidden", p, err)
		}
	}
	c.Refresh(context.Background())
	for p, want := range map[string]bool{s.haFile: true, s.blob: true, filepath.Join(results, job+".json"): true,
		torn: false, tornGraph: false, wrongBlob: false, plain: true} {
		err := c.Visible(rel(p))
		if (err == nil) != want || (err != nil && !errors.Is(err, ErrIncomplete)) {
			t.Errorf("%s: %v, want visible %v", p, err, want)
		}
	}
	// The torn graph is completed: shown on the next pass.
	writeFile(t, tornGraph, s.graph)
	c.Refresh(context.Background())
	if err := c.Visible(rel(tornGraph)); err != nil {
		t.Errorf("completed job graph: %v", err)
	}
	if err := os.Remove(s.blob); err != nil {
		t.Fatal(err)
	}
	c.Refresh(context.Background())
	if err := c.Visible(rel(s.blob)); !errors.Is(err, ErrIncomplete) {
		t.Errorf("a blob gone: %v", err)
	}
}
