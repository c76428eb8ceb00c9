package manifest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSparseMetadataIsNotReadWhole: a _metadata of a few GB, a hole after
// its first bytes (truncate makes it; it takes no disk), costs the
// verification the pages its parse reaches: the process's peak resident
// set does not grow by the file's size.
func TestSparseMetadataIsNotReadWhole(t *testing.T) {
	j := newTestJob(t, 10)
	j.checkpoint(t, 1, span(0, 10))
	meta := filepath.Join(j.chk(1), MetadataFile)
	fi, err := os.Stat(meta)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3 << 30
	if err := os.Truncate(meta, size); err != nil {
		t.Fatal(err)
	}
	peak := func() int64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Maxrss << 10 // KiB on Linux
	}
	before := peak()
	got := newVerifier(t, nil, j.root).VerifyDir(context.Background(), j.chk(1))
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemParseError || got.Problems[0].Offset > fi.Size()+8 {
		t.Fatalf("verdict %+v; want a parse error at the end of the %d bytes written", got.Problems, fi.Size())
	}
	if grew := peak() - before; grew > 256<<20 {
		t.Errorf("the peak resident set grew by %d MiB verifying a %d GiB sparse _metadata whose parse stops at byte %d", grew>>20, size>>30, got.Problems[0].Offset)
	}
}

// TestFindCheckpointsSaysWhatItSkips: entries named chk-N that are no
// directory a verification enters are listed with why, also for a job
// with no other.
func TestFindCheckpointsSaysWhatItSkips(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "job")
	for _, d := range []string{filepath.Join(job, "chk-1"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(job, "chk-2")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(job, "chk-3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(job, "chk-x"), nil, 0o644) // not named chk-N: not listed
	want := []Skipped{{"chk-2", "symbolic link (not followed)"}, {"chk-3", "not a directory"}}
	for _, dir := range []string{root, job} {
		_, jobs, err := FindCheckpoints(dir)
		if err != nil || len(jobs) != 1 || len(jobs[0].Checkpoints) != 1 || len(jobs[0].Skipped) != 2 || jobs[0].Skipped[0] != want[0] || jobs[0].Skipped[1] != want[1] {
			t.Errorf("FindCheckpoints(%s) = %+v, %v; want chk-1 and skipped %v", dir, jobs, err, want)
		}
	}
	os.RemoveAll(filepath.Join(job, "chk-1"))
	if shape, jobs, err := FindCheckpoints(job); err != nil || shape != ShapeJob || len(jobs[0].Skipped) != 2 {
		t.Errorf("a job of skipped entries only: %v %+v %v", shape, jobs, err)
	}
	if chks, err := ListCheckpoints(job); err != nil || len(chks) != 0 {
		t.Errorf("ListCheckpoints = %v, %v", chks, err)
	}
}
