package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// Problems an operator's trial found (issue 31), each through the built
// binary.

// TestStatusBeforeFlinksFirstStart: before Flink's first start ZooKeeper
// holds no namespace of the cluster; status says so, and what else would
// explain it, with exit 0, in text and JSON. An unreachable ZooKeeper
// stays exit 3. (Before, status exited 3 with "no Flink namespace
// found".)
func TestStatusBeforeFlinksFirstStart(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	zkArgs := []string{"status", "--zk", c.ConnectString(), "--site", "dc1"}

	r := runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders")...)
	if want := "cluster /orders (/flink/orders): no Flink job under /flink/orders yet: Flink has not started with this cluster id, or path-root or cluster-id differ from Flink's"; r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("a fresh ensemble: exit %d\n%s%s\nwant exit 0 and %q", r.code, r.stdout, r.stderr, want)
	}
	if !strings.Contains(r.stdout, "active site: none yet; epoch 0") || !strings.Contains(r.stdout, "JobManager: no JobManager alive") {
		t.Errorf("a fresh ensemble: lacks the site and JobManager lines\n%s", r.stdout)
	}
	r = runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders", "-o", "json")...)
	var rep struct {
		NoNamespace string            `json:"no_namespace"`
		Jobs        []json.RawMessage `json:"jobs"`
		ActiveSite  string            `json:"active_site"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil || rep.Jobs == nil || len(rep.Jobs) != 0 ||
		!strings.HasPrefix(rep.NoNamespace, "no Flink job under /flink/orders yet") {
		t.Errorf("-o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	// Without a cluster id: the path root.
	if r = runBinary(t, time.Minute, nil, zkArgs...); r.code != exitOK || !strings.Contains(r.stdout, "no Flink job under /flink yet: Flink has not started under this path root") {
		t.Errorf("no cluster id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Another cluster beside it: a misspelt cluster id is as likely.
	client := zktest.Connect(t, c.Servers())
	for _, p := range []string{"/flink", "/flink/payments", "/flink/payments/jobs"} {
		if _, err := client.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r = runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "no Flink job under /flink/orders yet") || !strings.Contains(r.stdout, "/flink holds Flink cluster(s) payments: check the cluster id and path root") {
		t.Errorf("another cluster beside: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A path root ckptfs may not list: an error, as before.
	if _, err := client.Create("/locked", nil, 0, zk.DigestACL(zk.PermAll, "someone", "pw")); err != nil {
		t.Fatal(err)
	}
	if r = runBinary(t, time.Minute, nil, append(zkArgs, "--path-root", "/locked", "--cluster-id", "/orders")...); r.code != exitUsage {
		t.Errorf("a path root ckptfs may not list: exit %d\n%s%s\nwant 3", r.code, r.stdout, r.stderr)
	}
	// ZooKeeper unreachable: an error, as before.
	r = runBinary(t, time.Minute, nil, "status", "--zk", freeAddr(t), "--zk-session-timeout", "1s", "--cluster-id", "/orders")
	if r.code != exitUsage {
		t.Errorf("unreachable ZooKeeper: exit %d\n%s%s\nwant 3", r.code, r.stdout, r.stderr)
	}
}

// TestConfigCheckWarnsOfUnguardedMounts: config check warns, naming the
// keys to set, when metrics-addr serves beyond loopback without TLS and
// client certificates, and when a primary has no zk and so no fence;
// the file stays valid (exit 0). (Before, both passed silently.)
func TestConfigCheckWarnsOfUnguardedMounts(t *testing.T) {
	dir := t.TempDir()
	ca := zktest.NewCA(t, "metrics CA")
	server := ca.Issue(t, "ckptfs-daemon")
	const (
		plain   = "serves /metrics and /healthz beyond loopback over plain HTTP"
		noCA    = "serves /metrics and /healthz beyond loopback to every client that reaches the port: set metrics-tls-client-ca"
		noFence = "mode primary without zk: nothing fences this mount"
	)
	tls := "metrics-tls-cert: " + server.CertFile + "\nmetrics-tls-key: " + server.KeyFile + "\n"
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"every interface", "metrics-addr: 0.0.0.0:9477\n", []string{"metrics-addr 0.0.0.0:9477 " + plain, "set metrics-tls-cert and metrics-tls-key (HTTPS) and metrics-tls-client-ca"}},
		{"an interface by name", "metrics-addr: flink1.dc1:9477\n", []string{"metrics-addr flink1.dc1:9477 " + plain}},
		{"TLS without client certificates", "metrics-addr: '[::]:9477'\n" + tls, []string{"metrics-addr [::]:9477 " + noCA}},
		{"TLS with client certificates", "metrics-addr: 0.0.0.0:9477\n" + tls + "metrics-tls-client-ca: " + ca.CertFile + "\n", nil},
		{"loopback", "metrics-addr: 127.0.0.1:9477\n", nil},
		{"no host", "metrics-addr: :9477\n", nil},
		{"localhost", "metrics-addr: localhost:9477\n", nil},
		{"primary without zk", "mode: primary\n", []string{noFence, "set zk and cluster-id"}},
		{"primary with zk", "mode: primary\nsite: dc1\nzk: zk1:2181\nzk-acl: [open]\n", nil},
		{"replica without zk", "mode: replica\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
			_, stderr, code := ckptfs(t, "config", "check", "--config", file)
			if code != exitOK {
				t.Fatalf("exit %d, want 0\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for _, w := range []string{plain, noCA, noFence} {
				if len(tc.want) == 0 && strings.Contains(stderr, w) {
					t.Errorf("stderr warns %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestMountHelperLeavesThePipeWithoutSyslog: `mount.fuse.ckptfs ... 2>&1
// | cat` returns on a host with no syslog, no journal and no log-file:
// the daemon says on the pipe that its log goes on in a fallback file
// (LOGS_DIRECTORY here), then lets the pipe go; SIGHUP reopens that file.
// (Before, it kept standard error, so cat never saw the pipe's end.)
func TestMountHelperLeavesThePipeWithoutSyslog(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt, logs := filepath.Join(top, "backing"), filepath.Join(top, "mnt"), filepath.Join(top, "logs")
	os.MkdirAll(filepath.Join(backing, "d"), 0o755)
	os.MkdirAll(mnt, 0o755)
	helper := filepath.Join(top, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	// mount runs the helper as `| cat` would and returns what the
	// caller's pipe got, to its end.
	mount := func() []byte {
		t.Helper()
		h := exec.Command(helper, backing, mnt, "-o", "mode=primary,poll=200ms")
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "JOURNAL_STREAM=") {
				h.Env = append(h.Env, e)
			}
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		h.Stdout, h.Stderr = w, w
		err = h.Start()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		out := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(r); out <- b }()
		if err := h.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
		select {
		case b := <-out:
			if err := os.WriteFile(filepath.Join(mnt, "d", "f"), []byte("x"), 0o644); err != nil {
				t.Fatalf("the mount no longer serves: %v", err)
			}
			return b
		case <-time.After(10 * time.Second):
			t.Fatal("the caller's pipe never ends: the daemon holds it")
		}
		return nil
	}

	t.Setenv("LOGS_DIRECTORY", logs)
	said := mount()
	for _, sock := range []string{"/dev/log", "/var/run/syslog", "/var/run/log"} {
		if st, err := os.Stat(sock); err == nil && st.Mode()&os.ModeSocket != 0 {
			t.Logf("this host has syslog (%s): the daemon logs there", sock)
			return
		}
	}
	logFile := fallbackLog(mnt)
	if !strings.HasPrefix(logFile, logs+"/") || !bytes.Contains(said, []byte("the log goes on in the fallback file")) || !bytes.Contains(said, []byte(logFile)) {
		t.Errorf("the caller's pipe got %q; want the warning naming %s", said, logFile)
	}
	if b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte("detached from the standard streams")) {
		t.Errorf("the fallback file holds %q", b)
	}
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pidOf(t, mnt), syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte("log reopened")); b, _ = os.ReadFile(logFile) {
		if time.Now().After(deadline) {
			t.Fatalf("after logrotate and SIGHUP the fallback file holds %q", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}

	// No fallback file either (its directory cannot be made): the log
	// is discarded, as the caller is told, and the pipe ends.
	t.Setenv("LOGS_DIRECTORY", filepath.Join(logFile+".1", "sub"))
	if said := mount(); !bytes.Contains(said, []byte("the log after this line is discarded; set log-file")) {
		t.Errorf("without a fallback file the caller's pipe got %q", said)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMountWarnsOfNonEmptyMountPoint: a mount over a directory that
// holds files logs a warning naming the directory, how many entries it
// hides and the first of them; an empty one logs none. (Before, the
// mount covered them without a word, Flink's own files included.)
func TestMountWarnsOfNonEmptyMountPoint(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(backing, 0o755)
	os.MkdirAll(filepath.Join(mnt, "checkpoints", "job"), 0o755)
	os.WriteFile(filepath.Join(mnt, "early"), []byte("x"), 0o644)
	const warning = "the mount point is not empty: the mount hides what it holds"
	// linesUntilMounted are the daemon's lines up to its "mounted",
	// which it logs after the warning.
	linesUntilMounted := func(d *mountProc) []string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			lines := d.allLines()
			if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, `"msg":"mounted"`) }) {
				return lines
			}
		}
		t.Fatal("the daemon did not log mounted")
		return nil
	}
	d := startMount(t, "--log-format", "json", backing, mnt)
	var found map[string]any
	for _, l := range linesUntilMounted(d) {
		if strings.Contains(l, warning) {
			if err := json.Unmarshal([]byte(l), &found); err != nil {
				t.Fatal(err)
			}
		}
	}
	if found == nil || found["mountpoint"] != mnt || found["entries"] != "2" || fmt.Sprint(found["names"]) != "[checkpoints early]" {
		t.Errorf("want one warning naming %s, 2 entries, checkpoints and early; got %v in\n%s", mnt, found, strings.Join(d.allLines(), "\n"))
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	empty := filepath.Join(top, "empty")
	os.MkdirAll(empty, 0o755)
	d = startMount(t, "--log-format", "json", backing, empty)
	if slices.ContainsFunc(linesUntilMounted(d), func(l string) bool { return strings.Contains(l, warning) }) {
		t.Errorf("an empty mount point was warned about:\n%s", strings.Join(d.allLines(), "\n"))
	}
}

