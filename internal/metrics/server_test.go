package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// scaled is l with every time limit divided by n: the endpoint's own
// limits, on a test's time scale.
func (l limits) scaled(n time.Duration) limits {
	l.readHeader /= n
	l.read /= n
	l.write /= n
	l.idle /= n
	return l
}

// serveWith serves the endpoint with the limits l on a loopback port
// until the test ends, and returns its address.
func serveWith(t *testing.T, l limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	src := Sources{Site: "dc2"}
	srv := newServer(Handler(NewRegistry(src), src), log.New(io.Discard, "", 0), l)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// endpointConn is one connection to the endpoint.
type endpointConn struct {
	net.Conn
	r *bufio.Reader
}

func dialEndpoint(t *testing.T, addr string) *endpointConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &endpointConn{Conn: c, r: bufio.NewReader(c)}
}

// get asks /healthz on the connection, keeping it open.
func (c *endpointConn) get() error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: ckptfs\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// closedWithin reports whether the server closes the connection within
// d.
func (c *endpointConn) closedWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// The endpoint closes a keep-alive connection left idle for its idle
// timeout (the daemon's limits, a hundred times shorter), so that idle
// connections of local users and abandoned scrapers do not pile up.
func TestServerClosesIdleConnection(t *testing.T) {
	l := serverLimits.scaled(100)
	c := dialEndpoint(t, serveWith(t, l))
	if err := c.get(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !c.closedWithin(l.idle + 2*time.Second) {
		t.Fatalf("a connection idle for %v is still open (idle timeout %v)", time.Since(start).Round(time.Millisecond), l.idle)
	}
	if d := time.Since(start); d < l.idle/2 {
		t.Errorf("an idle connection closed after %v, before its idle timeout %v", d, l.idle)
	}
}

// The endpoint serves at most its limit of connections at once, and
// closes the others at once; a connection that closes makes room.
func TestServerLimitsConnections(t *testing.T) {
	l := serverLimits.scaled(100)
	if l.conns <= 0 {
		t.Fatal("the endpoint serves any number of connections at once")
	}
	l.idle = time.Minute // the connections held here stay open
	addr := serveWith(t, l)
	held := make([]*endpointConn, l.conns)
	for i := range held {
		held[i] = dialEndpoint(t, addr)
		if err := held[i].get(); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, l.conns, err)
		}
	}
	extra := dialEndpoint(t, addr)
	if !extra.closedWithin(2 * time.Second) {
		t.Errorf("connection %d is served, beyond the limit %d", l.conns+1, l.conns)
	}
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := dialEndpoint(t, addr).get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("a connection after one of %d closed: %v", l.conns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
