package javaser

import (
	"fmt"
	"slices"
	"testing"
)

// haLikeStream encodes a graph shaped like a completedCheckpoint HA file:
// operators → subtasks → lists of key-group handles, each wrapping a
// FileStateHandle → Path → URI; handles objects in total.
func haLikeStream(tb testing.TB, handles int) []byte {
	f := newFlinkClasses()
	jdk := &f.jdk
	kgh := NewClassDesc("org.apache.flink.runtime.state.KeyGroupsStateHandle", 1, SCSerializable,
		ObjField("groupRangeOffsets", "Lorg/apache/flink/runtime/state/KeyGroupRangeOffsets;"),
		ObjField("stateHandle", "Lorg/apache/flink/runtime/state/StreamStateHandle;"))
	offsets := NewClassDesc("org.apache.flink.runtime.state.KeyGroupRangeOffsets", 1, SCSerializable,
		ObjField("offsets", "[J"), PrimField('I', "startKeyGroup"))
	subtask := NewClassDesc("org.apache.flink.runtime.checkpoint.OperatorSubtaskState", 1, SCSerializable,
		ObjField("managedKeyedState", "Ljava/util/List;"), PrimField('J', "stateSize"))
	checkpoint := NewClassDesc("org.apache.flink.runtime.checkpoint.CompletedCheckpoint", -8360248179615702014, SCSerializable,
		PrimField('J', "checkpointID"), PrimField('J', "timestamp"), ObjField("operatorStates", "Ljava/util/Map;"),
		ObjField("externalPointer", "Ljava/lang/String;"))
	const operators, subtasks = 10, 100
	perSubtask := max(1, handles/(operators*subtasks))
	var ops []MapEntry
	n := 0
	for op := range operators {
		var subs []MapEntry
		for st := range subtasks {
			var list []Value
			for range perSubtask {
				longs, err := jdk.Array([]int64{int64(n), int64(n) + 100})
				if err != nil {
					tb.Fatal(err)
				}
				uri := fmt.Sprintf("hdfs://nn:8020/flink/checkpoints/job/shared/%08x-%04d", n, st)
				list = append(list, NewObject(kgh).
					With("groupRangeOffsets", NewObject(offsets).With("offsets", longs).With("startKeyGroup", st)).
					With("stateHandle", f.fileStateHandle(uri, int64(n*1000))))
				n++
			}
			subs = append(subs, MapEntry{jdk.Integer(int32(st)),
				NewObject(subtask).With("managedKeyedState", jdk.ArrayList(list...)).With("stateSize", int64(len(list)))})
		}
		ops = append(ops, MapEntry{jdk.UUID(int64(op), 1), jdk.HashMap(subs...)})
	}
	s := NewStream(NewObject(checkpoint).With("checkpointID", 42).With("timestamp", 1700000000000).
		With("operatorStates", jdk.HashMap(ops...)).With("externalPointer", "hdfs://nn:8020/flink/checkpoints/job/chk-42"))
	data, err := Encode(s)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func benchStreams(b *testing.B) []struct {
	name string
	data []byte
} {
	props := metadataProperties(b)
	largest := slices.MaxFunc(props, func(x, y propertiesStream) int { return len(x.data) - len(y.data) })
	return []struct {
		name string
		data []byte
	}{
		{"largest-properties", largest.data},
		{"ha-like-10000-handles", haLikeStream(b, 10000)},
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, bc := range benchStreams(b) {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(bc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, bc := range benchStreams(b) {
		s, err := Decode(bc.data)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The synthetic HA-like stream is itself a decoding test: every handle is
// found again.
func TestHALikeStream(t *testing.T) {
	data := haLikeStream(t, 10000)
	s, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range s.Objects() {
		if o.ClassName() == "org.apache.flink.runtime.state.filesystem.FileStateHandle" {
			n++
		}
	}
	if n != 10000 {
		t.Errorf("found %d FileStateHandles, want 10000", n)
	}
}
