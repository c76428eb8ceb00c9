package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Cluster is a standalone ZooKeeper server (one member) or an ensemble of
// real ZooKeeper JVMs on 127.0.0.1. Servers are addressed by index
// 0..Size()-1; server i has myid i+1. Control methods return errors rather
// than failing the test, so they may be used from any goroutine and inside
// retry loops.
type Cluster struct {
	cfg     Config
	inst    installation
	log     *testLog
	servers []*server
	closed  atomic.Bool // set by Close before it stops anything
	// ca signs the servers' certificates (Security.TLS); harnessTLS is
	// how the harness itself speaks TLS to them.
	ca         *CA
	harnessTLS *tls.Config
}

type server struct {
	index   int
	peer    peer
	dir     string // zoo.cfg, log4j.properties; working directory
	dataDir string // myid, snapshots, transaction logs
	out     *lineSink

	mu   sync.Mutex
	proc *process // GUARDED_BY(mu); nil while stopped
}

// process is one run of a server JVM.
type process struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process is reaped
	err      error         // cmd.Wait's result; read only after done
	stopping atomic.Bool   // the harness signalled it
}

// StartCluster starts n (1 to MaxServers) servers in parallel and waits
// until each serves and, for an ensemble, exactly one leads. Options modify
// DefaultConfig. Everything is stopped by a cleanup registered on t, which
// fails the test if a server could not be stopped cleanly or had died.
//
// StartCluster skips the test in -short mode and when ZooKeeper is not
// installed, unless CKPTFS_REQUIRE_ZK=1, which makes that a failure. It must
// be called from the test goroutine.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	cfg := DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if n < 1 || n > MaxServers {
		t.Fatalf("zktest: StartCluster: %d servers requested, want 1 to %d", n, MaxServers)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zktest: StartCluster: invalid Config: %v", err)
	}
	inst := requireInstallation(t)

	for attempt := 1; ; attempt++ {
		c, err := newCluster(t, n, cfg, inst)
		if err != nil {
			t.Fatalf("zktest: StartCluster: %v", err)
		}
		start := time.Now()
		var errs []error
		for _, s := range c.servers {
			errs = append(errs, c.spawn(s))
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		err = c.waitReady(c.indexes(), cfg.StartTimeout)
		if err == nil {
			c.log.Printf("%d server(s) ready in %v: %s", n, time.Since(start).Round(time.Millisecond), c.ConnectString())
			return c
		}
		if attempt < startAttempts && c.lostPortRace() {
			// The servers it started are stopped; what they said stays
			// in the log.
			c.Close()
			c.log.Printf("another process took a port before ZooKeeper bound it; starting again on other ports (attempt %d of %d)", attempt+1, startAttempts)
			continue
		}
		t.Fatal(err)
	}
}

// testHookPortsTaken, when set by a test, sees the ports of every new
// cluster before its servers start.
var testHookPortsTaken func(ports []int)

// startAttempts bounds how often StartCluster starts a cluster again after
// losing a port to another process.
const startAttempts = 3

// lostPortRace reports whether a server could not bind a port it was
// given (see Caveats in the package documentation).
func (c *Cluster) lostPortRace() bool {
	for _, s := range c.servers {
		for _, line := range s.out.Tail() {
			if strings.Contains(line, "java.net.BindException: Address already in use") {
				return true
			}
		}
	}
	return false
}

