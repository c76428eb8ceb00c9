package zktest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

var acl = zk.WorldACL(zk.PermAll)

// retry calls f until it succeeds or timeout passes; go-zookeeper fails
// requests while it reconnects.
func retry(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestIntegration_SingleServerCRUD(t *testing.T) {
	c := StartCluster(t, 1, func(cfg *Config) { cfg.MaxSessionTimeout = 8 * time.Second })
	if conf, err := c.FourLetterWord(0, "conf"); err != nil || !strings.Contains(conf, "maxSessionTimeout=8000") {
		t.Fatalf("conf = %q, %v; want maxSessionTimeout=8000 from the Option", conf, err)
	}
	if m, err := c.Mode(0); err != nil || m != ModeStandalone {
		t.Fatalf("Mode(0) = %q, %v; want %q", m, err, ModeStandalone)
	}
	if l, err := c.Leader(); err != nil || l != 0 {
		t.Fatalf("Leader() = %d, %v; want 0", l, err)
	}
	if reply, err := c.FourLetterWord(0, "ruok"); err != nil || reply != "imok" {
		t.Fatalf("ruok = %q, %v; want imok", reply, err)
	}
	cl := Connect(t, c.Servers())

	if _, err := cl.Create("/crud", []byte("v1"), 0, acl); err != nil {
		t.Fatalf("Create: %v", err)
	}
	data, stat, err := cl.Get("/crud")
	if err != nil || string(data) != "v1" {
		t.Fatalf("Get = %q, %v; want v1", data, err)
	}
	if _, err = cl.Set("/crud", []byte("v2"), stat.Version+1); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("Set with a wrong version = %v, want ErrBadVersion", err)
	}
	if stat, err = cl.Set("/crud", []byte("v2"), stat.Version); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if data, _, err := cl.Get("/crud"); err != nil || string(data) != "v2" {
		t.Fatalf("Get after Set = %q, %v; want v2", data, err)
	}
	if err := cl.Delete("/crud", stat.Version); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ok, _, err := cl.Exists("/crud"); err != nil || ok {
		t.Fatalf("Exists after Delete = %v, %v; want false", ok, err)
	}
}

func TestIntegration_EnsembleSurvivesLeaderStop(t *testing.T) {
	c := StartCluster(t, 3)
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	cl := Connect(t, c.Servers())
	sid := cl.SessionID()
	if _, err = cl.Create("/before", []byte("x"), 0, acl); err != nil {
		t.Fatalf("Create: %v", err)
	}
	mark := cl.Mark()

	if err = c.Stop(leader); err != nil {
		t.Fatalf("Stop(leader %d): %v", leader, err)
	}
	if c.Running(leader) {
		t.Fatalf("Running(%d) = true after Stop", leader)
	}
	newLeader, err := c.WaitLeader(30 * time.Second)
	if err != nil {
		t.Fatalf("no new leader: %v", err)
	}
	if newLeader == leader {
		t.Fatalf("WaitLeader() = %d, the stopped server", newLeader)
	}
	t.Logf("leader %d stopped; server %d leads now", leader, newLeader)

	retry(t, 20*time.Second, "write after failover", func() error {
		_, err := cl.Create("/after", []byte("y"), 0, acl)
		if errors.Is(err, zk.ErrNodeExists) { // an earlier try got through
			return nil
		}
		return err
	})
	if got := cl.SessionID(); got != sid {
		t.Errorf("session changed from 0x%x to 0x%x across the failover", sid, got)
	}
	for _, ev := range cl.Events()[mark:] {
		if ev.State == zk.StateExpired {
			t.Errorf("session expired during the failover: %v", cl.Events()[mark:])
		}
	}
	if _, _, err := cl.Get("/before"); err != nil {
		t.Errorf("Get /before after failover: %v", err)
	}
}

