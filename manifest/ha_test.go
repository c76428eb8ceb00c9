package manifest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

const haJob = "00112233445566778899aabbccddeeff"

// haSite is a site holding checkpoint 7 of one job, its HA file and the
// znode data that points to it.
type haSite struct {
	root, chk, haPath string
	znode             flinkha.StateHandle
	v                 *Verifier
}

func (s *haSite) write(t *testing.T, rel string, size int) {
	t.Helper()
	p := filepath.Join(s.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newHASite lays out a complete checkpoint: state files, _metadata, the HA
// file for field set fs, and the znode data.
func newHASite(t *testing.T, fs flinkha.FieldSet, modify func(*flinkha.CheckpointSpec)) *haSite {
	t.Helper()
	root := t.TempDir()
	s := &haSite{root: root, chk: filepath.Join(root, "checkpoints", haJob, "chk-7")}
	for rel, size := range map[string]int{
		"checkpoints/" + haJob + "/chk-7/keyed 0": 100,
		"checkpoints/" + haJob + "/chk-7/op":      50,
		"checkpoints/" + haJob + "/shared/sst ü":  300,
		"checkpoints/" + haJob + "/shared/merged": 40,
	} {
		s.write(t, rel, size)
	}
	abs := func(rel string) string { return "file:" + filepath.Join(root, "checkpoints", haJob, rel) }
	m := &metadata.Metadata{
		Version: 3, CheckpointID: 7, ChannelLayout: metadata.ChannelLayout112,
		Operators: []metadata.Operator{{
			IDLower: 1, IDUpper: 2, Parallelism: 2, MaxParallelism: 128,
			Subtasks: []metadata.Subtask{
				{
					Index: 0, ManagedOperatorFlag: 1,
					ManagedOperator: &metadata.OperatorHandle{
						Tag:      metadata.TagPartitionableOperator,
						States:   []metadata.OperatorStateMeta{{Name: "s", Offsets: []int64{0}}},
						Delegate: &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: "op", Size: 50},
					},
					ManagedKeyed: &metadata.KeyedHandle{
						Tag: metadata.TagKeyGroupsV2, KeyGroupCount: 1, Offsets: []int64{0}, StateHandleID: "k",
						Delegate: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: abs("chk-7/keyed 0"), Size: 100},
					},
				},
				{
					Index: 1,
					ManagedKeyed: &metadata.KeyedHandle{
						Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: 7, BackendID: "b", KeyGroupStart: 64, KeyGroupCount: 64,
						CheckpointedSize: 1, StateHandleID: "i",
						Meta: &metadata.StreamHandle{Tag: metadata.TagByteStream, Name: "meta", Data: []byte{1, 2}, DataLen: 2},
						Shared: []metadata.NamedHandle{
							{LocalName: "1.sst", Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: abs("shared/sst ü"), Size: 300}},
							{LocalName: "2.sst", Handle: &metadata.StreamHandle{Tag: metadata.TagSegmentFile, Path: abs("shared/merged"), Offset: 10, Size: 30}},
						},
					},
				},
			},
		}},
	}
	var buf bytes.Buffer
	if err := metadata.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.chk, MetadataFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := flinkha.CheckpointSpec{
		FieldSet: fs, JobID: haJob, CheckpointID: 7, Timestamp: 1000, CompletionTimestamp: 2000,
		ExternalPointer: "file:" + s.chk, MetadataSize: int64(buf.Len()), Metadata: m,
	}
	if modify != nil {
		modify(&spec)
	}
	ha, err := flinkha.EncodeCompletedCheckpoint(spec)
	if err != nil {
		t.Fatal(err)
	}
	s.haPath = filepath.Join(root, "ha", "default", "completedCheckpoint0a1b2c3d4e5f")
	if err := os.MkdirAll(filepath.Dir(s.haPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.haPath, ha, 0o644); err != nil {
		t.Fatal(err)
	}
	if s.znode, err = flinkha.NewStateHandle("file:"+s.haPath, int64(len(ha))); err != nil {
		t.Fatal(err)
	}
	s.v = newVerifier(t, nil, root)
	return s
}

