package manifest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

func newVerifier(t testing.TB, maps []Mapping, roots ...string) *Verifier {
	t.Helper()
	res, err := NewResolver(maps, roots)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultVerifierConfig()
	cfg.Resolver = res
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			copyDir(t, filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()))
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func problemPaths(v *Verdict, kind ProblemKind) []string {
	var out []string
	for _, p := range v.Problems {
		if p.Kind == kind {
			out = append(out, p.Path)
		}
	}
	sort.Strings(out)
	return out
}

// TestRealCheckpointsVerifyComplete: every real directory with state files
// is complete, except bravo's, whose absolute references name files that
// were never published.
func TestRealCheckpointsVerifyComplete(t *testing.T) {
	for _, dir := range flinkdata.StateDirs(t) {
		rel, _ := filepath.Rel(flinkdata.Dir(t), dir)
		t.Run(rel, func(t *testing.T) {
			v := newVerifier(t, nil, dir).VerifyDir(context.Background(), dir)
			if strings.HasPrefix(rel, "bravo/") {
				if v.Complete {
					t.Fatal("bravo/checkpoints verified complete")
				}
				// 8 absolute handles outside the directory, named.
				if got := problemPaths(v, ProblemOutsideRoot); len(got) == 0 || !strings.HasPrefix(got[0], "file:/Users/") {
					t.Fatalf("bravo problems: %v", v.Problems)
				}
				return
			}
			if !v.Complete || v.Level != L1 {
				t.Fatalf("incomplete: %v", v.Problems)
			}
			if v.Manifest == nil || v.Files != len(v.Manifest.Files)+1 {
				t.Fatalf("files %d, manifest %v", v.Files, v.Manifest)
			}
		})
	}
}

