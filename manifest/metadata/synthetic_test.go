package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func fileHandle(path string, size int64) *StreamHandle {
	return &StreamHandle{Tag: TagFileStream, Path: path, Size: size}
}

func inline(name string, data string) *StreamHandle {
	return &StreamHandle{Tag: TagByteStream, Name: name, Data: []byte(data), DataLen: int32(len(data))}
}

// everyHandle builds a metadata of the given version that uses every
// handle kind that version can hold.
func everyHandle(version int32, props []byte) *Metadata {
	const base = "hdfs://nn:8020/flink/checkpoints/0123456789abcdef0123456789abcdef"
	m := &Metadata{
		Version:      version,
		CheckpointID: 42,
		MasterStates: []MasterState{{Version: 1, Name: "hook \u00e9\U0001F600\x00", Data: []byte{1, 2, 3}}},
	}
	if version >= 4 {
		m.Properties = props
	}
	st := Subtask{
		Index:           0,
		Duration:        -1,
		ManagedOperator: &OperatorHandle{Tag: TagPartitionableOperator, States: []OperatorStateMeta{{Name: "union", Mode: 1, Offsets: []int64{0, 17}}, {Name: "split", Mode: 0}}, Delegate: &StreamHandle{Tag: TagRelativeStream, Path: "0c5a2d7f-op", Size: 34}},
		RawOperator:     &OperatorHandle{Tag: TagPartitionableOperator, States: []OperatorStateMeta{{Name: "raw", Mode: 2, Offsets: []int64{3}}}, Delegate: inline(base+"/chk-42/inline", "abc")},
		ManagedKeyed: &KeyedHandle{
			Tag: TagIncrementalKeyGroupsV2, CheckpointID: 42, BackendID: "e7a1b7d2-0000-4000-8000-000000000001",
			KeyGroupStart: 0, KeyGroupCount: 64, CheckpointedSize: 999,
			Meta:          &StreamHandle{Tag: TagRelativeStream, Path: "meta-uuid", Size: 100},
			Shared:        []NamedHandle{{LocalName: "000007.sst", Handle: fileHandle(base+"/shared/sst-uuid", 5000)}, {LocalName: "000008.sst", Handle: inline("tiny", "x")}},
			Private:       []NamedHandle{{LocalName: "MANIFEST-000004", Handle: fileHandle(base+"/chk-42/manifest-uuid", 120)}},
			StateHandleID: "state-handle-1",
		},
		RawKeyed: &KeyedHandle{Tag: TagKeyGroupsV2, KeyGroupStart: 64, KeyGroupCount: 2, Offsets: []int64{0, 10}, Delegate: fileHandle(base+"/chk-42/raw-uuid", 20), StateHandleID: "state-handle-2"},
	}
	if version >= 3 {
		if version >= 6 {
			st.InputChannels = []ChannelHandle{
				{Type: ChannelInput, SubtaskIndex: 0, A: 1, B: 2, Offsets: []int64{0, 8}, StateSize: 16, Delegate: fileHandle(base+"/chk-42/channel-uuid", 16)},
				{Type: ChannelMergedInput, SubtaskIndex: 0, StateSize: 16, Delegate: fileHandle(base+"/chk-42/channel-uuid", 16), MergedOffsets: []byte{9, 9, 9}},
			}
			st.OutputChannels = []ChannelHandle{
				{Type: ChannelOutput, SubtaskIndex: 0, A: 0, B: 3, StateSize: 0, Delegate: inline("out", "")},
				{Type: ChannelMergedOutput, SubtaskIndex: 0, StateSize: 4, Delegate: fileHandle(base+"/chk-42/out-uuid", 4), MergedOffsets: []byte{}},
			}
		} else {
			st.InputChannels = []ChannelHandle{{SubtaskIndex: 0, A: 1, B: 2, Offsets: []int64{0, 8}, StateSize: 16, Delegate: fileHandle(base+"/chk-42/channel-uuid", 16)}}
			st.OutputChannels = []ChannelHandle{{SubtaskIndex: 0, A: 0, B: 3, StateSize: 4, Delegate: fileHandle(base+"/chk-42/out-uuid", 4)}}
		}
	}
	if version >= 7 {
		st.RefCheckpointMarker, st.RefCheckpointID = 1, 40
	}
	changelog := Subtask{
		Index:    1,
		Duration: -1,
		ManagedKeyed: &KeyedHandle{
			Tag: TagChangelogV2, KeyGroupStart: 0, KeyGroupCount: 64, CheckpointedSize: 77,
			Materialized: []*KeyedHandle{
				{Tag: TagIncrementalKeyGroups, CheckpointID: 40, BackendID: "old-backend", KeyGroupStart: 0, KeyGroupCount: 64, Meta: inline("m", "meta"),
					Shared: []NamedHandle{{LocalName: "000001.sst", Handle: fileHandle(base+"/shared/old-sst", 7000)}}},
				{Tag: TagKeyGroups, KeyGroupStart: 0, KeyGroupCount: 1, Offsets: []int64{0}, Delegate: &StreamHandle{Tag: TagKeyGroups, KeyGroups: &KeyGroupOffsets{Start: 0, Offsets: []int64{5}}, Delegate: fileHandle("file:/tmp/nested", 9)}},
				{Tag: TagSavepointKeyGroups, KeyGroupStart: 0, KeyGroupCount: 1, Offsets: []int64{0}, Delegate: fileHandle("/abs/savepoint-file", 11)},
			},
			NonMaterialized: []*KeyedHandle{
				{Tag: TagChangelogByteIncrement, KeyGroupStart: 0, KeyGroupCount: 64, From: 1, To: 5, Changes: []StateChange{{KeyGroup: 3, Data: []byte("change"), DataLen: 6}, {KeyGroup: -1, Data: []byte{}, DataLen: 0}}, StateHandleID: "bytes-1"},
				{Tag: TagChangelogFileIncrement, KeyGroupStart: 0, KeyGroupCount: 64, Parts: []OffsetHandle{{Offset: 0, Handle: fileHandle("s3://bucket/dstl/f1", 300)}}, StateSize: 300, CheckpointedSize: 300, StateHandleID: "file-1"},
				{Tag: TagChangelogFileIncrementV2, KeyGroupStart: 0, KeyGroupCount: 64, Parts: []OffsetHandle{{Offset: 100, Handle: fileHandle("s3://bucket/dstl/f2", 400)}}, StateSize: 300, CheckpointedSize: 300, StateHandleID: "file-2", StorageIdentifier: "filesystem"},
			},
			MaterializationID: 3, CheckpointID: 42, StateHandleID: "changelog-1",
		},
		RawKeyed: &KeyedHandle{Tag: TagChangelog, KeyGroupStart: 0, KeyGroupCount: 64, MaterializationID: 2, StateHandleID: "changelog-0"},
	}
	if version >= 7 {
		changelog.RefCheckpointMarker = 0
	}
	fileMerging := Subtask{
		Index:               2,
		Duration:            -1,
		ManagedOperatorFlag: 1,
		ManagedOperator: &OperatorHandle{Tag: TagFileMergingOperator, States: []OperatorStateMeta{{Name: "s", Mode: 0, Offsets: []int64{0}}},
			TaskOwnedDir: base + "/taskowned/job_x_tm_y", SharedDir: base + "/shared/op_2_4_", EmptyFlag: 0,
			Delegate: &StreamHandle{Tag: TagSegmentFile, Offset: 128, Size: 64, Scope: 1, Path: base + "/shared/op_2_4_/physical-uuid", LogicalFileID: "logical-1"}},
		RawOperatorFlag: 1,
		RawOperator: &OperatorHandle{Tag: TagFileMergingOperator, TaskOwnedDir: base + "/taskowned/job_x_tm_y", SharedDir: base + "/shared/op_2_4_", EmptyFlag: 1,
			Delegate: &StreamHandle{Tag: TagEmptySegmentFile}},
		ManagedKeyed: &KeyedHandle{Tag: TagKeyGroupsV2, KeyGroupStart: 0, KeyGroupCount: 1, Offsets: []int64{0},
			Delegate: &StreamHandle{Tag: TagSegmentFile, Offset: 0, Size: 128, Scope: 0, Path: base + "/shared/op_2_4_/physical-uuid", LogicalFileID: "logical-0"}, StateHandleID: "fm"},
	}
	op := Operator{
		IDLower: 0x0123456789abcdef, IDUpper: -2, Parallelism: 4, MaxParallelism: 128,
		Subtasks: []Subtask{st, changelog, fileMerging},
	}
	if version == 2 {
		op.ChainLength = 1
		// Version 2 predates channel state and finished subtasks, and
		// may carry Flink 1.1 legacy state.
		op.Subtasks[0].LegacyFlag, op.Subtasks[0].Legacy = 1, inline("legacy", "old")
	} else {
		for i := range op.Subtasks {
			op.Subtasks[i].Duration = 0
		}
		op.Coordinator = inline("coordinator", "coord")
		op.Subtasks = append(op.Subtasks, Subtask{Index: 3, Finished: true})
	}
	if version >= 5 {
		op.Name, op.UID = "Source: Kafka \u2192 Map", "source-uid"
	}
	m.Operators = []Operator{op}
	if version >= 3 {
		m.Operators = append(m.Operators, Operator{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 1, FullyFinished: true})
	}
	if version >= 3 && version <= 5 {
		m.ChannelLayout = ChannelLayout112
	}
	// The handles above use the manual flags convention: a handle present
	// means flag 1.
	for i := range m.Operators {
		for j := range m.Operators[i].Subtasks {
			s := &m.Operators[i].Subtasks[j]
			if s.ManagedOperator != nil {
				s.ManagedOperatorFlag = 1
			}
			if s.RawOperator != nil {
				s.RawOperatorFlag = 1
			}
		}
	}
	return m
}

