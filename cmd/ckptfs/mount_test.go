package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// mountProc is a `ckptfs mount` process.
type mountProc struct {
	cmd  *exec.Cmd
	logs chan string
	mnt  string

	mu    sync.Mutex
	lines []string // GUARDED_BY(mu): every log line
}

// allLines returns every line the daemon logged so far.
func (d *mountProc) allLines() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.lines...)
}

// startMount runs the built binary in the foreground and waits until it
// says it serves (CKPTFS_READY_FD). A daemon killed before that may still
// hold a file open on its own mount (go-fuse's poll probe), and a process
// exiting with such a file open waits forever for its own answer.
func startMount(t testing.TB, args ...string) *mountProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"mount", "--log-level", "debug"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		t.Fatal(err)
	}
	d := &mountProc{cmd: cmd, logs: make(chan string, 1000), mnt: args[len(args)-1]}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log("ckptfs:", sc.Text())
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			d.mu.Unlock()
			select {
			case d.logs <- sc.Text():
			default:
			}
		}
		close(d.logs)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			d.stop(t)
		}
		syscall.Unmount(d.mnt, syscall.MNT_DETACH)
	})
	signalled := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(ready).ReadString('\n')
		signalled <- line
	}()
	select {
	case line := <-signalled:
		if line != "READY\n" {
			t.Fatalf("the daemon did not become ready (%q)", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon was not ready after 30s")
	}
	if !isFUSEMount(t, d.mnt) {
		t.Fatal("ready, but no mount at " + d.mnt)
	}
	if mode := flagValue(args, "--mode"); mounttest.WantsLease(mode, args) {
		if err := mounttest.WaitWritable(d.mnt, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// flagValue is the value of a flag in args (--name value or
// --name=value; "" when absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		switch {
		case a == name && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, name+"="):
			return a[len(name)+1:]
		}
	}
	return ""
}

func isFUSEMount(t testing.TB, dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir && strings.Contains(line, "fuse.ckptfs") {
			return true
		}
	}
	return false
}

func (d *mountProc) stop(t testing.TB) int {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(30 * time.Second):
		// Its goroutines, in its log, say what it waits for.
		d.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		t.Fatal("daemon did not stop within 30 s of SIGTERM (its goroutines are in its log above)")
		return -1
	}
}

