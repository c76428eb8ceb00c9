package zktest

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy in front of one address, used to cut
// clients off from ZooKeeper the way a network partition does.
//
// While blocked, nothing crosses the proxy in either direction, not even a
// connection close, and new connections are accepted but get no answer.
// Sockets stay open and no byte is lost: on Unblock everything that was
// held back is delivered, as TCP would after a partition heals. A client
// therefore notices a Block only through its own timeouts, and the server
// only through missing heartbeats, which is what makes sessions expire.
type Proxy struct {
	target string
	ln     net.Listener
	log    *testLog

	// latency delays every byte each way (SetLatency).
	latency atomic.Int64
	// trap is the armed TrapRequest, nil when none.
	trap atomic.Pointer[requestTrap]

	mu      sync.Mutex
	open    chan struct{}           // GUARDED_BY(mu); closed while unblocked
	conns   map[*proxyConn]struct{} // GUARDED_BY(mu)
	closed  bool                    // GUARDED_BY(mu)
	closing chan struct{}           // closed by Close
	wg      sync.WaitGroup          // the accept loop and every connection
}

type proxyConn struct {
	client net.Conn
	once   sync.Once
	done   chan struct{} // closed by close

	mu     sync.Mutex
	server net.Conn // GUARDED_BY(mu); nil until dialled
}

// NewProxy listens on a fresh 127.0.0.1 port and forwards every connection
// to target. It is closed by a cleanup registered on t.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{
		target:  target,
		log:     newTestLog(t, "zktest proxy "+target+": "),
		open:    make(chan struct{}),
		conns:   make(map[*proxyConn]struct{}),
		closing: make(chan struct{}),
	}
	close(p.open)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy for %s: %v", target, err)
	}
	p.ln = ln
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("zktest: close proxy for %s: %v", target, err)
		}
	})
	p.wg.Add(1)
	go p.accept()
	return p
}

// SetLatency delays everything that crosses the proxy by d in each
// direction (a round trip takes 2d more), as a WAN link would: bytes read
// are written d later, and more may be on their way meanwhile.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// OpMulti is ZooKeeper's opcode of a multi (a transaction of several
// operations), the one request TrapRequest is used for.
const OpMulti int32 = 14

// requestTrap is an armed TrapRequest.
type requestTrap struct {
	op    int32
	fired chan struct{}
}

// TrapRequest arms the proxy for the next request of ZooKeeper opcode op
// (OpMulti, ...) that a client sends through it, on any connection: the
// proxy blocks, as Block does, before the rest of that request reaches
// the server, and the returned channel is closed. The server holds no
// whole request then (it waits for the rest of it) until Unblock; so a
// client cut off there has an outcome it cannot know: what happens when
// a session expires, or the client dies, in the middle of a transaction.
// Arming again replaces the trap; Disarm removes it. The proxy reads
// ZooKeeper's framing (a length before every packet, the connect request
// first, then a request header of xid and opcode), so a trap needs the
// plain protocol: no TLS.
func (p *Proxy) TrapRequest(op int32) <-chan struct{} {
	tr := &requestTrap{op: op, fired: make(chan struct{})}
	p.trap.Store(tr)
	return tr.fired
}

// Disarm removes the trap TrapRequest armed, if it has not fired.
func (p *Proxy) Disarm() { p.trap.Store(nil) }

// requestFramer follows the packets a client sends on one connection:
// each is a 4-byte length and that many bytes; every packet after the
// connect request starts with its xid and opcode.
type requestFramer struct {
	connected bool     // the connect request has passed
	head      [12]byte // the packet's first bytes: length, xid, opcode
	n         int      // bytes of head read
	skip      int64    // bytes of the packet's body still to pass
}

// split returns the offset in b at which the header of a request of
// opcode op is complete (the request's body follows), or -1.
func (f *requestFramer) split(b []byte, op int32) int {
	at := -1
	for i := 0; i < len(b); {
		if f.skip > 0 {
			k := int64(len(b) - i)
			if k > f.skip {
				k = f.skip
			}
			f.skip -= k
			i += int(k)
			continue
		}
		want := 12
		if !f.connected {
			want = 4
		}
		for f.n < want && i < len(b) {
			f.head[f.n] = b[i]
			f.n++
			i++
		}
		if f.n < want {
			break
		}
		length := int64(binary.BigEndian.Uint32(f.head[:4]))
		if f.connected {
			if int32(binary.BigEndian.Uint32(f.head[8:12])) == op && at < 0 {
				at = i
			}
			f.skip = length - 8
		} else {
			f.skip = length
			f.connected = true
		}
		f.n = 0
	}
	return at
}

