package flinkha

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

const (
	testJob     = "0123456789abcdeffedcba9876543210"
	testPointer = "file:/flink/checkpoints/0123456789abcdeffedcba9876543210/chk-7"
)

func fileH(p string, size int64) *metadata.StreamHandle {
	return &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: p, Size: size}
}

func relH(p string, size int64) *metadata.StreamHandle {
	return &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: p, Size: size}
}

func inlineH(name string, data []byte) *metadata.StreamHandle {
	return &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: name, Data: data, DataLen: int32(len(data))}
}

// sampleMetadata is a checkpoint with every kind of handle the encoder
// supports, paths with spaces, escapes and non-ASCII characters included.
func sampleMetadata(id int64) *metadata.Metadata {
	shared := "hdfs://namenode:8020/flink/checkpoints/" + testJob + "/shared"
	return &metadata.Metadata{
		Version:      4,
		CheckpointID: id,
		MasterStates: []metadata.MasterState{{Version: 1, Name: "hook", Data: []byte{1, 2, 3}}},
		Operators: []metadata.Operator{
			{
				IDLower: 0x1111, IDUpper: -0x2222, Parallelism: 4, MaxParallelism: 128,
				Coordinator: inlineH("coordinator", []byte("coordinator state")),
				Subtasks: []metadata.Subtask{
					{
						Index:               0,
						ManagedOperatorFlag: 1,
						ManagedOperator: &metadata.OperatorHandle{
							Tag: metadata.TagPartitionableOperator,
							States: []metadata.OperatorStateMeta{
								{Name: "split", Mode: 0, Offsets: []int64{0, 10}},
								{Name: "union ü", Mode: 1, Offsets: []int64{20}},
								{Name: "broadcast", Mode: 2},
							},
							Delegate: relH("op state 0", 64),
						},
						RawOperatorFlag: 1,
						RawOperator: &metadata.OperatorHandle{
							Tag:      metadata.TagPartitionableOperator,
							Delegate: inlineH(testPointer+"/inline-op", []byte{7, 7, 7}),
						},
						ManagedKeyed: &metadata.KeyedHandle{
							Tag: metadata.TagKeyGroupsV2, KeyGroupStart: 0, KeyGroupCount: 2, Offsets: []int64{0, 40},
							Delegate: fileH(testPointer+"/keyed 0 ü%20#?", 100), StateHandleID: "kg-0",
						},
						RawKeyed: &metadata.KeyedHandle{
							Tag: metadata.TagKeyGroups, KeyGroupStart: 5, KeyGroupCount: 0,
							Delegate: fileH("file:/elsewhere/raw-keyed", -1),
						},
						InputChannels: []metadata.ChannelHandle{
							{SubtaskIndex: 0, A: 0, B: 1, Offsets: []int64{0, 5}, StateSize: 9, Delegate: relH("channels", 30)},
							{SubtaskIndex: 0, A: 1, B: 0, Offsets: []int64{300}, StateSize: 20, Delegate: relH("channels", 30)},
						},
						OutputChannels: []metadata.ChannelHandle{
							{SubtaskIndex: 0, A: 2, B: 3, StateSize: 1, Delegate: inlineH("out", []byte{1})},
						},
					},
					{
						Index: 1,
						ManagedKeyed: &metadata.KeyedHandle{
							Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: id, BackendID: "2b2b6b5c-8f2b-4f3e-9d60-0ae2f6c1b5a1",
							KeyGroupStart: 32, KeyGroupCount: 32, CheckpointedSize: 77,
							Meta: relH("rocks meta", 12),
							Shared: []metadata.NamedHandle{
								{LocalName: "000011.sst", Handle: fileH(shared+"/9f0e 1", 4096)},
								{LocalName: "000012.sst", Handle: inlineH(shared+"/tiny", []byte("tiny"))},
							},
							Private: []metadata.NamedHandle{
								{LocalName: "MANIFEST-000004", Handle: relH("manifest", 33)},
								{LocalName: "CURRENT", Handle: &metadata.StreamHandle{
									Tag: metadata.TagSegmentFile, Path: shared + "/op_1_2_/merged", Offset: 100, Size: 16,
									Scope: 1, LogicalFileID: "logical-7",
								}},
							},
							StateHandleID: "inc-1",
						},
						RawKeyed: &metadata.KeyedHandle{
							Tag: metadata.TagIncrementalKeyGroups, CheckpointID: id - 1, BackendID: "pre-FLINK-6964 backend",
							KeyGroupStart: 64, KeyGroupCount: 1, Meta: fileH(shared+"/old meta", 5),
						},
					},
					{
						Index: 2,
						ManagedKeyed: &metadata.KeyedHandle{
							Tag: metadata.TagSavepointKeyGroups, KeyGroupStart: 96, KeyGroupCount: 1, Offsets: []int64{0},
							Delegate: &metadata.StreamHandle{
								Tag: metadata.TagKeyGroups, KeyGroups: &metadata.KeyGroupOffsets{Start: 96, Offsets: []int64{8}},
								Delegate: fileH("file:/savepoints/savepoint-012345-6789abcdef01/nested", 200),
							},
						},
					},
					{Index: 3, Finished: true},
				},
			},
			{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 1, FullyFinished: true},
			{IDLower: 3, IDUpper: 4, Parallelism: 2, MaxParallelism: 2},
		},
	}
}

