package zktest

import (
	"bufio"
	"errors"
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
