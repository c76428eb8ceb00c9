package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
	"go.uber.org/goleak"
)

// binary is the ckptfs command built once for all tests of this package.
var binary string

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		runWriter(path) // a writer process of TestIntegration_FenceWithoutDaemon
	}
	// Every ckptfs command of these tests, mounts and takeovers alike.
	mounttest.UseLease(mounttest.TestLease)
	var err error
	if binary, err = mounttest.BuildCkptfs("ckptfs-cmd-test"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir := filepath.Dir(binary)
	// Fails the run when a goroutine outlives the tests.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// ckptfs runs the built binary and returns stdout, stderr and exit code.
func ckptfs(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// writeCheckpoint writes chk-<id> with one relative state file per size.
func writeCheckpoint(t *testing.T, jobDir string, id int64, sizes ...int) string {
	t.Helper()
	dir := filepath.Join(jobDir, fmt.Sprintf("chk-%d", id))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	op := metadata.Operator{IDLower: 7, IDUpper: 9, Parallelism: int32(len(sizes)), MaxParallelism: 128}
	for i, n := range sizes {
		name := fmt.Sprintf("state-%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		op.Subtasks = append(op.Subtasks, metadata.Subtask{Index: int32(i), ManagedKeyed: &metadata.KeyedHandle{
			Tag: metadata.TagKeyGroupsV2, KeyGroupStart: int32(i), KeyGroupCount: 1, Offsets: []int64{0},
			Delegate: &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: name, Size: int64(n)}, StateHandleID: name}})
	}
	m := &metadata.Metadata{Version: 3, CheckpointID: id, Operators: []metadata.Operator{op}, ChannelLayout: metadata.ChannelLayout112}
	var buf bytes.Buffer
	if err := metadata.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_metadata"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkpointsTree lays out three jobs: one whose newest checkpoint is