// TestVerifyChecksums: verify --checksums compares contents with the
// manifests the primary sealed (found in .ckptfs above ROOT): an intact
// sealed checkpoint is L3, an unsealed one L1 with a note, and each file
// whose contents differ is named with the sealed and the found checksum.
// (Before, verify had no checksum mode: a same-size corruption passed.)
func TestVerifyChecksums(t *testing.T) {
	backing := t.TempDir()
	const id = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	job := filepath.Join(backing, "checkpoints", id)
	for n := int64(1); n <= 3; n++ {
		writeCheckpoint(t, job, n, 10, 20)
	}
	res, err := manifest.NewResolver(nil, []string{backing})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := manifest.NewRecorder(manifest.RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"chk-1", "chk-3"} {
		if _, err := rec.Seal(filepath.Join("checkpoints", id, n)); err != nil {
			t.Fatal(err)
		}
	}
	// chk-3's state-1 is corrupted in place: same size, other bytes.
	victim := filepath.Join(job, "chk-3", "state-1")
	os.WriteFile(victim, bytes.Repeat([]byte{0xff}, 20), 0o644)
	sealed := manifest.FormatChecksum(crc32.Checksum(make([]byte, 20), crc32.MakeTable(crc32.Castagnoli)))
	found := manifest.FormatChecksum(crc32.Checksum(bytes.Repeat([]byte{0xff}, 20), crc32.MakeTable(crc32.Castagnoli)))
	root := filepath.Join(backing, "checkpoints")

	if out, stderr, code := ckptfs(t, "verify", root); code != exitOK || strings.Contains(out, "checksum") {
		t.Errorf("without --checksums (sizes only): exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code := ckptfs(t, "verify", "--checksums", root)
	for _, want := range []string{
		"3: checksum_mismatch: state-1: sealed " + sealed + ", found " + found,
		"2: no sealed manifest: sizes checked, contents not",
		"newest complete checkpoint: 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--checksums: output lacks %q:\n%s%s", want, out, stderr)
		}
	}
	if code != exitNewestIncomplete || !regexp.MustCompile(`(?m)^ +1 +yes +L3 `).MatchString(out) {
		t.Errorf("--checksums: exit %d, want 1, and chk-1 at L3:\n%s", code, out)
	}
	out, _, _ = ckptfs(t, "verify", "--checksums", "-o", "json", filepath.Join(job, "chk-3"))
	var doc struct {
		Jobs []struct {
			Checkpoints []manifest.Verdict `json:"checkpoints"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Jobs) != 1 || len(doc.Jobs[0].Checkpoints) != 1 {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if p := doc.Jobs[0].Checkpoints[0].Problems; len(p) != 1 || p[0].Kind != manifest.ProblemChecksumMismatch || p[0].Path != "state-1" ||
		p[0].ExpectedChecksum != sealed || p[0].FoundChecksum != found {
		t.Errorf("-o json: problems %+v, want state-1 sealed %s found %s", p, sealed, found)
	}
	// No sealed manifests in ROOT or above: a usage error naming why.
	if _, stderr, code := ckptfs(t, "verify", "--checksums", checkpointsTree(t)); code != exitUsage || !strings.Contains(stderr, "no .ckptfs/manifests in") {
		t.Errorf("no sealed manifests: exit %d, %s", code, stderr)
	}
}

// TestMountLogsTheFileAChecksumMismatchHides: a replica hides a sealed
// checkpoint whose file differs from its checksum, and its log names the
// file, the sealed and the found checksum, once, not on every pass.
// (Before, the checkpoint was hidden with no reason logged.)
func TestMountLogsTheFileAChecksumMismatchHides(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "nas"), filepath.Join(top, "flink")
	const id = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	job := filepath.Join(backing, "checkpoints", id)
	writeCheckpoint(t, job, 1, 10, 20)
	os.MkdirAll(mnt, 0o755)
	res, _ := manifest.NewResolver(nil, []string{backing})
	rec, _ := manifest.NewRecorder(manifest.RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: true})
	if _, err := rec.Seal(filepath.Join("checkpoints", id, "chk-1")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(job, "chk-1", "state-1"), bytes.Repeat([]byte{0xff}, 20), 0o644)
	sealed := manifest.FormatChecksum(crc32.Checksum(make([]byte, 20), crc32.MakeTable(crc32.Castagnoli)))
	found := manifest.FormatChecksum(crc32.Checksum(bytes.Repeat([]byte{0xff}, 20), crc32.MakeTable(crc32.Castagnoli)))

	d := startMount(t, "--log-format", "json", "--poll", "50ms", "--metrics-addr", "127.0.0.1:0", backing, mnt)
	addr := d.metricsAddr(t)
	passes := func() float64 {
		v, _ := seriesValue(scrapeDaemon(t, addr), "ckptfs_catalog_passes_total", "", "")
		return v
	}
	for start := passes(); passes() < start+10; {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(mnt, "checkpoints", id, "chk-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("chk-1 with a corrupted file: %v, want hidden", err)
	}
	var warnings []map[string]any
	for _, l := range d.allLines() {
		if strings.Contains(l, "checkpoint hidden: its contents differ from the checksums the primary sealed") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			warnings = append(warnings, m)
		}
	}
	if len(warnings) != 1 || warnings[0]["file"] != "state-1" || warnings[0]["sealed"] != sealed || warnings[0]["found"] != found ||
		warnings[0]["checkpoint"] != float64(1) || warnings[0]["job"] != id {
		t.Errorf("after 10 passes: %d warnings %v; want one naming state-1, sealed %s, found %s", len(warnings), warnings, sealed, found)
	}
}