func encode(t testing.TB, m *Metadata) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, m); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

func decode(data []byte, opts Options) (*Metadata, error) {
	return Decode(bytes.NewReader(data), int64(len(data)), opts)
}

// TestEveryHandleRoundTrip writes and reads every handle kind in every
// version: the parsed form equals what was written, and writes the same
// bytes again.
func TestEveryHandleRoundTrip(t *testing.T) {
	props := realProperties(t)
	for v := int32(2); v <= 7; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			want := everyHandle(v, props)
			data := encode(t, want)
			got, err := decode(data, Options{KeepInline: true})
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded form differs:\n got %+v\nwant %+v", got, want)
			}
			if again := encode(t, got); !bytes.Equal(again, data) {
				t.Fatalf("second encoding differs at %d", firstDiff(again, data))
			}
			kinds := map[Kind]int{}
			for _, r := range got.References("/local/chk-42") {
				kinds[r.Kind]++
			}
			for _, k := range []Kind{KindExclusive, KindShared, KindSegment, KindDirectory, KindChangelog, KindOther} {
				if kinds[k] == 0 {
					t.Errorf("no reference of kind %s: %v", k, kinds)
				}
			}
			// Every strict prefix fails.
			for n := 0; n < len(data); n++ {
				if _, err := decode(data[:n], Options{}); err == nil {
					t.Fatalf("prefix of %d bytes parsed", n)
				}
			}
		})
	}
}

