package zktest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes every line back and counts accepted connections.
func echoServer(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

// roundTrip writes line and reads one line back within timeout.
func roundTrip(c net.Conn, r *bufio.Reader, line string, timeout time.Duration) (string, error) {
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	got, err := r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxy_BlockHoldsTrafficAndUnblockDeliversIt(t *testing.T) {
	target, _ := echoServer(t)
	p := NewProxy(t, target)
	if p.Target() != target {
		t.Fatalf("Target() = %q, want %q", p.Target(), target)
	}
	c, r := dial(t, p.Addr())
	if got, err := roundTrip(c, r, "one", 5*time.Second); err != nil || got != "one" {
		t.Fatalf("before Block: got %q, %v; want \"one\"", got, err)
	}

	p.Block()
	if !p.Blocked() {
		t.Fatal("Blocked() = false after Block")
	}
	if got, err := roundTrip(c, r, "two", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("while blocked: got %q, %v; want a read timeout", got, err)
	}

	p.Unblock()
	if p.Blocked() {
		t.Fatal("Blocked() = true after Unblock")
	}
	// "two" was held, not dropped: it arrives first.
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after Unblock: got %q, %v; want the held \"two\"", got, err)
	}
	if got, err := roundTrip(c, r, "three", 5*time.Second); err != nil || got != "three" {
		t.Fatalf("after Unblock: got %q, %v; want \"three\"", got, err)
	}
}

func TestProxy_ConnectionsAcceptedWhileBlockedWait(t *testing.T) {
	target, accepted := echoServer(t)
	p := NewProxy(t, target)
	p.Block()
	c, r := dial(t, p.Addr()) // the proxy accepts it
	if got, err := roundTrip(c, r, "held", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("while blocked: got %q, %v; want a read timeout", got, err)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("target accepted %d connections while blocked, want 0", n)
	}
	p.Unblock()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Unblock: got %q, %v; want \"held\"", got, err)
	}
}

func TestProxy_DropConnsAndClose(t *testing.T) {
	target, _ := echoServer(t)
	p := NewProxy(t, target)
	c, r := dial(t, p.Addr())
	if _, err := roundTrip(c, r, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.DropConns(); n != 1 {
		t.Fatalf("DropConns() = %d, want 1", n)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("read after DropConns: %v, want the connection closed", err)
	}

	// New connections still work.
	c2, r2 := dial(t, p.Addr())
	if got, err := roundTrip(c2, r2, "y", 5*time.Second); err != nil || got != "y" {
		t.Fatalf("after DropConns: got %q, %v", got, err)
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close() = %v, want nil", err)
	}
	if _, err := net.DialTimeout("tcp4", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepts connections after Close")
	}
}

func TestProxy_PassesEndOfStream(t *testing.T) {
	target, _ := echoServer(t)
	p := NewProxy(t, target)
	c, _ := dial(t, p.Addr())
	io.WriteString(c, "bye")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c) // the echo server ends after our end of stream
	if err != nil || string(got) != "bye" {
		t.Fatalf("ReadAll = %q, %v; want \"bye\" then end of stream", got, err)
	}
}

// packet is one ZooKeeper packet: a 4-byte length and body.
func packet(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// request is a request packet: xid, opcode and a body of n bytes.
func request(xid, op int32, n int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return packet(append(b, bytes.Repeat([]byte{0xab}, n)...))
}

// TestProxy_TrapRequest: the trap passes every packet before the
// trapped request, and holds that request's body (the server never has
// all of it) until Unblock, however the client's writes split it. A
// connect request whose bytes look like the opcode is not trapped.
func TestProxy_TrapRequest(t *testing.T) {
	for _, split := range []int{0, 1, 3, 13, 20, 1 << 20} {
		t.Run(fmt.Sprintf("writes of %d", split), func(t *testing.T) {
			got := make(chan []byte, 64)
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						got <- append([]byte(nil), buf[:n]...)
					}
					if err != nil {
						return
					}
				}
			}()
			p := NewProxy(t, ln.Addr().String())
			fired := p.TrapRequest(OpMulti)
			c, _ := dial(t, p.Addr())
			// The connect request's protocol version and zxid bytes hold
			// 14 where a request's opcode would be.
			connect := packet(append(make([]byte, 7), 14, 0, 0, 0, 0, 0, 0, 0, 0))
			var stream []byte
			stream = append(stream, connect...)
			stream = append(stream, request(1, 1, 30)...) // create
			before := len(stream)
			stream = append(stream, request(2, OpMulti, 40)...)
			stream = append(stream, request(3, 4, 5)...) // a read behind it
			for i := 0; i < len(stream); {
				n := len(stream) - i
				if split > 0 && split < n {
					n = split
				}
				if _, err := c.Write(stream[i : i+n]); err != nil {
					t.Fatal(err)
				}
				i += n
			}
			select {
			case <-fired:
			case <-time.After(5 * time.Second):
				t.Fatal("the trap did not fire")
			}
			if !p.Blocked() {
				t.Fatal("the proxy is not blocked after the trap fired")
			}
			var recv []byte
			collect := func(d time.Duration) {
				deadline := time.After(d)
				for {
					select {
					case b := <-got:
						recv = append(recv, b...)
					case <-deadline:
						return
					}
				}
			}
			collect(300 * time.Millisecond)
			if len(recv) < before || !bytes.Equal(recv[:before], stream[:before]) {
				t.Fatalf("the server got %d bytes before the multi, want the %d before it", len(recv), before)
			}
			if len(recv) >= before+4+8+40 {
				t.Fatalf("the server got the whole multi (%d bytes of %d) while trapped", len(recv), len(stream))
			}
			p.Unblock()
			collect(500 * time.Millisecond)
			if !bytes.Equal(recv, stream) {
				t.Fatalf("after Unblock the server got %d bytes, want all %d in order", len(recv), len(stream))
			}
			// Fired once: the next multi passes.
			c.Write(request(4, OpMulti, 10))
			collect(300 * time.Millisecond)
			if p.Blocked() || len(recv) != len(stream)+4+8+10 {
				t.Fatalf("a second multi: blocked %v, %d bytes", p.Blocked(), len(recv)-len(stream))
			}
		})
	}
}