// TestMountReplicaEndToEnd runs the daemon in replica mode over a backing
// directory that holds one complete checkpoint and one that is being
// copied.
func TestMountReplicaEndToEnd(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(mnt, 0o755)
	job := filepath.Join(backing, "checkpoints", "0123456789abcdef0123456789abcdef")
	var src string
	for _, d := range flinkdata.StateDirs(t) {
		if strings.HasSuffix(d, "rocksdb-checkpoint") {
			src = d
			break
		}
	}
	m, err := metadata.DecodeFile(filepath.Join(src, "_metadata"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	complete := filepath.Join(job, "chk-"+strconv.FormatInt(m.CheckpointID, 10))
	copyTree(t, src, complete)
	// The next checkpoint: _metadata rewritten with the next id, one state
	// file still missing.
	nextID := m.CheckpointID + 1
	next := filepath.Join(job, "chk-"+strconv.FormatInt(nextID, 10))
	copyTree(t, src, next)
	m2, _ := metadata.DecodeFile(filepath.Join(src, "_metadata"), metadata.Options{KeepInline: true})
	m2.CheckpointID = nextID
	f, _ := os.Create(filepath.Join(next, "_metadata"))
	metadata.Encode(f, m2)
	f.Close()
	entries, _ := os.ReadDir(next)
	var held string
	for _, e := range entries {
		if e.Name() != "_metadata" {
			held = e.Name()
			break
		}
	}
	heldData, _ := os.ReadFile(filepath.Join(next, held))
	os.Remove(filepath.Join(next, held))
	os.MkdirAll(filepath.Join(backing, ".ckptfs"), 0o755)

	d := startMount(t, "--mode", "replica", "--poll", "200ms", backing, mnt)
	mjob := filepath.Join(mnt, "checkpoints", "0123456789abcdef0123456789abcdef")
	names := func() []string {
		es, err := os.ReadDir(mjob)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	if got := names(); len(got) != 1 || got[0] != filepath.Base(complete) {
		t.Fatalf("listing %v, want only %s", got, filepath.Base(complete))
	}
	if _, err := os.Stat(filepath.Join(mjob, filepath.Base(next))); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat of the incomplete checkpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, ".ckptfs")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf(".ckptfs: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mjob, "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write on a replica: %v", err)
	}
	// The last file arrives: the checkpoint appears within a poll interval.
	os.WriteFile(filepath.Join(next, held), heldData, 0o644)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(mjob, filepath.Base(next), "_metadata")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the completed checkpoint did not appear")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	if isFUSEMount(t, mnt) {
		t.Fatal("still mounted after SIGTERM")
	}
}

// TestMountHelper runs the binary as mount.fuse.ckptfs, as mount(8) does.
func TestMountHelper(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(filepath.Join(backing, "dir"), 0o755)
	os.MkdirAll(mnt, 0o755)
	helper := filepath.Join(top, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	// mount(8) does not wait for the daemon's output to end: give the
	// helper a file, not a pipe, as its output.
	logf, err := os.Create(filepath.Join(top, "helper.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	h := exec.Command(helper, backing, mnt, "-o", "rw,_netdev,mode=primary,poll=1s,site=dc2,allow_other,x-systemd.requires=nas.mount")
	h.Stdout, h.Stderr = logf, logf
	if err := h.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		t.Fatalf("helper: %v\n%s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	if !isFUSEMount(t, mnt) {
		t.Fatal("helper returned but nothing is mounted")
	}
	if err := os.WriteFile(filepath.Join(mnt, "dir", "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("primary write: %v", err)
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(helper, backing, mnt, "-o", "bogus=1").Run(); err == nil {
		t.Fatal("an unknown option was accepted")
	}
}

func TestMountConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("backing: /nas\nmountpoint: /flink\nmode: primary\nsite: dc1\npoll: 5s\nmap: [\"hdfs://nn/flink=/nas\"]\nzk: z1:2181\n"), 0o644)
	cfg, stderr, code := mountSettings(t, "--config", good)
	if code != 0 || cfg.Backing != "/nas" || cfg.MountPoint != "/flink" || cfg.Mode != "primary" || cfg.Poll != 5*time.Second || cfg.Maps[0] != "hdfs://nn/flink=/nas" || cfg.ZK != "z1:2181" || cfg.PathRoot != "/flink" {
		t.Fatalf("exit %d %s: %+v", code, stderr, cfg)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("backing: /nas\nmountpiont: /flink\n"), 0o644)
	if _, stderr, code := mountSettings(t, "--config", bad); code != 3 || !strings.Contains(stderr, "bad.yaml:2: unknown key \"mountpiont\"") {
		t.Fatalf("unknown key: exit %d: %s", code, stderr)
	}
	// Flags win over the file.
	_, stderr, code = ckptfs(t, "mount", "--config", good, "--mode", "bogus")
	if code != 3 || !strings.Contains(stderr, "bogus") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(out, in)
		in.Close()
		out.Close()
	}
}

// TestMountPromotionAndFencing (design §5.14), with the real binary and a
// real ZooKeeper: dc1's mount, configured primary in a cluster no site was
// activated in, writes only once it holds the lease (after D); dc2's
// replica never writes. A hand that rewrites active-site fences dc1 (its
// renewals fail: a writer open on it is cut off) and promotes nobody, not
// even dc2 that it names. A takeover on dc2 refuses while dc1's daemon
// renews the lease (exit 5) and activates once that daemon stopped: dc2's
// mount is promoted.
func TestMountPromotionAndFencing(t *testing.T) {
	mounttest.RequireFUSE(t)
	cluster := zktest.StartCluster(t, 1)
	client := zktest.Connect(t, cluster.Servers())
	top := t.TempDir()
	const lease = 2 * time.Second
	var mnts [2]string
	var daemons [2]*mountProc
	var dc1Metrics string
	common := []string{"--zk", cluster.ConnectString(), "--cluster-id", "c1", "--lease-duration", lease.String()}
	for i, site := range []string{"dc1", "dc2"} {
		backing, mnt := filepath.Join(top, site, "backing"), filepath.Join(top, site, "mnt")
		os.MkdirAll(filepath.Join(backing, "d"), 0o755)
		os.MkdirAll(mnt, 0o755)
		mode := map[string]string{"dc1": "primary", "dc2": "replica"}[site]
		d := startMount(t, append(append([]string{"--log-format", "json", "--mode", mode, "--site", site}, common...),
			"--poll", "200ms", "--metrics-addr", "127.0.0.1:0", backing, mnt)...)
		if site == "dc1" {
			dc1Metrics = d.metricsAddr(t)
		}
		mnts[i], daemons[i] = mnt, d
	}
	write := func(mnt string) error { return os.WriteFile(filepath.Join(mnt, "d", "f"), []byte("x"), 0o644) }
	waitFor := func(what string, within time.Duration, ok func() bool) {
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("dc1's configured primary never became writable", 10*lease, func() bool { return write(mnts[0]) == nil })
	// A writer open on dc1 when it is fenced: fencing cuts it off.
	open, err := os.OpenFile(filepath.Join(mnts[0], "d", "open"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := write(mnts[1]); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("dc2's replica: %v", err)
	}

	// A hand names dc2: dc1 fences, nobody is promoted.
	if _, err := client.Set("/ckptfs/c1/active-site", []byte("dc2"), -1); err != nil {
		t.Fatal(err)
	}
	waitFor("dc1 was not fenced after active-site was rewritten by hand", 10*time.Second, func() bool { return errors.Is(write(mnts[0]), syscall.EROFS) })
	if _, err := open.Write([]byte("after")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a writer open on dc1 when it was fenced: %v, want EROFS", err)
	}
	time.Sleep(2 * lease)
	if err := write(mnts[1]); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("dc2 after a hand named it active: %v, want EROFS: only a takeover moves the lease", err)
	}
	fams := scrapeDaemon(t, dc1Metrics)
	if n, ok := seriesValue(fams, "ckptfs_writes_after_fence_total", "", ""); !ok || n != 0 {
		t.Errorf("ckptfs_writes_after_fence_total %v (exported %v), want 0", n, ok)
	}
	if n, ok := seriesValue(fams, "ckptfs_lease_claiming", "", ""); !ok || n != 0 {
		t.Errorf("ckptfs_lease_claiming %v (exported %v) on a fenced dc1, want 0", n, ok)
	}

	// Put it back: dc1 holds again (its lease, its epoch). A takeover on
	// dc2 refuses while dc1's daemon renews.
	if _, err := client.Set("/ckptfs/c1/active-site", []byte("dc1"), -1); err != nil {
		t.Fatal(err)
	}
	waitFor("dc1 did not write again once active-site named it again", 10*time.Second, func() bool { return write(mnts[0]) == nil })
	takeover := append([]string{"takeover", "--site", "dc2", "--wait", "0"}, common...)
	if out, stderr, code := ckptfs(t, takeover...); code != exitAlive || !strings.Contains(stderr+out, "still renews the lease") {
		t.Fatalf("takeover on dc2 while dc1 renews: exit %d\n%s\n%s", code, out, stderr)
	}
	// dc1's daemon stops (nothing open on its mount: a clean unmount):
	// the takeover activates after D.
	open.Close()
	if code := daemons[0].stop(t); code != 0 {
		t.Errorf("dc1's daemon exited %d", code)
	}
	if out, stderr, code := ckptfs(t, takeover...); code != exitOK {
		t.Fatalf("takeover on dc2 after dc1 stopped: exit %d\n%s\n%s", code, out, stderr)
	}
	waitFor("dc2 was not promoted after its takeover", 10*time.Second, func() bool { return write(mnts[1]) == nil })
}

// realRocksDBCheckpoint returns a real checkpoint directory with many
// state files and its checkpoint id.
func realRocksDBCheckpoint(t *testing.T) (string, int64) {
	t.Helper()
	best, n := "", 0
	for _, d := range flinkdata.StateDirs(t) {
		if !strings.HasSuffix(d, "rocksdb-checkpoint") {
			continue
		}
		if es, _ := os.ReadDir(d); len(es) > n {
			best, n = d, len(es)
		}
	}
	m, err := metadata.DecodeFile(filepath.Join(best, "_metadata"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return best, m.CheckpointID
}

// TestMountReplicaCopiers copies a real checkpoint into the backing
// directory behind a replica mount the ways replication tools do: file by
// file out of order, temporary file then rename, and in place. Until the
// last byte has arrived the checkpoint is invisible to stat, open, ls and
// ls -l; after it, it appears.
func TestMountReplicaCopiers(t *testing.T) {
	mounttest.RequireFUSE(t)
	src, id := realRocksDBCheckpoint(t)
	entries, _ := os.ReadDir(src)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// _metadata first: the worst order for a checker that trusts it.
	order := append([]string{"_metadata"}, reverse(without(names, "_metadata"))...)
	chk := "chk-" + strconv.FormatInt(id, 10)
	copiers := replicaCopiers()
	for kind, copyFile := range copiers {
		t.Run(kind, func(t *testing.T) {
			top := t.TempDir()
			backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
			job := filepath.Join(backing, "job")
			os.MkdirAll(filepath.Join(job, chk), 0o755)
			os.MkdirAll(mnt, 0o755)
			const poll = 300 * time.Millisecond
			startMount(t, "--mode", "replica", "--poll", poll.String(), backing, mnt)
			mchk := filepath.Join(mnt, "job", chk)
			invisible := func(step string) {
				t.Helper()
				if _, err := os.Stat(mchk); !errors.Is(err, syscall.ENOENT) {
					t.Fatalf("%s: stat %s: %v", step, chk, err)
				}
				if _, err := os.Open(filepath.Join(mchk, "_metadata")); !errors.Is(err, syscall.ENOENT) {
					t.Fatalf("%s: open _metadata: %v", step, err)
				}
				for _, args := range [][]string{{"-a"}, {"-la"}} {
					out, err := exec.Command("ls", append(args, filepath.Join(mnt, "job"))...).CombinedOutput()
					if err != nil || strings.Contains(string(out), chk) {
						t.Fatalf("%s: ls %v shows %s (%v):\n%s", step, args, chk, err, out)
					}
				}
			}
			invisible("empty chk dir")
			for i, name := range order {
				data, err := os.ReadFile(filepath.Join(src, name))
				if err != nil {
					t.Fatal(err)
				}
				copyFile(t, filepath.Join(job, chk), name, data)
				if i < len(order)-1 && (i%7 == 0 || i == len(order)-2) {
					time.Sleep(poll + 50*time.Millisecond) // give a pass the chance to be wrong
					invisible(fmt.Sprintf("after %d of %d files", i+1, len(order)))
				}
			}
			done := time.Now()
			deadline := done.Add(10 * time.Second)
			for {
				if _, err := os.Stat(mchk); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the complete checkpoint did not appear")
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Logf("visible %v after the last byte (poll %v)", time.Since(done).Round(time.Millisecond), poll)
			for _, name := range names {
				got, err := os.ReadFile(filepath.Join(mchk, name))
				want, _ := os.ReadFile(filepath.Join(src, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("reading %s through the mount: %v", name, err)
				}
			}
			out, err := exec.Command("ls", "-la", filepath.Join(mnt, "job")).CombinedOutput()
			if err != nil || !strings.Contains(string(out), chk) {
				t.Fatalf("ls -la after completion: %v\n%s", err, out)
			}
		})
	}
}

// replicaCopiers are the ways replication tools copy a file into the
// replica's backing directory: written out of order, to a temporary file
// renamed into place, and in place in two writes.
func replicaCopiers() map[string]func(t *testing.T, dst, name string, data []byte) {
	return map[string]func(t *testing.T, dst, name string, data []byte){
		"out-of-order": func(t *testing.T, dst, name string, data []byte) {
			os.WriteFile(filepath.Join(dst, name), data, 0o644)
		},
		"temp-then-rename": func(t *testing.T, dst, name string, data []byte) {
			tmp := filepath.Join(dst, "."+name+".Ab12Cd")
			os.WriteFile(tmp, data, 0o644)
			os.Rename(tmp, filepath.Join(dst, name))
		},
		"in-place": func(t *testing.T, dst, name string, data []byte) {
			f, err := os.Create(filepath.Join(dst, name))
			if err != nil {
				t.Fatal(err)
			}
			f.Write(data[:len(data)/2])
			f.Sync()
			f.Write(data[len(data)/2:])
			f.Close()
		},
	}
}

func without(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

func reverse(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[len(list)-1-i] = s
	}
	return out
}

// TestMountSealsAndReplicaChecksL3 writes checkpoints through a primary
// mount in Flink's order (mkdir chk-N, state files, shared/ files,
// _metadata last; and _metadata through an in-progress file renamed into
// place), checks the sealed manifests' checksums, and then shows a
// replica of that tree with one same-size corrupted file keeping the
// checkpoint invisible, while an intact replica shows it.
func TestMountSealsAndReplicaChecksL3(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "primary"), filepath.Join(top, "flink")
	os.MkdirAll(backing, 0o755)
	os.MkdirAll(mnt, 0o755)
	d := startMount(t, "--log-format", "json", "--mode", "primary", "--poll", "200ms", "--map", "file:"+mnt+"="+backing, "--metrics-addr", "127.0.0.1:0", backing, mnt)
	addr := d.metricsAddr(t)
	job := filepath.Join(mnt, "job")
	os.MkdirAll(filepath.Join(job, "shared"), 0o755)

	write := func(id int64, viaInProgress bool) map[string][]byte {
		chk := filepath.Join(job, "chk-"+strconv.FormatInt(id, 10))
		if err := os.Mkdir(chk, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		op := metadata.Operator{IDLower: 1, IDUpper: 2, Parallelism: 2, MaxParallelism: 128}
		for i := range 2 {
			excl := fmt.Sprintf("excl-%d-%d", id, i)
			shared := fmt.Sprintf("sst-%d-%d", id, i)
			data := bytes.Repeat([]byte{byte(id), byte(i)}, 3000+i)
			sdata := bytes.Repeat([]byte{byte(i), byte(id), 7}, 5000+i)
			if err := os.WriteFile(filepath.Join(chk, excl), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(job, "shared", shared), sdata, 0o644); err != nil {
				t.Fatal(err)
			}
			files["job/chk-"+strconv.FormatInt(id, 10)+"/"+excl] = data
			files["job/shared/"+shared] = sdata
			op.Subtasks = append(op.Subtasks, metadata.Subtask{Index: int32(i), ManagedKeyed: &metadata.KeyedHandle{
				Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: id, BackendID: "b", KeyGroupStart: int32(i), KeyGroupCount: 1,
				Meta:          &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: excl, Size: int64(len(data))},
				Shared:        []metadata.NamedHandle{{LocalName: "000001.sst", Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + filepath.Join(job, "shared", shared), Size: int64(len(sdata))}}},
				StateHandleID: "s"}})
		}
		var meta bytes.Buffer
		if err := metadata.Encode(&meta, &metadata.Metadata{Version: 3, CheckpointID: id, Operators: []metadata.Operator{op}, ChannelLayout: metadata.ChannelLayout112}); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(chk, "_metadata")
		if viaInProgress {
			tmp := filepath.Join(chk, "._metadata.inprogress.5f2d1c")
			os.WriteFile(tmp, meta.Bytes(), 0o644)
			if err := os.Rename(tmp, target); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(target, meta.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files["job/chk-"+strconv.FormatInt(id, 10)+"/_metadata"] = meta.Bytes()
		return files
	}
	written := map[int64]map[string][]byte{1: write(1, false), 2: write(2, true)}
	var total, metadataBytes int
	for _, files := range written {
		for rel, data := range files {
			total += len(data)
			if strings.HasSuffix(rel, "/_metadata") {
				metadataBytes += len(data)
			}
		}
	}
	for id, files := range written {
		sealed := filepath.Join(backing, ".ckptfs", "manifests", "job", "chk-"+strconv.FormatInt(id, 10)+".json")
		deadline := time.Now().Add(10 * time.Second)
		var doc []byte
		for {
			var err error
			if doc, err = os.ReadFile(sealed); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("checkpoint %d was not sealed", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var m struct {
			MetadataChecksum string `json:"metadata_checksum"`
			Files            []struct {
				Path     string `json:"path"`
				Relative bool   `json:"relative"`
				Checksum string `json:"checksum"`
			} `json:"files"`
		}
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		crc := func(b []byte) string {
			return manifest.FormatChecksum(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		}
		chkRel := "job/chk-" + strconv.FormatInt(id, 10)
		if m.MetadataChecksum != crc(files[chkRel+"/_metadata"]) || len(m.Files) != 4 {
			t.Fatalf("checkpoint %d sealed manifest:\n%s", id, doc)
		}
		for _, f := range m.Files {
			rel := strings.TrimPrefix(strings.TrimPrefix(f.Path, "file:"+mnt+"/"), "file:"+mnt)
			if f.Relative {
				rel = chkRel + "/" + f.Path
			}
			if f.Checksum != crc(files[rel]) {
				t.Errorf("checkpoint %d: %s sealed %s, written %s", id, f.Path, f.Checksum, crc(files[rel]))
			}
		}
	}
	// The primary read back everything written, and its verifier, which
	// raises both checkpoints to L3 within a pass or two, read none of it
	// again (a _metadata renamed into place is a new version: at most the
	// _metadata files).
	passes := func() float64 {
		v, _ := seriesValue(scrapeDaemon(t, addr), "ckptfs_catalog_passes_total", "", "")
		return v
	}
	for start := passes(); passes() < start+3; {
		time.Sleep(50 * time.Millisecond)
	}
	fams := scrapeDaemon(t, addr)
	seal, _ := seriesValue(fams, "ckptfs_checksummed_bytes_total", "reader", "seal")
	verify, ok := seriesValue(fams, "ckptfs_checksummed_bytes_total", "reader", "verify")
	if !ok || seal < float64(total) || verify > float64(metadataBytes) {
		t.Errorf("primary checksummed %v bytes reading back and %v verifying, want at least %d and at most %d", seal, verify, total, metadataBytes)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("primary exit %d", code)
	}

	// Two replicas of the primary's tree (with .ckptfs): one intact, one
	// with a same-size corruption in a shared file of checkpoint 2.
	replica := func(name string, corrupt bool) string {
		dst := filepath.Join(top, name)
		if out, err := exec.Command("cp", "-a", backing, dst).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if corrupt {
			p := filepath.Join(dst, "job", "shared", "sst-2-0")
			data, _ := os.ReadFile(p)
			data[100] ^= 0xff
			os.WriteFile(p, data, 0o644)
		}
		rmnt := filepath.Join(top, name+"-mnt")
		os.MkdirAll(rmnt, 0o755)
		startMount(t, "--mode", "replica", "--poll", "200ms", "--map", "file:"+mnt+"="+dst, dst, rmnt)
		return rmnt
	}
	good, bad := replica("intact", false), replica("corrupt", true)
	for _, id := range []string{"chk-1", "chk-2"} {
		if _, err := os.Stat(filepath.Join(good, "job", id)); err != nil {
			t.Errorf("intact replica hides %s: %v", id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(bad, "job", "chk-1")); err != nil {
		t.Errorf("corrupt replica hides the untouched chk-1: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bad, "job", "chk-2")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("corrupt replica shows chk-2 (same size, wrong bytes): %v", err)
	}
}

// TestMountMetricsSettings: metrics-addr and lag-interval come from the
// file, the flags and the mount options like every setting, and a port
// that is taken fails the start before anything is mounted.
func TestMountMetricsSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.yaml")
	os.WriteFile(file, []byte("backing: /nas\nmountpoint: /flink\nmetrics-addr: 127.0.0.1:9477\nlag-interval: 30s\n"), 0o644)
	cfg, stderr, code := mountSettings(t, "--config", file)
	if code != 0 || cfg.MetricsAddr != "127.0.0.1:9477" || cfg.LagInterval != 30*time.Second {
		t.Fatalf("exit %d %s: %+v", code, stderr, cfg)
	}
	for _, bad := range []func(*mountConfig){
		func(c *mountConfig) { c.MetricsAddr = "9477" },
		func(c *mountConfig) { c.LagInterval = time.Millisecond },
	} {
		c := *cfg
		bad(&c)
		if err := c.validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	got, _, err := mountHelperArgs([]string{"/nas", "/flink", "-o", "metrics-addr=127.0.0.1:9477,lag-interval=5s"})
	if err != nil || !slices.Contains(got, "--metrics-addr=127.0.0.1:9477") || !slices.Contains(got, "--lag-interval=5s") {
		t.Errorf("helper: %q, %v", strings.Join(got, " "), err)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	os.MkdirAll(backing, 0o755)
	os.MkdirAll(mnt, 0o755)
	_, stderr, code = ckptfs(t, "mount", "--metrics-addr", taken.Addr().String(), backing, mnt)
	if code != 3 || !strings.Contains(stderr, "metrics-addr") || isFUSEMount(t, mnt) {
		t.Errorf("a taken metrics port: exit %d, %s", code, stderr)
	}
}

// TestMountSurvivesHangupAndClosedLog: SIGHUP is logged and ignored, and
// a log reader that went away does not kill the daemon with SIGPIPE; the
// mount keeps serving and SIGTERM still ends it cleanly. (Before, SIGHUP
// ended the daemon with status 129 and left a dead mount.)
func TestMountSurvivesHangupAndClosedLog(t *testing.T) {
	mounttest.RequireFUSE(t)
	top := t.TempDir()
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	os.MkdirAll(filepath.Join(backing, "d"), 0o755)
	os.MkdirAll(mnt, 0o755)
	cmd := exec.Command(binary, "mount", "--mode", "primary", "--poll", "200ms", backing, mnt)
	logR, logW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer ready.Close()
	cmd.Stderr, cmd.ExtraFiles = logW, []*os.File{readyW}
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	err = cmd.Start()
	logW.Close()
	readyW.Close()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	})
	if line, _ := bufio.NewReader(ready).ReadString('\n'); line != "READY\n" {
		t.Fatalf("the daemon did not become ready (%q)", line)
	}
	logR.Close() // the log reader goes away
	for range 3 {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatalf("the daemon ended after SIGHUP with a closed log: %v", <-exited)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case err := <-exited:
		t.Fatalf("the daemon ended after SIGHUP with a closed log: %v", err)
	case <-time.After(time.Second):
	}
	if err := os.WriteFile(filepath.Join(mnt, "d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the mount no longer serves: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop after SIGTERM")
	}
	if isFUSEMount(t, mnt) {
		t.Error("still mounted after a clean exit")
	}
}
