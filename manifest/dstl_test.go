package manifest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// framed builds a changelog file as StateChangeFsUploader writes it with
// compression: the flag byte, the stream identifier, then one chunk per
// block, compressed ones as a Snappy block of literals (any valid block
// will do: only headers are read).
func framed(blocks ...[]byte) []byte {
	out := append([]byte{dstlCompressed}, snappyStreamID...)
	for i, b := range blocks {
		var body []byte
		typ := byte(snappyChunkUncompressed)
		if i%2 == 0 {
			typ = snappyChunkCompressed
			body = binary.AppendUvarint(nil, uint64(len(b)))
			for rest := b; len(rest) > 0; {
				n := min(len(rest), 60)
				body = append(body, byte(n-1)<<2)
				body = append(body, rest[:n]...)
				rest = rest[n:]
			}
		} else {
			body = b
		}
		n := 4 + len(body)
		out = append(out, typ, byte(n), byte(n>>8), byte(n>>16), 1, 2, 3, 4)
		out = append(out, body...)
	}
	return out
}

func TestChangelogChanges(t *testing.T) {
	blocks := [][]byte{bytes.Repeat([]byte("a"), 300), bytes.Repeat([]byte("b"), 70), []byte("c")}
	good := framed(blocks...)
	const want = 371
	compressed, n, err := changelogChanges(bytes.NewReader(good), int64(len(good)), want)
	if err != nil || !compressed || n != want {
		t.Fatalf("good file: compressed %v, %d changes, %v; want %d", compressed, n, err, want)
	}
	// Every truncation ends early or holds too few changes; every
	// extension holds too many or is no chunk.
	for size := 0; size < len(good); size++ {
		_, n, err := changelogChanges(bytes.NewReader(good[:size]), int64(size), want)
		if err == nil && n >= want {
			t.Fatalf("truncated to %d bytes: %d changes and no error", size, n)
		}
	}
	for _, extra := range [][]byte{{0}, {1, 5, 0, 0}, framed([]byte("d"))[1+len(snappyStreamID):], snappyStreamID} {
		ext := append(bytes.Clone(good), extra...)
		_, n, err := changelogChanges(bytes.NewReader(ext), int64(len(ext)), want)
		if err == nil && n == want {
			t.Fatalf("extended by % x: no error", extra)
		}
	}
	plain := append([]byte{dstlPlain}, make([]byte, want)...)
	if compressed, n, err := changelogChanges(bytes.NewReader(plain), int64(len(plain)), want); err != nil || compressed || n != want {
		t.Fatalf("plain file: compressed %v, %d changes, %v", compressed, n, err)
	}
	for name, data := range map[string][]byte{
		"flag byte 2":        append([]byte{2}, good[1:]...),
		"no identifier":      append([]byte{dstlCompressed}, good[2:]...),
		"reserved chunk":     append(bytes.Clone(good), 0x02, 0, 0, 0),
		"padding chunk":      append(bytes.Clone(good), 0xfe, 0, 0, 0),
		"block over 64 KiB":  append(append([]byte{dstlCompressed}, snappyStreamID...), 0x00, 10, 0, 0, 1, 2, 3, 4, 0x81, 0x80, 0x08, 0),
		"empty uncompressed": append(bytes.Clone(good), 0x01, 4, 0, 0, 1, 2, 3, 4),
	} {
		_, _, err := changelogChanges(bytes.NewReader(data), int64(len(data)), want)
		var de *dstlError
		if !errors.As(err, &de) || de.Short {
			t.Errorf("%s: %v, want a format error", name, err)
		}
	}
}

// realChangelogs returns the Snappy-compressed changelog files of the
// corpus.
func realChangelogs(tb testing.TB) [][]byte {
	var out [][]byte
	for _, e := range flinkdata.Corpus(tb) {
		if !strings.HasPrefix(e.Kind, "changelog") {
			continue
		}
		// <job>/dstl/<uuid>; Flink 1.15 writes <uuid> straight below.
		files, _ := filepath.Glob(filepath.Join(e.Storage(), "changelog", "*", "dstl", "*"))
		flat, _ := filepath.Glob(filepath.Join(e.Storage(), "changelog", "*-*"))
		files = append(files, flat...)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, data)
		}
	}
	return out
}