// TestBravoMissingFilesAreNamed maps bravo's absolute URIs into the test
// data: the two files that were published are found, the rest are named as
// missing.
func TestBravoMissingFilesAreNamed(t *testing.T) {
	dir := filepath.Join(flinkdata.Dir(t), "bravo", "checkpoints")
	m, err := metadata.DecodeFile(filepath.Join(dir, MetadataFile), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The references point into the writer's test resources: map them onto
	// bravo/, where checkpoints/514157 and checkpoints/778401 were
	// published and the savepoint's files were not.
	const resources = "file:/Users/david.artiga/workspaces/platform/bravo/src/test/resources"
	for _, r := range m.References("") {
		if !r.Relative && !strings.HasPrefix(r.Path, resources+"/") {
			t.Fatalf("reference %s is not under %s", r.Path, resources)
		}
	}
	bravo := filepath.Dir(dir)
	v := newVerifier(t, []Mapping{{Prefix: resources, Dir: bravo}}).VerifyDir(context.Background(), dir)
	if v.Complete {
		t.Fatal("complete")
	}
	// bravo recorded size 0 for the two files it published (they hold
	// 1214 bytes) and they are not where the savepoint's six are.
	missing := problemPaths(v, ProblemMissing)
	mismatched := problemPaths(v, ProblemSizeMismatch)
	if len(missing) != 6 || len(mismatched) != 2 || len(v.Problems) != 8 {
		t.Fatalf("problems: %v", v.Problems)
	}
	for _, p := range missing {
		if !strings.Contains(p, "/savepoints/savepoint-cfec6e-dd56005c0832/") {
			t.Errorf("%s reported missing", p)
		}
	}
	if !strings.HasSuffix(mismatched[0], "/checkpoints/514157") || !strings.HasSuffix(mismatched[1], "/checkpoints/778401") {
		t.Errorf("size mismatches: %v", mismatched)
	}
}

// TestMutationsMakeIncomplete: deleting, truncating or growing any one
// referenced file of a real checkpoint makes it incomplete, naming the file.
func TestMutationsMakeIncomplete(t *testing.T) {
	for _, src := range flinkdata.StateDirs(t) {
		if strings.Contains(src, "bravo") {
			continue
		}
		rel, _ := filepath.Rel(flinkdata.Dir(t), src)
		t.Run(rel, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "chk")
			copyDir(t, src, dir)
			v := newVerifier(t, nil, dir)
			base := v.VerifyDir(context.Background(), dir)
			if !base.Complete {
				t.Fatalf("copy incomplete: %v", base.Problems)
			}
			for _, f := range base.Manifest.Files {
				path := filepath.Join(dir, f.Path)
				orig, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				mutations := []struct {
					name string
					do   func() error
					kind ProblemKind
				}{
					{"delete", func() error { return os.Remove(path) }, ProblemMissing},
					{"truncate", func() error { return os.Truncate(path, int64(len(orig))-1) }, ProblemSizeMismatch},
					{"append", func() error { return os.WriteFile(path, append(bytes.Clone(orig), 'x'), 0o644) }, ProblemSizeMismatch},
				}
				for _, m := range mutations {
					if m.name == "truncate" && len(orig) == 0 {
						continue
					}
					if err := m.do(); err != nil {
						t.Fatal(err)
					}
					got := v.VerifyDir(context.Background(), dir)
					if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != m.kind || got.Problems[0].Path != f.Path {
						t.Fatalf("%s %s: got %v", m.name, f.Path, got.Problems)
					}
					if err := os.WriteFile(path, orig, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if again := v.VerifyDir(context.Background(), dir); !again.Complete {
				t.Fatalf("restored copy incomplete: %v", again.Problems)
			}
		})
	}
}

// TestTruncatedMetadataIsAParseError: the smallest real checkpoint with
// state files at every offset, the others at a stride (the parser's own
// tests cover every offset of all of them).
func TestTruncatedMetadataIsAParseError(t *testing.T) {
	dirs := flinkdata.StateDirs(t)
	sort.Slice(dirs, func(i, j int) bool { return fileSize(t, dirs[i]) < fileSize(t, dirs[j]) })
	for i, src := range dirs {
		dir := filepath.Join(t.TempDir(), "chk-1")
		copyDir(t, src, dir)
		data, _ := os.ReadFile(filepath.Join(dir, MetadataFile))
		v := newVerifier(t, nil, dir)
		step := 1
		if i > 0 {
			step = 101
		}
		for n := 0; n < len(data); n += step {
			if err := os.WriteFile(filepath.Join(dir, MetadataFile), data[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			got := v.VerifyDir(context.Background(), dir)
			if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemParseError {
				t.Fatalf("%s cut at %d: %v", src, n, got.Problems)
			}
		}
	}
}

func fileSize(t testing.TB, dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestWrongCheckpointID(t *testing.T) {
	var src string
	for _, d := range flinkdata.StateDirs(t) {
		if !strings.Contains(d, "bravo") {
			src = d
			break
		}
	}
	dir := filepath.Join(t.TempDir(), "job", "chk-999999")
	copyDir(t, src, dir)
	v := newVerifier(t, nil, dir).VerifyDir(context.Background(), dir)
	if v.Complete || len(v.Problems) != 1 || v.Problems[0].Kind != ProblemWrongCheckpointID || v.Problems[0].Expected != 999999 {
		t.Fatalf("got %v", v.Problems)
	}
}

// writeMetadata writes a checkpoint whose only state is the given handles.
func writeMetadata(t testing.TB, dir string, id int64, handles ...*metadata.StreamHandle) {
	t.Helper()
	m := &metadata.Metadata{Version: 3, CheckpointID: id, ChannelLayout: metadata.ChannelLayout112}
	op := metadata.Operator{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 128}
	for i, h := range handles {
		op.Subtasks = append(op.Subtasks, metadata.Subtask{Index: int32(i), ManagedKeyed: &metadata.KeyedHandle{
			Tag: metadata.TagKeyGroupsV2, KeyGroupCount: 1, Offsets: []int64{0}, Delegate: h, StateHandleID: "x"}})
	}
	m.Operators = []metadata.Operator{op}
	var buf bytes.Buffer
	if err := metadata.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetadataFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEscapingReferencesAreNeverOpened: references that climb out of the
// roots are outside_root even though the file they name exists, and a
// symbolic link inside the root is not followed out of it.
func TestEscapingReferencesAreNeverOpened(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	secret := filepath.Join(top, "secret")
	if err := os.WriteFile(secret, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "job", "chk-5")
	if err := os.MkdirAll(filepath.Join(root, "job", "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "job", "shared", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(top, filepath.Join(root, "job", "dirlink")); err != nil {
		t.Fatal(err)
	}
	writeMetadata(t, dir, 5,
		&metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: "../../../secret", Size: 5},
		&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: secret, Size: 5},
		&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file://" + secret, Size: 5},
		&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "hdfs://namenode/flink/x", Size: 5},
		&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: filepath.Join(root, "job", "shared", "link"), Size: 5},
		&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: filepath.Join(root, "job", "dirlink", "secret"), Size: 5},
	)
	v := newVerifier(t, nil, root).VerifyDir(context.Background(), dir)
	if v.Complete {
		t.Fatal("complete")
	}
	outside := problemPaths(v, ProblemOutsideRoot)
	if len(outside) != 6 || len(v.Problems) != 6 {
		t.Fatalf("want 6 outside_root problems, got %v", v.Problems)
	}
}

func TestResolver(t *testing.T) {
	r, err := NewResolver([]Mapping{
		{Prefix: "hdfs://nn:8020/flink", Dir: "/replica/flink"},
		{Prefix: "hdfs://nn:8020/flink/ha", Dir: "/replica/ha"},
		{Prefix: "file:///data/ckpt", Dir: "/mnt/nas/ckpt"},
		{Prefix: "S3://bucket", Dir: "/mnt/s3"},
	}, []string{"/local"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"hdfs://nn:8020/flink/job/chk-1/x", "/replica/flink/job/chk-1/x"},
		{"hdfs://nn:8020/flink/ha/completedCheckpoint1", "/replica/ha/completedCheckpoint1"},
		{"file:/data/ckpt/job/shared/a", "/mnt/nas/ckpt/job/shared/a"},
		{"file:///data/ckpt/job/shared/a", "/mnt/nas/ckpt/job/shared/a"},
		{"file://localhost/data/ckpt/a", "/mnt/nas/ckpt/a"},
		{"/data/ckpt/a", "/mnt/nas/ckpt/a"},
		{"s3://bucket/k", "/mnt/s3/k"},
		{"/local/x/../y", "/local/y"},
		{"file:/local/z", "/local/z"},
	}
	for _, c := range cases {
		got, err := r.Local(c.in)
		if err != nil || got != c.want {
			t.Errorf("Local(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"hdfs://nn:8020/flinkx/a", // prefix only on a path boundary
		"hdfs://other/flink/a",
		"/etc/passwd",
		"file://remotehost/data/ckpt/a",
		"hdfs://nn:8020/flink/../../etc/passwd",
		"relative/path",
		"/local/../etc",
	} {
		if got, err := r.Local(bad); err == nil {
			t.Errorf("Local(%q) = %q, want outside_root", bad, got)
		}
	}
	if _, err := ParseMapping("nodir="); err == nil {
		t.Error("ParseMapping accepted an empty directory")
	}
	if m, err := ParseMapping("hdfs://a=b/c=/x"); err != nil || m.Prefix != "hdfs://a=b/c" || m.Dir != "/x" {
		t.Errorf("ParseMapping split at the wrong '=': %+v %v", m, err)
	}
}

// TestCacheTrustsFilesForMaxAge: with MaxAge, a file seen complete is not
// stat'ed again until MaxAge passes; a changed _metadata is parsed again.
func TestCacheTrustsFilesForMaxAge(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "job", "chk-1")
	state := filepath.Join(root, "job", "shared", "s1")
	os.MkdirAll(filepath.Dir(state), 0o755)
	os.WriteFile(state, []byte("abc"), 0o644)
	writeMetadata(t, dir, 1, &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: state, Size: 3})

	now := time.Unix(1000, 0)
	res, _ := NewResolver(nil, []string{root})
	v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: time.Minute, Workers: 1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.VerifyDir(context.Background(), dir); !got.Complete {
		t.Fatalf("first: %v", got.Problems)
	}
	os.Remove(state)
	now = now.Add(30 * time.Second)
	if got := v.VerifyDir(context.Background(), dir); !got.Complete {
		t.Fatalf("within MaxAge the file is trusted: %v", got.Problems)
	}
	now = now.Add(31 * time.Second)
	if got := v.VerifyDir(context.Background(), dir); got.Complete {
		t.Fatal("after MaxAge the deleted file must be found missing")
	}
	// A rewritten _metadata is parsed again: now it names checkpoint 2.
	writeMetadata(t, dir, 2)
	if got := v.VerifyDir(context.Background(), dir); got.Complete || got.Problems[0].Kind != ProblemWrongCheckpointID {
		t.Fatalf("rewritten metadata: %v", got.Problems)
	}
	v.Sweep(func(string) bool { return false })
	if len(v.cache.manifests) != 0 {
		t.Fatal("sweep kept manifests it was told to drop")
	}
}

func TestFindCheckpointsShapes(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"jobA/chk-3", "jobA/chk-10", "jobA/shared", "jobA/chk-x", "jobB/chk-1", "other"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "jobA", "chk-10", MetadataFile), nil, 0o644)

	shape, jobs, err := FindCheckpoints(root)
	if err != nil || shape != ShapeRoot || len(jobs) != 2 || jobs[0].ID != "jobA" || len(jobs[0].Checkpoints) != 2 || jobs[0].Checkpoints[1].ID != 10 {
		t.Fatalf("root: %v %v %+v", shape, err, jobs)
	}
	shape, jobs, err = FindCheckpoints(filepath.Join(root, "jobA"))
	if err != nil || shape != ShapeJob || jobs[0].ID != "jobA" || jobs[0].Checkpoints[0].ID != 3 {
		t.Fatalf("job: %v %v %+v", shape, err, jobs)
	}
	shape, jobs, err = FindCheckpoints(filepath.Join(root, "jobA", "chk-10"))
	if err != nil || shape != ShapeCheckpoint || jobs[0].ID != "jobA" || jobs[0].Checkpoints[0].ID != 10 {
		t.Fatalf("checkpoint: %v %v %+v", shape, err, jobs)
	}
	if _, _, err := FindCheckpoints(filepath.Join(root, "other")); err == nil {
		t.Fatal("empty directory searched without error")
	}
	for _, name := range []string{"chk-", "chk-01", "chk--1", "chk-+1", "chk-1a", "xchk-1"} {
		if _, ok := CheckpointIDFromDirName(name); ok {
			t.Errorf("%q taken for a checkpoint directory", name)
		}
	}
}
