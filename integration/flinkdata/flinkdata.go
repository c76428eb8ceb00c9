// Package flinkdata finds the real Flink-written checkpoints and savepoints
// that the tests check every parser and verifier against.
//
// The data lives outside the repository, in shared/testdata/flink beside
// the clone (CI lays a copy there). CKPTFS_FLINK_TESTDATA overrides the
// location. A missing directory fails the test: a parser that passes
// because it saw no data has proven nothing. Only `go test -short` skips.
package flinkdata

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// EnvVar overrides the location of the test data.
const EnvVar = "CKPTFS_FLINK_TESTDATA"

// metadataMagic starts every _metadata file.
var metadataMagic = []byte{0x49, 0x60, 0x67, 0x2D}

// Dir returns the root of the real Flink test data.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(EnvVar); d != "" {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s=%s: %v", EnvVar, d, err)
		}
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(filepath.Dir(dir), "shared", "testdata", "flink")
			if _, err := os.Stat(d); err != nil {
				if testing.Short() {
					t.Skipf("real Flink test data not found at %s (-short)", d)
				}
				t.Fatalf("real Flink test data not found at %s: set %s", d, EnvVar)
			}
			return d
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// File is one real metadata file.
type File struct {
	// Path is the file's path; Rel is relative to Dir.
	Path, Rel string
	// Version is the metadata format version from the header.
	Version int32
}

// MetadataFiles lists every file under Dir that starts with the _metadata
// magic (every _metadata, and the single-file Flink 1.2 savepoints), then
// those of the committed corpus (CorpusDir; Rel starts with "corpus/").
func MetadataFiles(t testing.TB) []File {
	t.Helper()
	out := metadataFiles(t, Dir(t), "")
	if len(out) == 0 {
		t.Fatalf("no metadata files under %s", Dir(t))
	}
	corpus := metadataFiles(t, CorpusDir(t), "corpus")
	if len(corpus) == 0 && !testing.Short() {
		t.Fatalf("no metadata files in the corpus %s", CorpusDir(t))
	}
	return append(out, corpus...)
}

func metadataFiles(t testing.TB, root, prefix string) []File {
	t.Helper()
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return nil
	}
	var out []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var head [8]byte
		if n, _ := f.Read(head[:]); n < 8 || !bytes.Equal(head[:4], metadataMagic) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.Join(prefix, rel)
		out = append(out, File{Path: path, Rel: rel, Version: int32(binary.BigEndian.Uint32(head[4:]))})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	return out
}

// StateDirs lists the directories under Dir that hold a _metadata file and
// at least one other file beside it (the corpus is not among them: its
// files reference absolute paths; see Corpus).
func StateDirs(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, f := range metadataFiles(t, Dir(t), "") {
		if filepath.Base(f.Path) != "_metadata" {
			continue
		}
		entries, err := os.ReadDir(filepath.Dir(f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > 1 {
			out = append(out, filepath.Dir(f.Path))
		}
	}
	return out
}
