package flinkha

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

var fieldSets = []FieldSet{FieldSet115, FieldSet15, FieldSet14}

func encodeSpec(t testing.TB, spec CheckpointSpec) []byte {
	t.Helper()
	data, err := EncodeCompletedCheckpoint(spec)
	if err != nil {
		t.Fatalf("EncodeCompletedCheckpoint: %v", err)
	}
	return data
}

func decodeOK(t testing.TB, data []byte) *CompletedCheckpoint {
	t.Helper()
	cc, err := DecodeCompletedCheckpoint(data)
	if err != nil {
		t.Fatalf("DecodeCompletedCheckpoint: %v", err)
	}
	return cc
}

// Round trip of every field set: the decoded HA file gives back the ids,
// times, pointer, metadata handle and exactly the metadata's file set.
func TestCompletedCheckpointRoundTrip(t *testing.T) {
	for _, fs := range fieldSets {
		for _, ret := range []Retention{RetainNever, RetainOnFailure, RetainOnCancellation} {
			spec := sampleSpec(fs)
			spec.Retention = ret
			if fs == FieldSet14 && ret == RetainNever {
				spec.ExternalPointer = ""
				spec.Metadata = withoutRelative(spec.Metadata)
			}
			t.Run(string(fs)+"/"+[]string{"never", "failure", "cancellation"}[ret], func(t *testing.T) {
				cc := decodeOK(t, encodeSpec(t, spec))
				if cc.FieldSet != fs {
					t.Errorf("field set %q, want %q", cc.FieldSet, fs)
				}
				if got, want := view(cc), specView(t, spec); !slices.Equal(got, want) {
					t.Errorf("decoded view differs:%s", diffLines(got, want))
				}
				if (cc.Metadata == nil) != (fs == FieldSet14) {
					t.Errorf("metadata handle %v for field set %s", cc.Metadata, fs)
				}
			})
		}
	}
}

// withoutRelative replaces relative handles (which need an external
// pointer) by absolute ones.
func withoutRelative(m *metadata.Metadata) *metadata.Metadata {
	var fix func(h *metadata.StreamHandle)
	fix = func(h *metadata.StreamHandle) {
		for ; h != nil; h = h.Delegate {
			if h.Tag == metadata.TagRelativeStream {
				h.Tag, h.Path = metadata.TagFileStream, "file:/flink/checkpoints/old/chk-7/"+h.Path
			}
		}
	}
	for i := range m.Operators {
		for j := range m.Operators[i].Subtasks {
			st := &m.Operators[i].Subtasks[j]
			for _, o := range []*metadata.OperatorHandle{st.ManagedOperator, st.RawOperator} {
				if o != nil {
					fix(o.Delegate)
				}
			}
			for _, k := range []*metadata.KeyedHandle{st.ManagedKeyed, st.RawKeyed} {
				if k == nil {
					continue
				}
				fix(k.Delegate)
				fix(k.Meta)
				for _, nh := range append(slices.Clone(k.Shared), k.Private...) {
					fix(nh.Handle)
				}
			}
			for _, c := range append(slices.Clone(st.InputChannels), st.OutputChannels...) {
				fix(c.Delegate)
			}
		}
	}
	return m
}

// The field set is told apart by the descriptor's fields, and the layout
// written for each is the one of its Flink version.
func TestFieldSetLayouts(t *testing.T) {
	want := map[FieldSet][]string{
		FieldSet115: {"checkpointID", "completionTimestamp", "timestamp", "externalPointer", "job", "masterHookStates",
			"metadataHandle", "operatorStates", "props", "restoredProps", "storageLocation"},
		FieldSet15: {"checkpointID", "duration", "timestamp", "externalPointer", "job", "masterHookStates",
			"metadataHandle", "operatorStates", "props", "storageLocation"},
		FieldSet14: {"checkpointID", "duration", "timestamp", "externalPointer", "externalizedMetadata", "job",
			"masterHookStates", "operatorStates", "props"},
	}
	for _, fs := range fieldSets {
		s, err := javaser.Decode(encodeSpec(t, sampleSpec(fs)))
		if err != nil {
			t.Fatal(err)
		}
		root, _ := s.Object()
		var names []string
		for _, f := range root.Class.Fields {
			names = append(names, f.Name)
		}
		if !slices.Equal(names, want[fs]) {
			t.Errorf("%s: fields %v, want %v", fs, names, want[fs])
		}
		if fs == FieldSet15 || fs == FieldSet14 {
			d, _ := javaser.FieldAs[int64](root, "duration")
			if d != 1500 {
				t.Errorf("%s: duration %d, want 1500", fs, d)
			}
		}
	}
}

