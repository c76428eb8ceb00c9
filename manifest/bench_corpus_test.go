package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// BenchEntryEnv names a corpus entry directory (one made by make corpus,
// committed or not) for BenchmarkVerifyRealCheckpoint.
const BenchEntryEnv = "CKPTFS_BENCH_ENTRY"

// BenchmarkVerifyRealCheckpoint runs BenchmarkVerify10kFiles's phases on
// real RocksDB incremental checkpoints: a bare stat of the files the
// newest checkpoint but one references, its cold verification (parse and
// stat), and the re-verification of the newest, which shares most of its
// files. The entry is $CKPTFS_BENCH_ENTRY, or else the committed
// rocksdb-incremental entry whose checkpoint references the most files.
// Besides the ratios it reports files per second, cold and re-verified.
func BenchmarkVerifyRealCheckpoint(b *testing.B) {
	var e flinkdata.Entry
	if dir := os.Getenv(BenchEntryEnv); dir != "" {
		var err error
		if e, err = flinkdata.ReadEntry(dir); err != nil {
			b.Fatal(err)
		}
	} else {
		most := -1
		for _, c := range flinkdata.Corpus(b) {
			if c.Kind != "rocksdb-incremental" || len(c.Checkpoints) < 2 {
				continue
			}
			if n := len(benchPaths(b, &c, c.Checkpoints[len(c.Checkpoints)-2].Dir)); n > most {
				e, most = c, n
			}
		}
	}
	if len(e.Checkpoints) < 2 {
		b.Fatalf("entry %s has fewer than two checkpoints", e.Dir)
	}
	chk1 := e.Checkpoints[len(e.Checkpoints)-2].Dir
	chk2 := e.Checkpoints[len(e.Checkpoints)-1].Dir
	paths := benchPaths(b, &e, chk1)
	b.Logf("%s %s: %s references %d files", e.Release, e.Kind, chk1, len(paths))
	res, err := NewResolver([]Mapping{{Prefix: e.StorageRootURI, Dir: e.Storage()}}, []string{e.Storage()})
	if err != nil {
		b.Fatal(err)
	}
	local := func(dir string) string { return filepath.Join(e.Storage(), filepath.FromSlash(dir)) }
	b.Run("warm", func(b *testing.B) { benchVerifyDirs(b, func() {}, res, local(chk1), local(chk2), paths) })
	b.Run("dropcaches", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("dropping the kernel caches needs root")
		}
		benchVerifyDirs(b, func() {
			syscall.Sync()
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
				b.Fatal(err)
			}
		}, res, local(chk1), local(chk2), paths)
	})
}

// benchPaths are the local paths of the distinct files dir references.
func benchPaths(b *testing.B, e *flinkdata.Entry, dir string) []string {
	m, err := metadata.DecodeFile(filepath.Join(e.Storage(), filepath.FromSlash(dir), MetadataFile), metadata.Options{})
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range m.References(e.StorageRootURI + "/" + dir) {
		p := strings.TrimPrefix(strings.TrimPrefix(r.Resolved, "file:"), "//")
		rel, err := filepath.Rel(e.StorageRoot(), p)
		if err != nil || strings.HasPrefix(rel, "..") || r.Kind == metadata.KindDirectory || seen[rel] {
			continue
		}
		seen[rel] = true
		out = append(out, filepath.Join(e.Storage(), rel))
	}
	return out
}
