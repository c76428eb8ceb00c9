package javaser

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode checks that Decode never panics or hangs, that its errors are
// well-formed, and that whatever it accepts is written back byte for byte.
//
// Seeds: the JDK-written streams committed in testdata/fuzz/FuzzDecode
// (kept equal to the JDK's output by TestJDK), the CheckpointProperties
// streams of every real _metadata of version >= 4, and the grammar cases.
func FuzzDecode(f *testing.F) {
	seen := map[string]bool{}
	for _, p := range metadataProperties(f) {
		if !seen[string(p.data)] {
			seen[string(p.data)] = true
			f.Add(p.data)
		}
	}
	for _, c := range grammarCases() {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			if de.Offset < 0 || de.Offset > int64(len(data)) {
				t.Fatalf("offset %d outside the %d-byte input: %v", de.Offset, len(data), err)
			}
			n := 0
			for _, kind := range []error{ErrTruncated, ErrMalformed, ErrTooDeep, ErrUnsupported, ErrTooLarge} {
				if errors.Is(err, kind) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error in %d categories: %v", n, err)
			}
			return
		}
		out, err := Encode(s)
		if err != nil {
			t.Fatalf("Encode of a decoded stream: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("Encode does not reproduce the input:\n%s", diffBytes(out, data))
		}
		if err := s.Walk(func(Value) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
}
