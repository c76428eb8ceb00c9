package fusefs_test

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
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

// The two ways a writer opens a file: write-only opens get passthrough
// (the kernel writes the backing file), read-write opens are served by
// the daemon. Flink opens write-only (Java's FileOutputStream).
var writeOpens = []struct {
	name  string
	flags int
}{
	{"write-only", os.O_WRONLY},
	{"read-write", os.O_RDWR},
}

// writeChunks writes data to p through the mount in chunks, sequentially,
// creating or truncating it, opened write-only.
func writeChunks(t *testing.T, p string, data []byte, chunk int) {
	t.Helper()
	writeChunksFlags(t, p, data, chunk, os.O_WRONLY)
}

func writeChunksFlags(t *testing.T, p string, data []byte, chunk, flags int) {
	t.Helper()
	f, err := os.OpenFile(p, flags|os.O_CREATE|os.O_TRUNC, 0o644)
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

// waitReleased waits until the kernel released every file closed on m:
// RELEASE comes after close(2) returned, and may report a file again.
func waitReleased(t *testing.T, m *mounttest.Mount) {
	t.Helper()
	if !released(m) {
		t.Fatalf("files stay open: %+v", m.Server.Stats())
	}
}

// released waits a while for every closed file on m to be released.
func released(m *mounttest.Mount) bool {
	deadline := time.Now().Add(5 * time.Second)
	for m.Server.Stats().OpenFiles > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// checkCalls compares what the Sealer got (times ignored) once the mount
// delivered everything reported so far, after every closed file was
// released, and resets it.
func checkCalls(t *testing.T, m *mounttest.Mount, s *mounttest.Sealer, want ...mounttest.SealerCall) {
	t.Helper()
	waitReleased(t, m)
	m.Server.SyncSealer()
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
	for _, open := range writeOpens {
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
			t.Run(open.name+"/"+tc.name, func(t *testing.T) {
				data := randomBytes(tc.size)
				writeChunksFlags(t, m.Path("job/chk-1/state"), data, tc.chunk, open.flags)
				checkCalls(t, m, s, written("job/chk-1/state", data))
				got, err := os.ReadFile(m.Path("job/chk-1/state"))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read back %d bytes, %v", len(got), err)
				}
				checkCalls(t, m, s) // reading reports nothing
			})
		}
	}
	if st := m.Server.Stats(); st.ReadBackBytes < 2*(1<<20+3<<20) {
		t.Errorf("ReadBackBytes %d after writing 8 MiB", st.ReadBackBytes)
	}
}