// problem returns the only problem of v, failing unless there is exactly
// one and it has kind.
func oneProblem(t *testing.T, v *Verdict, kind ProblemKind) Problem {
	t.Helper()
	if v.Complete || v.Level != LevelNone {
		t.Fatalf("complete=%v level=%v, want an incomplete verdict", v.Complete, v.Level)
	}
	if len(v.Problems) != 1 || v.Problems[0].Kind != kind {
		t.Fatalf("problems %v, want one %s", v.Problems, kind)
	}
	return v.Problems[0]
}

func TestVerifyHAComplete(t *testing.T) {
	for _, fs := range []flinkha.FieldSet{flinkha.FieldSet115, flinkha.FieldSet15} {
		t.Run(string(fs), func(t *testing.T) {
			s := newHASite(t, fs, nil)
			ha, cc := s.v.VerifyHA(context.Background(), 7, s.znode)
			if !ha.Complete || ha.Level != L2 || len(ha.Problems) != 0 {
				t.Fatalf("HA verdict %v", ha)
			}
			if cc == nil || cc.CheckpointID != 7 || cc.JobID != haJob {
				t.Fatalf("checkpoint %+v", cc)
			}
			// _metadata and 4 state files; the HA file itself counts too.
			if ha.Files != 6 || ha.Manifest.Source != SourceHA || ha.Dir != s.chk {
				t.Errorf("files %d, source %s, dir %q", ha.Files, ha.Manifest.Source, ha.Dir)
			}
			pv := s.v.VerifyPointer(context.Background(), 7, s.znode)
			if !pv.Verdict.Complete || pv.Verdict.Level != L2 || !pv.HAFileReadable || pv.Checkpoint == nil {
				t.Fatalf("pointer verdict %v (readable %v)", pv.Verdict, pv.HAFileReadable)
			}
			if pv.Dir == nil || !pv.Dir.Complete || pv.Dir.Level != L1 || pv.Verdict.Dir != s.chk {
				t.Fatalf("directory verdict %v", pv.Dir)
			}
		})
	}
}

// A 1.4 HA file names no directory with _metadata: the HA part alone
// decides.
func TestVerifyPointerFieldSet14(t *testing.T) {
	s := newHASite(t, flinkha.FieldSet14, func(spec *flinkha.CheckpointSpec) { spec.Retention = flinkha.RetainOnCancellation })
	pv := s.v.VerifyPointer(context.Background(), 7, s.znode)
	if !pv.Verdict.Complete || pv.Verdict.Level != L2 || pv.Dir != nil {
		t.Fatalf("pointer verdict %v, dir %v", pv.Verdict, pv.Dir)
	}
	os.Remove(filepath.Join(s.root, "checkpoints", haJob, "shared", "sst ü"))
	pv = s.v.VerifyPointer(context.Background(), 7, s.znode)
	if pv.Verdict.Complete || pv.Verdict.Level != LevelNone || !pv.HAFileReadable {
		t.Fatalf("missing file: %v", pv.Verdict)
	}
}