// TestNullProperties: the State Processor API's SavepointWriter writes
// Java null where CheckpointProperties stand, and Flink reads such a
// savepoint (readObject returns null): so does Decode, in every version
// with properties. Anything else in their place stays refused.
func TestNullProperties(t *testing.T) {
	null := []byte{0xac, 0xed, 0x00, 0x05, 0x70} // stream header, TC_NULL
	for v := int32(4); v <= 7; v++ {
		want := everyHandle(v, null)
		data := encode(t, want)
		got, err := decode(data, Options{KeepInline: true})
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if !bytes.Equal(got.Properties, null) || !reflect.DeepEqual(got, want) {
			t.Errorf("v%d: decoded %+v, want %+v", v, got, want)
		}
	}
	for name, props := range map[string][]byte{
		"two nulls":    {0xac, 0xed, 0x00, 0x05, 0x70, 0x70},
		"a string":     {0xac, 0xed, 0x00, 0x05, 0x74, 0x00, 0x01, 'x'},
		"no item":      {0xac, 0xed, 0x00, 0x05},
		"a bad header": {0xac, 0xed, 0x00, 0x04, 0x70},
	} {
		if _, err := decode(encode(t, everyHandle(5, props)), Options{}); err == nil {
			t.Errorf("%s in place of the properties: accepted", name)
		}
	}
}

