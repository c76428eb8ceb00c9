package manifest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestMetadataShrinksWhileMapped: a _metadata truncated after it was
// mapped makes the parse fault past the new end. The verification says
// "unknown" instead of crashing, and the next one, of the file as it is
// now, parses it again.
func TestMetadataShrinksWhileMapped(t *testing.T) {
	j := newTestJob(t, 2000)
	j.checkpoint(t, 1, span(0, 2000))
	meta := filepath.Join(j.chk(1), MetadataFile)
	full, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	if len(full) < 3*pageSize {
		t.Fatalf("_metadata has %d bytes; the test needs more than two pages", len(full))
	}
	shrink := func() {
		if err := os.Truncate(meta, int64(2*pageSize)); err != nil {
			t.Error(err)
		}
	}
	testHookMapped.Store(&shrink)
	defer testHookMapped.Store(nil)

	v := newVerifier(t, nil, j.root)
	got := v.VerifyDir(context.Background(), j.chk(1))
	if got.Complete || !got.Unknown || len(got.Problems) != 1 {
		t.Fatalf("verdict complete=%v unknown=%v problems=%+v; want one io_error", got.Complete, got.Unknown, got.Problems)
	}
	p := got.Problems[0]
	if p.Kind != ProblemIOError || !strings.Contains(p.Detail, "shrank while it was read") {
		t.Fatalf("problem %+v; want io_error naming the shrinking file", p)
	}

	testHookMapped.Store(nil)
	if err := os.WriteFile(meta, full, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := v.VerifyDir(context.Background(), j.chk(1)); !got.Complete {
		t.Fatalf("after the file is whole again: %+v", got.Problems)
	}
}

// panickingVisitor fails with a fault outside any mapping.
type panickingVisitor struct{ target *int }

func (p *panickingVisitor) Reference(*metadata.RawReference) { *p.target = 1 }
func (p *panickingVisitor) Restart()                         {}

// TestDecodeMappedReferencesPassesOtherPanicsOn: only a fault inside the
// mapping is turned into an error.
func TestDecodeMappedReferencesPassesOtherPanicsOn(t *testing.T) {
	j := newTestJob(t, 10)
	j.checkpoint(t, 1, span(0, 10))
	f, err := os.Open(filepath.Join(j.chk(1), MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("a nil dereference in the visitor was swallowed")
		}
	}()
	_, err = decodeFileReferences(f, st.Size(), &panickingVisitor{})
	t.Fatalf("decodeFileReferences returned (%v) instead of panicking", err)
}
