package metadata

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sparseFile reads as a file of size bytes that holds head and then
// zeros: a _metadata extended with truncate, whose hole takes no disk.
type sparseFile struct {
	head []byte
	size int64
}

func (s sparseFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.size-off))
	clear(p[:n])
	if off < int64(len(s.head)) {
		copy(p[:n], s.head[off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

type nopVisitor struct{}

func (nopVisitor) Reference(*RawReference) {}
func (nopVisitor) Restart()                {}

// TestCountsDoNotAllocate: a count in _metadata is a claim that a sparse
// (or hostile) file of a few GB backs with zeros. Decode and
// DecodeReferences allocate for the elements they parse, not for the
// count: a parse that fails at the first element allocates little.
func TestCountsDoNotAllocate(t *testing.T) {
	be := binary.BigEndian
	u32 := func(b []byte, v uint32) []byte { return be.AppendUint32(b, v) }
	header := func() []byte {
		b := u32(u32(nil, uint32(Magic)), 3)
		return be.AppendUint64(b, 7) // checkpoint id
	}
	const claimed = 4 << 20
	zeroOperator := make([]byte, 24) // ids and parallelisms
	cases := []struct {
		name string
		head []byte
		what string // where the parse fails
	}{
		// The first master state has no magic.
		{"master states", u32(header(), claimed), "master state magic"},
		// The first operator's coordinator has an unknown tag.
		{"operators", append(append(u32(u32(header(), 0), claimed), zeroOperator...), 0xee), "stream handle tag"},
		// The first subtask's operator state has an unknown tag.
		{"subtasks", append(u32(u32(append(append(u32(u32(header(), 0), 1), zeroOperator...), TagNull), claimed), 0), 0, 0, 0, 1, 0xee), "tag"},
	}
	const size = 3 << 30
	const limit = 16 << 20
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := sparseFile{head: tc.head, size: size}
			for _, run := range []struct {
				name  string
				parse func() error
			}{
				{"Decode", func() error { _, err := Decode(f, size, Options{}); return err }},
				{"Decode KeepInline", func() error { _, err := Decode(f, size, Options{KeepInline: true}); return err }},
				{"DecodeReferences", func() error { _, err := DecodeReferences(f, size, Options{}, nopVisitor{}); return err }},
			} {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				err := run.parse()
				runtime.ReadMemStats(&after)
				var pe *ParseError
				if !errors.As(err, &pe) || pe.What != tc.what || pe.Offset > int64(len(tc.head))+8 {
					t.Errorf("%s: %v; want a parse error at %s right after the first %d bytes", run.name, err, tc.what, len(tc.head))
				}
				if n := after.TotalAlloc - before.TotalAlloc; n > limit {
					t.Errorf("%s allocated %d MiB for a parse that failed at byte %d (the count claims %d elements); want under %d MiB", run.name, n>>20, pe.Offset, claimed, limit>>20)
				}
			}
		})
	}
}

// TestDecodeFileRefusesWhatHasNoEnd: a FIFO at the path is refused at
// once, not waited for (a FIFO's open and reads wait for a writer).
func TestDecodeFileRefusesWhatHasNoEnd(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "_metadata")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := DecodeFile(fifo, Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("DecodeFile of a FIFO = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("DecodeFile of a FIFO hung past the deadline of 10s")
		// A writer that comes and goes lets the open return.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
	}
}
