package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInspectRefusesSymlinks: inspect never reads a file through a
// symbolic link, and an error shows at most a short hex prefix of the
// file.
func TestInspectRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", "root:$6$s3cr3t-hash-never-shown:19000:0:99999:7:::\n")
	secretHex := hex.EncodeToString([]byte("root"))
	chk := filepath.Join(dir, "job", "chk-1")
	if err := os.MkdirAll(chk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(chk, "_metadata")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{chk, filepath.Join(chk, "_metadata")} {
		_, stderr, code := ckptfs(t, "inspect", path)
		if code != exitUsage || !strings.Contains(stderr, "symbolic link") || strings.Contains(stderr, "s3cr3t") || strings.Contains(stderr, secretHex) {
			t.Errorf("inspect %s: exit %d, stderr %q; want 3, the symbolic link named, nothing of its target's bytes", path, code, stderr)
		}
	}

	// A regular file that is no _metadata: the error, with at most a
	// short hex prefix, nothing of the text.
	plain := writeFile(t, filepath.Join(dir, "job"), "not-metadata", "root:$6$s3cr3t-hash-never-shown:19000\n")
	_, stderr, code := ckptfs(t, "inspect", plain)
	if code != exitUsage || !strings.Contains(stderr, "bad magic number") || strings.Contains(stderr, "s3cr3t") || strings.Contains(stderr, "root:") {
		t.Errorf("inspect of a text file: exit %d, stderr %q", code, stderr)
	}
	// Not a regular file: refused without reading.
	fifo := filepath.Join(dir, "job", "chk-2", "_metadata")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, 15*time.Second, nil, "inspect", filepath.Dir(fifo)); r.code != exitUsage || !strings.Contains(r.stderr, "not a regular file") {
		t.Errorf("inspect of a FIFO: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runBinary(t, 15*time.Second, nil, "verify", filepath.Dir(fifo)); r.code != exitNoneComplete || !strings.Contains(r.stdout, "not a regular file") {
		t.Errorf("verify of a FIFO: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestVerifySaysWhatItSkips: a chk-N that is a symbolic link (or not a
// directory) is not verified, and verify says so, in text and JSON.
func TestVerifySaysWhatItSkips(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	writeCheckpoint(t, job, 1, 10)
	elsewhere := writeCheckpoint(t, filepath.Join(t.TempDir(), "other"), 2, 10)
	if err := os.Symlink(elsewhere, filepath.Join(job, "chk-2")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, job, "chk-3", "a file\n")
	for _, arg := range []string{root, job} {
		out, stderr, code := ckptfs(t, "verify", arg)
		if code != exitOK || !strings.Contains(out, "skipped chk-2: symbolic link (not followed)") || !strings.Contains(out, "skipped chk-3: not a directory") || !strings.Contains(out, "newest complete checkpoint: 1") {
			t.Errorf("verify %s: exit %d %s\n%s", arg, code, stderr, out)
		}
	}
	out, _, code := ckptfs(t, "verify", "-o", "json", job)
	var doc struct {
		Jobs []struct {
			Skipped []struct {
				Name   string `json:"name"`
				Reason string `json:"reason"`
			} `json:"skipped"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || len(doc.Jobs) != 1 || len(doc.Jobs[0].Skipped) != 2 ||
		doc.Jobs[0].Skipped[0].Name != "chk-2" || doc.Jobs[0].Skipped[0].Reason != "symbolic link (not followed)" {
		t.Errorf("json: exit %d, %v\n%s", code, err, out)
	}
	// A job of skipped checkpoints only has no complete checkpoint.
	only := filepath.Join(root, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	os.MkdirAll(only, 0o755)
	if err := os.Symlink(elsewhere, filepath.Join(only, "chk-2")); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := ckptfs(t, "verify", only); code != exitNoneComplete || !strings.Contains(out, "skipped chk-2") {
		t.Errorf("verify of symbolic links only: exit %d %s\n%s", code, stderr, out)
	}
}

// TestSparseMetadataBoundsMemory: a _metadata of a few GB that is a hole
// after its first bytes (truncate makes it; it takes no disk) costs
// verify and inspect the bytes their parse reaches, not the file's size.
func TestSparseMetadataBoundsMemory(t *testing.T) {
	job := filepath.Join(t.TempDir(), "job")
	chk := writeCheckpoint(t, job, 1, 10)
	meta := filepath.Join(chk, "_metadata")
	fi, err := os.Stat(meta)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3 << 30
	if err := os.Truncate(meta, size); err != nil {
		t.Fatal(err)
	}
	const limit = 256 << 20
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"verify", job}, exitNoneComplete},
		{[]string{"verify", "-o", "json", chk}, exitNoneComplete},
		{[]string{"inspect", chk}, exitUsage},
	} {
		r := runBinary(t, 60*time.Second, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, "offset") {
			t.Errorf("%q: exit %d, want %d and the parse error's offset (%d)\n%s%s", tc.args, r.code, tc.code, fi.Size(), r.stdout, r.stderr)
		}
		if r.maxRSS > limit {
			t.Errorf("%q: peak RSS %d MiB for a %d GiB sparse _metadata whose parse stops at byte %d; want under %d MiB", tc.args, r.maxRSS>>20, size>>30, fi.Size(), limit>>20)
		}
	}
}