func sampleSpec(fs FieldSet) CheckpointSpec {
	spec := CheckpointSpec{
		FieldSet: fs, JobID: testJob, CheckpointID: 7, Timestamp: 1_700_000_000_000, CompletionTimestamp: 1_700_000_001_500,
		ExternalPointer: testPointer, MetadataSize: 4242, Retention: RetainOnCancellation,
		Metadata: sampleMetadata(7),
	}
	return spec
}

// normPath is a Flink path as Path.toString() prints it.
func normPath(t testing.TB, p string) string {
	t.Helper()
	u, err := PathToURI(p)
	if err != nil {
		t.Fatalf("PathToURI(%q): %v", p, err)
	}
	s, err := URIToPath(u)
	if err != nil {
		t.Fatalf("URIToPath(%q): %v", u, err)
	}
	return s
}

// view prints a decoded HA file in the form HaTool prints what the JDK
// read, sorted, without the properties line.
func view(cc *CompletedCheckpoint) []string {
	out := []string{
		"job " + cc.JobID,
		fmt.Sprintf("id %d", cc.CheckpointID),
		fmt.Sprintf("timestamp %d", cc.Timestamp),
		fmt.Sprintf("completion %d", cc.CompletionTimestamp),
		"pointer " + cc.ExternalPointer,
		fmt.Sprintf("inline %d", cc.InlineBytes),
	}
	if cc.Metadata != nil {
		out = append(out, "metadata "+refLine(*cc.Metadata))
	}
	for _, f := range cc.Files {
		if f.Dir {
			out = append(out, "dir "+f.Path)
		} else {
			out = append(out, "file "+refLine(f))
		}
	}
	slices.Sort(out)
	return out
}

func refLine(f FileRef) string {
	kind := "file"
	if f.Segment {
		kind = "segment"
	}
	return fmt.Sprintf("%s\t%s\t%d\t%d\t%s", f.Class, f.Path, f.Size, f.Offset, kind)
}

// specView is the view DecodeCompletedCheckpoint must give for an HA file
// encoded from spec: the metadata's file set with relative handles made
// absolute against the external pointer.
func specView(t testing.TB, spec CheckpointSpec) []string {
	t.Helper()
	pointer := ""
	if spec.ExternalPointer != "" {
		pointer = normPath(t, spec.ExternalPointer)
	}
	_, inline := spec.Metadata.Inline()
	out := []string{
		"job " + spec.JobID,
		fmt.Sprintf("id %d", spec.CheckpointID),
		fmt.Sprintf("timestamp %d", spec.Timestamp),
		fmt.Sprintf("completion %d", spec.CompletionTimestamp),
		"pointer " + pointer,
		fmt.Sprintf("inline %d", inline),
	}
	if pointer != "" {
		meta := spec.MetadataPath
		if meta == "" {
			meta = pointer + "/_metadata"
		}
		line := refLine(FileRef{Class: classFileStateHandle, Path: normPath(t, meta), Size: spec.MetadataSize})
		if spec.FieldSet == FieldSet14 {
			out = append(out, "file "+line)
		} else {
			out = append(out, "metadata "+line)
		}
	}
	seen := map[string]bool{}
	for _, r := range spec.Metadata.References(pointer) {
		ref := FileRef{Class: classFileStateHandle, Path: normPath(t, r.Resolved), Size: r.Size}
		if r.Kind == metadata.KindDirectory {
			// A file-merging operator handle's managed directory.
			if line := "dir " + ref.Path; !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
			continue
		}
		switch {
		case r.Relative:
			ref.Class = classRelativeFile
		case r.Kind == metadata.KindSegment:
			ref.Class, ref.Offset, ref.Segment = classSegmentFile, r.Offset, true
		case r.Kind == metadata.KindChangelog && r.Size > 0:
			ref.Size-- // the handle records the file less its compression flag byte
		}
		line := "file " + refLine(ref)
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

// diffLines describes how two sorted line lists differ.
func diffLines(got, want []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "\n  missing: %q", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "\n  extra:   %q", l)
		}
	}
	if b.Len() == 0 && !slices.Equal(got, want) {
		fmt.Fprintf(&b, "\n  same lines, different multiplicity:\n  got  %q\n  want %q", got, want)
	}
	return b.String()
}
