package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/replication"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestMountReplicaCorpusSimulators: each of the three replication
// simulators (snapshot, file-level, per-object; integration/replication)
// copies the whole corpus, in its own random order, into the backing
// directory of a replica mount. Before its operations (every 19th, and
// with pauses longer than a catalog pass at a few random ones) no
// checkpoint or savepoint the mount shows may lack a byte of a file it
// references; once the copy is done, every one of them shows.
func TestMountReplicaCorpusSimulators(t *testing.T) {
	mounttest.RequireFUSE(t)
	entries := flinkdata.Corpus(t)
	top := t.TempDir()
	src := filepath.Join(top, "src")
	type need struct {
		length int64
		exact  bool // else at least length: a file-merging segment's end
	}
	type state struct {
		entry, dir string
		files      map[string]need // below the entry's directory
	}
	var states []state
	for i, e := range entries {
		name := fmt.Sprintf("e%02d", i)
		if err := os.CopyFS(filepath.Join(src, name), os.DirFS(e.Storage())); err != nil {
			t.Fatal(err)
		}
		var dirs []string
		for _, c := range e.Checkpoints {
			dirs = append(dirs, c.Dir)
		}
		for _, s := range e.Savepoints {
			if s.Format != "SPA" {
				dirs = append(dirs, s.Dir)
			}
		}
		for _, dir := range dirs {
			st := state{entry: name, dir: dir, files: map[string]need{}}
			meta := dir + "/" + manifest.MetadataFile
			m, err := metadata.DecodeFile(filepath.Join(e.Storage(), meta), metadata.Options{})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(e.Storage(), meta))
			if err != nil {
				t.Fatal(err)
			}
			st.files[meta] = need{fi.Size(), true}
			for _, r := range m.References(e.StorageRootURI + "/" + dir) {
				if r.Kind == metadata.KindDirectory {
					continue
				}
				rel, err := filepath.Rel(e.StorageRoot(), strings.TrimPrefix(strings.TrimPrefix(r.Resolved, "file:"), "//"))
				if err != nil {
					t.Fatal(err)
				}
				n := st.files[rel]
				length := r.MinLength()
				if r.Kind == metadata.KindChangelog {
					// A compressed DSTL file is not its handle's size long:
					// whole is as long as Flink wrote it.
					fi, err := os.Stat(filepath.Join(e.Storage(), rel))
					if err != nil {
						t.Fatal(err)
					}
					length = fi.Size()
				}
				st.files[rel] = need{max(n.length, length), r.ExactSize()}
			}
			states = append(states, st)
		}
	}
	const poll = 150 * time.Millisecond
	for k, kind := range []string{"snapshot", "filelevel", "perobject"} {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(top, kind)
			backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
			os.MkdirAll(backing, 0o755)
			os.MkdirAll(mnt, 0o755)
			args := []string{"--mode", "replica", "--poll", poll.String()}
			for i, e := range entries {
				args = append(args, "--map", e.StorageRootURI+"="+filepath.Join(backing, fmt.Sprintf("e%02d", i)))
			}
			startMount(t, append(args, backing, mnt)...)
			var mu sync.Mutex
			ops, violations := 0, 0
			rng := rand.New(rand.NewPCG(uint64(k), 15))
			check := func() {
				for _, s := range states {
					if _, err := os.Stat(filepath.Join(mnt, s.entry, s.dir)); err != nil {
						continue
					}
					for rel, n := range s.files {
						fi, err := os.Stat(filepath.Join(backing, s.entry, rel))
						if err != nil || n.exact && fi.Size() != n.length || fi.Size() < n.length {
							violations++
							t.Errorf("%s %s shown while %s is not whole (%v)", s.entry, s.dir, rel, err)
						}
					}
				}
			}
			o := replication.Options{Source: src, Dest: backing, Rand: rand.New(rand.NewPCG(uint64(k), 1)), ChunkSize: 2048,
				Hook: func(replication.Op) error {
					mu.Lock()
					defer mu.Unlock()
					ops++
					if rng.IntN(300) == 0 {
						time.Sleep(poll + 100*time.Millisecond) // a catalog pass
					}
					if ops%19 == 0 {
						check()
					}
					return nil
				}}
			var repl replication.Replicator
			var err error
			switch kind {
			case "snapshot":
				repl, err = replication.NewSnapshot(replication.SnapshotOptions{Options: o})
			case "filelevel":
				repl, err = replication.NewFileLevel(o)
			case "perobject":
				repl, err = replication.NewPerObject(replication.PerObjectOptions{Options: o, MinDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond})
			}
			if err != nil {
				t.Fatal(err)
			}
			// One pass: a second scan of the per-object simulator would
			// copy again, in place, files whose copy had not yet set their
			// times, and a checkpoint once whole would lose bytes again
			// (what a replica does then is for the next catalog pass).
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- repl.Pass(ctx) }()
			deadline := time.Now().Add(60 * time.Second)
			for shown := 0; shown < len(states); {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d checkpoints and savepoints shown after the copy", shown, len(states))
				}
				time.Sleep(50 * time.Millisecond)
				shown = 0
				for _, s := range states {
					if _, err := os.Stat(filepath.Join(mnt, s.entry, s.dir)); err == nil {
						shown++
					}
				}
			}
			cancel()
			repl.Stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			check()
			t.Logf("%s: %d operations, %d checkpoints and savepoints shown once whole, %d violations", kind, ops, len(states), violations)
			mu.Unlock()
		})
	}
}