func TestVerifyHAProblems(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong size", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		z := s.znode
		z.Size++
		ha, cc := s.v.VerifyHA(ctx, 7, z)
		p := oneProblem(t, ha, ProblemSizeMismatch)
		if cc != nil || p.Expected != z.Size || p.Found != z.Size-1 || !strings.HasSuffix(p.Path, "/completedCheckpoint0a1b2c3d4e5f") {
			t.Fatalf("problem %+v, checkpoint %v", p, cc)
		}
		pv := s.v.VerifyPointer(ctx, 7, z)
		if pv.HAFileReadable || pv.Verdict.Complete || pv.Verdict.Level != LevelNone || pv.Dir != nil {
			t.Fatalf("pointer verdict %v", pv.Verdict)
		}
	})
	t.Run("missing", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.Remove(s.haPath)
		ha, _ := s.v.VerifyHA(ctx, 7, s.znode)
		oneProblem(t, ha, ProblemMissing)
	})
	t.Run("directory instead of file", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.Remove(s.haPath)
		os.Mkdir(s.haPath, 0o755)
		ha, _ := s.v.VerifyHA(ctx, 7, s.znode)
		oneProblem(t, ha, ProblemMissing)
	})
	t.Run("another checkpoint", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		ha, cc := s.v.VerifyHA(ctx, 8, s.znode)
		p := oneProblem(t, ha, ProblemWrongCheckpointID)
		if cc != nil || p.Expected != 8 || p.Found != 7 {
			t.Fatalf("problem %+v, checkpoint %v", p, cc)
		}
	})
	t.Run("missing state file", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.Remove(filepath.Join(s.root, "checkpoints", haJob, "shared", "sst ü"))
		ha, cc := s.v.VerifyHA(ctx, 7, s.znode)
		p := oneProblem(t, ha, ProblemMissing)
		if cc == nil || p.Path != "file:"+filepath.Join(s.root, "checkpoints", haJob, "shared", "sst ü") {
			t.Fatalf("problem %+v, checkpoint %v", p, cc)
		}
		pv := s.v.VerifyPointer(ctx, 7, s.znode)
		// Readable HA file, but neither part is complete.
		if !pv.HAFileReadable || pv.Verdict.Complete || pv.Verdict.Level != LevelNone || len(pv.Verdict.Problems) != 2 {
			t.Fatalf("pointer verdict %v", pv.Verdict)
		}
	})
	t.Run("short segment", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		s.write(t, "checkpoints/"+haJob+"/shared/merged", 39)
		ha, _ := s.v.VerifyHA(ctx, 7, s.znode)
		if p := oneProblem(t, ha, ProblemSizeMismatch); p.Expected != 40 || p.Found != 39 {
			t.Fatalf("problem %+v", p)
		}
		s.write(t, "checkpoints/"+haJob+"/shared/merged", 1000) // segments need at least their end
		if ha, _ := s.v.VerifyHA(ctx, 7, s.znode); !ha.Complete {
			t.Fatalf("longer physical file: %v", ha)
		}
	})
	t.Run("metadata size", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, func(spec *flinkha.CheckpointSpec) { spec.MetadataSize++ })
		ha, _ := s.v.VerifyHA(ctx, 7, s.znode)
		p := oneProblem(t, ha, ProblemSizeMismatch)
		if p.Path != "file:"+filepath.Join(s.chk, MetadataFile) {
			t.Fatalf("problem %+v", p)
		}
		// The directory alone is fine: restorable with flink run -s only.
		pv := s.v.VerifyPointer(ctx, 7, s.znode)
		if pv.Verdict.Complete || pv.Verdict.Level != L1 || !pv.Dir.Complete {
			t.Fatalf("pointer verdict %v", pv.Verdict)
		}
	})
	t.Run("truncated, size recorded", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.Truncate(s.haPath, s.znode.Size/2)
		ha, _ := s.v.VerifyHA(ctx, 7, s.znode)
		oneProblem(t, ha, ProblemSizeMismatch)
	})
	t.Run("truncated, size unknown", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.Truncate(s.haPath, s.znode.Size/2)
		z := s.znode
		z.Size = -1
		ha, cc := s.v.VerifyHA(ctx, 7, z)
		p := oneProblem(t, ha, ProblemParseError)
		if cc != nil || p.Offset <= 0 || p.Offset > s.znode.Size/2 || !strings.Contains(p.Detail, "truncated") {
			t.Fatalf("problem %+v", p)
		}
	})
	t.Run("too large to read", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		if err := os.Truncate(s.haPath, MaxHAFileSize+1); err != nil { // sparse
			t.Fatal(err)
		}
		z := s.znode
		z.Size = -1
		ha, _ := s.v.VerifyHA(ctx, 7, z)
		if p := oneProblem(t, ha, ProblemParseError); !strings.Contains(p.Detail, "larger than") {
			t.Fatalf("problem %+v", p)
		}
	})
	t.Run("not an HA file", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		os.WriteFile(s.haPath, []byte("garbage"), 0o644)
		z := s.znode
		z.Size = 7
		ha, _ := s.v.VerifyHA(ctx, 7, z)
		if p := oneProblem(t, ha, ProblemParseError); p.Offset != 0 || !strings.Contains(p.Detail, "header") {
			t.Fatalf("problem %+v", p)
		}
	})
	t.Run("outside the roots", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		z, _ := flinkha.NewStateHandle("file:/etc/passwd", 10)
		ha, _ := s.v.VerifyHA(ctx, 7, z)
		oneProblem(t, ha, ProblemOutsideRoot)
		z, _ = flinkha.NewStateHandle("file:"+s.root+"/../escape", 10)
		ha, _ = s.v.VerifyHA(ctx, 7, z)
		oneProblem(t, ha, ProblemOutsideRoot)
	})
	t.Run("state file outside the roots", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, func(spec *flinkha.CheckpointSpec) {
			spec.Metadata.Operators[0].Subtasks[0].ManagedKeyed.Delegate.Path = "hdfs://nn/elsewhere"
		})
		ha, cc := s.v.VerifyHA(ctx, 7, s.znode)
		if p := oneProblem(t, ha, ProblemOutsideRoot); cc == nil || p.Path != "hdfs://nn/elsewhere" {
			t.Fatalf("problem %+v", p)
		}
	})
	t.Run("bad znode URI", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		ha, _ := s.v.VerifyHA(ctx, 7, flinkha.StateHandle{URI: "file:/a b", Size: 1})
		oneProblem(t, ha, ProblemParseError)
	})
	t.Run("directory of another checkpoint", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, func(spec *flinkha.CheckpointSpec) {
			spec.CheckpointID, spec.Metadata.CheckpointID = 8, 8
		})
		pv := s.v.VerifyPointer(ctx, 8, s.znode)
		if !pv.HA.Complete || pv.Dir == nil || pv.Verdict.Complete {
			t.Fatalf("pointer verdict %v", pv.Verdict)
		}
		if p := oneProblem(t, pv.Dir, ProblemWrongCheckpointID); p.Expected != 8 || p.Found != 7 {
			t.Fatalf("problem %+v", p)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := newHASite(t, flinkha.FieldSet115, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ha, _ := s.v.VerifyHA(cctx, 7, s.znode)
		if oneProblem(t, ha, ProblemIOError); !ha.Unknown {
			t.Fatal("a cancelled verification is not unknown")
		}
	})
}