func TestReferencesResolveAndClassify(t *testing.T) {
	m := everyHandle(4, realProperties(t))
	refs := m.References("/replica/job/chk-42")
	want := map[string]Reference{
		"0c5a2d7f-op": {Path: "0c5a2d7f-op", Resolved: "/replica/job/chk-42/0c5a2d7f-op", Relative: true, Size: 34, Kind: KindExclusive},
		"hdfs://nn:8020/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/sst-uuid": {
			Path: "hdfs://nn:8020/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/sst-uuid", Resolved: "hdfs://nn:8020/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/sst-uuid", Size: 5000, Kind: KindShared},
		"s3://bucket/dstl/f2": {Path: "s3://bucket/dstl/f2", Resolved: "s3://bucket/dstl/f2", Size: 401, Kind: KindChangelog}, // and the compression flag
		"/abs/savepoint-file": {Path: "/abs/savepoint-file", Resolved: "/abs/savepoint-file", Size: 11, Kind: KindOther},
	}
	found := 0
	for _, r := range refs {
		if w, ok := want[r.Path]; ok {
			found++
			if r != w {
				t.Errorf("reference %s: got %+v, want %+v", r.Path, r, w)
			}
		}
		if r.Kind == KindSegment && r.Path == "hdfs://nn:8020/flink/checkpoints/0123456789abcdef0123456789abcdef/shared/op_2_4_/physical-uuid" && r.Offset == 128 && r.MinLength() != 192 {
			t.Errorf("segment min length %d, want 192", r.MinLength())
		}
	}
	if found != len(want) {
		t.Errorf("found %d of %d expected references", found, len(want))
	}
	count, n := m.Inline()
	if count != 4 || n != int64(len("abc")+len("x")+len("meta")+len("coord")) {
		t.Errorf("inline: %d handles, %d bytes", count, n)
	}
}

func TestChannelLayout111IsDetected(t *testing.T) {
	m := everyHandle(3, nil)
	m.ChannelLayout = ChannelLayout111
	data := encode(t, m)
	got, err := decode(data, Options{KeepInline: true})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got.ChannelLayout != ChannelLayout111 {
		t.Fatalf("layout %v, want 1.11", got.ChannelLayout)
	}
	if !bytes.Equal(encode(t, got), data) {
		t.Fatal("1.11 layout does not round-trip")
	}
	if _, err := decode(data, Options{ChannelLayout: ChannelLayout112}); err == nil {
		t.Fatal("1.11 data parsed with the forced 1.12 layout")
	}
}

func header(version int32, id int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(Magic))
	b = binary.BigEndian.AppendUint32(b, uint32(version))
	return binary.BigEndian.AppendUint64(b, uint64(id))
}

