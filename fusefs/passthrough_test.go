package fusefs_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// requirePassthrough skips when the kernel did not agree to passthrough
// (before Linux 6.9, or without CAP_SYS_ADMIN).
func requirePassthrough(t *testing.T, m *mounttest.Mount) {
	t.Helper()
	if !m.Server.Passthrough() {
		t.Skip("SKIPPED: the kernel did not grant FUSE passthrough on this machine")
	}
}

func readAll(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestIntegration_PassthroughReads: read-only opens get a backing file and
// the daemon serves no READ at all.
func TestIntegration_PassthroughReads(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModeReplica, fusefs.ModePrimary} {
		t.Run(mode.String(), func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: mode, Sealer: &mounttest.Sealer{}})
			requirePassthrough(t, m)
			data := randomBytes(8<<20 + 5)
			m.WriteOrig("job/shared/big", data)
			before := m.Server.Stats()
			if got := readAll(t, m.Path("job/shared/big")); !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, differ from the backing file", len(got))
			}
			after := m.Server.Stats()
			t.Logf("after reading %d bytes: %+v", len(data), after)
			if after.PassthroughOpens == before.PassthroughOpens {
				t.Errorf("no passthrough open: %+v", after)
			}
			if after.DaemonReads != before.DaemonReads {
				t.Errorf("daemon served %d READs (%d bytes) for a passthrough file",
					after.DaemonReads-before.DaemonReads, after.DaemonReadBytes-before.DaemonReadBytes)
			}
		})
	}
}

// TestIntegration_DaemonReads: with passthrough off, reads go through
// the daemon (splice from the backing file) and are still correct.
func TestIntegration_DaemonReads(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{
		Mode:      fusefs.ModeReplica,
		Configure: func(c *fusefs.Config) { c.Passthrough = false },
	})
	if m.Server.Passthrough() {
		t.Fatal("passthrough on although disabled")
	}
	data := randomBytes(3<<20 + 1)
	m.WriteOrig("f", data)
	if got := readAll(t, m.Path("f")); !bytes.Equal(got, data) {
		t.Fatal("data differs")
	}
	st := m.Server.Stats()
	if st.PassthroughOpens != 0 || st.DaemonReads == 0 || st.DaemonReadBytes < uint64(len(data)) {
		t.Errorf("stats %+v", st)
	}
}

// TestIntegration_WritesThroughTheDaemon: a write-only open on a primary
// is served by the daemon, never passed through (design §5.14), and the
// Sealer still gets the file's checksum; a read-only open of the same
// file afterwards passes through.
func TestIntegration_WritesThroughTheDaemon(t *testing.T) {
	s := &mounttest.Sealer{}
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: s})
	requirePassthrough(t, m)
	data := randomBytes(4<<20 + 3)
	writeChunks(t, m.Path("state"), data, 4096)
	st := m.Server.Stats()
	if st.PassthroughOpens != 0 || st.DaemonOpens != 1 {
		t.Errorf("write-only open passed through: %+v", st)
	}
	if got, _ := os.ReadFile(m.OrigPath("state")); !bytes.Equal(got, data) {
		t.Fatal("backing file differs")
	}
	checkCalls(t, m, s, written("state", data))
	waitReleased(t, m)
	if got := readAll(t, m.Path("state")); !bytes.Equal(got, data) {
		t.Fatal("read back differs")
	}
	if st := m.Server.Stats(); st.PassthroughOpens != 1 {
		t.Errorf("read-only open not passed through: %+v", st)
	}
}

// TestIntegration_PassthroughWithWriters: the kernel cannot serve one
// inode both through passthrough and through the daemon.
func TestIntegration_PassthroughWithWriters(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Sealer: &mounttest.Sealer{}})
	requirePassthrough(t, m)
	p := m.Path("f")
	m.WriteOrig("f", []byte("0123456789"))

	t.Run("reader while writing write-only", func(t *testing.T) {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteAt([]byte("ab"), 0); err != nil {
			t.Fatal(err)
		}
		before := m.Server.Stats()
		if got := readAll(t, p); string(got) != "ab23456789" {
			t.Errorf("reader sees %q", got)
		}
		after := m.Server.Stats()
		if after.DaemonReads == before.DaemonReads || after.PassthroughOpens != before.PassthroughOpens {
			t.Errorf("reader of a file open for writing (through the daemon) should use the daemon: %+v", after)
		}
	})
	t.Run("reader while writing read-write", func(t *testing.T) {
		waitReleased(t, m)
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := w.WriteAt([]byte("cd"), 0); err != nil {
			t.Fatal(err)
		}
		before := m.Server.Stats()
		if got := readAll(t, p); string(got) != "cd23456789" {
			t.Errorf("reader sees %q", got)
		}
		after := m.Server.Stats()
		if after.DaemonReads == before.DaemonReads || after.PassthroughOpens != before.PassthroughOpens {
			t.Errorf("reader of a file open read-write should use the daemon: %+v", after)
		}
	})
	for _, flags := range []int{os.O_WRONLY, os.O_RDWR} {
		t.Run(fmt.Sprintf("writer (flags %#x) while reading", flags), func(t *testing.T) {
			r := openPassthrough(t, m, p)
			defer r.Close()
			busy := m.Server.Stats().WriteBusy
			w, err := os.OpenFile(p, flags, 0)
			if err == nil {
				w.Close()
			}
			wantErrno(t, "write open while a passthrough reader is open", err, syscall.ETXTBSY)
			if m.Server.Stats().WriteBusy <= busy {
				t.Error("WriteBusy not counted")
			}
		})
	}
	t.Run("read-write writer waits for a reader that is closing", func(t *testing.T) {
		r := openPassthrough(t, m, p)
		closed := make(chan struct{})
		time.AfterFunc(20*time.Millisecond, func() { r.Close(); close(closed) })
		w, err := os.OpenFile(p, os.O_RDWR, 0)
		<-closed
		if err != nil {
			t.Fatalf("write open while the reader closes: %v", err)
		}
		w.Close()
	})
	t.Run("read-write writer right after reader closed", func(t *testing.T) {
		// close(2) returns before the daemon sees RELEASE; the writer
		// must wait for it, not fail.
		for i := range 50 {
			r, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			w, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			w.Close()
		}
	})
}

// openPassthrough opens p for reading and makes sure the open got
// passthrough: it does not while the daemon still has a handle of the
// file, and a RELEASE may arrive only after close(2) returned.
func openPassthrough(t *testing.T, m *mounttest.Mount, p string) *os.File {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		before := m.Server.Stats().PassthroughOpens
		r, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if m.Server.Stats().PassthroughOpens > before {
			return r
		}
		r.Close()
		if time.Now().After(deadline) {
			t.Fatal("read opens do not get passthrough")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
