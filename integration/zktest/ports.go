package zktest

import (
	"fmt"
	"net"
	"sync"
)

// ports hands out loopback TCP ports. A port is found by binding port 0 and
// closing the listener again, so another process may still take it before
// ZooKeeper binds it; within this process no port is handed out twice, so
// parallel tests and restarted servers never collide with each other.
var ports = portAllocator{used: make(map[int]bool)}

type portAllocator struct {
	mu   sync.Mutex
	used map[int]bool // GUARDED_BY(mu): every port handed out so far
}

// FreePorts returns n TCP ports that were free on addr (an IPv4 address)
// a moment ago and that this process never handed out before, neither
// to a ZooKeeper server nor to another caller. Tests that place servers
// in other network namespaces probe the ports here, where those servers'
// ports look free: without the record they would be handed out again.
func FreePorts(addr string, n int) ([]int, error) { return ports.takeOn(addr, n) }

// take returns n distinct loopback ports that were free a moment ago and
// were never returned before by this allocator.
func (a *portAllocator) take(n int) ([]int, error) { return a.takeOn("127.0.0.1", n) }

func (a *portAllocator) takeOn(addr string, n int) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()

	out := make([]int, 0, n)
	// Keep the listeners open until all n are chosen so the kernel cannot
	// hand the same port out twice within one call.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for attempts := 0; len(out) < n; attempts++ {
		if attempts > 100*n {
			return nil, fmt.Errorf("no fresh port on %s after %d attempts", addr, attempts)
		}
		l, err := net.Listen("tcp4", net.JoinHostPort(addr, "0"))
		if err != nil {
			return nil, fmt.Errorf("allocate port: %w", err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if a.used[p] {
			continue
		}
		a.used[p] = true
		out = append(out, p)
	}
	return out, nil
}
