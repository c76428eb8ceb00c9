package nasfault

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/daemon"
	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/internal/watchdog"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/manifest/metadata"
	"github.com/ckptfs/ckptfs/zkbridge"
)

func TestMain(m *testing.M) { faultfs.Main(m) }

// Job directories of the tests (Flink's <checkpoints dir>/<job id>).
const (
	jobA = "jobs/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	jobB = "jobs/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	jobC = "jobs/cccccccccccccccccccccccccccccccc"
	jobD = "jobs/dddddddddddddddddddddddddddddddd"
)

// site is one mount daemon over a faultfs NAS.
type site struct {
	t *testing.T
	// lower is the NAS's real directory, nas the faultfs mount of it (the
	// daemon's backing), mnt the ckptfs mount point.
	lower, nas, mnt string
	fault           *faultfs.FS
	metricsURL      string
	// chk is the real checkpoint's directory name (chk-<its id>), src
	// where it is copied from.
	chk, src string

	stop func()
	done chan error
	logs *logBuffer
}

// realCheckpoint is a real Flink checkpoint with state files beside its
// _metadata, and its id.
func realCheckpoint(t *testing.T) (string, int64) {
	t.Helper()
	for _, src := range flinkdata.StateDirs(t) {
		if !strings.HasSuffix(src, "-checkpoint") {
			continue
		}
		m, err := metadata.DecodeFile(filepath.Join(src, manifest.MetadataFile), metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return src, m.CheckpointID
	}
	t.Fatal("no real checkpoint in the test data")
	return "", 0
}

// startSite lays out jobA and jobB with one complete checkpoint each on
// the NAS and starts a daemon in mode over it, with tweak applied to its
// configuration.
func startSite(t *testing.T, mode fusefs.Mode, tweak func(*daemon.Config)) *site {
	t.Helper()
	return startSiteOn(t, mode, tweak, nil)
}

// testLease is the lease of the tests' sites: a site made active by hand
// (active-site written, no lease) adopts it after this long.
const testLease = 2 * time.Second

// useZooKeeper makes the site's daemon use cluster as site dc2 of cluster
// c1, with the test's lease and a watchdog that records what the kernel's
// would do (a real one would kill the test binary).
func useZooKeeper(c *daemon.Config, cluster *zktest.Cluster) {
	z := zkbridge.DefaultConfig()
	z.Servers, z.Site, z.ClusterID = cluster.Servers(), "dc2", "c1"
	z.LeaseDuration = testLease
	z.Logger = c.Logger
	c.ZooKeeper = &z
	c.Watchdog = &watchdog.Recorder{}
}

// startSiteOn is startSite with faults set by before on the NAS before
// the daemon starts.
func startSiteOn(t *testing.T, mode fusefs.Mode, tweak func(*daemon.Config), before func(*faultfs.FS)) *site {
	t.Helper()
	mounttest.RequireFUSE(t)
	src, id := realCheckpoint(t)
	top := t.TempDir()
	s := &site{t: t, lower: filepath.Join(top, "lower"), nas: filepath.Join(top, "nas"), mnt: filepath.Join(top, "flink"),
		chk: "chk-" + strconv.FormatInt(id, 10), src: src, logs: &logBuffer{t: t}}
	for _, d := range []string{s.lower, s.nas, s.mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.put(jobA)
	s.put(jobB)
	s.fault = faultfs.Mount(t, s.lower, s.nas)

	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: "file://" + s.mnt, Dir: s.nas}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := daemon.DefaultConfig()
	cfg.Site, cfg.Backing, cfg.MountPoint, cfg.Resolver = "dc2", s.nas, s.mnt, res
	cfg.Logger = slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Catalog.Poll, cfg.FollowInterval = 100*time.Millisecond, 50*time.Millisecond
	cfg.Verifier.MaxAge = 2 * cfg.Catalog.Poll
	// Short, so that hangs show quickly; long enough for a loaded machine.
	cfg.Catalog.BackingTimeout = 2 * time.Second
	cfg.Mount.Mode = mode
	cfg.MetricsAddr = freeAddr(t)
	s.metricsURL = "http://" + cfg.MetricsAddr
	if tweak != nil {
		tweak(&cfg)
	}
	if before != nil {
		before(s.fault)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cfg.Notify.Ready = w
	ctx, stop := context.WithCancel(context.Background())
	s.stop, s.done = stop, make(chan error, 1)
	go func() { s.done <- daemon.Run(ctx, cfg) }()
	// A daemon that hangs at start fails the test, not the run: the NAS
	// is released for it.
	ready := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		n, _ := r.Read(buf)
		ready <- string(buf[:n])
	}()
	select {
	case got := <-ready:
		if got != "READY\n" {
			stop()
			t.Fatalf("daemon not ready: %v", <-s.done)
		}
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		stack := buf[:runtime.Stack(buf, true)]
		s.fault.Clear()
		stop()
		t.Fatalf("daemon not ready within 30s: %v\nlog:\n%s\ngoroutines:\n%s", <-s.done, s.logs, stack)
	}
	// Cleanups run last in, first out: the daemon stops (and the NAS is
	// released for it) before faultfs unmounts.
	t.Cleanup(func() {
		s.fault.Clear()
		s.stopDaemon(30 * time.Second)
		syscall.Unmount(s.mnt, syscall.MNT_DETACH)
	})
	return s
}

// stopDaemon stops the daemon and fails the test if it takes longer
// than limit.
func (s *site) stopDaemon(limit time.Duration) error {
	s.t.Helper()
	if s.stop == nil {
		return nil
	}
	s.stop()
	s.stop = nil
	select {
	case err := <-s.done:
		return err
	case <-time.After(limit):
		buf := make([]byte, 1<<20)
		s.t.Errorf("the daemon did not stop within %v; goroutines:\n%s", limit, buf[:runtime.Stack(buf, true)])
		s.fault.Clear()
		return <-s.done
	}
}

// put copies the real checkpoint into job on the NAS, behind faultfs's
// back (as replication writes a replica).
func (s *site) put(job string) string {
	s.t.Helper()
	dir := filepath.Join(s.lower, job, s.chk)
	copyDir(s.t, s.src, dir)
	return dir
}

func copyDir(t *testing.T, src, dst string) {
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

// visible says whether Flink sees job's checkpoint through the mount.
func (s *site) visible(job string) bool {
	_, err := os.Stat(filepath.Join(s.mnt, job, s.chk))
	return err == nil
}

// waitFor fails the test unless cond holds within limit.
func (s *site) waitFor(limit time.Duration, what string, cond func() bool) {
	s.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			s.t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(start); d > time.Second {
		s.t.Logf("%s: after %v", what, d.Round(time.Millisecond))
	}
}

// health is the daemon's /healthz answer.
func (s *site) health() metrics.Health {
	s.t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(s.metricsURL + "/healthz")
	if err != nil {
		s.t.Fatalf("healthz: %v", err)
	}
	defer resp.Body.Close()
	var h metrics.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		s.t.Fatalf("healthz: %v", err)
	}
	return h
}

// metric is the value of the series whose line starts with prefix
// (name{labels}), 0 when absent.
func (s *site) metric(prefix string) float64 {
	s.t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(s.metricsURL + "/metrics")
	if err != nil {
		s.t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				s.t.Fatalf("metric %q: %v", line, err)
			}
			return v
		}
	}
	return 0
}

// unknownVerifications is the daemon's count of "unknown" verdicts.
func (s *site) unknownVerifications() float64 {
	return s.metric(`ckptfs_verifications_total{result="unknown"`)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logBuffer keeps the daemon's log for the test: it is shown when the
// test fails (t.Log after the test ends would panic).
type logBuffer struct {
	t    *testing.T
	mu   sync.Mutex
	buf  strings.Builder
	done bool
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return len(p), nil
}

// contains reports whether a log line contains every one of words.
func (l *logBuffer) contains(words ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(l.buf.String(), "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// dumpOnFailure shows the daemon's log when the test failed.
func (s *site) dumpOnFailure() {
	if s.t.Failed() {
		s.t.Log("daemon log:\n" + s.logs.String())
	}
}

var _ = fmt.Sprint
