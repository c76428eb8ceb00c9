package javaser

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// allocated returns the bytes and objects f allocates.
func allocated(f func()) (bytes, objects uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// Length prefixes far beyond the input fail before anything is allocated
// for them.
func TestHugeLengthsFailFast(t *testing.T) {
	arrayOf := func(class string, n uint32) []byte {
		return stream(tcArray, classDesc(class, 1, SCSerializable, tcNull), u32(n), u64(0))
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{"2^31-1 longs", arrayOf("[J", 0x7FFFFFFF)},
		{"2^31-1 doubles", arrayOf("[D", 0x7FFFFFFF)},
		{"2^31-1 bytes", arrayOf("[B", 0x7FFFFFFF)},
		{"2^31-1 booleans", arrayOf("[Z", 0x7FFFFFFF)},
		{"2^31-1 objects", arrayOf("[Ljava.lang.Object;", 0x7FFFFFFF)},
		{"long string of 2^62 bytes", stream(tcLongString, u64(1<<62), "abc")},
		{"string of 65535 bytes", stream(tcString, u16(0xFFFF), "abc")},
		{"block of 2^31-1 bytes", stream(tcBlockDataLong, u32(0x7FFFFFFF), "abc")},
		{"32767 fields", stream(tcObject, tcClassDesc, utf("C"), u64(1), SCSerializable, u16(0x7FFF), 'I', utf("x"))},
		{"65535 proxy interfaces", stream(tcObject, tcProxyClassDesc, u32(65535), utf("I"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.in) > 64 {
				t.Fatalf("input of %d bytes; these cases should be tiny", len(tc.in))
			}
			var err error
			b, n := allocated(func() { _, err = Decode(tc.in) })
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("Decode = %v, want ErrTruncated", err)
			}
			if b > 16<<10 || n > 64 {
				t.Errorf("allocated %d bytes in %d objects for a %d-byte input", b, n, len(tc.in))
			}
			if avg := testing.AllocsPerRun(20, func() { Decode(tc.in) }); avg > 40 {
				t.Errorf("%v allocations per run", avg)
			}
		})
	}
}

// Memory use is bounded by a small multiple of the input size, also for
// inputs built to make many small values from few bytes. Retained memory
// is what an attacker can pin; total allocation adds the garbage of
// growing slices.
func TestAllocationProportionalToInput(t *testing.T) {
	const maxLive, maxTotal = 32, 128 // bytes per input byte
	repeat := func(n int, parts ...any) []any {
		var out []any
		for range n {
			out = append(out, parts...)
		}
		return out
	}
	// A hierarchy of 300 classes without fields, then many objects of it:
	// each costs 6 bytes and must not cost 300 class data entries.
	chain := raw(tcNull)
	for i := range 300 {
		chain = classDesc("C"+string(rune('A'+i%26))+string(rune('a'+i/26)), 1, SCSerializable, chain)
	}
	refObj := []any{tcObject, tcReference, u32(baseWireHandle)}
	tests := []struct {
		name string
		in   []byte
	}{
		{"objects of a deep class without data", stream(append([]any{tcObject, chain}, repeat(100000, refObj...)...)...)},
		{"null elements", stream(append([]any{tcArray, classDesc("[Ljava.lang.Object;", 1, SCSerializable, tcNull), u32(200000)}, repeat(200000, tcNull)...)...)},
		{"empty strings", stream(repeat(200000, tcString, u16(0))...)},
		{"empty blocks", stream(repeat(200000, tcBlockData, 0)...)},
		{"resets", stream(repeat(400000, tcReset)...)},
		{"references", stream(append([]any{tcString, u16(0)}, repeat(100000, tcReference, u32(baseWireHandle))...)...)},
		{"boolean fields", stream(append([]any{tcObject, classDesc("B", 1, SCSerializable, tcNull, primFieldDesc('Z', "a"), primFieldDesc('Z', "b")), 0, 1},
			repeat(50000, tcObject, tcReference, u32(baseWireHandle), 1, 0)...)...)},
		{"class descriptors", stream(repeat(30000, tcClass, classDesc("K", 1, SCSerializable, tcNull))...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after, kept runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s, err := Decode(tc.in)
			runtime.ReadMemStats(&after)
			runtime.GC()
			runtime.ReadMemStats(&kept)
			runtime.KeepAlive(s)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			n := float64(len(tc.in))
			if live := float64(kept.HeapAlloc) - float64(before.HeapAlloc); live/n > maxLive {
				t.Errorf("result holds %.0f bytes for %d input bytes: %.1f per byte, want at most %d", live, len(tc.in), live/n, maxLive)
			}
			if total := float64(after.TotalAlloc - before.TotalAlloc); total/n > maxTotal {
				t.Errorf("allocated %.0f bytes for %d input bytes: %.1f per byte, want at most %d", total, len(tc.in), total/n, maxTotal)
			}
			t.Logf("live %.1f, total %.1f bytes per input byte", (float64(kept.HeapAlloc)-float64(before.HeapAlloc))/n, float64(after.TotalAlloc-before.TotalAlloc)/n)
		})
	}
}

