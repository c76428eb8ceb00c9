package manifest

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// records is what r holds, for comparisons.
func (r *Recorder) records() map[string]writtenFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.written)
}

func newTestRecorder(t *testing.T, backing string, readUnwritten bool) *Recorder {
	t.Helper()
	res, err := NewResolver(nil, []string{backing})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: readUnwritten})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// versionOf is the version of the file at path.
func versionOf(t testing.TB, path string) FileVersion {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return VersionOf(&st)
}

func TestRecorderRenamed(t *testing.T) {
	sum := func(n uint32) writtenFile { return writtenFile{size: int64(n), crc: n, hasChecksum: true} }
	before := map[string]writtenFile{
		"job/chk-1/a":   sum(1),
		"job/chk-1/b":   {},
		"job/chk-1/d/c": sum(3),
		"job/chk-10/a":  sum(10), // shares a prefix with chk-1, not a parent
		"job/chk-2/a":   sum(20),
		"job/tmp":       sum(99),
	}
	for _, tc := range []struct {
		name     string
		old, new string
		exchange bool
		want     map[string]writtenFile
	}{
		{"file", "job/tmp", "job/chk-1/_metadata", false, map[string]writtenFile{
			"job/chk-1/a": sum(1), "job/chk-1/b": {}, "job/chk-1/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-2/a": sum(20), "job/chk-1/_metadata": sum(99)}},
		{"file over a recorded file", "job/chk-1/a", "job/chk-1/b", false, map[string]writtenFile{
			"job/chk-1/b": sum(1), "job/chk-1/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-2/a": sum(20), "job/tmp": sum(99)}},
		{"unrecorded file over a recorded one", "job/none", "job/chk-1/a", false, map[string]writtenFile{
			"job/chk-1/b": {}, "job/chk-1/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-2/a": sum(20), "job/tmp": sum(99)}},
		{"directory", "job/chk-1", "job/chk-5", false, map[string]writtenFile{
			"job/chk-5/a": sum(1), "job/chk-5/b": {}, "job/chk-5/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-2/a": sum(20), "job/tmp": sum(99)}},
		{"directory over a directory", "job/chk-1", "job/chk-2", false, map[string]writtenFile{
			"job/chk-2/a": sum(1), "job/chk-2/b": {}, "job/chk-2/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/tmp": sum(99)}},
		{"exchange directories", "job/chk-1", "job/chk-2", true, map[string]writtenFile{
			"job/chk-2/a": sum(1), "job/chk-2/b": {}, "job/chk-2/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-1/a": sum(20), "job/tmp": sum(99)}},
		{"exchange a file with an unrecorded name", "job/tmp", "job/other", true, map[string]writtenFile{
			"job/chk-1/a": sum(1), "job/chk-1/b": {}, "job/chk-1/d/c": sum(3), "job/chk-10/a": sum(10),
			"job/chk-2/a": sum(20), "job/other": sum(99)}},
		{"same name", "job/tmp", "job/tmp", false, before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRecorder(t, t.TempDir(), false)
			r.written = maps.Clone(before)
			r.Renamed(tc.old, tc.new, tc.exchange)
			if got := r.records(); !maps.Equal(got, tc.want) {
				t.Errorf("after Renamed(%q, %q, %v):\n got %v\nwant %v", tc.old, tc.new, tc.exchange, got, tc.want)
			}
		})
	}
}

