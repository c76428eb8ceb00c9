package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// Bugs a newcomer's trial found (issue 14), each through the built binary.

// pidOf finds the `ckptfs mount` process serving mnt.
func pidOf(t *testing.T, mnt string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[1] == "mount" && args[len(args)-1] == mnt {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			return pid
		}
	}
	t.Fatalf("no ckptfs mount process for %s", mnt)
	return 0
}

// TestMountHelperLeavesTheCallersStreams: `mount.fuse.ckptfs ... 2>&1 |
// cat` returns, because the daemon lets go of the caller's pipe once the
// mount serves, and its log goes on in log-file, which SIGHUP reopens.
// (Before, the daemon kept the pipe: cat never saw its end, and once the
// reader was gone the next log line killed the daemon.)
func TestMountHelperLeavesTheCallersStreams(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(filepath.Join(backing, "d"), 0o755)
	os.MkdirAll(mnt, 0o755)
	helper := filepath.Join(top, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(top, "ckptfs.log")
	h := exec.Command(helper, backing, mnt, "-o", "mode=primary,poll=200ms,log_level=debug,log_file="+logFile)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	h.Stdout, h.Stderr = w, w
	err = h.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	// Read the pipe as `| cat` does: to its end.
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); out <- b }()
	if err := h.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	select {
	case b := <-out:
		t.Logf("the caller's pipe ended; it got %q", b)
	case <-time.After(10 * time.Second):
		t.Fatal("the caller's pipe never ends: the daemon holds it")
	}
	r.Close()
	if err := os.WriteFile(filepath.Join(mnt, "d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the mount no longer serves: %v", err)
	}
	pid := pidOf(t, mnt)
	rotated := logFile + ".1"
	if err := os.Rename(logFile, rotated); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if bytes.Contains(b, []byte("log reopened")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after logrotate and SIGHUP the new log file holds %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if b, _ := os.ReadFile(rotated); !bytes.Contains(b, []byte("mounted")) || !bytes.Contains(b, []byte("detached from the standard streams")) {
		t.Errorf("the log file before rotation holds %q", b)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMountRefusesMapOutsideItsBacking: a map that sends paths inside the
// mount point anywhere but to the same place below the backing directory
// is refused; Flink would read the backing while ckptfs verified the
// other directory. (Before, the mount showed checkpoints complete that
// the backing it served lacked.) Maps of other file systems are free.
func TestMountRefusesMapOutsideItsBacking(t *testing.T) {
	top := t.TempDir()
	backing, mnt, other := filepath.Join(top, "nas"), filepath.Join(top, "flink"), filepath.Join(top, "elsewhere")
	for _, d := range []string{backing, mnt, other} {
		os.MkdirAll(d, 0o755)
	}
	helper := filepath.Join(top, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"file://" + mnt + "=" + other, mnt + "/job=" + other, "file:///=" + other, "file://" + mnt + "/job=" + backing} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, binary, "mount", "--map", m, backing, mnt)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(stderr.String(), "the map must lead there") {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			t.Errorf("--map %s: %v, %s; want exit 3 and the reason", m, err, &stderr)
		}
	}
	for _, m := range []string{"file://" + mnt + "=" + backing, mnt + "/job=" + backing + "/job", "hdfs://nn/flink=" + other, "file://" + other + "=" + other} {
		// mount -f checks everything and mounts nothing.
		if out, err := exec.Command(helper, backing, mnt, "-f", "-o", `map="`+m+`"`).CombinedOutput(); err != nil {
			t.Errorf("map %s refused: %v\n%s", m, err, out)
		}
	}
}

// TestPrimaryFencesWhenItsBackingIsReplaced: the NAS goes away and an
// empty directory is at its path; the primary mount must not write there,
// and health must say so. (Before, it wrote into the replacement and
// /healthz and `ckptfs health` stayed ok.)
func TestPrimaryFencesWhenItsBackingIsReplaced(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "nas"), filepath.Join(top, "flink")
	os.MkdirAll(filepath.Join(backing, "job"), 0o755)
	os.MkdirAll(mnt, 0o755)
	d := startMount(t, "--log-format", "json", "--mode", "primary", "--poll", "200ms", "--metrics-addr", "127.0.0.1:0", backing, mnt)
	url := "http://" + d.metricsAddr(t) + "/healthz"
	if err := os.WriteFile(filepath.Join(mnt, "job", "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The NAS is unmounted: its path now shows the directory beneath.
	if err := os.Rename(backing, backing+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(backing, "job"), 0o755); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var werr error
	for {
		werr = os.WriteFile(filepath.Join(mnt, "job", "b"), []byte("x"), 0o644)
		if errors.Is(werr, syscall.EROFS) || time.Now().After(deadline) {
			break
		}
		os.Remove(filepath.Join(backing, "job", "b"))
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(werr, syscall.EROFS) {
		t.Fatalf("a write after the backing was replaced: %v, want EROFS (fenced)", werr)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "backing directory was replaced") {
		t.Errorf("/healthz: %d %s; want 503 naming the replaced backing", resp.StatusCode, body)
	}
	out, code, _ := health(t, "--metrics-url", strings.TrimSuffix(url, "/healthz"))
	if code == 0 || !strings.Contains(out, "replaced") {
		t.Errorf("ckptfs health: exit %d\n%s", code, out)
	}
	if !slices.ContainsFunc(d.allLines(), func(l string) bool { return strings.Contains(l, "fencing the mount") }) {
		t.Error("the fence was not logged")
	}
}
