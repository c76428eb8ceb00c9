package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHealthReadsTheConfiguration: health takes its settings like every
// other command: --config, $CKPTFS_CONFIG, CKPTFS_<KEY>, and the file's
// errors name their line.
func TestHealthReadsTheConfiguration(t *testing.T) {
	dir := t.TempDir()
	plain := t.TempDir()
	conf := writeFile(t, dir, "ckptfs.yaml", "backing: /nas\nmountpoint: "+plain+"\ntimeout: 2s\n")
	notMounted := "mount " + plain + ": not mounted"
	for _, how := range []struct {
		name string
		env  []string
		args []string
	}{
		{"--config", nil, []string{"--config", conf}},
		{"CKPTFS_CONFIG", []string{"CKPTFS_CONFIG=" + conf}, nil},
		{"CKPTFS_MOUNTPOINT", []string{"CKPTFS_MOUNTPOINT=" + plain}, nil},
	} {
		r := runBinary(t, 15*time.Second, how.env, append([]string{"health"}, how.args...)...)
		if r.code != exitUnhealthy || !strings.Contains(r.stdout, notMounted) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and %q", how.name, r.code, r.stdout, r.stderr, notMounted)
		}
	}
	for _, tc := range []struct{ file, want string }{
		{"max-lag: soon\n", `:1: max-lag: invalid value "soon"`},
		{"mountpoint: /flink\nmax-lag: -1\nmetrics-url: http://127.0.0.1:9477\n", `:2: max-lag -1 must not be negative`},
		{"metrics-url: ftp://x\n", `:1: metrics-url "ftp://x": want http://HOST:PORT`},
		{"mountpoint: /flink\ntimeout: 0s\n", `:2: timeout 0s must be positive`},
	} {
		bad := writeFile(t, dir, "bad.yaml", tc.file)
		if r := runBinary(t, 15*time.Second, nil, "health", "--config", bad); r.code != exitUsage || !strings.Contains(r.stderr, bad+tc.want) {
			t.Errorf("%q: health exit %d, stderr %q; want 3 and %q", tc.file, r.code, r.stderr, bad+tc.want)
		}
		if _, stderr, code := ckptfs(t, "config", "check", "--config", bad); code != exitUsage || !strings.Contains(stderr, bad+tc.want) {
			t.Errorf("%q: config check exit %d, stderr %q; want 3 and %q", tc.file, code, stderr, bad+tc.want)
		}
	}
	good := writeFile(t, dir, "good.yaml", "mountpoint: /flink\nmetrics-url: http://127.0.0.1:9477\nmax-lag: 2\n")
	out, stderr, code := ckptfs(t, "config", "check", "--config", good)
	if code != exitOK || !regexp.MustCompile(`metrics-url +line 2 +used by health\n`).MatchString(out) || !regexp.MustCompile(`mountpoint +line 1 +used by (mount, health|health, mount)\n`).MatchString(out) {
		t.Errorf("config check: exit %d %s\n%s", code, stderr, out)
	}
}

// TestMountExitStatuses: what the runbook's table says of mount and its
// helper: 3 for usage and settings errors (nothing mounted), 1 when the
// mount fails.
func TestMountExitStatuses(t *testing.T) {
	dir := t.TempDir()
	backing, absent := filepath.Join(dir, "nas"), filepath.Join(dir, "absent")
	inside, mnt := filepath.Join(backing, "flink"), filepath.Join(dir, "mnt")
	for _, d := range []string{inside, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{inside, backing, mnt} {
			syscall.Unmount(d, syscall.MNT_DETACH)
		}
	})
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mount", backing, inside}, exitUsage, "overlap"},
		{[]string{"mount", inside, backing}, exitUsage, "overlap"},
		{[]string{"mount", backing, backing + "/"}, exitUsage, "overlap"},
		{[]string{"mount", "--backing", backing, "--mountpoint", inside}, exitUsage, "overlap"},
		{[]string{"mount", backing}, exitUsage, "want BACKING and MOUNTPOINT"},
		{[]string{"mount", "--frob", backing, mnt}, exitUsage, "unknown flag"},
		{[]string{"mount", "--mode", "fenced", backing, mnt}, exitUsage, `mode "fenced"`},
		{[]string{"mount", "--lease", backing, mnt}, exitUsage, "lease is retired: with zk every mount holds its site's lease"},
		{[]string{"mount", absent, mnt}, 1, "backing"},
	} {
		r := runBinary(t, 15*time.Second, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}

	helper := filepath.Join(dir, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helper, backing, inside, "-f", "-o", "rw").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "overlap") {
		t.Errorf("helper -f over its own backing: %v\n%s\nwant exit 3 and the overlap", err, out)
	}
}
