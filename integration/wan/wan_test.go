//go:build linux

package wan

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// TestIntegration_WAN: hosts reach each other and the test through the
// WAN, and its rules cut, delay and restore links, each direction on its
// own.
func TestIntegration_WAN(t *testing.T) {
	if testing.Short() {
		t.Skip("the WAN needs root and network namespaces")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CKPTFS_REQUIRE_ZK") != "" {
			t.Fatal("the WAN needs root (TUN devices and network namespaces)")
		}
		t.Skip("the WAN needs root")
	}
	wan := New(t)
	a := NewHost(t, wan, "a")
	b := NewHost(t, wan, "b")
	if a.Addr == b.Addr || a.Addr == "" {
		t.Fatalf("addresses %q and %q", a.Addr, b.Addr)
	}
	echo := func(s *Host) string {
		var ln net.Listener
		if err := Do(s.PID(), func() (err error) { ln, err = net.Listen("tcp4", s.Addr+":0"); return err }); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			conns []net.Conn
			wg    sync.WaitGroup
		)
		// Connections whose peer was cut off never see it close.
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				wg.Go(func() { io.Copy(c, c) })
			}
		})
		return ln.Addr().String()
	}
	atA, atB := echo(a), echo(b)
	// roundTrip dials addr from s (nil: the test) and times one echo.
	roundTrip := func(s *Host, addr string) (time.Duration, error) {
		var c net.Conn
		dial := func() (err error) { c, err = net.DialTimeout("tcp4", addr, 500*time.Millisecond); return err }
		var err error
		if s == nil {
			err = dial()
		} else {
			err = Do(s.PID(), dial)
		}
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		start := time.Now()
		if _, err := fmt.Fprintln(c, "ping"); err != nil {
			return 0, err
		}
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	must := func(what string, s *Host, addr string) time.Duration {
		t.Helper()
		d, err := roundTrip(s, addr)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return d
	}
	mustNot := func(what string, s *Host, addr string) {
		t.Helper()
		if _, err := roundTrip(s, addr); err == nil {
			t.Fatalf("%s: got through", what)
		}
	}
	must("a to b", a, atB)
	must("b to a", b, atA)
	must("the test to a", nil, atA)

	wan.SetLatency(20 * time.Millisecond)
	if d := must("a to b, 20ms each way", a, atB); d < 40*time.Millisecond {
		t.Errorf("a round trip over links of 20ms took %v", d)
	}
	if d := must("the test to b", nil, atB); d >= 20*time.Millisecond {
		t.Errorf("the test's own link is delayed: %v", d)
	}
	wan.SetLatency(0)

	wan.Cut([]string{"a"}, []string{"b"}, true)
	mustNot("a to b, one way cut", a, atB)
	// b's packets reach a, a's answers do not reach b.
	mustNot("b to a, answers cut", b, atA)
	must("the test to a during the cut", nil, atA)
	wan.Heal([]string{"a"}, []string{"b"})
	must("a to b, healed", a, atB)
	wan.Cut([]string{"a"}, []string{"b"}, false)
	mustNot("b to a, both ways cut", b, atA)
	wan.Heal([]string{"a"}, []string{"b"})
	must("b to a, healed", b, atA)
	if wan.Dropped() == 0 {
		t.Error("the WAN dropped nothing")
	}
}
