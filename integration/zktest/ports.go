package zktest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ports hands out loopback TCP ports. A port is found by binding it and
// closing the listener again, so another process may still take it before
// ZooKeeper binds it; within this process no port is handed out twice, so
// parallel tests and restarted servers never collide with each other.
// Ports come from below the kernel's ephemeral range: a port held for a
// minute before its server binds it (a Flink JobManager started at a
// run's end) would otherwise be the local port of some outgoing
// connection by then (make jepsen saw "Could not start rest endpoint on
// any port in port range 44995").
var ports = portAllocator{used: make(map[int]bool), rng: rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))}

type portAllocator struct {
	mu   sync.Mutex
	used map[int]bool // GUARDED_BY(mu): every port handed out so far
	rng  *rand.Rand   // GUARDED_BY(mu)
}

// lowPort is the lowest port handed out; ephemeralStart the first port
// of the kernel's ephemeral range (ip_local_port_range), 32768 if it
// cannot be read.
const lowPort = 12000

func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(data))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= lowPort+1000 {
		return 32768
	}
	return n
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

	high := ephemeralStart()
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
		p := lowPort + a.rng.IntN(high-lowPort)
		if a.used[p] {
			continue
		}
		l, err := net.Listen("tcp4", net.JoinHostPort(addr, strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		a.used[p] = true
		out = append(out, p)
	}
	return out, nil
}
