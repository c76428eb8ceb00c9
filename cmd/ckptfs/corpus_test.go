package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestMountReplicaCorpus copies the newest checkpoint and the savepoints
// of every corpus entry (real Flink, every kind: flinkdata.Corpus) into
// the backing directory behind one replica mount, file by file in random
// order with _metadata first, each entry by another of the three copiers,
// to the directory of Flink's storage root that the mount maps. Until the
// last referenced file has arrived, the checkpoint or savepoint directory
// is hidden; then it shows. The State Processor API's savepoints are left
// out: Flink does not name their directory (flinkdata/corpus/README.md).
func TestMountReplicaCorpus(t *testing.T) {
	mounttest.RequireFUSE(t)
	entries := flinkdata.Corpus(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(mnt, 0o755)
	const poll = 150 * time.Millisecond
	args := []string{"--mode", "replica", "--poll", poll.String()}
	for i, e := range entries {
		root := filepath.Join(backing, fmt.Sprintf("e%02d", i))
		os.MkdirAll(root, 0o755)
		args = append(args, "--map", e.StorageRootURI+"="+root)
	}
	startMount(t, append(args, backing, mnt)...)
	copiers := replicaCopiers()
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range copiers {
			if !yield(k) {
				return
			}
		}
	})
	rng := rand.New(rand.NewPCG(15, 15))
	shown := 0
	for i, e := range entries {
		name := fmt.Sprintf("e%02d", i)
		copier := kinds[i%len(kinds)]
		copyFile := copiers[copier]
		var dirs []string
		if n := len(e.Checkpoints); n > 0 {
			dirs = append(dirs, e.Checkpoints[n-1].Dir)
		}
		for _, s := range e.Savepoints {
			if s.Format != "SPA" {
				dirs = append(dirs, s.Dir)
			}
		}
		for _, dir := range dirs {
			files, mkdirs := corpusNeeds(t, &e, dir)
			for _, d := range mkdirs {
				os.MkdirAll(filepath.Join(backing, name, d), 0o755)
			}
			os.MkdirAll(filepath.Join(backing, name, dir), 0o755)
			rng.Shuffle(len(files), func(a, b int) { files[a], files[b] = files[b], files[a] })
			order := append([]string{dir + "/" + manifest.MetadataFile}, files...)
			var missing []string
			for _, rel := range order {
				if _, err := os.Stat(filepath.Join(backing, name, rel)); err != nil {
					missing = append(missing, rel)
				}
			}
			mdir := filepath.Join(mnt, name, dir)
			for j, rel := range missing {
				if j == len(missing)-1 && j > 0 {
					time.Sleep(poll + 100*time.Millisecond) // give a pass the chance to be wrong
					if _, err := os.Stat(mdir); !errors.Is(err, syscall.ENOENT) {
						t.Errorf("%s %s (%s): shown without %s: %v", e.Release, e.Kind, dir, rel, err)
					}
				}
				data, err := os.ReadFile(filepath.Join(e.Storage(), rel))
				if err != nil {
					t.Fatal(err)
				}
				dst := filepath.Join(backing, name, rel)
				os.MkdirAll(filepath.Dir(dst), 0o755)
				copyFile(t, filepath.Dir(dst), filepath.Base(dst), data)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Stat(mdir); err == nil {
					shown++
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s %s (%s, %s): not shown once complete", e.Release, e.Kind, dir, copier)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	t.Logf("%d checkpoints and savepoints of %d corpus entries hidden until complete, then shown", shown, len(entries))
}

// corpusNeeds lists the files (relative to the entry's storage) that the
// checkpoint or savepoint in dir references, and the directories it needs.
func corpusNeeds(t *testing.T, e *flinkdata.Entry, dir string) (files, dirs []string) {
	t.Helper()
	m, err := metadata.DecodeFile(filepath.Join(e.Storage(), dir, manifest.MetadataFile), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range m.References(e.StorageRootURI + "/" + dir) {
		p := strings.TrimPrefix(strings.TrimPrefix(r.Resolved, "file:"), "//")
		rel, err := filepath.Rel(e.StorageRoot(), p)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s references %s, outside the storage root", dir, r.Resolved)
		}
		if seen[rel] {
			continue
		}
		seen[rel] = true
		if r.Kind == metadata.KindDirectory {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
	}
	sort.Strings(files)
	return files, dirs
}
