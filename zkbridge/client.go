package zkbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/internal/zksasl"
)

// ErrClosed means the Bridge's connection was closed by Close.
var ErrClosed = errors.New("zkbridge: connection closed")

// errOutcomeUnknown wraps a write that may or may not have been applied:
// the connection failed after the request could have reached a server.
// The caller re-reads and decides.
var errOutcomeUnknown = errors.New("outcome unknown")

// client is one ZooKeeper connection following docs/design.md §5.8: it
// waits for a session after connecting, authenticates every connection
// before its first request, reports session changes (an expired session
// means every ephemeral node and watch of ours is gone), retries reads
// while it reconnects and never retries a write blindly.
//
// The connection lives until close: go-zookeeper reconnects by itself
// after any outage and opens a new session after an expiry, and the
// client keeps it. go-zookeeper calls take no context; a call whose
// context ends is abandoned (await): the caller gets the context's error
// at once, and the call ends by itself when its reply comes or the
// connection fails, which go-zookeeper notices within 2/3 of the session
// timeout. Nothing a context does closes the connection.
type client struct {
	// conn is set once by dial, under mu (the event callback reads it);
	// read without mu after dial returns.
	conn  *zk.Conn
	acls  aclPolicy
	auth  *Credentials
	log   *slog.Logger
	retry time.Duration

	closed atomic.Bool

	// locksMu guards what tells a lock node of this client's session
	// that a call holds from an orphan (createLock, orphanLock). It is
	// never held across a ZooKeeper call.
	locksMu sync.Mutex
	// locks: GUARDED_BY(locksMu). The lock nodes calls of this client
	// hold.
	locks map[string]bool
	// lockCreates: GUARDED_BY(locksMu). createLock calls under way.
	// INVARIANT: a createLock call counts here from before it sends its
	// create until it has recorded the node it returns in locks (see
	// "Orphan lock nodes" in lock.go).
	lockCreates int
	// lockSettled: GUARDED_BY(locksMu). Closed and replaced whenever a
	// createLock call ends.
	lockSettled chan struct{}
	// testLockCreated is a test seam, called when createLock's node
	// exists and before createLock records it.
	testLockCreated func(node string)

	mu sync.Mutex
	// session: GUARDED_BY(mu). The current session id, 0 while none.
	session int64
	// expiries: GUARDED_BY(mu). Sessions the servers expired so far.
	// INVARIANT: only grows.
	expiries uint64
	// changed: GUARDED_BY(mu). Closed and replaced when a session is
	// established or expires.
	changed chan struct{}
	// history: GUARDED_BY(mu). What happened to the session, for metrics
	// and health.
	history sessionHistory
	// loginErr: GUARDED_BY(mu). Per server, why the last connection to it
	// failed for good before a session (a certificate ckptfs cannot
	// verify, a refused SASL login); removed when one succeeds.
	loginErr map[string]error

	// guard checks the ACLs of ckptfs's own znodes before the client
	// uses them (aclGuard); nil when ckptfs connects anonymously.
	guard *aclGuard
}

// sessionHistory is what happened to the client's session.
type sessionHistory struct {
	// up: a session is established now.
	up bool
	// since: when the current session was established, or when the last
	// one was lost (zero before the first).
	since time.Time
	// losses counts the times a session was lost: its connection closed,
	// every server unreachable, or it expired.
	losses uint64
	// lastLost and lastRegained bound the last outage that ended.
	lastLost, lastRegained time.Time
}