// Addr returns the address clients should dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Block stops all traffic through the proxy, held back until Unblock.
// Bytes that are being written at the moment Block is called may still
// arrive.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
		p.log.Printf("blocked")
	default:
	}
}

// Unblock lets traffic flow again, starting with what was held back.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
		p.log.Printf("unblocked")
	}
}

// Blocked reports whether the proxy is blocked.
func (p *Proxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		return false
	default:
		return true
	}
}

// DropConns closes every current connection at once, on both sides, as a
// reset would, and returns how many there were. New connections are served
// as usual (or held, if the proxy is blocked).
func (p *Proxy) DropConns() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for pc := range p.conns {
		conns = append(conns, pc)
	}
	p.mu.Unlock()
	for _, pc := range conns {
		pc.close()
	}
	if len(conns) > 0 {
		p.log.Printf("dropped %d connection(s)", len(conns))
	}
	return len(conns)
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines to end. Later calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropConns()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		pc := &proxyConn{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[pc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(pc)
	}
}

// wait blocks while the proxy is blocked. It returns false if pc or the
// proxy was closed meanwhile.
func (p *Proxy) wait(pc *proxyConn) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		select {
		case <-pc.done:
			return false
		default:
			return true
		}
	case <-pc.done:
		return false
	case <-p.closing:
		return false
	}
}

func (p *Proxy) serve(pc *proxyConn) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	// A connection accepted while blocked is not dialled through until
	// the proxy opens: the target sees nothing of it before.
	if !p.wait(pc) {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.log.Printf("dial: %v", err)
		return
	}
	if !pc.setServer(server) {
		return
	}
	errc := make(chan error, 2)
	go func() { errc <- p.pipe(pc, server, pc.client, &requestFramer{}) }()
	go func() { errc <- p.pipe(pc, pc.client, server, nil) }()
	for range 2 {
		if err := <-errc; err != nil {
			// Not a clean end of stream: tear both directions down.
			pc.close()
		}
	}
}

// pipe copies src to dst, holding data and end-of-stream back while the
// proxy is blocked, each chunk SetLatency later. It returns nil after
// passing on a clean end of stream. framer, on the client's side, follows
// its requests for TrapRequest.
func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn, framer *requestFramer) error {
	// Chunks are written in order by one goroutine, each at its time, so
	// that later ones are read meanwhile (a link carries many at once).
	type chunk struct {
		data []byte
		due  time.Time
		done chan struct{} // closed once written (or dropped), when set
	}
	delayed := make(chan chunk, 1024)
	written := make(chan error, 1)
	go func() {
		var werr error
		for c := range delayed {
			if werr == nil {
				time.Sleep(time.Until(c.due))
				if p.wait(pc) {
					_, werr = dst.Write(c.data)
				} else {
					werr = net.ErrClosed
				}
			}
			if c.done != nil {
				close(c.done)
			}
		}
		written <- werr
	}()
	drain := func() error {
		close(delayed)
		return <-written
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		data := buf[:n]
		if framer != nil && n > 0 {
			if tr := p.trap.Load(); tr != nil {
				if at := framer.split(data, tr.op); at >= 0 && p.trap.CompareAndSwap(tr, nil) {
					// What comes before the request's body reaches the
					// server; the body waits.
					if !p.wait(pc) {
						drain()
						return net.ErrClosed
					}
					done := make(chan struct{})
					delayed <- chunk{data: append([]byte(nil), data[:at]...), due: time.Now().Add(time.Duration(p.latency.Load())), done: done}
					<-done
					data = data[at:]
					p.Block()
					p.log.Printf("trapped a request of opcode %d", tr.op)
					close(tr.fired)
				}
			} else {
				framer.split(data, -1)
			}
		}
		if len(data) > 0 {
			if !p.wait(pc) {
				drain()
				return net.ErrClosed
			}
			delayed <- chunk{data: append([]byte(nil), data...), due: time.Now().Add(time.Duration(p.latency.Load()))}
		}
		if err != nil {
			if werr := drain(); werr != nil {
				return werr
			}
			if !p.wait(pc) {
				return net.ErrClosed
			}
			cw, ok := dst.(interface{ CloseWrite() error })
			if !errors.Is(err, io.EOF) || !ok {
				return err
			}
			return cw.CloseWrite()
		}
	}
}

func (pc *proxyConn) setServer(c net.Conn) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	select {
	case <-pc.done:
		c.Close()
		return false
	default:
		pc.server = c
		return true
	}
}

func (pc *proxyConn) close() {
	pc.once.Do(func() {
		pc.mu.Lock()
		close(pc.done)
		server := pc.server
		pc.mu.Unlock()
		pc.client.Close()
		if server != nil {
			server.Close()
		}
	})
}