// TestRealChangelogChunkBoundaries: a real compressed DSTL file cut where
// a chunk ends parses without error (nothing says the file ends early)
// and holds fewer changes: the sum catches it.
func TestRealChangelogChunkBoundaries(t *testing.T) {
	multi := 0
	for _, data := range realChangelogs(t) {
		if data[0] != dstlCompressed {
			continue
		}
		_, total, err := changelogChanges(bytes.NewReader(data), int64(len(data)), 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		chunks := 0
		for off := 1 + len(snappyStreamID); off < len(data); chunks++ {
			off += 4 + (int(data[off+1]) | int(data[off+2])<<8 | int(data[off+3])<<16)
			if off == len(data) {
				break
			}
			_, n, err := changelogChanges(bytes.NewReader(data[:off]), int64(off), total)
			if err != nil || n >= total {
				t.Errorf("cut after chunk %d at %d of %d bytes: %d of %d changes, %v", chunks, off, len(data), n, total, err)
			}
		}
		if chunks > 0 {
			multi++
		}
	}
	if multi == 0 {
		t.Error("no real compressed DSTL file of more than one chunk")
	}
}

func FuzzChangelogChanges(f *testing.F) {
	f.Add(framed([]byte("abc"), []byte("de")))
	for _, data := range realChangelogs(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const want = 1 << 20
		compressed, n, err := changelogChanges(bytes.NewReader(data), int64(len(data)), want)
		if err != nil {
			var de *dstlError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > int64(len(data)) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if n < 0 || n > want+snappyMaxBlock || compressed != (data[0] == dstlCompressed) {
			t.Fatalf("compressed %v, %d changes of a %d-byte file", compressed, n, len(data))
		}
	})
}

// TestCompressedChangelogVersionCache: a compressed changelog file found
// complete is remembered with its version, so verifying again does not
// read it; rewritten (same length, chunk headers broken), it has another
// version and is read and caught again.
func TestCompressedChangelogVersionCache(t *testing.T) {
	for _, e := range flinkdata.Corpus(t) {
		if !strings.HasPrefix(e.Kind, "changelog-compressed") || len(e.Checkpoints) == 0 {
			continue
		}
		t.Run(e.Release+"/"+e.Kind, func(t *testing.T) {
			storage := filepath.Join(t.TempDir(), "storage")
			copyDir(t, e.Storage(), storage)
			chk := filepath.Join(storage, filepath.FromSlash(e.Checkpoints[len(e.Checkpoints)-1].Dir))
			v := corpusVerifier(t, &e, storage)
			verdict := v.VerifyDir(context.Background(), chk)
			if !verdict.Complete {
				t.Fatalf("incomplete: %v", verdict.Problems)
			}
			var victim *File
			for i := range verdict.Manifest.Files {
				f := &verdict.Manifest.Files[i]
				if f.Kind != metadata.KindChangelog {
					continue
				}
				rel, _ := corpusFile(&e, "", f)
				var st unix.Stat_t
				if err := unix.Stat(filepath.Join(storage, filepath.FromSlash(rel)), &st); err != nil {
					t.Fatal(err)
				}
				v.cache.pathsMu.Lock()
				pe := v.cache.paths[f.Path]
				d := v.cache.dstl[pe]
				remembered := pe != nil && d.size == f.Size && d.ver == VersionOf(&st)
				v.cache.pathsMu.Unlock()
				if !remembered {
					t.Errorf("%s: not remembered as complete at its version", f.Path)
				}
				if st.Size != f.Size {
					victim = f
				}
			}
			if victim == nil {
				t.Fatal("no compressed changelog file")
			}
			rel, _ := corpusFile(&e, "", victim)
			p := filepath.Join(storage, filepath.FromSlash(rel))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[1+len(snappyStreamID)] = 0x7f // a reserved chunk type
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			verdict = v.VerifyDir(context.Background(), chk)
			if verdict.Complete || !slices.ContainsFunc(verdict.Problems, func(pr Problem) bool { return pr.Path == victim.Path && pr.Kind == ProblemParseError }) {
				t.Fatalf("rewritten %s: complete %v, problems %v", rel, verdict.Complete, verdict.Problems)
			}
		})
	}
}
