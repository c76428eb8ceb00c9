package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
)

// propsV4 is a CheckpointProperties stream as Flink 1.19 writes it, taken
// from the real data at test start.
func realProperties(t testing.TB) []byte {
	t.Helper()
	for _, f := range flinkdata.MetadataFiles(t) {
		if f.Version == 4 {
			m, err := DecodeFile(f.Path, Options{})
			if err != nil {
				t.Fatalf("%s: %v", f.Rel, err)
			}
			return m.Properties
		}
	}
	t.Fatal("no version-4 metadata in the real data")
	return nil
}

// TestRealFiles parses every real metadata file and writes it again byte
// for byte.
func TestRealFiles(t *testing.T) {
	files := flinkdata.MetadataFiles(t)
	versions := map[int32]int{}
	for _, f := range files {
		t.Run(f.Rel, func(t *testing.T) {
			data, err := os.ReadFile(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(bytes.NewReader(data), int64(len(data)), Options{KeepInline: true})
			if f.Version == 1 {
				if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "unsupported metadata version 1") {
					t.Fatalf("version 1: got %v, want the unsupported-version error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			versions[m.Version]++
			if m.Version != f.Version {
				t.Errorf("version %d, header says %d", m.Version, f.Version)
			}
			if want := int64(binary.BigEndian.Uint64(data[8:16])); m.CheckpointID != want {
				t.Errorf("checkpoint id %d, header says %d", m.CheckpointID, want)
			}
			var out bytes.Buffer
			if err := Encode(&out, m); err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(out.Bytes(), data) {
				t.Fatalf("re-encoded %d bytes differ from the %d read (first difference at %d)", out.Len(), len(data), firstDiff(out.Bytes(), data))
			}
			// Without inline bytes the references and counts are the same.
			lean, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
			if err != nil {
				t.Fatalf("decode without inline bytes: %v", err)
			}
			if !reflect.DeepEqual(lean.References("/x"), m.References("/x")) {
				t.Error("references differ with and without KeepInline")
			}
			c1, b1 := lean.Inline()
			c2, b2 := m.Inline()
			if c1 != c2 || b1 != b2 {
				t.Errorf("inline %d/%d without data, %d/%d with", c1, b1, c2, b2)
			}
		})
	}
	for _, v := range []int32{2, 3, 4, 5} {
		if versions[v] == 0 {
			t.Errorf("no real file of version %d was parsed", v)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRealStateDirsReferenceTheirFiles checks that the relative references
// of every real checkpoint with state files name exactly those files.
func TestRealStateDirsReferenceTheirFiles(t *testing.T) {
	for _, dir := range flinkdata.StateDirs(t) {
		rel, _ := filepath.Rel(flinkdata.Dir(t), dir)
		t.Run(rel, func(t *testing.T) {
			m, err := DecodeFile(filepath.Join(dir, "_metadata"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			referenced := map[string]bool{}
			for _, r := range m.References(dir) {
				if r.Relative {
					referenced[r.Path] = true
					if r.Resolved != dir+"/"+r.Path || r.Kind != KindExclusive {
						t.Errorf("relative %s resolved to %s, kind %s", r.Path, r.Resolved, r.Kind)
					}
				}
			}
			entries, _ := os.ReadDir(dir)
			present := map[string]bool{}
			for _, e := range entries {
				if e.Name() != "_metadata" {
					present[e.Name()] = true
				}
			}
			switch {
			case strings.HasPrefix(rel, "bravo/"):
				// Absolute references to files never published.
				if len(referenced) != 0 {
					t.Errorf("bravo has %d relative references", len(referenced))
				}
				return
			case strings.HasSuffix(rel, "over-aggregate-lag/1.18/savepoint"):
				// The data's README: an extra unreferenced file.
				delete(present, "OverWindowRestoreTest")
			}
			if !reflect.DeepEqual(referenced, present) {
				t.Errorf("referenced %v, present %v", keys(referenced), keys(present))
			}
		})
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTruncatedRealFilesFail: a prefix of a real file never parses. Every
// offset of the checkpoints with state files (the acceptance data); a
// stride plus the tail of every other file.
func TestTruncatedRealFilesFail(t *testing.T) {
	everyOffset := map[string]bool{}
	for _, dir := range flinkdata.StateDirs(t) {
		everyOffset[filepath.Join(dir, "_metadata")] = true
	}
	for _, f := range flinkdata.MetadataFiles(t) {
		if f.Version == 1 {
			continue
		}
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(data); n++ {
			if !everyOffset[f.Path] && n%97 != 0 && n < len(data)-512 {
				continue
			}
			_, err := Decode(bytes.NewReader(data[:n]), int64(n), Options{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%s truncated to %d bytes: got %v, want a *ParseError", f.Rel, n, err)
			}
		}
	}
}

// TestTrailingBytesFail: one byte after the end is an error, not a
// "probably fine".
func TestTrailingBytesFail(t *testing.T) {
	for _, f := range flinkdata.MetadataFiles(t) {
		if f.Version == 1 {
			continue
		}
		data, _ := os.ReadFile(f.Path)
		data = append(data, 0)
		if _, err := Decode(bytes.NewReader(data), int64(len(data)), Options{}); err == nil {
			t.Errorf("%s with a trailing byte parsed", f.Rel)
		}
	}
}