// Every real _metadata whose handles the encoder supports becomes an HA
// file that decodes to exactly its file set.
func TestRealMetadataRoundTrip(t *testing.T) {
	n := 0
	for _, f := range flinkdata.MetadataFiles(t) {
		m, err := metadata.DecodeFile(f.Path, metadata.Options{KeepInline: true})
		if err != nil {
			continue // format versions this parser rejects are tested in metadata
		}
		spec := CheckpointSpec{
			JobID: testJob, CheckpointID: m.CheckpointID, Timestamp: 1, CompletionTimestamp: 2,
			ExternalPointer: "file:" + filepath.Dir(f.Path), MetadataSize: 1, Metadata: m,
		}
		data, err := EncodeCompletedCheckpoint(spec)
		if err != nil {
			if !strings.Contains(err.Error(), "not supported") {
				t.Errorf("%s: %v", f.Rel, err)
			}
			continue
		}
		n++
		cc, err := DecodeCompletedCheckpoint(data)
		if err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		if got, want := view(cc), specView(t, spec); !slices.Equal(got, want) {
			t.Errorf("%s: decoded view differs:%s", f.Rel, diffLines(got, want))
		}
	}
	if n < 100 {
		t.Fatalf("only %d real metadata files encoded", n)
	}
}

// Encoding is deterministic: handles without a stored StateHandleID get
// name-based ids, not random ones.
func TestEncodeDeterministic(t *testing.T) {
	a := encodeSpec(t, sampleSpec(FieldSet115))
	b := encodeSpec(t, sampleSpec(FieldSet115))
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of one spec differ")
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*CheckpointSpec)
		want   string
	}{
		{"bad job id", func(s *CheckpointSpec) { s.JobID = "xyz" }, "32 hex digits"},
		{"negative id", func(s *CheckpointSpec) { s.CheckpointID = -1; s.Metadata.CheckpointID = -1 }, "must not be negative"},
		{"metadata of another checkpoint", func(s *CheckpointSpec) { s.Metadata.CheckpointID = 8 }, "metadata of checkpoint 8"},
		{"no pointer", func(s *CheckpointSpec) { s.ExternalPointer = "" }, "ExternalPointer is required"},
		{"bad pointer", func(s *CheckpointSpec) { s.ExternalPointer = "1x:/a" }, "scheme"},
		{"unknown field set", func(s *CheckpointSpec) { s.FieldSet = "0.9" }, "unknown field set"},
		{"unknown retention", func(s *CheckpointSpec) { s.Retention = 7 }, "unknown retention"},
		{"in-memory changes not kept", func(s *CheckpointSpec) {
			s.Metadata.Operators[2].Subtasks = []metadata.Subtask{{ManagedKeyed: &metadata.KeyedHandle{Tag: metadata.TagChangelogByteIncrement, KeyGroupCount: 1,
				Changes: []metadata.StateChange{{KeyGroup: 0, DataLen: 3}}}}}
		}, "KeepInline"},
		{"file merging operator without a directory", func(s *CheckpointSpec) {
			s.Metadata.Operators[2].Subtasks = []metadata.Subtask{{ManagedOperator: &metadata.OperatorHandle{
				Tag: metadata.TagFileMergingOperator, SharedDir: "file:/flink/shared/x", EmptyFlag: 1,
				Delegate: &metadata.StreamHandle{Tag: metadata.TagEmptySegmentFile}}}}
		}, "task-owned directory"},
		{"inline bytes not kept", func(s *CheckpointSpec) {
			s.Metadata.Operators[0].Coordinator = &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: "c", DataLen: 5}
		}, "KeepInline"},
		{"file coordinator", func(s *CheckpointSpec) { s.Metadata.Operators[0].Coordinator = fileH("/x", 1) }, "coordinator state"},
		{"offsets and count differ", func(s *CheckpointSpec) { s.Metadata.Operators[0].Subtasks[0].ManagedKeyed.KeyGroupCount = 3 }, "2 offsets for 3 key groups"},
		{"merged channels without a stream", func(s *CheckpointSpec) {
			s.Metadata.Operators[0].Subtasks[0].InputChannels[0].Type = metadata.ChannelMergedInput
			s.Metadata.Operators[0].Subtasks[0].InputChannels[0].Delegate = nil
		}, "merged channel state handle without a stream"},
		{"bad mode", func(s *CheckpointSpec) { s.Metadata.Operators[0].Subtasks[0].ManagedOperator.States[0].Mode = 3 }, "distribution mode 3"},
		{"bad scope", func(s *CheckpointSpec) {
			s.Metadata.Operators[0].Subtasks[1].ManagedKeyed.Private[1].Handle.Scope = 2
		}, "scope 2"},
		{"1.4 retained without pointer", func(s *CheckpointSpec) {
			s.FieldSet, s.ExternalPointer, s.Metadata = FieldSet14, "", withoutRelative(s.Metadata)
		}, "externalizes exactly the retained"},
		{"1.4 relative without pointer", func(s *CheckpointSpec) {
			s.FieldSet, s.ExternalPointer, s.Retention = FieldSet14, "", RetainNever
		}, "relative handle without ExternalPointer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := sampleSpec(FieldSet115)
			tc.modify(&spec)
			_, err := EncodeCompletedCheckpoint(spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A 1.4 checkpoint that was not externalized has neither pointer nor
// metadata; one that was reports its metadata file among the files.
func TestFieldSet14Externalized(t *testing.T) {
	spec := sampleSpec(FieldSet14)
	spec.MetadataPath = "file:/flink/ext/checkpoint_metadata-0a1b2c3d4e5f"
	cc := decodeOK(t, encodeSpec(t, spec))
	if cc.Metadata != nil || cc.ExternalPointer != normPath(t, testPointer) {
		t.Fatalf("metadata %v, pointer %q", cc.Metadata, cc.ExternalPointer)
	}
	if !slices.ContainsFunc(cc.Files, func(f FileRef) bool { return f.Path == spec.MetadataPath && f.Size == 4242 }) {
		t.Fatalf("externalized metadata missing from %v", cc.Files)
	}
}

// Relative handles are absolute in the HA file: the writing site's chk-N
// joined with the relative path.
func TestRelativeHandlesAbsolute(t *testing.T) {
	cc := decodeOK(t, encodeSpec(t, sampleSpec(FieldSet115)))
	var rel []string
	for _, f := range cc.Files {
		if f.Class == classRelativeFile {
			rel = append(rel, f.Path)
		}
	}
	slices.Sort(rel)
	want := []string{testPointer + "/channels", testPointer + "/manifest", testPointer + "/op state 0", testPointer + "/rocks meta"}
	if !slices.Equal(rel, want) {
		t.Fatalf("relative handles %q, want %q", rel, want)
	}
}

// Decoding fails clearly for streams that are not an HA file.
func TestDecodeCompletedCheckpointRejects(t *testing.T) {
	good := encodeSpec(t, sampleSpec(FieldSet115))
	znode, err := EncodeStateHandle(StateHandle{URI: "file:/ha/completedCheckpoint1", Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	root := func(modify func(*javaser.Object)) []byte {
		s, err := javaser.Decode(good)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := s.Object()
		modify(o)
		b, err := javaser.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var jdk javaser.JDK
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"not a stream", []byte("completedCheckpoint"), "bad stream header"},
		{"a znode", znode, "want org.apache.flink.runtime.checkpoint.CompletedCheckpoint"},
		{"two objects", append(slices.Clone(good), good[4:]...), "2 top-level items"},
		{"trailing byte", append(slices.Clone(good), 0x70), "2 top-level items"},
		{"null", []byte{0xAC, 0xED, 0, 5, 0x70}, "want an object"},
		{"other suid", root(func(o *javaser.Object) { o.Class.SerialVersionUID = 1 }), "serialVersionUID 1"},
		{"unknown fields", root(func(o *javaser.Object) { o.Class.Fields[1].Name = "finishedAt" }), "unknown CompletedCheckpoint field set"},
		{"job null", root(func(o *javaser.Object) { o.Set("job", nil) }), "job is not a JobID"},
		{"job of other class", root(func(o *javaser.Object) { o.Set("job", jdk.UUID(1, 2)) }), "job is not a JobID"},
		{"pointer not a string", root(func(o *javaser.Object) { o.Set("externalPointer", jdk.UUID(1, 2)) }), "externalPointer"},
		{"bad URI", root(func(o *javaser.Object) {
			meta, _ := javaser.FieldAs[*javaser.Object](o, "metadataHandle")
			p, _ := javaser.FieldAs[*javaser.Object](meta, "filePath")
			u, _ := javaser.FieldAs[*javaser.Object](p, "uri")
			u.Set("string", "file:/a b")
		}), "invalid URI"},
		{"negative size", root(func(o *javaser.Object) {
			meta, _ := javaser.FieldAs[*javaser.Object](o, "metadataHandle")
			meta.Set("stateSize", int64(-2))
		}), "size -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := DecodeCompletedCheckpoint(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v", cc)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Every strict prefix of an HA file fails, and so does every single-byte
// change that breaks the grammar; no input panics.
func TestCompletedCheckpointTruncation(t *testing.T) {
	for _, fs := range fieldSets {
		t.Run(string(fs), func(t *testing.T) {
			t.Parallel()
			spec := sampleSpec(fs)
			if fs != FieldSet115 { // the state below CompletedCheckpoint is the same
				spec.Metadata.Operators = spec.Metadata.Operators[1:]
			}
			data := encodeSpec(t, spec)
			for i := range data {
				if cc, err := DecodeCompletedCheckpoint(data[:i]); err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded: %+v", i, len(data), cc)
				} else if i >= 4 && !errors.Is(err, javaser.ErrTruncated) {
					t.Fatalf("prefix of %d bytes: %v, want ErrTruncated", i, err)
				}
			}
		})
	}
}

// Length prefixes far beyond the input fail at once, without allocating
// for them.
func TestCompletedCheckpointHugeLengths(t *testing.T) {
	data := encodeSpec(t, sampleSpec(FieldSet115))
	// The external pointer string, claiming 65535 bytes.
	i := bytes.Index(data, []byte(testPointer))
	if i < 3 || data[i-3] != 0x74 {
		t.Fatalf("pointer string not found")
	}
	mod := slices.Clone(data)
	mod[i-2], mod[i-1] = 0xFF, 0xFF
	if _, err := DecodeCompletedCheckpoint(mod); !errors.Is(err, javaser.ErrTruncated) {
		t.Fatalf("pointer of 65535 bytes: %v, want ErrTruncated", err)
	}
	// A long[] claiming 2^31-1 elements in a few bytes.
	huge := []byte{0xAC, 0xED, 0, 5, 0x75, 0x72, 0, 2, '[', 'J', 0x78, 0x20, 0x04, 0xB5, 0x12, 0xB1, 0x75, 0x93,
		2, 0, 0, 0x78, 0x70, 0x7F, 0xFF, 0xFF, 0xFF}
	var err error
	allocs := testing.AllocsPerRun(10, func() { _, err = DecodeCompletedCheckpoint(huge) })
	if !errors.Is(err, javaser.ErrTruncated) {
		t.Fatalf("huge array: %v, want ErrTruncated", err)
	}
	if allocs > 100 {
		t.Fatalf("%v allocations for a %d-byte input", allocs, len(huge))
	}
}

// TestCheckpointProperties114: real Flink 1.14.6 writes CompletedCheckpoint
// with 1.15's fields (completionTimestamp, no restoredProps) but
// CheckpointProperties as 1.5 declares them: checkpointType the enum
// CheckpointType, no unclaimed (the harvest in integration/realflink/
// testdata/1.14.6). The encoder writes that for release 1.14, and 1.15's
// SnapshotType with unclaimed for release 1.15.
func TestCheckpointProperties114(t *testing.T) {
	props := func(t *testing.T, ha []byte) (*javaser.Object, []string) {
		t.Helper()
		s, err := javaser.Decode(ha)
		if err != nil {
			t.Fatal(err)
		}
		root, err := s.Object()
		if err != nil {
			t.Fatal(err)
		}
		p, err := javaser.FieldAs[*javaser.Object](root, "props")
		if err != nil || p == nil {
			t.Fatalf("props: %v", err)
		}
		var fields []string
		for _, f := range p.Class.Fields {
			sig := string(f.Code)
			if f.Type != nil {
				sig = f.Type.Value
			}
			fields = append(fields, f.Name+" "+sig)
		}
		return p, fields
	}
	real, err := filepath.Glob(filepath.Join("..", "..", "integration", "realflink", "testdata", "1.14.6", "storage", "ha", "*", "completedCheckpoint*"))
	if err != nil || len(real) == 0 {
		t.Fatalf("no HA file of real Flink 1.14.6 (%v)", err)
	}
	data, err := os.ReadFile(real[0])
	if err != nil {
		t.Fatal(err)
	}
	if cc := decodeOK(t, data); cc.FieldSet != FieldSet1150 {
		t.Fatalf("real 1.14.6 HA file has field set %s, want %s", cc.FieldSet, FieldSet1150)
	}
	realProps, realFields := props(t, data)
	spec := sampleSpec(FieldSet1150)
	spec.Release = "1.14"
	spec.Metadata.Version = 3
	emuProps, emuFields := props(t, encodeSpec(t, spec))
	if !slices.Equal(emuFields, realFields) || emuProps.SerialVersionUID() != realProps.SerialVersionUID() {
		t.Errorf("release 1.14: CheckpointProperties %v (serialVersionUID %d), real 1.14.6 %v (%d)", emuFields, emuProps.SerialVersionUID(), realFields, realProps.SerialVersionUID())
	}
	for _, p := range []*javaser.Object{realProps, emuProps} {
		if ct, err := javaser.FieldAs[*javaser.Enum](p, "checkpointType"); err != nil || ct == nil || ct.ClassName() != classCheckpointType || ct.Name() != "CHECKPOINT" {
			t.Errorf("checkpointType %v, %v; want the enum %s.CHECKPOINT", ct, err, classCheckpointType)
		}
	}
	spec.Release = "1.15"
	if _, fields := props(t, encodeSpec(t, spec)); !slices.Contains(fields, "unclaimed Z") {
		t.Errorf("release 1.15: CheckpointProperties %v, want 1.15's with unclaimed", fields)
	}
}