// Files found complete are trusted for MaxAge, as in VerifyDir; the HA
// file itself is read every time.
func TestVerifyHAUsesFileCache(t *testing.T) {
	s := newHASite(t, flinkha.FieldSet115, nil)
	res, _ := NewResolver(nil, []string{s.root})
	cfg := DefaultVerifierConfig()
	cfg.Resolver, cfg.MaxAge = res, 1<<40
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ha, _ := v.VerifyHA(context.Background(), 7, s.znode); !ha.Complete {
		t.Fatal(ha)
	}
	os.Remove(filepath.Join(s.root, "checkpoints", haJob, "shared", "sst ü"))
	if ha, _ := v.VerifyHA(context.Background(), 7, s.znode); !ha.Complete {
		t.Fatalf("cached file re-checked: %v", ha)
	}
	os.Remove(s.haPath)
	ha, _ := v.VerifyHA(context.Background(), 7, s.znode)
	oneProblem(t, ha, ProblemMissing)
}

func TestL2Complete(t *testing.T) {
	complete := func(l Level) *Verdict { return &Verdict{Complete: true, Level: l} }
	tests := []struct {
		name string
		pv   *PointerVerdict
		want bool
	}{
		{"nil", nil, false},
		{"no verdict", &PointerVerdict{HAFileReadable: true}, false},
		{"L2", &PointerVerdict{HAFileReadable: true, Verdict: complete(L2)}, true},
		{"L3", &PointerVerdict{HAFileReadable: true, Verdict: complete(L3)}, true},
		{"only the directory", &PointerVerdict{HAFileReadable: true, Verdict: &Verdict{Level: L1}}, false},
		{"complete at L1", &PointerVerdict{HAFileReadable: true, Verdict: complete(L1)}, false},
		{"HA file unreadable", &PointerVerdict{Verdict: complete(L2)}, false},
	}
	for _, tc := range tests {
		if got := tc.pv.L2Complete(); got != tc.want {
			t.Errorf("%s: L2Complete() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
