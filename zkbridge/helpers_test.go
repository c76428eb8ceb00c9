package zkbridge

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// testWriter forwards to t.Log until the test ends; later writes (a zk
// goroutine that outlives the test) are dropped.
type testWriter struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// env is one Flink cluster's worth of test fixtures on a ZooKeeper
// cluster: its own path root and storage directory.
type env struct {
	t       testing.TB
	zk      *zktest.Cluster
	root    string // Flink's path.root
	ckptfs  string // ckptfs's root
	storage string // local directory standing for Flink's file system
	servers []string
}

var rootSeq struct {
	sync.Mutex
	n int
}

func newEnv(t testing.TB, c *zktest.Cluster) *env {
	rootSeq.Lock()
	rootSeq.n++
	n := rootSeq.n
	rootSeq.Unlock()
	return &env{t: t, zk: c, root: fmt.Sprintf("/flink%d", n), ckptfs: fmt.Sprintf("/ckptfs%d", n), storage: t.TempDir(), servers: c.Servers()}
}

// jmConfig returns a JobManager config of this env.
func (e *env) jmConfig(layout flinkemu.Layout) flinkemu.Config {
	cfg := flinkemu.DefaultConfig()
	cfg.Servers = e.servers
	cfg.Layout = layout
	cfg.PathRoot = e.root
	cfg.Storage = e.storage
	return cfg
}

// startJM starts an emulated JobManager (through proxies when asked, so
// that its session can be expired) and closes it at the end of the test.
func (e *env) startJM(layout flinkemu.Layout, viaProxies bool, modify ...func(*flinkemu.Config)) (*flinkemu.JobManager, []*zktest.Proxy) {
	e.t.Helper()
	cfg := e.jmConfig(layout)
	var proxies []*zktest.Proxy
	if viaProxies {
		proxies, cfg.Servers = e.proxies()
	}
	for _, m := range modify {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		e.t.Fatalf("start JobManager: %v", err)
	}
	e.t.Cleanup(jm.Close)
	return jm, proxies
}

// proxies puts a zktest proxy before every server of e's ensemble and
// returns them with their addresses (a client's Servers).
func (e *env) proxies() ([]*zktest.Proxy, []string) {
	var proxies []*zktest.Proxy
	var addrs []string
	for _, s := range e.servers {
		p := zktest.NewProxy(e.t, s)
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	return proxies, addrs
}

// config returns a bridge config for site.
func (e *env) config(site string) Config {
	cfg := DefaultConfig()
	cfg.Servers = e.servers
	cfg.PathRoot = e.root
	cfg.CkptfsRoot = e.ckptfs
	cfg.Site = site
	cfg.SessionTimeout = 4 * time.Second
	cfg.RetryTimeout = 30 * time.Second
	cfg.LivenessPoll = 200 * time.Millisecond
	// A takeover sees the lease unchanged for D before it activates:
	// the shortest D keeps the tests' takeovers quick.
	cfg.LeaseDuration = MinLeaseDuration
	cfg.Logger = testLogger(e.t)
	return cfg
}

// bridge opens a Bridge on this env, verifying with the real manifest
// verifier over the env's storage.
func (e *env) bridge(site string, modify ...func(*Config)) *Bridge {
	e.t.Helper()
	cfg := e.config(site)
	for _, m := range modify {
		m(&cfg)
	}
	b, err := New(context.Background(), cfg, e.verifier())
	if err != nil {
		e.t.Fatalf("zkbridge.New: %v", err)
	}
	e.t.Cleanup(b.Close)
	return b
}

// verifier verifies with no cache, as a takeover does.
func (e *env) verifier() Verifier {
	e.t.Helper()
	res, err := manifest.NewResolver([]manifest.Mapping{{Prefix: flinkemu.DefaultConfig().FlinkStorage, Dir: e.storage}}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := manifest.DefaultVerifierConfig()
	cfg.Resolver = res
	v, err := manifest.NewVerifier(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return NewSiteVerifier(v, manifest.DefaultCatalogConfig().BackingTimeout)
}

// dump reads the whole tree below the env's roots.
func (e *env) dump(conn *zk.Conn) flinkemu.Tree {
	e.t.Helper()
	t1, err := flinkemu.Dump(conn, e.root)
	if err != nil {
		e.t.Fatal(err)
	}
	t2, err := flinkemu.Dump(conn, e.ckptfs)
	if err != nil {
		e.t.Fatal(err)
	}
	for p, n := range t2 {
		t1[p] = n
	}
	return t1
}

// ctx returns a context bounded for one test step.
func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v (last error %v)", what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