// complete, one whose newest is torn (an older one is complete), and one
// with no complete checkpoint.
func checkpointsTree(t *testing.T) string {
	root := t.TempDir()
	good := filepath.Join(root, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	writeCheckpoint(t, good, 1, 10, 20)
	writeCheckpoint(t, good, 2, 30)

	torn := filepath.Join(root, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	writeCheckpoint(t, torn, 3, 5)
	chk4 := writeCheckpoint(t, torn, 4, 5, 6)
	meta, _ := os.ReadFile(filepath.Join(chk4, "_metadata"))
	os.WriteFile(filepath.Join(chk4, "_metadata"), meta[:len(meta)-3], 0o644)
	os.MkdirAll(filepath.Join(torn, "chk-5"), 0o755) // triggered, nothing written yet

	none := filepath.Join(root, "cccccccccccccccccccccccccccccccc")
	chk7 := writeCheckpoint(t, none, 7, 8, 9)
	os.Remove(filepath.Join(chk7, "state-1"))
	return root
}

func TestVerifyTreeOfJobs(t *testing.T) {
	root := checkpointsTree(t)
	out, stderr, code := ckptfs(t, "verify", root)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"job aaaaaaaa", "newest complete checkpoint: 2", "newest complete checkpoint: 3", "newest complete checkpoint: none", "missing: state-1", "parse_error: _metadata"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = ckptfs(t, "verify", "-o", "json", root)
	if code != 2 {
		t.Fatalf("json exit %d", code)
	}
	var doc struct {
		Jobs []struct {
			JobID          string `json:"job_id"`
			Newest         *int64 `json:"newest"`
			NewestComplete *int64 `json:"newest_complete"`
			Checkpoints    []struct {
				ID       int64  `json:"id"`
				Complete bool   `json:"complete"`
				Level    string `json:"level"`
				Files    int    `json:"files"`
				Bytes    int64  `json:"bytes"`
				Problems []struct {
					Path    string `json:"path"`
					Problem string `json:"problem"`
					Detail  string `json:"detail"`
				} `json:"problems"`
			} `json:"checkpoints"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Jobs) != 3 {
		t.Fatalf("%d jobs", len(doc.Jobs))
	}
	a, b, c := doc.Jobs[0], doc.Jobs[1], doc.Jobs[2]
	if *a.Newest != 2 || *a.NewestComplete != 2 || !a.Checkpoints[0].Complete || a.Checkpoints[0].Level != "L1" || a.Checkpoints[0].Files != 3 || a.Checkpoints[0].Bytes != 30+int64(fileSizeOf(t, root, a.JobID, 1)) {
		t.Errorf("job a: %+v", a)
	}
	if *b.Newest != 5 || *b.NewestComplete != 3 || b.Checkpoints[1].Problems[0].Problem != "parse_error" || b.Checkpoints[2].Problems[0].Problem != "missing" || b.Checkpoints[2].Problems[0].Path != "_metadata" {
		t.Errorf("job b: %+v", b)
	}
	if c.NewestComplete != nil || c.Checkpoints[0].Problems[0].Problem != "missing" || c.Checkpoints[0].Problems[0].Path != "state-1" {
		t.Errorf("job c: %+v", c)
	}

	cases := []struct {
		args []string
		code int
	}{
		{[]string{"verify", "--job", a.JobID, root}, 0},
		{[]string{"verify", "--job", b.JobID, root}, 1},
		{[]string{"verify", "--job", b.JobID, "--checkpoint", "3", root}, 0},
		{[]string{"verify", "--job", b.JobID, "--checkpoint", "4", root}, 2},
		{[]string{"verify", filepath.Join(root, a.JobID)}, 0},
		{[]string{"verify", filepath.Join(root, b.JobID, "chk-4")}, 2},
		{[]string{"verify", "--job", "nosuchjob", root}, 3},
		{[]string{"verify", filepath.Join(root, "nonexistent")}, 3},
		{[]string{"verify"}, 3},
		{[]string{"verify", "-o", "yaml", root}, 3},
		{[]string{"verify", "--map", "nodir", root}, 3},
	}
	for _, tc := range cases {
		if _, stderr, code := ckptfs(t, tc.args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, stderr)
		}
	}
}

func fileSizeOf(t *testing.T, root, job string, id int) int {
	fi, err := os.Stat(filepath.Join(root, job, fmt.Sprintf("chk-%d", id), "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size())
}

func TestInspect(t *testing.T) {
	var dir string
	for _, d := range flinkdata.StateDirs(t) {
		if strings.Contains(d, "rocksdb-checkpoint") {
			dir = d
			break
		}
	}
	out, stderr, code := ckptfs(t, "inspect", "-o", "json", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		CheckpointID    *int64 `json:"checkpoint_id"`
		MetadataVersion int    `json:"metadata_version"`
		Operators       []struct {
			ID string `json:"id"`
		} `json:"operators"`
		Files []struct {
			Path     string `json:"path"`
			Size     int64  `json:"size"`
			Kind     string `json:"kind"`
			Relative bool   `json:"relative"`
		} `json:"files"`
		InlineBytes *int64 `json:"inline_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.CheckpointID == nil || doc.MetadataVersion < 3 || len(doc.Operators) == 0 || len(doc.Files) == 0 || doc.InlineBytes == nil {
		t.Fatalf("inspect json: %s", out)
	}
	for _, f := range doc.Files {
		fi, err := os.Stat(filepath.Join(dir, f.Path))
		if !f.Relative || f.Kind != "exclusive" || err != nil || fi.Size() != f.Size {
			t.Errorf("file %+v: %v", f, err)
		}
	}
	if out, _, code := ckptfs(t, "inspect", filepath.Join(dir, "_metadata")); code != 0 || !strings.Contains(out, "checkpoint ") || !strings.Contains(out, "operators (") {
		t.Errorf("text inspect: exit %d\n%s", code, out)
	}

	// A torn _metadata: exit 3, the offset on stderr.
	torn := filepath.Join(t.TempDir(), "_metadata")
	data, _ := os.ReadFile(filepath.Join(dir, "_metadata"))
	os.WriteFile(torn, data[:len(data)/2], 0o644)
	if _, stderr, code := ckptfs(t, "inspect", torn); code != 3 || !strings.Contains(stderr, "offset") {
		t.Errorf("torn: exit %d, stderr %q", code, stderr)
	}
	// Flink 1.2: the documented error.
	v1 := filepath.Join(flinkdata.Dir(t), "flink-1.6.0", "operatorstate", "nonKeyed-flink1.2")
	if _, stderr, code := ckptfs(t, "inspect", v1); code != 3 || !strings.Contains(stderr, "unsupported metadata version 1") {
		t.Errorf("version 1: exit %d, stderr %q", code, stderr)
	}
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	out, _, code := ckptfs(t, "verify", "--help")
	if code != 0 || !strings.Contains(out, "2  some job has no complete checkpoint") || !strings.Contains(out, "--map") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