func TestIntegration_StoppedServerRestartsAndRejoins(t *testing.T) {
	c := StartCluster(t, 3)
	leader, err := c.Leader()
	if err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	if err := c.Stop(follower); err != nil {
		t.Fatalf("Stop(%d): %v", follower, err)
	}
	if err := c.Stop(follower); err == nil {
		t.Fatalf("second Stop(%d) = nil, want an error", follower)
	}
	if m, err := c.Mode(follower); err == nil {
		t.Fatalf("Mode(%d) of a stopped server = %q, want an error", follower, m)
	}
	others := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == follower })
	cl := Connect(t, c.Servers(others...))
	if _, err := cl.Create("/while-down", []byte("missed"), 0, acl); err != nil {
		t.Fatalf("Create with server %d down: %v", follower, err)
	}

	if err := c.Start(follower); err != nil {
		t.Fatalf("Start(%d): %v", follower, err)
	}
	if m, err := c.Mode(follower); err != nil || m != ModeFollower {
		t.Fatalf("Mode(%d) after restart = %q, %v; want follower", follower, m, err)
	}
	// Read through the restarted server only: it caught up.
	direct := Connect(t, c.Servers(follower))
	if data, _, err := direct.Get("/while-down"); err != nil || string(data) != "missed" {
		t.Fatalf("Get /while-down from restarted server = %q, %v; want \"missed\"", data, err)
	}

	// A crashed leader comes back as a follower.
	if err := c.Kill(leader); err != nil {
		t.Fatalf("Kill(%d): %v", leader, err)
	}
	if _, err := c.WaitLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(leader); err != nil {
		t.Fatalf("Start(%d) after Kill: %v", leader, err)
	}
	if m, err := c.Mode(leader); err != nil || m != ModeFollower {
		t.Fatalf("Mode(%d) after restart = %q, %v; want follower", leader, m, err)
	}
}

func TestIntegration_FiveServerEnsembleStarts(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 5)
	elapsed := time.Since(start)
	t.Logf("5-server ensemble ready in %v", elapsed.Round(time.Millisecond))
	if elapsed > 45*time.Second {
		t.Errorf("5-server ensemble took %v to start, want under 45s", elapsed)
	}
	modes := map[Mode]int{}
	for i := range c.Size() {
		m, err := c.Mode(i)
		if err != nil {
			t.Fatal(err)
		}
		modes[m]++
	}
	if modes[ModeLeader] != 1 || modes[ModeFollower] != 4 {
		t.Fatalf("modes = %v, want 1 leader and 4 followers", modes)
	}
	if got := strings.Count(c.ConnectString(3, 4), ","); got != 1 {
		t.Fatalf("ConnectString(3, 4) = %q, want two addresses", c.ConnectString(3, 4))
	}
	cl := Connect(t, c.Servers(3, 4))
	if _, err := cl.Create("/five", nil, 0, acl); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

func TestIntegration_ProxyBlocksAndUnblocksClient(t *testing.T) {
	c := StartCluster(t, 1)
	cl := Connect(t, c.Servers(), ThroughProxies(), WithSessionTimeout(4*time.Second))
	sid := cl.SessionID()
	p := cl.Proxies()[0]
	if len(cl.Proxies()) != 1 || cl.Server() != p.Addr() {
		t.Fatalf("client talks to %s, want its proxy %s", cl.Server(), p.Addr())
	}
	mark := cl.Mark()

	// Block for less than the client's receive timeout (2/3 of the session
	// timeout): the request is held, then delivered, on the same connection.
	p.Block()
	created := make(chan error, 1)
	go func() {
		_, err := cl.Create("/held", nil, 0, acl)
		created <- err
	}()
	select {
	case err := <-created:
		t.Fatalf("Create finished (%v) while the proxy was blocked", err)
	case <-time.After(time.Second):
	}
	direct := Connect(t, c.Servers())
	if ok, _, err := direct.Exists("/held"); err != nil || ok {
		t.Fatalf("server sees /held = %v, %v while blocked; want false", ok, err)
	}
	p.Unblock()
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("held Create failed after Unblock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held Create did not finish after Unblock")
	}
	if got := cl.SessionID(); got != sid {
		t.Errorf("session changed from 0x%x to 0x%x across a short block", sid, got)
	}
	if ev := cl.Events()[mark:]; len(ev) != 0 {
		t.Errorf("session events during a short block: %v, want none", ev)
	}
}

