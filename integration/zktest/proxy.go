package zktest

import (
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
	go func() { errc <- p.pipe(pc, server, pc.client) }()
	go func() { errc <- p.pipe(pc, pc.client, server) }()
	for range 2 {
		if err := <-errc; err != nil {
			// Not a clean end of stream: tear both directions down.
			pc.close()
		}
	}
}

// pipe copies src to dst, holding data and end-of-stream back while the
// proxy is blocked, each chunk SetLatency later. It returns nil after
// passing on a clean end of stream.
func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn) error {
	// Chunks are written in order by one goroutine, each at its time, so
	// that later ones are read meanwhile (a link carries many at once).
	type chunk struct {
		data []byte
		due  time.Time
	}
	delayed := make(chan chunk, 1024)
	written := make(chan error, 1)
	go func() {
		var werr error
		for c := range delayed {
			if werr == nil {
				time.Sleep(time.Until(c.due))
				if !p.wait(pc) {
					werr = net.ErrClosed
					continue
				}
				_, werr = dst.Write(c.data)
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
		if n > 0 {
			if !p.wait(pc) {
				drain()
				return net.ErrClosed
			}
			delayed <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(p.latency.Load()))}
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