// dial connects and waits until the client has a session, and, with
// digest credentials, has added them (go-zookeeper re-sends them on every
// later connection before its first request).
func dial(ctx context.Context, cfg *Config) (*client, error) {
	c := &client{
		acls:        newACLPolicy(cfg),
		auth:        cfg.Auth,
		log:         cfg.Logger,
		retry:       cfg.RetryTimeout,
		changed:     make(chan struct{}),
		loginErr:    map[string]error{},
		locks:       map[string]bool{},
		lockSettled: make(chan struct{}),
	}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{cfg.Logger.With("component", "zk-client")}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(c.onEvent),
		zk.WithMaxBufferSize(cfg.MaxBufferSize),
		zk.WithDialer(c.dialer(cfg)))
	if err != nil {
		return nil, fmt.Errorf("zkbridge: connect %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	c.mu.Lock() // onEvent may already run
	c.conn = conn
	c.mu.Unlock()
	timer := time.NewTimer(cfg.ConnectTimeout)
	defer timer.Stop()
	for {
		id, _, changed := c.sessionState()
		if id != 0 {
			break
		}
		if err := c.loginFailed(cfg.Servers); err != nil {
			conn.Close()
			return nil, err
		}
		select {
		case <-changed:
		case <-time.After(100 * time.Millisecond): // loginErr has no channel
		case <-timer.C:
			conn.Close()
			msg := fmt.Sprintf("zkbridge: no ZooKeeper session with %s within %v", strings.Join(cfg.Servers, ","), cfg.ConnectTimeout)
			if err := c.lastLoginErr(); err != nil {
				return nil, fmt.Errorf("%s: %w", msg, err)
			}
			return nil, errors.New(msg)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
	if c.auth != nil && c.auth.Scheme == SchemeDigest {
		_, err := retry(ctx, c, "authenticate as "+c.auth.String(), func() (struct{}, error) {
			return struct{}{}, conn.AddAuth("digest", []byte(c.auth.User+":"+c.auth.Password))
		})
		if err != nil {
			conn.Close()
			return nil, err
		}
	}
	c.log.Debug("zookeeper session established", "session", fmt.Sprintf("0x%x", conn.SessionID()), "server", conn.Server(), "identity", c.identity())
	if ids := cfg.ckptfsIdentities(); ids != nil {
		c.guard = newACLGuard(c.acls, ids, cfg.sessionIdentities())
	} else {
		c.log.Info("ckptfs connects anonymously: its znodes are open to every client, so their ACLs are not checked (give zk-auth-file or a client certificate to make them ckptfs's alone)", "znode", c.acls.root)
	}
	return c, nil
}

// dialer opens go-zookeeper's connections: TCP, TLS when configured, and
// with SASL credentials a zksasl connection that logs in before the
// first request.
func (c *client) dialer(cfg *Config) zk.Dialer {
	tlsCfg := cfg.TLS
	auth := cfg.Auth
	saslTimeout := cfg.SessionTimeout
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		var conn net.Conn
		var err error
		if tlsCfg != nil {
			tc := tlsCfg.Clone()
			if tc.ServerName == "" {
				if host, _, err := net.SplitHostPort(addr); err == nil {
					tc.ServerName = host
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			conn, err = (&tls.Dialer{NetDialer: &net.Dialer{}, Config: tc}).DialContext(ctx, network, addr)
			var verr *tls.CertificateVerificationError
			if errors.As(err, &verr) {
				err = fmt.Errorf("TLS with %s: the server's certificate does not verify against the configured CA: %w", addr, err)
				c.setLoginErr(addr, err)
			}
		} else {
			conn, err = net.DialTimeout(network, addr, timeout)
		}
		if err != nil || auth == nil || auth.Scheme != SchemeSASL {
			return conn, err
		}
		return zksasl.Wrap(conn, auth.User, auth.Password, saslTimeout, func(err error) {
			if err != nil {
				err = fmt.Errorf("SASL DIGEST-MD5 login as %s with %s: %w", auth.User, addr, err)
			}
			c.setLoginErr(addr, err)
		}), nil
	}
}

func (c *client) setLoginErr(server string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.loginErr, server)
	} else {
		c.loginErr[server] = err
	}
}

// loginFailed returns an error when every server refused to let ckptfs
// in: waiting longer cannot help.
func (c *client) loginFailed(servers []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, s := range servers {
		err, ok := c.loginErr[s]
		if !ok {
			return nil
		}
		errs = append(errs, err)
	}
	enforced := false
	for _, e := range errs {
		if errors.Is(e, zksasl.ErrRefused) {
			enforced = true
		}
	}
	if enforced {
		return &AuthError{What: "log in", Identity: c.identity(), Enforced: true, Err: errors.Join(errs...)}
	}
	return fmt.Errorf("zkbridge: %w", errors.Join(errs...))
}

func (c *client) lastLoginErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, err := range c.loginErr {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// identity names who the client is to ZooKeeper, "" when anonymous: the
// scheme and the user (Credentials.String), for messages, logs and
// health, which must not show the digest identity's hash.
func (c *client) identity() string {
	if c.auth == nil {
		return ""
	}
	return c.auth.String()
}

// onEvent is go-zookeeper's event callback; it must not block.
func (c *client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	var log func()
	defer func() {
		if log != nil {
			log()
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	h := &c.history
	if ev.State == zk.StateHasSession {
		if !h.up {
			if !h.since.IsZero() {
				h.lastLost, h.lastRegained = h.since, now
				outage, conn := now.Sub(h.since), c.conn
				log = func() {
					c.log.Info("ZooKeeper session established again", "session", fmt.Sprintf("0x%x", conn.SessionID()), "server", ev.Server, "outage", outage.Round(time.Millisecond).String())
				}
			}
			h.up, h.since = true, now
		}
	} else if h.up && ev.State != zk.StateConnected && !c.closed.Load() {
		// Closing the client disconnects too: that is no loss.
		h.up, h.since = false, now
		h.losses++
		session := c.session
		log = func() {
			c.log.Warn("ZooKeeper session lost: reconnecting", "session", fmt.Sprintf("0x%x", session), "server", ev.Server)
		}
	}
	if ev.State == zk.StateExpired {
		session := c.session
		prev := log
		log = func() {
			if prev != nil {
				prev()
			}
			c.log.Warn("ZooKeeper session expired: a new one replaces it; its ephemeral nodes and watches are gone", "session", fmt.Sprintf("0x%x", session))
		}
	}
	switch ev.State {
	case zk.StateHasSession:
		delete(c.loginErr, ev.Server)
		if c.conn != nil {
			c.session = c.conn.SessionID()
		}
	case zk.StateExpired:
		c.session = 0
		c.expiries++
	default:
		return
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// sessionState returns the current session id (0 while none), how many
// sessions expired so far, and a channel closed at the next change.
func (c *client) sessionState() (id int64, expiries uint64, changed <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == 0 && c.conn != nil && c.conn.State() == zk.StateHasSession {
		// The callback ran before conn was assigned.
		c.session = c.conn.SessionID()
	}
	return c.session, c.expiries, c.changed
}

// close closes the connection; pending and later calls fail with
// ErrClosed.
func (c *client) close() {
	if !c.closed.Swap(true) {
		c.conn.Close()
	}
}

// transient reports whether err comes from the connection rather than
// from ZooKeeper's answer: the request may be retried (a read) or must be
// verified (a write).
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, zk.ErrSessionMoved)
}

// result is one go-zookeeper call's outcome.
type result[T any] struct {
	v   T
	err error
}

// await runs op, one go-zookeeper call, and returns its result, or ctx's
// error as soon as ctx ends: op is then abandoned and ends by itself
// (see client). op must not write anything the caller reads.
func await[T any](ctx context.Context, op func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return op()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := op()
		ch <- result[T]{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// retry runs op, and again while it fails transiently, until
// RetryTimeout. Only reads and idempotent writes go through retry. A
// refusal for want of authorization comes back as an *AuthError.
func retry[T any](ctx context.Context, c *client, what string, op func() (T, error)) (T, error) {
	deadline := time.Now().Add(c.retry)
	backoff := 20 * time.Millisecond
	var zero T
	for {
		if c.closed.Load() {
			return zero, ErrClosed
		}
		v, err := await(ctx, op)
		if err == nil || !transient(err) {
			return v, c.explain(what, err)
		}
		if c.closed.Load() {
			return zero, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return zero, fmt.Errorf("%s: %w (retried for %v)", what, err, c.retry)
		}
		_, _, changed := c.sessionState()
		t := time.NewTimer(min(backoff, remaining))
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, time.Second)
	}
}

// explain turns ZooKeeper's refusals of ckptfs's identity into an
// *AuthError naming the operation and the identity.
func (c *client) explain(what string, err error) error {
	switch {
	case err == nil, ctxErr(err):
		return err
	case errors.Is(err, zk.ErrNoAuth):
		return &AuthError{What: what, Identity: c.identity(), Err: err}
	case authRequired(err):
		return &AuthError{What: what, Identity: c.identity(), Enforced: true, Err: err}
	case errors.Is(err, zk.ErrInvalidACL):
		return fmt.Errorf("%s: %w (an ACL naming the session's own identity, auth, needs credentials or a client certificate)", what, err)
	}
	return err
}

func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// get reads a znode; a missing one is (nil, nil, zk.ErrNoNode).
func (c *client) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, err
	}
	type got struct {
		data []byte
		stat *zk.Stat
	}
	r, err := retry(ctx, c, "get "+path, func() (got, error) {
		data, stat, err := c.conn.Get(path)
		return got{data, stat}, err
	})
	return r.data, r.stat, err
}

// getACL reads a znode's ACL (ZooKeeper asks for read or admin
// permission on it).
func (c *client) getACL(ctx context.Context, path string) ([]zk.ACL, *zk.Stat, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, err
	}
	return c.getACLUnguarded(ctx, path)
}

// getACLUnguarded is getACL without the check of ckptfs's znodes: the
// check itself reads ACLs with it.
func (c *client) getACLUnguarded(ctx context.Context, path string) ([]zk.ACL, *zk.Stat, error) {
	type got struct {
		acl  []zk.ACL
		stat *zk.Stat
	}
	r, err := retry(ctx, c, "get the ACL of "+path, func() (got, error) {
		acl, stat, err := c.conn.GetACL(path)
		return got{acl, stat}, err
	})
	return r.acl, r.stat, err
}

// children lists a znode's children, sorted, with the znode's stat.
func (c *client) children(ctx context.Context, path string) ([]string, *zk.Stat, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, err
	}
	type got struct {
		names []string
		stat  *zk.Stat
	}
	r, err := retry(ctx, c, "list "+path, func() (got, error) {
		names, stat, err := c.conn.Children(path)
		return got{names, stat}, err
	})
	if err == nil {
		slices.Sort(r.names)
	}
	return r.names, r.stat, err
}

// exists returns the znode's stat, or nil if it does not exist.
func (c *client) exists(ctx context.Context, path string) (*zk.Stat, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, err
	}
	stat, err := retry(ctx, c, "stat "+path, func() (*zk.Stat, error) {
		ok, stat, err := c.conn.Exists(path)
		if !ok {
			stat = nil
		}
		return stat, err
	})
	if err != nil {
		return nil, err
	}
	return stat, nil
}

// existsW is exists with a watch; the channel fires once.
func (c *client) existsW(ctx context.Context, path string) (*zk.Stat, <-chan zk.Event, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, err
	}
	type got struct {
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	r, err := retry(ctx, c, "watch "+path, func() (got, error) {
		ok, stat, ch, err := c.conn.ExistsW(path)
		if !ok {
			stat = nil
		}
		return got{stat, ch}, err
	})
	if err != nil {
		return nil, nil, err
	}
	return r.stat, r.ch, nil
}

// getW is get with a watch on the znode's data (or its creation); the
// channel fires once.
func (c *client) getW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, nil, err
	}
	type got struct {
		data []byte
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	r, err := retry(ctx, c, "watch "+path, func() (got, error) {
		data, stat, ch, err := c.conn.GetW(path)
		return got{data, stat, ch}, err
	})
	return r.data, r.stat, r.ch, err
}