// TestIntegration_DropConnsKeepsSession shows why ExpireSession must
// black-hole traffic: a client whose connections are reset, for longer
// than its session timeout, reconnects each time and keeps its session.
func TestIntegration_DropConnsKeepsSession(t *testing.T) {
	c := StartCluster(t, 1)
	const timeout = 2 * time.Second
	cl := Connect(t, c.Servers(), ThroughProxies(), WithSessionTimeout(timeout))
	sid := cl.SessionID()
	if _, err := cl.Create("/eph", nil, zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	drops := 0
	for start := time.Now(); time.Since(start) < 2*timeout; drops++ {
		mark := cl.Mark()
		if n := cl.Proxies()[0].DropConns(); n != 1 {
			t.Fatalf("DropConns() = %d, want the client's connection", n)
		}
		// With one server go-zookeeper waits a second before redialling.
		if _, err := cl.WaitState(mark, zk.StateHasSession, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("dropped the connection %d times over %v", drops, 2*timeout)
	if got := cl.SessionID(); got != sid {
		t.Fatalf("session changed from 0x%x to 0x%x; events %v", sid, got, cl.Events())
	}
	if ok, _, err := cl.Exists("/eph"); err != nil || !ok {
		t.Fatalf("Exists /eph = %v, %v; want the ephemeral node to survive", ok, err)
	}
}

func TestIntegration_ExpireSession(t *testing.T) {
	c := StartCluster(t, 3)
	cl := Connect(t, c.Servers(), ThroughProxies(), WithSessionTimeout(time.Second))
	old := cl.SessionID()
	if _, err := cl.Create("/eph", []byte("mine"), zk.FlagEphemeral, acl); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := cl.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	mark := cl.Mark()

	start := time.Now()
	ExpireSession(t, cl)
	t.Logf("ExpireSession took %v", time.Since(start).Round(time.Millisecond))

	if _, err = cl.WaitState(mark, zk.StateExpired, 0); err != nil {
		t.Fatalf("ExpireSession returned without StateExpired: %v", err)
	}
	if _, err = cl.WaitState(mark, zk.StateHasSession, 15*time.Second); err != nil {
		t.Fatalf("no new session: %v", err)
	}
	if cl.SessionID() == old || cl.SessionID() == 0 {
		t.Fatalf("session id 0x%x after expiry, want a new one (old 0x%x)", cl.SessionID(), old)
	}
	select {
	case ev := <-watch:
		if ev.Type != zk.EventNotWatching {
			t.Errorf("watch fired with %v, want EventNotWatching", ev)
		}
	case <-time.After(5 * time.Second):
		t.Error("watch of the expired session did not fire")
	}
	direct := Connect(t, c.Servers())
	exists, _, err := direct.Exists("/eph")
	if err != nil || exists {
		t.Fatalf("Exists /eph after expiry = %v, %v; want false", exists, err)
	}
	children, _, err := direct.Children("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range children {
		if strings.HasPrefix(name, "zktest-expire-") {
			t.Errorf("marker /%s left behind", name)
		}
	}
}

// TestIntegration_ExpireConnSession expires a connection opened by "code
// under test" with its own zk.Connect.
func TestIntegration_ExpireConnSession(t *testing.T) {
	c := StartCluster(t, 1)
	p := NewProxy(t, c.Servers()[0])
	conn, _, err := zk.Connect([]string{p.Addr()}, time.Second, zk.WithLogger(newTestLog(t, "conn under test: ")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	retry(t, 10*time.Second, "create", func() error {
		_, err := conn.Create("/eph", nil, zk.FlagEphemeral, acl)
		return err
	})
	old := conn.SessionID()
	ExpireConnSession(t, conn, []*Proxy{p})
	if conn.SessionID() == old {
		t.Fatalf("session id still 0x%x", old)
	}
	retry(t, 10*time.Second, "Exists /eph", func() error {
		ok, _, err := conn.Exists("/eph")
		if err == nil && ok {
			t.Fatal("/eph survived its session")
		}
		return err
	})
}

// processesUnder returns the pids of processes whose command line mentions
// dir.
func processesUnder(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestIntegration_CleanupLeavesNoProcesses(t *testing.T) {
	var dir string
	var pids []int
	ran := t.Run("cluster", func(t *testing.T) {
		c := StartCluster(t, 3)
		dir = filepath.Dir(filepath.Dir(c.DataDir(0)))
		for i := range c.Size() {
			pids = append(pids, c.PID(i))
		}
		if got := processesUnder(t, dir); len(got) != 3 {
			t.Fatalf("processes under %s = %v, want the 3 servers %v", dir, got, pids)
		}
		if err := c.Kill(1); err != nil { // one already gone at cleanup
			t.Fatal(err)
		}
	})
	if !ran {
		return // the subtest failed; its report says why
	}
	if dir == "" {
		t.Skip("the subtest started no cluster")
	}
	if left := processesUnder(t, dir); len(left) > 0 {
		t.Fatalf("processes %v still run after cleanup (servers were %v)", left, pids)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			if cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); strings.Contains(string(cmd), quorumPeerMain) {
				t.Errorf("server pid %d still runs", pid)
			}
		}
	}
}

func TestIntegration_CloseReportsCrashedServer(t *testing.T) {
	c := StartCluster(t, 1)
	pid := c.PID(0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.servers[0].proc.done: // reaped by the harness
	case <-time.After(10 * time.Second):
		t.Fatal("killed server not reaped")
	}
	err := c.Close()
	if err == nil || !strings.Contains(err.Error(), "exited unexpectedly") {
		t.Fatalf("Close() = %v, want it to report the crash", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close() = %v, want nil", err)
	}
	if err := c.Start(0); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestIntegration_StartFailureShowsServerOutput starts a server whose
// zoo.cfg ZooKeeper rejects and checks that the error says why.
func TestIntegration_StartFailureShowsServerOutput(t *testing.T) {
	inst := requireInstallation(t)
	cfg := DefaultConfig()
	cfg.Extra = map[string]string{"secureClientPort": "not-a-port"}
	c, err := newCluster(t, 1, cfg, inst)
	if err != nil {
		t.Fatal(err)
	}
	if err = c.spawn(c.servers[0]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.waitReady([]int{0}, 30*time.Second)
	if err == nil {
		t.Fatal("waitReady succeeded for a broken config")
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("waitReady took %v; it should give up once the server exits", time.Since(start))
	}
	if msg := err.Error(); !strings.Contains(msg, "exited") || !strings.Contains(msg, "not-a-port") {
		t.Fatalf("error does not explain the failure:\n%v", err)
	}
	// The crash is reported by Stop; cleanup then has nothing left to do.
	if err := c.Stop(0); err == nil {
		t.Fatal("Stop of a crashed server = nil, want the crash")
	}
}

// TestIntegration_ZookeeperHomeLayout runs a server from an upstream-style
// ZOOKEEPER_HOME built from the installed jars.
func TestIntegration_ZookeeperHomeLayout(t *testing.T) {
	inst := requireInstallation(t)
	if inst.source != "Debian package" {
		t.Skipf("needs the Debian jars to build a fake distribution; using %s", inst.source)
	}
	home := t.TempDir()
	lib := filepath.Join(home, "lib")
	os.MkdirAll(lib, 0o755)
	for i, jar := range filepath.SplitList(inst.classpath) {
		name := filepath.Base(jar)
		if i == 0 {
			name = "zookeeper-test.jar"
		}
		if err := os.Symlink(jar, filepath.Join(lib, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvHome, home)
	t.Setenv(EnvClasspath, "")
	c := StartCluster(t, 1)
	if m, err := c.Mode(0); err != nil || m != ModeStandalone {
		t.Fatalf("Mode(0) = %q, %v", m, err)
	}
	if got := processesUnder(t, home); len(got) != 1 {
		t.Fatalf("processes using %s = %v, want the server", home, got)
	}
}

// TestIntegration_StartClusterRetriesLostPort: a port taken by someone
// else before ZooKeeper binds it costs StartCluster one more attempt on
// other ports, not the test.
func TestIntegration_StartClusterRetriesLostPort(t *testing.T) {
	var taken []net.Listener
	t.Cleanup(func() {
		testHookPortsTaken = nil
		for _, l := range taken {
			l.Close()
		}
	})
	clusters := 0
	testHookPortsTaken = func(ps []int) {
		clusters++
		if clusters > 1 {
			return
		}
		// The client port of the first server, the race make test once
		// lost: that server exits at once.
		l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", ps[0]))
		if err != nil {
			t.Fatalf("take port %d: %v", ps[0], err)
		}
		taken = append(taken, l)
	}
	c := StartCluster(t, 3)
	if clusters != 2 {
		t.Fatalf("%d clusters started, want 2", clusters)
	}
	if _, err := c.Leader(); err != nil {
		t.Fatal(err)
	}
	cl := Connect(t, c.Servers())
	if _, err := cl.Create("/after-retry", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
}