// newCluster writes every server's files and registers the cleanup.
func newCluster(t testing.TB, n int, cfg Config, inst installation) (*Cluster, error) {
	// The log's cleanup must run last and the temporary directory must be
	// removed after the servers stop: register in that order, before Close.
	c := &Cluster{cfg: cfg, inst: inst, log: newTestLog(t, "zktest: ")}
	base := t.TempDir()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("zktest: cleanup: %v", err)
		}
	})
	if !inst.logs {
		c.log.Printf("no log4j binding found next to ZooKeeper (%s, %s): servers will log nothing", debianSlf4j, debianLog4j)
	}

	perServer := 3 // client, quorum, election
	if n == 1 {
		perServer = 1
	}
	ps, err := ports.take(n * perServer)
	if err != nil {
		return nil, err
	}
	if testHookPortsTaken != nil {
		testHookPortsTaken(ps)
	}
	if sec := cfg.Security; sec != nil && sec.TLS {
		if err := c.setUpTLS(base); err != nil {
			return nil, err
		}
	}
	peers := make([]peer, n)
	for i := range peers {
		peers[i] = peer{id: i + 1, host: "127.0.0.1", clientPort: ps[i*perServer]}
		if cfg.Place != nil {
			peers[i].host = cfg.Place(i).Addr
		}
		if n > 1 {
			peers[i].quorumPort, peers[i].electionPort = ps[i*perServer+1], ps[i*perServer+2]
		}
	}
	for i, p := range peers {
		dir := filepath.Join(base, fmt.Sprintf("zk%d", i))
		s := &server{
			index:   i,
			peer:    p,
			dir:     dir,
			dataDir: filepath.Join(dir, "data"),
			out:     &lineSink{log: newTestLog(t, fmt.Sprintf("zk%d| ", i))},
		}
		if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
			return nil, err
		}
		files := map[string]string{
			filepath.Join(s.dataDir, "myid"):       fmt.Sprintf("%d\n", p.id),
			filepath.Join(dir, "zoo.cfg"):          cfg.zooCfg(p, peers, s.dataDir),
			filepath.Join(dir, "log4j.properties"): cfg.log4jProperties(),
		}
		if sec := cfg.Security; sec != nil && len(sec.SASLUsers) > 0 {
			files[filepath.Join(dir, "jaas.conf")] = sec.jaasConf()
		}
		if c.ca != nil {
			if err := c.ca.serverKeyStore(dir); err != nil {
				return nil, err
			}
		}
		for name, content := range files {
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				return nil, err
			}
		}
		c.servers = append(c.servers, s)
	}
	return c, nil
}

// jvmArgs mirrors what Debian's zkServer.sh start-foreground runs, minus JMX,
// plus flags that make a small JVM start fast.
func (c *Cluster) jvmArgs(s *server) []string {
	args := []string{
		"-Xms32m", fmt.Sprintf("-Xmx%dm", c.cfg.HeapMB),
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1",
		"-XX:-UsePerfData",
		"-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dlog4j.configuration=file:" + filepath.Join(s.dir, "log4j.properties"),
		"-Dzookeeper.console.threshold=" + c.cfg.LogLevel,
	}
	if sec := c.cfg.Security; sec != nil && len(sec.SASLUsers) > 0 {
		args = append(args, "-Djava.security.auth.login.config="+filepath.Join(s.dir, "jaas.conf"))
	}
	args = append(args, c.cfg.JVMFlags...)
	classpath := c.inst.classpath
	if sec := c.cfg.Security; sec != nil && sec.TLS && c.inst.debian && exists(debianNettyCodec) {
		classpath += string(os.PathListSeparator) + debianNettyCodec
	}
	return append(args, "-cp", classpath, quorumPeerMain, filepath.Join(s.dir, "zoo.cfg"))
}

