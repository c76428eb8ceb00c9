package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// baseTime gives every written file a distinct, whole-second mtime so that
// size+mtime comparison sees every change.
var baseTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// writeFile writes root/rel with content, mode 0644 and mtime baseTime+stamp.
func writeFile(t *testing.T, root, rel, content string, stamp int) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := baseTime.Add(time.Duration(stamp) * time.Second)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// describe returns a comparable description of the tree under root:
// relative name -> type, permissions, size, mtime and content.
func describe(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return out
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[rel] = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			tg, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + tg
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %v %d %s %q", fi.Mode().Perm(), fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertSameTree(t *testing.T, src, dst string) {
	t.Helper()
	a, b := describe(t, src), describe(t, dst)
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: source %s, replica %s", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: only in replica: %s", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("replica differs from source:\n%s", strings.Join(diffs, "\n"))
	}
}

// kind builds one simulator and drives it to convergence.
type kind struct {
	name string
	make func(t *testing.T, o Options) Replicator
	// settle performs the final full pass.
	settle func(ctx context.Context, r Replicator) error
}

func kinds() []kind {
	pass := func(ctx context.Context, r Replicator) error { return r.Pass(ctx) }
	return []kind{
		{"Snapshot", func(t *testing.T, o Options) Replicator {
			r, err := NewSnapshot(SnapshotOptions{Options: o})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, pass},
		{"FileLevel", func(t *testing.T, o Options) Replicator {
			r, err := NewFileLevel(o)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, pass},
		{"PerObject", func(t *testing.T, o Options) Replicator {
			r, err := NewPerObject(PerObjectOptions{Options: o, MaxDelay: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}, func(ctx context.Context, r Replicator) error { return r.(*PerObject).Sync(ctx) }},
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func isStopped(err error) bool { return errors.Is(err, ErrStopped) }

// genContent is the content of a file of generation gen: same size for
// every generation, so that only the mtime tells generations apart.
func genContent(rel string, gen int) string {
	return fmt.Sprintf("gen=%06d file=%s %s\n", gen, rel, bytes.Repeat([]byte{'x'}, 40))
}

// parseGen returns the generation of a file's content, -1 if it has none
// (a torn or foreign file).
func parseGen(b []byte) int {
	var g int
	if _, err := fmt.Sscanf(string(b), "gen=%d", &g); err != nil {
		return -1
	}
	return g
}

// tempFiles lists the files under root whose name has the FileLevel
// temporary shape.
func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for rel := range describe(t, root) {
		if IsTempName(filepath.Base(rel)) {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}
