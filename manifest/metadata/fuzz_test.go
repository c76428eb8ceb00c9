package metadata

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
)

// FuzzDecode: no input panics, hangs or allocates without bound, whatever
// parses writes the same bytes again, and DecodeReferences agrees with
// Decode.
func FuzzDecode(f *testing.F) {
	for _, file := range flinkdata.MetadataFiles(f) {
		data, err := os.ReadFile(file.Path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	props := realProperties(f)
	for v := int32(2); v <= 7; v++ {
		f.Add(encode(f, everyHandle(v, props)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsDecode(t, data, Options{})
		m, err := decode(data, Options{KeepInline: true})
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := Encode(&out, m); err != nil {
			t.Fatalf("decoded but cannot encode: %v", err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("re-encoding differs at byte %d", firstDiff(out.Bytes(), data))
		}
		m.References("/x")
		m.Inline()
	})
}

// BenchmarkDecodeLargestReal parses the largest real _metadata.
func BenchmarkDecodeLargestReal(b *testing.B) {
	var data []byte
	for _, f := range flinkdata.MetadataFiles(b) {
		if f.Version == 1 {
			continue
		}
		d, err := os.ReadFile(f.Path)
		if err != nil {
			b.Fatal(err)
		}
		if len(d) > len(data) {
			data = d
		}
	}
	m, err := decode(data, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(data, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	reportPerHandle(b, data, countStreamHandles(m))
}

// BenchmarkDecode50kFiles parses a RocksDB-incremental-style checkpoint
// with 50,000 file handles.
func BenchmarkDecode50kFiles(b *testing.B) {
	m := synthetic(50000, 100)
	data := encode(b, m)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(data, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	reportPerHandle(b, data, 50000)
}

// BenchmarkDecodeReferences50kFiles decodes the references of what
// BenchmarkDecode50kFiles decodes, through a read buffer
// (DecodeReferences) and in place (DecodeReferencesBytes).
func BenchmarkDecodeReferences50kFiles(b *testing.B) {
	data := encode(b, synthetic(50000, 100))
	var v countVisitor
	b.Run("reader", func(b *testing.B) {
		benchDecodeReferences(b, len(data), func() error {
			_, err := DecodeReferences(bytes.NewReader(data), int64(len(data)), Options{}, &v)
			return err
		})
	})
	b.Run("bytes", func(b *testing.B) {
		benchDecodeReferences(b, len(data), func() error {
			_, err := DecodeReferencesBytes(data, Options{}, &v)
			return err
		})
	})
}

func benchDecodeReferences(b *testing.B, size int, decodeOnce func() error) {
	call := func() {
		if err := decodeOnce(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50000, "ns/handle")
	b.ReportMetric(testing.AllocsPerRun(3, call)/50000, "allocs/handle")
}

// reportPerHandle reports the allocations of one decode per file handle.
// Call it after the timed loop: b.Loop drops metrics reported before it.
func reportPerHandle(b *testing.B, data []byte, handles int) {
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := decode(data, Options{}); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(allocs/float64(handles), "allocs/handle")
}

func countStreamHandles(m *Metadata) int {
	n := 0
	m.walk(func(*StreamHandle, bool) { n++ }, nil)
	return n
}

// synthetic builds a checkpoint of subtasks incremental RocksDB handles
// referencing files files in shared/ in total.
func synthetic(files, subtasks int) *Metadata {
	const base = "file:/flink/checkpoints/0123456789abcdef0123456789abcdef"
	m := &Metadata{Version: 3, CheckpointID: 7, ChannelLayout: ChannelLayout112}
	op := Operator{IDLower: 1, IDUpper: 2, Parallelism: int32(subtasks), MaxParallelism: 32768, Coordinator: nil}
	per := files / subtasks
	n := 0
	for s := 0; s < subtasks; s++ {
		k := &KeyedHandle{Tag: TagIncrementalKeyGroupsV2, CheckpointID: 7, BackendID: fmt.Sprintf("backend-%d", s),
			KeyGroupStart: int32(s * 10), KeyGroupCount: 10, CheckpointedSize: 1,
			Meta: &StreamHandle{Tag: TagRelativeStream, Path: fmt.Sprintf("meta-%08d-0000-0000-0000-000000000000", s), Size: 100}, StateHandleID: "id"}
		for i := 0; i < per && n < files; i++ {
			k.Shared = append(k.Shared, NamedHandle{LocalName: fmt.Sprintf("%06d.sst", i),
				Handle: &StreamHandle{Tag: TagFileStream, Path: fmt.Sprintf("%s/shared/%08x-1111-2222-3333-444444444444", base, n), Size: int64(1000 + n)}})
			n++
		}
		op.Subtasks = append(op.Subtasks, Subtask{Index: int32(s), ManagedKeyed: k})
	}
	m.Operators = []Operator{op}
	return m
}