// spawn starts s's JVM without waiting for it to serve.
func (c *Cluster) spawn(s *server) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed.Load() {
		return errors.New("zktest: cluster is closed")
	}
	if s.proc != nil {
		select {
		case <-s.proc.done:
			return fmt.Errorf("zktest: server %d exited unexpectedly (%v); Stop it before starting it again", s.index, s.proc.err)
		default:
			return fmt.Errorf("zktest: server %d is already running", s.index)
		}
	}
	argv := append([]string{c.inst.java}, c.jvmArgs(s)...)
	if c.cfg.Place != nil {
		argv = append(slices.Clone(c.cfg.Place(s.index).Enter), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	// One writer for both streams: exec then uses one pipe, keeping order.
	cmd.Stdout, cmd.Stderr = s.out, s.out
	cmd.SysProcAttr = serverProcAttr()
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("zktest: start server %d: %w", s.index, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	s.out.Note("zktest: started pid %d, client port %d", cmd.Process.Pid, s.peer.clientPort)
	return nil
}

// halt signals p and waits for it to exit. A graceful halt that needs
// SIGKILL, or a process that died before it was halted, is an error.
func (p *process) halt(kill bool, grace time.Duration) error {
	select {
	case <-p.done:
		return fmt.Errorf("had exited unexpectedly: %v", p.err)
	default:
	}
	p.stopping.Store(true)
	if kill {
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		<-p.done
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		<-p.done
		return fmt.Errorf("did not exit within %v of SIGTERM and was killed", grace)
	}
	// The JVM exits with 128+15 after running its shutdown hooks.
	var ee *exec.ExitError
	if p.err == nil || errors.As(p.err, &ee) && ee.ExitCode() == 128+int(syscall.SIGTERM) {
		return nil
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
		return nil
	}
	return fmt.Errorf("exited with %v after SIGTERM", p.err)
}

// Stop stops server i gracefully: SIGTERM, then SIGKILL after
// Config.StopTimeout (which is reported as an error).
func (c *Cluster) Stop(i int) error { return c.halt(i, false) }

// Kill stops server i with SIGKILL, as a crash would.
func (c *Cluster) Kill(i int) error { return c.halt(i, true) }

func (c *Cluster) halt(i int, kill bool) error {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("zktest: server %d is not running", i)
	}
	p := s.proc
	s.proc = nil
	verb := "stop"
	if kill {
		verb = "kill"
	}
	s.out.Note("zktest: %s pid %d", verb, p.cmd.Process.Pid)
	if err := p.halt(kill, c.cfg.StopTimeout); err != nil {
		return fmt.Errorf("zktest: %s server %d: %w\n%s", verb, i, err, c.tail(i))
	}
	return nil
}

// Start starts stopped server i again, on the same ports and data
// directory, and waits until it serves and the running servers agree on one
// leader.
func (c *Cluster) Start(i int) error {
	if err := c.spawn(c.server(i)); err != nil {
		return err
	}
	return c.waitReady([]int{i}, c.cfg.StartTimeout)
}

// Close stops every running server, in parallel, and reports each failure,
// including servers that had died on their own. Later calls return nil. The
// cleanup registered by StartCluster calls it.
func (c *Cluster) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() {
			s.mu.Lock()
			running := s.proc != nil
			s.mu.Unlock()
			if running {
				errs[i] = c.halt(i, false)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Size returns the number of servers.
func (c *Cluster) Size() int { return len(c.servers) }

// Config returns the configuration the cluster was started with.
func (c *Cluster) Config() Config { return c.cfg }

// Servers returns the client addresses (127.0.0.1:port) of the servers with
// the given indexes, or of all servers when none are given.
func (c *Cluster) Servers(idx ...int) []string {
	if len(idx) == 0 {
		idx = c.indexes()
	}
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = c.server(i).addr()
	}
	return out
}

// ConnectString returns Servers(idx...) joined with commas, the form
// ZooKeeper clients and Flink's high-availability.zookeeper.quorum take.
func (c *Cluster) ConnectString(idx ...int) string {
	return strings.Join(c.Servers(idx...), ",")
}

// DataDir returns server i's data directory (myid, snapshots, logs).
func (c *Cluster) DataDir(i int) string { return c.server(i).dataDir }

// PID returns the process id of server i, or 0 if it is stopped.
func (c *Cluster) PID(i int) int {
	s := c.server(i)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether server i has been started and not stopped. A
// server that died on its own still counts as running until Stop reports it.
func (c *Cluster) Running(i int) bool { return c.PID(i) != 0 }

// FourLetterWord sends a four-letter command to server i (over TLS
// when its clients must use TLS).
func (c *Cluster) FourLetterWord(i int, word string) (string, error) {
	if c.harnessTLS != nil {
		return FourLetterWordTLS(c.server(i).addr(), word, 2*time.Second, c.harnessTLS)
	}
	return FourLetterWord(c.server(i).addr(), word, 2*time.Second)
}

// setUpTLS makes the cluster's CA and the harness's client certificate.
func (c *Cluster) setUpTLS(base string) error {
	dir := filepath.Join(base, "ca")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, err := newCA(dir, "zktest CA")
	if err != nil {
		return err
	}
	is, err := ca.issue("zktest-harness", nil)
	if err != nil {
		return err
	}
	kp, err := tls.LoadX509KeyPair(is.CertFile, is.KeyFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	c.ca, c.harnessTLS = ca, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
	return nil
}

// CA is the certificate authority of the servers' certificates, nil
// unless Security.TLS: clients trust CA.CertFile, and certificates it
// issues are accepted as client certificates.
func (c *Cluster) CA() *CA { return c.ca }

// Mode returns server i's role. It returns an error wrapping ErrNotServing
// while the server runs but does not serve, for example during an election.
func (c *Cluster) Mode(i int) (Mode, error) {
	m, err := c.mode(i)
	if err != nil {
		return "", fmt.Errorf("zktest: %w", err)
	}
	return m, nil
}

func (c *Cluster) mode(i int) (Mode, error) {
	if !c.Running(i) {
		return "", fmt.Errorf("server %d is not running", i)
	}
	reply, err := c.FourLetterWord(i, "srvr")
	if err != nil {
		return "", fmt.Errorf("server %d: %w", i, err)
	}
	m, err := parseMode(reply)
	if err != nil {
		return "", fmt.Errorf("server %d: %w", i, err)
	}
	return m, nil
}

// Leader returns the index of the running server that reports itself leader
// (or standalone). It does not wait: during an election it returns an error.
func (c *Cluster) Leader() (int, error) {
	leader := -1
	var errs []error
	for i := range c.servers {
		if !c.Running(i) {
			continue
		}
		m, err := c.mode(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m != ModeLeader && m != ModeStandalone {
			continue
		}
		if leader >= 0 {
			return -1, fmt.Errorf("zktest: servers %d and %d both lead", leader, i)
		}
		leader = i
	}
	if leader < 0 {
		return -1, fmt.Errorf("zktest: no running server leads: %w", errors.Join(errs...))
	}
	return leader, nil
}

// WaitLeader waits until every running server serves and exactly one of
// them leads, and returns that one.
func (c *Cluster) WaitLeader(timeout time.Duration) (int, error) {
	var running []int
	for i := range c.servers {
		if c.Running(i) {
			running = append(running, i)
		}
	}
	if err := c.waitReady(running, timeout); err != nil {
		return -1, err
	}
	return c.Leader()
}

// errExited marks a server that died while the harness waited for it.
var errExited = errors.New("exited")

// waitReady polls srvr until every server in want serves and exactly one
// running server leads. It gives up early if a server in want dies.
func (c *Cluster) waitReady(want []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.ready(want)
		if err == nil {
			return nil
		}
		if errors.Is(err, errExited) || time.Now().After(deadline) {
			return fmt.Errorf("zktest: servers %v not ready after %v: %w\n%s",
				want, timeout, err, c.tail(want...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) ready(want []int) error {
	var errs []error
	leaders := 0
	for i, s := range c.servers {
		wanted := slices.Contains(want, i)
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p == nil {
			if wanted {
				return fmt.Errorf("server %d is not running", i)
			}
			continue
		}
		select {
		case <-p.done:
			if wanted {
				return fmt.Errorf("server %d %w: %v", i, errExited, p.err)
			}
			continue
		default:
		}
		m, err := c.mode(i)
		switch {
		case err != nil:
			if wanted {
				errs = append(errs, err)
			}
		case m == ModeLeader || m == ModeStandalone:
			leaders++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if leaders != 1 {
		return fmt.Errorf("%d leaders among running servers, want 1", leaders)
	}
	return nil
}

// tail formats the last output lines of the given servers, or of all.
func (c *Cluster) tail(idx ...int) string {
	if len(idx) == 0 {
		idx = c.indexes()
	}
	var b strings.Builder
	for _, i := range idx {
		fmt.Fprintf(&b, "last output of server %d (myid %d, %s):\n", i, i+1, c.server(i).addr())
		for _, line := range c.server(i).out.Tail() {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return b.String()
}

func (c *Cluster) indexes() []int {
	idx := make([]int, len(c.servers))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

func (c *Cluster) server(i int) *server {
	if i < 0 || i >= len(c.servers) {
		panic(fmt.Sprintf("zktest: server index %d out of range [0,%d)", i, len(c.servers)))
	}
	return c.servers[i]
}

func (s *server) addr() string { return fmt.Sprintf("%s:%d", s.peer.host, s.peer.clientPort) }