// childrenW is children with a watch on the list; the channel fires once.
func (c *client) childrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, nil, err
	}
	type got struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := retry(ctx, c, "watch "+path, func() (got, error) {
		names, _, ch, err := c.conn.ChildrenW(path)
		return got{names, ch}, err
	})
	if err == nil {
		slices.Sort(r.names)
	}
	return r.names, r.ch, err
}

// ensure creates path and its missing ancestors below stopAt (which must
// exist or be "/") as persistent nodes with empty data and the ACL of
// their place (aclPolicy). A node that exists is fine, so a retry after
// an unknown outcome is safe; one of ckptfs's that other clients may
// change is refused (aclGuard judges them once per connection).
func (c *client) ensure(ctx context.Context, path string) error {
	if path == "/" || path == "" {
		return nil
	}
	stat, err := c.exists(ctx, path)
	if err != nil || stat != nil {
		return err
	}
	if parent := path[:strings.LastIndexByte(path, '/')]; parent != "" {
		if err := c.ensure(ctx, parent); err != nil {
			return err
		}
	}
	return c.createIfAbsent(ctx, path, nil)
}

// createIfAbsent creates a persistent node of ckptfs's with the ACL of
// its place unless one exists that only ckptfs's identities may change
// (aclGuard).
func (c *client) createIfAbsent(ctx context.Context, path string, data []byte) error {
	if err := c.guardPath(ctx, path); err != nil {
		return err
	}
	_, err := retry(ctx, c, "create "+path, func() (string, error) {
		return c.conn.Create(path, data, 0, c.acls.forPath(path))
	})
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// createOpen creates path, persistent and empty, open to every client
// (world:anyone:cdrwa, as zkCli's create makes it), unless it exists. For
// the namespace of a new Flink cluster only: ckptfs's own znodes take
// the ACL of their place.
func (c *client) createOpen(ctx context.Context, path string) error {
	_, err := retry(ctx, c, "create "+path, func() (string, error) {
		return c.conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
	})
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// set writes a znode's data once, by compare-and-set. A transient error
// leaves the outcome unknown.
func (c *client) set(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	if err := c.guardPath(ctx, path); err != nil {
		return nil, err
	}
	stat, err := await(ctx, func() (*zk.Stat, error) { return c.conn.Set(path, data, version) })
	return stat, c.explain("set "+path, err)
}

// create creates a persistent node of ckptfs's once, with the ACL of its
// place. A transient error leaves the outcome unknown.
func (c *client) create(ctx context.Context, path string, data []byte) error {
	if err := c.guardPath(ctx, path); err != nil {
		return err
	}
	_, err := await(ctx, func() (string, error) { return c.conn.Create(path, data, 0, c.acls.forPath(path)) })
	return c.explain("create "+path, err)
}

// remove deletes path at version (-1: any), retrying; a node already
// gone is done.
func (c *client) remove(ctx context.Context, path string, version int32) error {
	if err := c.guardPath(ctx, path); err != nil {
		return err
	}
	_, err := retry(ctx, c, "delete "+path, func() (struct{}, error) {
		err := c.conn.Delete(path, version)
		if errors.Is(err, zk.ErrNoNode) {
			return struct{}{}, nil
		}
		return struct{}{}, err
	})
	return err
}

// multi runs one transaction once. A connection failure makes its outcome
// unknown (errOutcomeUnknown); a refusal returns the index of the first
// failed operation and its error. It takes no context: a multi is never
// abandoned, so that its caller can decide its outcome; go-zookeeper
// bounds it.
func (c *client) multi(ops ...any) (failedOp int, err error) {
	if c.closed.Load() {
		return -1, ErrClosed
	}
	resp, err := c.conn.Multi(ops...)
	if err == nil {
		return -1, nil
	}
	for i, r := range resp {
		if r.Error != nil {
			return i, c.explain("transaction", r.Error)
		}
	}
	if c.closed.Load() {
		return -1, fmt.Errorf("%w: %w", errOutcomeUnknown, ErrClosed)
	}
	if !transient(err) {
		return -1, c.explain("transaction", err)
	}
	return -1, fmt.Errorf("%w: %w", errOutcomeUnknown, err)
}

// zkLogger sends go-zookeeper's messages to slog.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...))
}

// SessionState is where a Bridge's ZooKeeper connection stands.
type SessionState string

const (
	// SessionConnected: connected to a server, with a session.
	SessionConnected SessionState = "connected"
	// SessionConnecting: trying a server, or connected and waiting for
	// a session. A session lost by a disconnect may still be valid.
	SessionConnecting SessionState = "connecting"
	// SessionDisconnected: no connection (every server down or
	// unreachable, the session expired, authentication failed).
	SessionDisconnected SessionState = "disconnected"
	// SessionClosed: the Bridge was closed.
	SessionClosed SessionState = "closed"
)

// Session is a snapshot of a Bridge's ZooKeeper session.
type Session struct {
	State SessionState
	// ID is the current session id, 0 while there is none.
	ID int64
	// Expirations counts the sessions the servers expired so far.
	Expirations uint64
	// Losses counts the times the client lost its session: its
	// connection closed or every server was unreachable (the session
	// may have survived), or it expired.
	Losses uint64
	// Since is when the current session was established, or, while
	// there is none, when the last one was lost; zero before the first.
	Since time.Time
	// LastLost and LastRegained bound the last outage that ended; zero
	// before one did.
	LastLost, LastRegained time.Time
	// Identity is who ckptfs is to ZooKeeper: the scheme and the user,
	// digest:<user> or sasl:<user> ("" anonymous), never the digest
	// identity's hash.
	Identity string
}

// Session returns the connection's state now. It never blocks.
func (b *Bridge) Session() Session {
	id, expiries, _ := b.zk.sessionState()
	b.zk.mu.Lock()
	h := b.zk.history
	b.zk.mu.Unlock()
	s := Session{ID: id, Expirations: expiries, Losses: h.losses, Since: h.since,
		LastLost: h.lastLost, LastRegained: h.lastRegained, Identity: b.zk.identity()}
	switch st := b.zk.conn.State(); {
	case b.zk.closed.Load():
		s.State = SessionClosed
	case st == zk.StateHasSession:
		s.State = SessionConnected
	case st == zk.StateConnecting, st == zk.StateConnected:
		s.State = SessionConnecting
	default:
		s.State = SessionDisconnected
	}
	return s
}

// aclGuard keeps ckptfs from trusting znodes of its own that other
// clients may change (docs/design.md §5.3, §6.9). When ckptfs
// authenticates, its znodes are its identities' alone, but a znode that
// existed before (another client created ckptfs's root, the cluster's
// znode or active-site first, or an anonymous ckptfs did) keeps the ACL
// it was made with: with an open one, anyone could move active-site. So
// before the client first uses a path below CkptfsRoot/<cluster>, the
// guard reads the ACL of CkptfsRoot, of CkptfsRoot/<cluster> and of
// every persistent znode below it, and refuses (*ForeignACLError) while
// any lets another client than ckptfs's identities write, create,
// delete or set the ACL (foreignGrants). Ephemeral nodes (the takeover
// lock) are not judged: what their ACL governs is only
// themselves, and the writes that rely on the lock check it by version.
//
// Once per connection and cluster: a namespace found clean stays so,
// since no other client may then create, delete or change anything in
// it (the super user aside). A cluster's znode that does not exist yet
// is watched, and judged when it appears. A refusal is judged again
// after recheckRefused, so that mending the ACLs needs no restart.
type aclGuard struct {
	root    string   // CkptfsRoot, without a trailing slash
	ids     []zk.ACL // ckptfsIdentities
	session []zk.ACL // sessionIdentities: what auth stands for
	acls    aclPolicy

	// walkMu: one walk at a time (LOCK ORDER: walkMu before mu).
	walkMu sync.Mutex
	mu     sync.Mutex
	// spaces: GUARDED_BY(mu). Per cluster znode, what the last walk
	// found.
	spaces map[string]*guardedSpace
}

// guardedSpace is what the guard knows of one cluster's znodes.
type guardedSpace struct {
	// clean: every znode below was judged ckptfs's alone.
	clean bool
	// absent, while it has not fired: the cluster's znode did not exist.
	absent <-chan zk.Event
	// refused and at: the last walk's refusal, and when.
	refused error
	at      time.Time
}

// recheckRefused is how long a refusal stands before the guard reads
// the ACLs again.
const recheckRefused = 5 * time.Second

func newACLGuard(acls aclPolicy, ids, session []zk.ACL) *aclGuard {
	return &aclGuard{root: acls.root, ids: ids, session: session, acls: acls, spaces: map[string]*guardedSpace{}}
}

// spaceOf returns the cluster znode CkptfsRoot/<cluster> that path is at
// or below, or CkptfsRoot itself for the root; ok is false outside.
func (g *aclGuard) spaceOf(path string) (string, bool) {
	if path == g.root {
		return g.root, true
	}
	rel, ok := strings.CutPrefix(path, g.root+"/")
	if !ok || rel == "" {
		return "", false
	}
	if i := strings.IndexByte(rel, '/'); i >= 0 {
		rel = rel[:i]
	}
	return join(g.root, rel), true
}

// guardPath refuses, with a *ForeignACLError, to use path while the
// znodes of ckptfs's cluster it belongs to let other clients change
// them. Paths outside CkptfsRoot, and an anonymous ckptfs, pass.
func (c *client) guardPath(ctx context.Context, path string) error {
	g := c.guard
	if g == nil {
		return nil
	}
	space, ok := g.spaceOf(path)
	if !ok {
		return nil
	}
	if pass, err := g.known(space); pass || err != nil {
		return err
	}
	g.walkMu.Lock()
	defer g.walkMu.Unlock()
	if pass, err := g.known(space); pass || err != nil {
		return err // another call walked meanwhile
	}
	st, err := c.walkSpace(ctx, space)
	if err != nil && (st == nil || st.refused == nil) {
		return err // ZooKeeper's error, or the context's: not judged
	}
	g.mu.Lock()
	g.spaces[space] = st
	g.mu.Unlock()
	return st.refused
}

// known reports what the guard knows of space without reading: pass when
// it is clean or still absent, the refusal while it stands.
func (g *aclGuard) known(space string) (pass bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.spaces[space]
	switch {
	case st == nil:
		return false, nil
	case st.clean:
		return true, nil
	case st.absent != nil:
		select {
		case <-st.absent:
			return false, nil
		default:
			return true, nil
		}
	case st.refused != nil && time.Since(st.at) < recheckRefused:
		return false, st.refused
	}
	return false, nil
}

// walkSpace judges CkptfsRoot and, for a cluster's znode, it and every
// persistent znode below. A refusal comes back in the state (with err
// set to it); any other error alone.
func (c *client) walkSpace(ctx context.Context, space string) (*guardedSpace, error) {
	g := c.guard
	var foreign []ForeignACL
	var mu sync.Mutex
	judge := func(path string, acl []zk.ACL, readable bool) {
		var bad []zk.ACL
		if readable {
			if bad = foreignGrants(acl, g.ids); len(bad) == 0 {
				return
			}
		}
		mu.Lock()
		foreign = append(foreign, ForeignACL{Znode: path, ACL: acl, Foreign: bad, Want: expandAuth(g.acls.forPath(path), g.session)})
		mu.Unlock()
	}
	// read returns a znode's ACL and stat; readable is false when ckptfs
	// may not read its ACL, stat nil when it does not exist.
	read := func(ctx context.Context, path string) (acl []zk.ACL, stat *zk.Stat, readable bool, err error) {
		acl, stat, err = c.getACLUnguarded(ctx, path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return nil, nil, false, nil
		case errors.Is(err, zk.ErrNoAuth):
			return nil, &zk.Stat{}, false, nil
		case err != nil:
			return nil, nil, false, err
		}
		return acl, stat, true, nil
	}

	st := &guardedSpace{}
	acl, stat, readable, err := read(ctx, g.root)
	if err != nil {
		return nil, err
	}
	if stat != nil {
		judge(g.root, acl, readable)
	}
	if stat == nil || space != g.root {
		// The space's own znode absent: nothing to trust until it
		// appears, which the watch tells.
		if stat != nil {
			if _, stat, _, err = read(ctx, space); err != nil {
				return nil, err
			}
		}
		if stat == nil {
			exists, _, ch, err := c.conn.ExistsW(space)
			if err != nil {
				return nil, c.explain("watch "+space, err)
			}
			if !exists {
				st.absent = ch
				return st, nil
			}
		}
	}
	level := []string{}
	if space != g.root {
		level = append(level, space)
	}
	// Level by level, the znodes of a level at once (go-zookeeper
	// pipelines them): a few round trips, not one per znode.
	for len(level) > 0 {
		next := make([][]string, len(level))
		_, err := forEachJob(ctx, len(level), func(ctx context.Context, i int) error {
			path := level[i]
			acl, stat, readable, err := read(ctx, path)
			if err != nil || stat == nil || stat.EphemeralOwner != 0 {
				return err // gone meanwhile, or ephemeral: not judged
			}
			judge(path, acl, readable)
			if !readable || stat.NumChildren == 0 {
				return nil
			}
			kids, err := retry(ctx, c, "list "+path, func() ([]string, error) {
				kids, _, err := c.conn.Children(path)
				return kids, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			for _, k := range kids {
				next[i] = append(next[i], join(path, k))
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		level = slices.Concat(next...)
	}
	if len(foreign) == 0 {
		st.clean = true
		return st, nil
	}
	slices.SortFunc(foreign, func(a, b ForeignACL) int { return strings.Compare(a.Znode, b.Znode) })
	ids := make([]string, 0, len(g.ids))
	for _, id := range g.ids {
		if s := id.Scheme + ":" + id.ID; !slices.Contains(ids, s) {
			ids = append(ids, s)
		}
	}
	st.refused = &ForeignACLError{Identities: ids, Znodes: foreign}
	st.at = time.Now()
	g.mu.Lock()
	prev := g.spaces[space]
	g.mu.Unlock()
	if prev == nil || prev.refused == nil || prev.refused.Error() != st.refused.Error() {
		c.log.Error("ckptfs's znodes let other clients change them: refusing to use them", "err", st.refused)
	}
	return st, st.refused
}
