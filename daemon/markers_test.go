package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

// TestCatalogMarkersFollowPasses: the markers' index of the catalog is
// the last pass's: a job directory found by a new pass is published, one
// gone is not, without any other signal.
func TestCatalogMarkersFollowPasses(t *testing.T) {
	backing := t.TempDir()
	job := func(id string) string { return filepath.Join(backing, "checkpoints", id) }
	a, b := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	if err := os.MkdirAll(filepath.Join(job(a), "chk-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cat := mounttest.Catalog(t, backing)
	src := newCatalogMarkers(cat, "/mnt")
	ids := func() map[string]bool {
		ms, err := src.Markers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, m := range ms {
			out[m.JobID] = true
		}
		return out
	}
	if _, err := src.Markers(context.Background()); !errors.Is(err, errNotJudged) {
		t.Fatalf("before a pass: %v, want errNotJudged", err)
	}
	cat.Refresh(context.Background())
	if got := ids(); !got[a] || len(got) != 1 {
		t.Fatalf("after the first pass: %v, want %s", got, a)
	}
	if err := os.MkdirAll(filepath.Join(job(b), "chk-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(job(a)); err != nil {
		t.Fatal(err)
	}
	if got := ids(); !got[a] || len(got) != 1 {
		t.Fatalf("before the next pass: %v, want the last pass's %s", got, a)
	}
	cat.Refresh(context.Background())
	if got := ids(); !got[b] || len(got) != 1 {
		t.Fatalf("after the next pass: %v, want %s alone", got, b)
	}
	if l, err := src.Level(context.Background(), b, 1); err != nil || l != manifest.LevelNone {
		t.Errorf("Level of an incomplete checkpoint: %v, %v", l, err)
	}
}
