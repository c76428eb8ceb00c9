package zktest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/internal/zksasl"
)

// DefaultSessionTimeout is the session timeout Connect requests unless told
// otherwise. It outlasts a leader election of a test ensemble.
const DefaultSessionTimeout = 4 * time.Second

// Client is a go-zookeeper connection opened by Connect. It records every
// session event, so a test can wait for a state without consuming the
// library's event channel (which drops events once 6 are unread).
type Client struct {
	*zk.Conn

	proxies []*Proxy
	log     *testLog
	// security are the options that authenticate (for ExpireSession's
	// observer).
	security []ConnectOption

	mu      sync.Mutex
	events  []zk.Event    // GUARDED_BY(mu): session events in order
	changed chan struct{} // GUARDED_BY(mu): closed and replaced on each event
}

// ConnectOption changes how Connect connects.
type ConnectOption func(*connectConfig)

type connectConfig struct {
	sessionTimeout time.Duration
	waitTimeout    time.Duration
	viaProxies     bool
	zkOptions      []func(*zk.Conn)
	// digest is user:password to add (addauth digest) once connected.
	digest string
	// saslUser and saslPassword log every connection in with SASL
	// DIGEST-MD5.
	saslUser, saslPassword string
	tls                    *tls.Config
	security               []ConnectOption
}

// WithDigest authenticates the client as user with password by
// ZooKeeper's digest scheme (addauth digest user:password), before
// Connect returns; go-zookeeper adds it again on every reconnect.
func WithDigest(user, password string) ConnectOption {
	return func(c *connectConfig) {
		c.digest = user + ":" + password
		c.security = append(c.security, WithDigest(user, password))
	}
}

// WithSASL logs every connection of the client in as user with password
// by SASL DIGEST-MD5 (internal/zksasl), before its first request.
func WithSASL(user, password string) ConnectOption {
	return func(c *connectConfig) {
		c.saslUser, c.saslPassword = user, password
		c.security = append(c.security, WithSASL(user, password))
	}
}

// WithTLS connects over TLS with cfg (for a cluster whose clients must
// use TLS: Cluster.CA().ClientTLS).
func WithTLS(cfg *tls.Config) ConnectOption {
	return func(c *connectConfig) {
		c.tls = cfg
		c.security = append(c.security, WithTLS(cfg))
	}
}

// dialer is go-zookeeper's dialer for cfg's TLS and SASL, nil for
// plain TCP.
func (cfg *connectConfig) dialer() zk.Dialer {
	if cfg.tls == nil && cfg.saslUser == "" {
		return nil
	}
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var conn net.Conn
		var err error
		if cfg.tls != nil {
			tc := cfg.tls.Clone()
			if host, _, herr := net.SplitHostPort(addr); herr == nil && tc.ServerName == "" {
				tc.ServerName = host
			}
			conn, err = (&tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: tc}).Dial(network, addr)
		} else {
			conn, err = net.DialTimeout(network, addr, timeout)
		}
		if err != nil || cfg.saslUser == "" {
			return conn, err
		}
		return zksasl.Wrap(conn, cfg.saslUser, cfg.saslPassword, 10*time.Second, nil), nil
	}
}

// WithSessionTimeout sets the session timeout the client requests; the
// server clamps it into its [MinSessionTimeout, MaxSessionTimeout].
func WithSessionTimeout(d time.Duration) ConnectOption {
	return func(c *connectConfig) { c.sessionTimeout = d }
}

// WithWaitTimeout bounds how long Connect waits for a session (default 30s).
func WithWaitTimeout(d time.Duration) ConnectOption {
	return func(c *connectConfig) { c.waitTimeout = d }
}

// ThroughProxies puts a fresh Proxy in front of every server, so the test
// can cut the client off (Client.Proxies) or expire its session
// (ExpireSession).
func ThroughProxies() ConnectOption {
	return func(c *connectConfig) { c.viaProxies = true }
}

// WithZKOptions passes options such as zk.WithMaxBufferSize to zk.Connect.
// Connect sets the logger and the event callback itself; overriding them
// breaks Client's event history.
func WithZKOptions(opts ...func(*zk.Conn)) ConnectOption {
	return func(c *connectConfig) { c.zkOptions = append(c.zkOptions, opts...) }
}

// Connect opens a go-zookeeper connection to servers (client addresses, as
// from Cluster.Servers) with its log sent to t.Log, and waits until it has a
// session. The connection, and its proxies, are closed by a cleanup
// registered on t. It must be called from the test goroutine.
func Connect(t testing.TB, servers []string, opts ...ConnectOption) *Client {
	t.Helper()
	cfg := connectConfig{sessionTimeout: DefaultSessionTimeout, waitTimeout: 30 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	if len(servers) == 0 {
		t.Fatal("zktest: Connect: no servers")
	}
	c := &Client{log: newTestLog(t, "zk client: "), changed: make(chan struct{}), security: cfg.security}
	addrs := servers
	if cfg.viaProxies {
		addrs = make([]string, len(servers))
		for i, s := range servers {
			p := NewProxy(t, s)
			c.proxies = append(c.proxies, p)
			addrs[i] = p.Addr()
		}
	}
	extra := func(conn *zk.Conn) {
		if d := cfg.dialer(); d != nil {
			zk.WithDialer(d)(conn)
		}
		for _, o := range cfg.zkOptions {
			o(conn)
		}
	}
	conn, _, err := zk.Connect(addrs, cfg.sessionTimeout, zk.WithLogger(c.log), zk.WithEventCallback(c.record), extra)
	if err != nil {
		t.Fatalf("zktest: Connect %v: %v", servers, err)
	}
	c.Conn = conn
	t.Cleanup(conn.Close)
	if _, err := c.WaitState(0, zk.StateHasSession, cfg.waitTimeout); err != nil {
		t.Fatalf("zktest: Connect %v: %v", servers, err)
	}
	if cfg.digest != "" {
		if err := conn.AddAuth("digest", []byte(cfg.digest)); err != nil {
			t.Fatalf("zktest: Connect %v: addauth digest: %v", servers, err)
		}
	}
	return c
}

// record is the zk event callback; it must not block.
func (c *Client) record(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
	close(c.changed)
	c.changed = make(chan struct{})
}

// Proxies returns the proxies in front of the servers (ThroughProxies), in
// the order of the servers passed to Connect, or nil.
func (c *Client) Proxies() []*Proxy { return c.proxies }

// Events returns the session events seen so far, oldest first.
func (c *Client) Events() []zk.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]zk.Event(nil), c.events...)
}

