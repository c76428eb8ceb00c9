package fusefs_test

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeChunks writes data to p through the mount in chunks, sequentially.
func writeChunks(t *testing.T, p string, data []byte, chunk int) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += chunk {
		if _, err := f.Write(data[off:min(off+chunk, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func written(rel string, data []byte) mounttest.SealerCall {
	return mounttest.SealerCall{Op: "written", Rel: rel, Size: int64(len(data)), CRC: crc32.Checksum(data, castagnoli)}
}

func removed(rel string) mounttest.SealerCall { return mounttest.SealerCall{Op: "removed", Rel: rel} }
func noChecksum(rel string) mounttest.SealerCall {
	return mounttest.SealerCall{Op: "nochecksum", Rel: rel}
}
func renamed(from, to string) mounttest.SealerCall {
	return mounttest.SealerCall{Op: "renamed", Rel: from, NewRel: to}
}
func committed(rel string) mounttest.SealerCall {
	return mounttest.SealerCall{Op: "committed", Rel: rel}
}

// checkCalls compares what the Sealer got (times ignored) and resets it.
// Calls are checked right after close(2) returned: reporting happens in
// FLUSH, which close waits for, not in the asynchronous RELEASE.
func checkCalls(t *testing.T, s *mounttest.Sealer, want ...mounttest.SealerCall) {
	t.Helper()
	got := s.Calls()
	s.Reset()
	for i := range got {
		if got[i].At.IsZero() && (got[i].Op == "written" || got[i].Op == "nochecksum") {
			t.Errorf("call %v has no time", got[i])
		}
		got[i].At = time.Time{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("sealer calls:\n got %v\nwant %v", got, want)
	}
}

func newSealingMount(t *testing.T) (*mounttest.Mount, *mounttest.Sealer) {
	s := &mounttest.Sealer{}
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: s})
	m.MkdirOrig("job/chk-1")
	return m, s
}

func TestIntegration_SealSequentialWrite(t *testing.T) {
	m, s := newSealingMount(t)
	for _, tc := range []struct {
		name  string
		size  int
		chunk int
	}{
		{"empty", 0, 1},
		{"flink 4k buffer", 1<<20 + 17, 4096},
		{"large writes", 3<<20 + 123, 100 << 10},
		{"one byte writes", 300, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randomBytes(tc.size)
			writeChunks(t, m.Path("job/chk-1/state"), data, tc.chunk)
			checkCalls(t, s, written("job/chk-1/state", data))
			got, err := os.ReadFile(m.Path("job/chk-1/state"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, %v", len(got), err)
			}
			checkCalls(t, s) // reading reports nothing
		})
	}
}

func TestIntegration_SealUnknownChecksum(t *testing.T) {
	m, s := newSealingMount(t)
	rel := "job/chk-1/state"
	p := m.Path(rel)
	data := randomBytes(10000)

	t.Run("out of order", func(t *testing.T) {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(data[5000:], 5000)
		f.WriteAt(data[:5000], 0)
		f.Close()
		checkCalls(t, s, noChecksum(rel))
	})
	t.Run("overwrite start of longer file", func(t *testing.T) {
		m.WriteOrig(rel, data)
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data[:100])
		f.Close()
		checkCalls(t, s, noChecksum(rel))
	})
	t.Run("O_TRUNC then in order", func(t *testing.T) {
		m.WriteOrig(rel, data)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data[:100])
		f.Close()
		checkCalls(t, s, written(rel, data[:100]))
	})
	t.Run("ftruncate to zero restarts", func(t *testing.T) {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Truncate(0)
		f.WriteAt(data[:42], 0)
		f.Close()
		checkCalls(t, s, written(rel, data[:42]))
	})
	t.Run("ftruncate shorter", func(t *testing.T) {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Truncate(10)
		f.Close()
		checkCalls(t, s, noChecksum(rel))
	})
	t.Run("fallocate", func(t *testing.T) {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		checkCalls(t, s, noChecksum(rel))
	})
	t.Run("copy_file_range", func(t *testing.T) {
		writeChunks(t, m.Path("job/chk-1/src"), data, 4096)
		s.Reset()
		src, err := os.Open(m.Path("job/chk-1/src"))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		dst, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		n, err := unix.CopyFileRange(int(src.Fd()), nil, int(dst.Fd()), nil, len(data), 0)
		if err != nil || n != len(data) {
			t.Fatalf("copy_file_range: %d, %v", n, err)
		}
		dst.Close()
		checkCalls(t, s, noChecksum(rel))
		if got, _ := os.ReadFile(m.OrigPath(rel)); !bytes.Equal(got, data) {
			t.Error("copy_file_range copied wrong data")
		}
	})
	t.Run("two writers", func(t *testing.T) {
		a, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(data[:10])
		b.WriteAt([]byte("XX"), 2)
		a.Write(data[10:20])
		b.Close()
		a.Close()
		for _, c := range s.Calls() {
			if c.Op == "written" {
				t.Errorf("checksum claimed with two writers: %v", c)
			}
		}
		s.Reset()
	})
	if st := m.Server.Stats(); st.FilesUnsealed == 0 {
		t.Errorf("FilesUnsealed not counted: %+v", st)
	}
}

func TestIntegration_SealMetadataCommit(t *testing.T) {
	m, s := newSealingMount(t)
	meta := randomBytes(5000)

	t.Run("direct _metadata", func(t *testing.T) {
		writeChunks(t, m.Path("job/chk-1/_metadata"), meta, 4096)
		checkCalls(t, s, written("job/chk-1/_metadata", meta), committed("job/chk-1/_metadata"))
	})
	t.Run("in-progress then rename", func(t *testing.T) {
		m.MkdirOrig("job/chk-2")
		tmp := "job/chk-2/._metadata.inprogress.6f1c0e2a-3d55-4b8e-9a41-0c5e7f1d2b39"
		writeChunks(t, m.Path(tmp), meta, 4096)
		checkCalls(t, s, written(tmp, meta))
		if err := os.Rename(m.Path(tmp), m.Path("job/chk-2/_metadata")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, s, renamed(tmp, "job/chk-2/_metadata"), committed("job/chk-2/_metadata"))
	})
	t.Run("rename over an existing file", func(t *testing.T) {
		other := randomBytes(77)
		writeChunks(t, m.Path("job/chk-1/a"), other, 4096)
		m.WriteOrig("job/chk-1/b", []byte("written elsewhere"))
		s.Reset()
		if err := os.Rename(m.Path("job/chk-1/b"), m.Path("job/chk-1/a")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, s, renamed("job/chk-1/b", "job/chk-1/a"))
	})
	t.Run("unlink", func(t *testing.T) {
		if err := os.Remove(m.Path("job/chk-1/_metadata")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, s, removed("job/chk-1/_metadata"))
	})
	t.Run("directory", func(t *testing.T) {
		if err := os.Rename(m.Path("job/chk-2"), m.Path("job/chk-3")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, s, renamed("job/chk-2", "job/chk-3"))
	})
	t.Run("exchange", func(t *testing.T) {
		if err := unix.Renameat2(unix.AT_FDCWD, m.Path("job/chk-1"), unix.AT_FDCWD, m.Path("job/chk-3"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, s, mounttest.SealerCall{Op: "renamed", Rel: "job/chk-1", NewRel: "job/chk-3", Exchange: true})
	})
	if st := m.Server.Stats(); st.MetadataCommits != 2 || st.FilesSealed < 2 {
		t.Errorf("counters %+v", st)
	}
}

// TestIntegration_NoSealer: without a Sealer a primary still writes.
func TestIntegration_NoSealer(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary})
	data := randomBytes(1 << 20)
	writeChunks(t, m.Path("_metadata"), data, 64<<10)
	if got, _ := os.ReadFile(m.OrigPath("_metadata")); !bytes.Equal(got, data) {
		t.Error("data differs")
	}
	if st := m.Server.Stats(); st.FilesSealed != 0 || st.MetadataCommits != 0 {
		t.Errorf("sealing counted without a Sealer: %+v", st)
	}
}
