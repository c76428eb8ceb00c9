package flinkdata

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// The committed corpus: real Flink checkpoints and savepoints of every
// kind, made by `make corpus` (integration/realflink TestCorpus) and kept
// in the repository under corpus/<release>/<kind>/ (corpus/README.md).

// KeepFile is the empty file the corpus puts in a directory that Flink
// left empty (git keeps no empty directory); it is no file of Flink's.
const KeepFile = ".corpus-keep"

// Entry is one corpus entry, its corpus.json.
type Entry struct {
	// Dir is the entry's directory (set by Corpus, not stored).
	Dir string `json:"-"`

	Release      string            `json:"release"`
	FlinkVersion string            `json:"flink_version"`
	Kind         string            `json:"kind"`
	Made         string            `json:"made"`
	Regenerate   string            `json:"regenerate"`
	Settings     map[string]string `json:"settings"`
	JobArgs      []string          `json:"job_args"`
	Java         string            `json:"java"`
	JobID        string            `json:"job_id"`
	// StorageRootURI is the directory Flink wrote below, as Flink wrote
	// it into _metadata and HA files (file:<path>); Storage() holds a
	// copy of everything below it but HA blobs and job graphs.
	StorageRootURI string `json:"storage_root_uri"`
	// Checkpoints are the retained checkpoints, as ZooKeeper pointed at
	// them at the dump, with their HA files (paths relative to Storage).
	Checkpoints []Checkpoint `json:"checkpoints"`
	// Savepoints are the savepoint directories (relative to Storage).
	Savepoints []Savepoint `json:"savepoints,omitempty"`
	// Unreferenced are the files below Storage that no retained
	// checkpoint or savepoint references and that are neither _metadata
	// nor HA files: left by checkpoints in flight or subsumed at the dump.
	Unreferenced []string `json:"unreferenced,omitempty"`
	// MetadataVersions are the versions of the entry's _metadata files.
	MetadataVersions []int32 `json:"metadata_versions"`
	Dump             string  `json:"dump"`
}

// Checkpoint is a retained checkpoint of an entry.
type Checkpoint struct {
	ID     int64  `json:"id"`
	Dir    string `json:"dir"`
	HAFile string `json:"ha_file"`
}

// Savepoint is a savepoint of an entry; Format is CANONICAL or NATIVE.
type Savepoint struct {
	Dir    string `json:"dir"`
	Format string `json:"format"`
}

// Storage is the entry's copy of Flink's storage root.
func (e *Entry) Storage() string { return filepath.Join(e.Dir, "storage") }

// StorageRoot is StorageRootURI as a local path of the machine that made
// the entry.
func (e *Entry) StorageRoot() string {
	p := e.StorageRootURI
	if len(p) > len("file:") && p[:len("file:")] == "file:" {
		p = p[len("file:"):]
	}
	return p
}

// States are the entry's checkpoint and savepoint directories, relative
// to Storage.
func (e *Entry) States() []string {
	var dirs []string
	for _, c := range e.Checkpoints {
		dirs = append(dirs, c.Dir)
	}
	for _, s := range e.Savepoints {
		dirs = append(dirs, s.Dir)
	}
	return dirs
}

// CorpusDirEnv points the tests that walk the corpus at another
// directory (absolute) of <release>/<kind>/ entries instead of the
// committed corpus:
// one that make corpus wrote elsewhere (CKPTFS_CORPUS), for releases whose
// entries are too large to commit.
const CorpusDirEnv = "CKPTFS_CORPUS_DIR"

// CorpusDir is the committed corpus (corpus/ beside this file, found from
// the module's top directory), or CorpusDirEnv's directory.
func CorpusDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(CorpusDirEnv); d != "" {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s=%s: %v", CorpusDirEnv, d, err)
		}
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "integration", "flinkdata", "corpus")
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// ReadEntry reads the entry in dir (which holds corpus.json).
func ReadEntry(dir string) (Entry, error) {
	e := Entry{Dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err == nil {
		err = json.Unmarshal(data, &e)
	}
	return e, err
}

// Corpus lists the corpus's entries (CorpusDir), by release and kind. An
// empty corpus fails the test.
func Corpus(t testing.TB) []Entry {
	t.Helper()
	root := CorpusDir(t)
	var out []Entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "storage" {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "corpus.json" {
			return nil
		}
		e, err := ReadEntry(filepath.Dir(p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no corpus entry under %s", root)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}
