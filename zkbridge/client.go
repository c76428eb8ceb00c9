package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ErrClosed means the Bridge's connection was closed, by Close or because
// the context of a call ended.
var ErrClosed = errors.New("zkbridge: connection closed")

// errOutcomeUnknown wraps a write that may or may not have been applied:
// the connection failed after the request could have reached a server.
// The caller re-reads and decides.
var errOutcomeUnknown = errors.New("outcome unknown")

// client is one ZooKeeper connection following docs/design.md §5.8: it
// waits for a session after connecting, reports session changes (an
// expired session means every ephemeral node and watch of ours is gone),
// retries reads while it reconnects and never retries a write blindly.
//
// go-zookeeper calls take no context. A call blocks until its reply or
// until the connection fails, which the client notices within 2/3 of the
// session timeout; bind closes the connection when a context ends, which
// fails every pending call with ErrClosed.
type client struct {
	// conn is set once by dial, under mu (the event callback reads it);
	// read without mu after dial returns.
	conn  *zk.Conn
	acl   []zk.ACL
	log   *slog.Logger
	retry time.Duration

	closed atomic.Bool

	mu sync.Mutex
	// session: GUARDED_BY(mu). The current session id, 0 while none.
	session int64
	// expiries: GUARDED_BY(mu). Sessions the servers expired so far.
	// INVARIANT: only grows.
	expiries uint64
	// changed: GUARDED_BY(mu). Closed and replaced on every session event.
	changed chan struct{}
}

// dial connects and waits until the client has a session.
func dial(ctx context.Context, cfg *Config) (*client, error) {
	c := &client{
		acl:     cfg.ACL,
		log:     cfg.Logger,
		retry:   cfg.RetryTimeout,
		changed: make(chan struct{}),
	}
	conn, _, err := zk.Connect(cfg.Servers, cfg.SessionTimeout,
		zk.WithLogger(zkLogger{cfg.Logger.With("component", "zk-client")}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(c.onEvent),
		zk.WithMaxBufferSize(cfg.MaxBufferSize))
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
			c.log.Debug("zookeeper session established", "session", fmt.Sprintf("0x%x", id), "server", conn.Server())
			return c, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			conn.Close()
			return nil, fmt.Errorf("zkbridge: no ZooKeeper session with %s within %v", strings.Join(cfg.Servers, ","), cfg.ConnectTimeout)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// onEvent is go-zookeeper's event callback; it must not block.
func (c *client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
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

// bind closes the connection when ctx ends, until the returned function
// is called.
func (c *client) bind(ctx context.Context) (unbind func()) {
	stop := context.AfterFunc(ctx, c.close)
	return func() { stop() }
}

// transient reports whether err comes from the connection rather than
// from ZooKeeper's answer: the request may be retried (a read) or must be
// verified (a write).
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing) ||
		errors.Is(err, zk.ErrSessionMoved)
}

// do runs op, and again while it fails transiently, until RetryTimeout.
// Only reads and idempotent writes go through do.
func (c *client) do(ctx context.Context, what string, op func() error) error {
	deadline := time.Now().Add(c.retry)
	backoff := 20 * time.Millisecond
	for {
		if c.closed.Load() {
			return ErrClosed
		}
		err := op()
		if err == nil || !transient(err) {
			return err
		}
		if c.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return fmt.Errorf("%s: %w (retried for %v)", what, err, c.retry)
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

// get reads a znode; a missing one is (nil, nil, zk.ErrNoNode).
func (c *client) get(ctx context.Context, path string) (data []byte, stat *zk.Stat, err error) {
	err = c.do(ctx, "get "+path, func() error {
		data, stat, err = c.conn.Get(path)
		return err
	})
	return data, stat, err
}

// children lists a znode's children, sorted, with the znode's stat.
func (c *client) children(ctx context.Context, path string) (names []string, stat *zk.Stat, err error) {
	err = c.do(ctx, "list "+path, func() error {
		names, stat, err = c.conn.Children(path)
		return err
	})
	if err == nil {
		slices.Sort(names)
	}
	return names, stat, err
}

// exists returns the znode's stat, or nil if it does not exist.
func (c *client) exists(ctx context.Context, path string) (*zk.Stat, error) {
	var ok bool
	var stat *zk.Stat
	err := c.do(ctx, "stat "+path, func() (err error) {
		ok, stat, err = c.conn.Exists(path)
		return err
	})
	if err != nil || !ok {
		return nil, err
	}
	return stat, nil
}

// existsW is exists with a watch; the channel fires once.
func (c *client) existsW(ctx context.Context, path string) (stat *zk.Stat, ch <-chan zk.Event, err error) {
	var ok bool
	err = c.do(ctx, "watch "+path, func() (err error) {
		ok, stat, ch, err = c.conn.ExistsW(path)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		stat = nil
	}
	return stat, ch, nil
}

// ensure creates path and its missing ancestors below stopAt (which must
// exist or be "/") as persistent nodes with empty data. A node that exists
// is fine, so a retry after an unknown outcome is safe.
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

// createIfAbsent creates a persistent node unless one exists.
func (c *client) createIfAbsent(ctx context.Context, path string, data []byte) error {
	err := c.do(ctx, "create "+path, func() error {
		_, err := c.conn.Create(path, data, 0, c.acl)
		return err
	})
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// multi runs one transaction once. A connection failure makes its outcome
// unknown (errOutcomeUnknown); a refusal returns the index of the first
// failed operation and its error.
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
			return i, r.Error
		}
	}
	if c.closed.Load() {
		return -1, fmt.Errorf("%w: %w", errOutcomeUnknown, ErrClosed)
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
}

// Session returns the connection's state now. It never blocks.
func (b *Bridge) Session() Session {
	id, expiries, _ := b.zk.sessionState()
	s := Session{ID: id, Expirations: expiries}
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
