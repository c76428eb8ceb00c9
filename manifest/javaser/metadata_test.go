package javaser

import (
	"bytes"
	"testing"
)

// Every _metadata of version >= 4 ends with a Java stream holding exactly
// one CheckpointProperties object (docs/flink-formats.md §3.2, "Properties").
func TestMetadataProperties(t *testing.T) {
	streams := metadataProperties(t)
	shapes := map[string]int{}
	for _, p := range streams {
		s, err := Decode(p.data)
		if err != nil {
			t.Errorf("%s: %v", p.path, err)
			continue
		}
		o, err := s.Object()
		if err != nil {
			t.Errorf("%s: %v", p.path, err)
			continue
		}
		if got, want := o.ClassName(), "org.apache.flink.runtime.checkpoint.CheckpointProperties"; got != want {
			t.Errorf("%s: class %q, want %q", p.path, got, want)
		}
		if got := o.SerialVersionUID(); got != 2 {
			t.Errorf("%s: serialVersionUID %d, want 2", p.path, got)
		}
		if _, err := FieldAs[bool](o, "discardSubsumed"); err != nil {
			t.Errorf("%s: %v", p.path, err)
		}
		typ, err := FieldAs[*Object](o, "checkpointType")
		if err != nil || typ == nil {
			t.Errorf("%s: checkpointType: %v, %v", p.path, typ, err)
		} else {
			shapes[typ.ClassName()]++
		}
		out, err := Encode(s)
		if err != nil {
			t.Errorf("%s: encode: %v", p.path, err)
		} else if !bytes.Equal(out, p.data) {
			t.Errorf("%s: re-encoded stream differs from the original", p.path)
		}
	}
	t.Logf("%d properties streams; checkpoint types: %v", len(streams), shapes)
}