// Mark returns the number of session events seen so far: pass it to
// WaitState to wait only for later events.
func (c *Client) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

// WaitState waits for a session event with state want at position from or
// later in Events, and returns its position.
func (c *Client) WaitState(from int, want zk.State, timeout time.Duration) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		for i := from; i < len(c.events); i++ {
			if c.events[i].State == want {
				c.mu.Unlock()
				return i, nil
			}
		}
		from = max(from, len(c.events))
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return -1, fmt.Errorf("zktest: no %v within %v; session events: %v", want, timeout, c.stateHistory())
		}
	}
}

func (c *Client) stateHistory() []zk.State {
	var states []zk.State
	for _, ev := range c.Events() {
		states = append(states, ev.State)
	}
	return states
}

// expireTimeout bounds each step of ExpireSession. The server expires a
// session after its negotiated timeout, at most the cluster's
// MaxSessionTimeout (5s by default).
const expireTimeout = 60 * time.Second

// ExpireSession makes the ZooKeeper servers expire c's current session for
// real, and returns once c has seen zk.StateExpired. c must have been
// opened ThroughProxies. Afterwards go-zookeeper opens a new session by
// itself (zk.StateHasSession follows); ephemeral nodes and watches of the
// old session are gone.
//
// It blocks c's proxies, so c can reach no server, until the servers have
// closed the session, which takes about the negotiated session timeout,
// then unblocks them; c's next connection attempt is refused with "session
// expired". To observe the expiry it creates an ephemeral node
// /zktest-expire-<session id> through c and watches it vanish from a second,
// direct connection.
func ExpireSession(t testing.TB, c *Client) {
	t.Helper()
	if len(c.proxies) == 0 {
		t.Fatal("zktest: ExpireSession needs a Client connected ThroughProxies")
	}
	mark := c.Mark()
	if err := expire(t, c.Conn, c.proxies, c.security...); err != nil {
		t.Fatalf("zktest: ExpireSession: %v", err)
	}
	if _, err := c.WaitState(mark, zk.StateExpired, expireTimeout); err != nil {
		t.Fatalf("zktest: ExpireSession: %v", err)
	}
}

// ExpireConnSession is ExpireSession for a connection the code under test
// opened itself through proxies (NewProxy) that it dialled exclusively. It
// returns once conn's session id has changed from the expired one. On a
// secured cluster, security are the options (WithDigest, WithSASL,
// WithTLS) its observer connects with.
func ExpireConnSession(t testing.TB, conn *zk.Conn, proxies []*Proxy, security ...ConnectOption) {
	t.Helper()
	if len(proxies) == 0 {
		t.Fatal("zktest: ExpireConnSession: no proxies")
	}
	old := conn.SessionID()
	if err := expire(t, conn, proxies, security...); err != nil {
		t.Fatalf("zktest: ExpireConnSession: %v", err)
	}
	deadline := time.Now().Add(expireTimeout)
	for conn.SessionID() == old {
		if time.Now().After(deadline) {
			t.Fatalf("zktest: ExpireConnSession: conn still reports expired session 0x%x after %v", old, expireTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expire blocks proxies until the servers have closed conn's session.
func expire(t testing.TB, conn *zk.Conn, proxies []*Proxy, security ...ConnectOption) (err error) {
	sid := conn.SessionID()
	if sid == 0 || conn.State() != zk.StateHasSession {
		return fmt.Errorf("connection has no session (state %v)", conn.State())
	}
	marker := fmt.Sprintf("/zktest-expire-%016x", uint64(sid))
	if _, err := conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create marker %s: %w", marker, err)
	}

	// The observer talks to the servers directly.
	targets := make([]string, len(proxies))
	for i, p := range proxies {
		targets[i] = p.Target()
	}
	observer := Connect(t, targets, append([]ConnectOption{WithWaitTimeout(expireTimeout)}, security...)...)
	defer observer.Close()
	if err := waitExists(observer.Conn, marker, true); err != nil {
		return err
	}

	for _, p := range proxies {
		p.Block()
	}
	defer func() {
		for _, p := range proxies {
			p.Unblock()
		}
	}()
	start := time.Now()
	if err := waitExists(observer.Conn, marker, false); err != nil {
		return fmt.Errorf("session 0x%x did not expire: %w", sid, err)
	}
	observer.log.Printf("session 0x%x expired %v after its client was cut off", sid, time.Since(start).Round(time.Millisecond))
	return nil
}

// waitExists polls until path exists (or not), as seen by conn.
func waitExists(conn *zk.Conn, path string, want bool) error {
	deadline := time.Now().Add(expireTimeout)
	for {
		ok, _, err := conn.Exists(path)
		if err == nil && ok == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s exists=%v after %v (last error %v), want exists=%v", path, ok, expireTimeout, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