func i32(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func i64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

// TestHostileInput: impossible counts and lengths fail before anything
// large is allocated; unknown tags and versions are named.
func TestHostileInput(t *testing.T) {
	op3 := func(b []byte) []byte { // operator header of version 3, no coordinator
		b = i64(i64(b, 1), 2)
		b = i32(i32(b, 1), 128)
		return append(b, TagNull)
	}
	subtask3 := func(b []byte) []byte { // subtask 0: no operator state
		b = i32(b, 1) // subtask count
		b = i32(b, 0) // index
		return i32(i32(b, 0), 0)
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"bad magic", []byte{1, 2, 3, 4, 0, 0, 0, 3}, ErrBadMagic},
		{"version 1", header(1, 1), ErrUnsupportedVersion},
		{"version 8", header(8, 1), ErrUnsupportedVersion},
		{"negative checkpoint id", i32(i32(header(3, -1), 0), 0), ErrInvalid},
		{"huge master count", i32(header(3, 1), 1<<30), ErrTruncated},
		{"negative operator count", i32(i32(header(3, 1), 0), -5), ErrInvalid},
		{"huge operator count", i32(i32(header(3, 1), 0), 0x7fffffff), ErrTruncated},
		{"master state length beyond file", i32(i32(i32(header(3, 1), 1), int32(masterStateMagic)), 1<<30), ErrTruncated},
		{"master state bad magic", i32(i32(i32(i32(header(3, 1), 1), 0x12345678), 4), 0), ErrInvalid},
		{"huge subtask count", i32(op3(i32(i32(header(3, 1), 0), 1)), 0x7ffffff0), ErrTruncated},
		{"huge key-group count", i32(i32(append(subtask3(op3(i32(i32(header(3, 1), 0), 1))), TagKeyGroupsV2), 0), 0x7fffffff), ErrTruncated},
		{"unknown keyed tag", append(subtask3(op3(i32(i32(header(3, 1), 0), 1))), 99), ErrUnknownTag},
		{"key-group range beyond the file", append(append(subtask3(op3(i32(i32(header(3, 1), 0), 1))), TagKeyGroups), 0), ErrTruncated},
		{"string longer than the file", binary.BigEndian.AppendUint16(i32(i32(header(5, 1), 0), 1), 0xffff), ErrTruncated},
		{"huge inline length", i32(binary.BigEndian.AppendUint16(append(i64(i64(i32(i32(header(3, 1), 0), 1), 1), 2), 0, 0, 0, 1, 0, 0, 0, 1, TagByteStream), 0), 0x7fffffff), ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			allocs := testing.AllocsPerRun(5, func() { _, err = decode(c.data, Options{KeepInline: true}) })
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%v is not a *ParseError", err)
			}
			if allocs > 40 {
				t.Errorf("%v allocations for a %d-byte input", allocs, len(c.data))
			}
		})
	}
}

// TestDeepNestingFails: nested key-group stream handles beyond the limit
// are refused, not followed until the stack runs out.
// TestUnsupportedVersionsSayWhat: a refused version says what wrote it
// and what to do.
func TestUnsupportedVersionsSayWhat(t *testing.T) {
	for v, want := range map[int32]string{
		0:  "unsupported metadata version 0 (Flink 1.1 savepoints; restore them with Flink 1.2 or 1.3",
		1:  "unsupported metadata version 1 (Flink 1.1/1.2 savepoints; restore them with Flink 1.3-1.10",
		8:  "unsupported metadata version 8 (written by a newer Flink, or not a _metadata file)",
		-3: "unsupported metadata version -3 (written by a newer Flink, or not a _metadata file)",
	} {
		_, err := decode(header(v, 1), Options{})
		if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), want) {
			t.Errorf("version %d: %v, want %q", v, err, want)
		}
	}
}

func TestDeepNestingFails(t *testing.T) {
	b := i32(i32(header(3, 1), 0), 1)
	b = i64(i64(b, 1), 2)
	b = i32(i32(b, 1), 128)
	b = append(b, TagNull) // coordinator
	b = i32(b, 1)          // subtasks
	b = i32(b, 0)          // index
	b = i32(i32(b, 0), 0)  // no operator state
	b = append(b, TagSavepointKeyGroups)
	b = i32(i32(b, 0), 0) // range of 0 key groups
	for range 100000 {
		b = append(b, TagKeyGroups)
		b = i32(i32(b, 0), 0)
	}
	_, err := decode(b, Options{})
	if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte("nested deeper")) {
		t.Fatalf("got %v, want the nesting error", err)
	}
}

func TestModifiedUTF8Strings(t *testing.T) {
	m := everyHandle(5, realProperties(t))
	m.Operators[0].Name = "nul\x00 bmp \u00fc\u4e2d astral \U0001F680"
	data := encode(t, m)
	got, err := decode(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Operators[0].Name != m.Operators[0].Name {
		t.Fatalf("name %q, want %q", got.Operators[0].Name, m.Operators[0].Name)
	}
	// Java writes U+0000 as C0 80 and U+1F680 as a surrogate pair.
	if !bytes.Contains(data, []byte{'n', 'u', 'l', 0xC0, 0x80}) || !bytes.Contains(data, []byte{0xED, 0xA0, 0xBD, 0xED, 0xBA, 0x80}) {
		t.Fatal("strings are not written as Java modified UTF-8")
	}
}