// nestedArrays returns n Object[] nested in each other, the innermost
// holding a null.
func nestedArrays(n int) []byte {
	parts := []any{tcArray, classDesc("[Ljava.lang.Object;", 1, SCSerializable, tcNull), u32(1)}
	for range n - 1 {
		parts = append(parts, tcArray, tcReference, u32(baseWireHandle), u32(1))
	}
	return stream(append(parts, tcNull)...)
}

func TestNestingLimit(t *testing.T) {
	if _, err := Decode(nestedArrays(DefaultMaxDepth / 2)); err != nil {
		t.Fatalf("%d nested arrays: %v", DefaultMaxDepth/2, err)
	}
	deep := nestedArrays(100000)
	_, err := Decode(deep)
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrTooDeep) {
		t.Fatalf("100000 nested arrays: %v, want ErrTooDeep", err)
	}
	if de.Offset < 4 || de.Offset > 64*DefaultMaxDepth {
		t.Errorf("depth error at offset %d, want it near level %d", de.Offset, DefaultMaxDepth)
	}

	d := Decoder{MaxDepth: 20}
	if _, err := d.Decode(nestedArrays(10)); err != nil {
		t.Errorf("10 levels with MaxDepth 20: %v", err)
	}
	if _, err := d.Decode(nestedArrays(20)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("20 levels with MaxDepth 20: %v, want ErrTooDeep", err)
	}
	d = Decoder{MaxDepth: 1 << 20}
	s, err := d.Decode(deep)
	if err != nil {
		t.Fatalf("100000 levels with MaxDepth 2^20: %v", err)
	}
	if out, err := Encode(s); err != nil || !bytes.Equal(out, deep) {
		t.Errorf("re-encoding 100000 levels: %v", err)
	}
	n := 0
	if err := s.Walk(func(Value) error { n++; return nil }); err != nil || n != 100001 { // arrays + their class
		t.Errorf("Walk visited %d values (%v), want 100001", n, err)
	}

	// A superclass chain read inline nests as well.
	chain := raw(tcNull)
	for range 10000 {
		chain = classDesc("S", 1, SCSerializable, chain)
	}
	if _, err := Decode(stream(tcObject, chain)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("superclass chain of 10000: %v, want ErrTooDeep", err)
	}
}

// realStreams returns JDK-written seeds and the largest properties stream,
// each holding a single top-level object.
func realStreams(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, name := range []string{"flinkznode", "custom", "hierarchy", "externalizable", "backrefs", "proxy", "nested", "hashmap"} {
		b, err := os.ReadFile(seedFile(name))
		if err != nil {
			t.Fatal(err)
		}
		data, err := parseSeed(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out["jdk-"+name] = data
	}
	if _, err := os.Stat(flinkTestdataDir()); err == nil || !testing.Short() {
		props := metadataProperties(t)
		largest := slices.MaxFunc(props, func(a, b propertiesStream) int { return len(a.data) - len(b.data) })
		out[filepath.ToSlash(largest.path)] = largest.data
	}
	return out
}

// Every strict prefix of a stream holding one object is truncated: never
// success (except the bare header, an empty stream), never a panic.
func TestTruncationAtEveryOffset(t *testing.T) {
	for name, data := range realStreams(t) {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(data); err != nil {
				t.Fatalf("full stream: %v", err)
			}
			for n := range len(data) {
				s, err := Decode(data[:n])
				if n == 4 {
					if err != nil || len(s.Contents) != 0 {
						t.Errorf("header alone: %v, %v", s, err)
					}
					continue
				}
				var de *DecodeError
				if !errors.As(err, &de) || !errors.Is(err, ErrTruncated) {
					t.Fatalf("prefix of %d bytes: %v, want ErrTruncated", n, err)
				}
				if de.Offset > int64(n) {
					t.Fatalf("prefix of %d bytes: error offset %d beyond the input", n, de.Offset)
				}
			}
		})
	}
}

// A superclass chain made of back references does not nest, so the depth
// limit does not bound it: decoding and encoding must stay linear in it.
func TestLongSuperclassChainOfReferences(t *testing.T) {
	const classes = 30000
	for _, withField := range []bool{false, true} {
		var fields [][]byte
		if withField {
			fields = [][]byte{primFieldDesc('B', "b")}
		}
		// Class i is handle i; its superclass is class i-1.
		parts := []any{tcClass, classDesc("C", 1, SCSerializable, tcNull, fields...)}
		for i := 1; i < classes; i++ {
			parts = append(parts, tcClass, classDesc("C", 1, SCSerializable, raw(tcReference, u32(baseWireHandle+2*(i-1))), fields...))
		}
		if withField { // one object of the last class: one byte field per class
			parts = append(parts, tcObject, tcReference, u32(baseWireHandle+2*(classes-1)), make([]byte, classes))
		} else { // an object of every class: 6 bytes each, however deep its class
			for i := range classes {
				parts = append(parts, tcObject, tcReference, u32(baseWireHandle+2*i))
			}
		}
		in := stream(parts...)
		s, err := Decode(in)
		if err != nil {
			t.Fatalf("withField=%v: Decode: %v", withField, err)
		}
		out, err := Encode(s)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("withField=%v: Encode: %v", withField, err)
		}
	}
}