// TestRecorderWithoutChecksum: a file written through the mount without a
// known checksum is sealed with its size only, even if a checksum was
// reported for it before; ReadUnwritten hashes it at sealing time.
func TestRecorderWithoutChecksum(t *testing.T) {
	backing := t.TempDir()
	dir := realCheckpoint(t, filepath.Join(backing, "job"))
	chkRel, _ := filepath.Rel(backing, dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	for _, e := range entries {
		if e.Name() != MetadataFile {
			state = e.Name()
			break
		}
	}
	if state == "" {
		t.Fatal("checkpoint without state files")
	}
	stateRel := filepath.Join(chkRel, state)

	reportAll := func(r *Recorder) {
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			r.FileWritten(filepath.Join(chkRel, e.Name()), versionOf(t, filepath.Join(dir, e.Name())), crc32.Checksum(data, castagnoli), time.Now())
		}
	}
	checksums := func(r *Recorder) map[string]string {
		t.Helper()
		p, err := r.Seal(chkRel)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc sealedManifest
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{MetadataFile: doc.MetadataChecksum}
		for _, f := range doc.Files {
			out[f.Path] = f.Checksum
		}
		return out
	}

	r := newTestRecorder(t, backing, false)
	reportAll(r)
	if got := checksums(r)[state]; got == "" {
		t.Fatalf("%s reported with a checksum is sealed without one", state)
	}
	r.FileWrittenWithoutChecksum(stateRel, time.Now())
	got := checksums(r)
	if got[state] != "" {
		t.Errorf("%s reported without checksum is sealed with %q", state, got[state])
	}
	if got[MetadataFile] == "" {
		t.Errorf("the other files lost their checksums: %v", got)
	}

	hashing := newTestRecorder(t, backing, true)
	reportAll(hashing)
	hashing.FileWrittenWithoutChecksum(stateRel, time.Now())
	data, err := os.ReadFile(filepath.Join(dir, state))
	if err != nil {
		t.Fatal(err)
	}
	if want := FormatChecksum(crc32.Checksum(data, castagnoli)); checksums(hashing)[state] != want {
		t.Errorf("ReadUnwritten: %s sealed %q, want %q", state, checksums(hashing)[state], want)
	}

	// A sealed manifest with a size-only file still verifies at L3.
	cfg := DefaultVerifierConfig()
	cfg.Resolver, cfg.SealedRoot = r.cfg.Resolver, backing
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checksums(r)
	if got := v.VerifyDir(context.Background(), dir); !got.Complete || got.Level != L3 {
		t.Errorf("verify: complete %v level %v %v", got.Complete, got.Level, got.Problems)
	}
}

// TestRecorderTeachesVerifier: a Verifier given to the Recorder takes the
// checksums the mount read back for the versions it read, so verifying
// what this mount sealed reads no file again; a file changed afterwards
// is a new version and is read. The reported checksum of one state file
// is wrong on purpose: only a Verifier that did not read the file finds
// the checkpoint at L3.
func TestRecorderTeachesVerifier(t *testing.T) {
	backing := t.TempDir()
	dir := realCheckpoint(t, filepath.Join(backing, "job"))
	chkRel, _ := filepath.Rel(backing, dir)
	res, err := NewResolver(nil, []string{backing})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultVerifierConfig()
	cfg.Resolver, cfg.SealedRoot = res, backing
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		crc := crc32.Checksum(data, castagnoli)
		if state == "" && e.Name() != MetadataFile {
			state, crc = e.Name(), crc+1
		}
		r.FileWritten(filepath.Join(chkRel, e.Name()), versionOf(t, path), crc, time.Now())
	}
	if state == "" {
		t.Fatal("checkpoint without state files")
	}
	if _, err := r.Seal(chkRel); err != nil {
		t.Fatal(err)
	}
	if got := v.VerifyDir(context.Background(), dir); !got.Complete || got.Level != L3 {
		t.Fatalf("verified what the mount read back: complete %v level %v %v", got.Complete, got.Level, got.Problems)
	}

	// Rewritten with the same bytes, the file is another version: the
	// Verifier reads it and finds the sealed (wrong) checksum false.
	path := filepath.Join(dir, state)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got := v.VerifyDir(context.Background(), dir)
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemChecksumMismatch {
		t.Errorf("after a rewrite: complete %v level %v %v, want one checksum mismatch", got.Complete, got.Level, got.Problems)
	}
}