// TestIntegration_SealAnyWriteOrder: the checksum is taken from what the
// file holds when its writer closes it, however it was written.
func TestIntegration_SealAnyWriteOrder(t *testing.T) {
	m, s := newSealingMount(t)
	data := randomBytes(10000)
	// Each case writes its own file: the RELEASE of one case's handle,
	// which comes after close(2) returned, must not see the next case.
	var rel, p string
	create := func(t *testing.T) *os.File {
		t.Helper()
		rel = "job/chk-1/" + strings.ReplaceAll(t.Name(), "/", "-")
		p = m.Path(rel)
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	t.Run("out of order", func(t *testing.T) {
		f := create(t)
		f.WriteAt(data[5000:], 5000)
		f.WriteAt(data[:5000], 0)
		f.Close()
		checkCalls(t, m, s, written(rel, data))
	})
	t.Run("overwrite start of longer file", func(t *testing.T) {
		create(t).Close()
		waitReleased(t, m)
		m.WriteOrig(rel, data)
		m.Server.SyncSealer()
		s.Reset()
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("XY"))
		f.Close()
		checkCalls(t, m, s, written(rel, append([]byte("XY"), data[2:]...)))
	})
	t.Run("ftruncate shorter", func(t *testing.T) {
		f := create(t)
		f.Write(data)
		f.Truncate(10)
		f.Close()
		checkCalls(t, m, s, written(rel, data[:10]))
	})
	t.Run("fallocate", func(t *testing.T) {
		f := create(t)
		f.Write(data)
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		checkCalls(t, m, s, written(rel, data))
	})
	t.Run("copy_file_range", func(t *testing.T) {
		writeChunks(t, m.Path("job/chk-1/src"), data, 4096)
		m.Server.SyncSealer()
		s.Reset()
		src, err := os.Open(m.Path("job/chk-1/src"))
		if err != nil {
			t.Fatal(err)
		}
		dst := create(t)
		n, err := unix.CopyFileRange(int(src.Fd()), nil, int(dst.Fd()), nil, len(data), 0)
		src.Close()
		dst.Close()
		if err != nil || n != len(data) {
			t.Fatalf("copy_file_range: %d, %v", n, err)
		}
		checkCalls(t, m, s, written(rel, data))
	})
	t.Run("two writers", func(t *testing.T) {
		a := create(t)
		b, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(data[:10])
		b.WriteAt([]byte("XX"), 2)
		a.Write(data[10:20])
		b.Close()
		a.Close()
		final := slices.Concat(data[:2], []byte("XX"), data[4:20])
		checkCalls(t, m, s, written(rel, final), written(rel, final))
	})
	t.Run("written to again after a close", func(t *testing.T) {
		// A descriptor still open after another one of the same open
		// file was closed: RELEASE reports the file again.
		f := create(t)
		dup, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data[:100])
		f.Close()
		m.Server.SyncSealer()
		unix.Write(dup, data[100:200])
		unix.Close(dup)
		want := written(rel, data[:200])
		deadline := time.Now().Add(5 * time.Second)
		for {
			m.Server.SyncSealer()
			calls := s.Calls()
			if len(calls) == 2 {
				calls[0].At, calls[1].At = time.Time{}, time.Time{}
				if calls[0] != written(rel, data[:100]) || calls[1] != want {
					t.Errorf("calls %v, want %v then %v", calls, written(rel, data[:100]), want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("calls %v: RELEASE did not report the later write", calls)
			}
			time.Sleep(10 * time.Millisecond)
		}
		s.Reset()
	})
}

// TestIntegration_SealWithoutChecksum: a file that changes between its
// writer's close and the end of the read-back, or is truncated by path,
// is reported without checksum.
func TestIntegration_SealWithoutChecksum(t *testing.T) {
	m, s := newSealingMount(t)
	rel := "job/chk-1/state"
	data := randomBytes(10000)

	t.Run("changed behind the mount before the read-back", func(t *testing.T) {
		fusefs.SetTestHookReadBack(func() {
			// After the RELEASE, which would otherwise see the change and
			// report the file once more.
			if !released(m) {
				t.Error("the writer is not released")
			}
			if err := os.WriteFile(m.OrigPath(rel), data[:5], 0o644); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() { fusefs.SetTestHookReadBack(nil) })
		writeChunks(t, m.Path(rel), data, 4096)
		checkCalls(t, m, s, noChecksum(rel))
		fusefs.SetTestHookReadBack(nil)
	})
	t.Run("truncate by path", func(t *testing.T) {
		writeChunks(t, m.Path(rel), data, 4096)
		checkCalls(t, m, s, written(rel, data))
		if err := os.Truncate(m.Path(rel), 10); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, noChecksum(rel))
	})
	if st := m.Server.Stats(); st.FilesUnsealed != 2 {
		t.Errorf("FilesUnsealed = %d, want 2: %+v", st.FilesUnsealed, st)
	}
}

func TestIntegration_SealMetadataCommit(t *testing.T) {
	m, s := newSealingMount(t)
	meta := randomBytes(5000)

	t.Run("direct _metadata", func(t *testing.T) {
		writeChunks(t, m.Path("job/chk-1/_metadata"), meta, 4096)
		checkCalls(t, m, s, written("job/chk-1/_metadata", meta), committed("job/chk-1/_metadata"))
	})
	t.Run("in-progress then rename", func(t *testing.T) {
		m.MkdirOrig("job/chk-2")
		tmp := "job/chk-2/._metadata.inprogress.6f1c0e2a-3d55-4b8e-9a41-0c5e7f1d2b39"
		writeChunks(t, m.Path(tmp), meta, 4096)
		checkCalls(t, m, s, written(tmp, meta))
		if err := os.Rename(m.Path(tmp), m.Path("job/chk-2/_metadata")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, renamed(tmp, "job/chk-2/_metadata"), committed("job/chk-2/_metadata"))
	})
	t.Run("rename over an existing file", func(t *testing.T) {
		other := randomBytes(77)
		writeChunks(t, m.Path("job/chk-1/a"), other, 4096)
		m.WriteOrig("job/chk-1/b", []byte("written elsewhere"))
		m.Server.SyncSealer()
		s.Reset()
		if err := os.Rename(m.Path("job/chk-1/b"), m.Path("job/chk-1/a")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, renamed("job/chk-1/b", "job/chk-1/a"))
	})
	t.Run("unlink", func(t *testing.T) {
		if err := os.Remove(m.Path("job/chk-1/_metadata")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, removed("job/chk-1/_metadata"))
	})
	t.Run("directory", func(t *testing.T) {
		if err := os.Rename(m.Path("job/chk-2"), m.Path("job/chk-3")); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, renamed("job/chk-2", "job/chk-3"))
	})
	t.Run("exchange", func(t *testing.T) {
		if err := unix.Renameat2(unix.AT_FDCWD, m.Path("job/chk-1"), unix.AT_FDCWD, m.Path("job/chk-3"), unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
		checkCalls(t, m, s, mounttest.SealerCall{Op: "renamed", Rel: "job/chk-1", NewRel: "job/chk-3", Exchange: true})
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
