//go:build linux

// Package wan is the network between test sites that are network hosts:
// each site a network namespace with one TUN device, and the test process
// forwarding the packets between them, dropping or delaying them by
// rules per link. It is shared by every harness that puts sites apart
// (integration/realflink's partitions and WAN benchmark, zkbridge's
// benchmarks at scale), so that one piece of code adds latency between
// sites.
package wan

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WAN is the network between sites that are network hosts (NewHost, or
// realflink's NewNetSite):
// every site's network namespace has one TUN device with the site's
// address on a /24 the WAN picked for the test, and the WAN carries each
// IPv4 packet from one site's device to another's, applying the link's
// rule on the way: a link may be down (a partition, each direction on its
// own), lose packets, or add latency. The test process is a host of the
// WAN too ("host", .254), so it reaches every site, and rules never apply
// to it: the test is the observer outside the partition.
//
// The WAN forwards in the test process rather than with a bridge, tc
// netem and nftables because the kernels the tests run on need not have
// sch_netem or nftables (this project's CI kernel has neither); a TUN
// device and iproute2's ip are all it needs. Everything it makes goes
// away with its file descriptors: a TUN device that is not persistent is
// removed by the kernel when the WAN closes it, in whichever namespace it
// is.
type WAN struct {
	t      testing.TB
	id     string // in device names, unique on the machine
	subnet [3]byte

	mu    sync.Mutex
	hosts [256]*wanHost         // GUARDED_BY(mu), by last octet
	rules map[[2]string]Link    // GUARDED_BY(mu), by (from, to) site
	queue map[[2]byte]chan wanP // GUARDED_BY(mu), delayed packets per link
	rng   *mrand.Rand           // GUARDED_BY(mu)

	// Dropped counts packets a rule dropped (down or lost).
	dropped atomic.Uint64
	closing chan struct{}
	wg      sync.WaitGroup
}

// Link is the rule of one direction between two sites. The zero Link
// carries every packet at once.
type Link struct {
	Down    bool          // drop every packet
	Loss    float64       // drop each packet with this probability
	Latency time.Duration // deliver each packet this much later
}

type wanHost struct {
	name  string
	octet byte
	addr  string
	dev   string
	tun   *os.File
}

type wanP struct {
	data []byte
	due  time.Time
}

// hostName is the test process's own host on the WAN.
const hostName = "host"

// New makes a WAN and the test process's device on it. A cleanup on t
// removes it. It needs root (a TUN device, network namespaces) and
// iproute2's ip; callers that may run without them skip first.
func New(t testing.TB) *WAN {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("wan: needs root (TUN devices and network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("wan: ip (iproute2) not found: %v", err)
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	w := &WAN{
		t: t, id: hex.EncodeToString(b[:2]), subnet: [3]byte{10, 200 + b[2]%50, b[1]},
		rules: map[[2]string]Link{}, queue: map[[2]byte]chan wanP{},
		rng: mrand.New(mrand.NewPCG(uint64(b[0]), uint64(b[1]))), closing: make(chan struct{}),
	}
	t.Cleanup(w.close)
	if out, err := exec.Command("ip", "-4", "route", "show", "to", "match", w.addr(1)).Output(); err == nil && strings.Contains(string(out), w.prefix()) {
		t.Fatalf("wan: the WAN's subnet %s.0/24 is in use: %s", w.prefix(), out)
	}
	if _, err := w.attach(hostName, 254, 0); err != nil {
		t.Fatalf("wan: the test's host on the WAN: %v", err)
	}
	return w
}

func (w *WAN) prefix() string {
	return fmt.Sprintf("%d.%d.%d", w.subnet[0], w.subnet[1], w.subnet[2])
}

func (w *WAN) addr(octet byte) string { return fmt.Sprintf("%s.%d", w.prefix(), octet) }

// Attach makes a TUN device for a host named name (a site: the rules
// name it) in the network namespace of process pid, with the next free
// address of the WAN, and returns that address. The device goes away
// with the WAN.
func (w *WAN) Attach(name string, pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("wan: host %s: no process holds its namespace", name)
	}
	w.mu.Lock()
	octet := byte(1)
	for w.hosts[octet] != nil && octet < 253 {
		octet++
	}
	if w.hosts[octet] != nil {
		w.mu.Unlock()
		return "", fmt.Errorf("wan: host %s: no address left", name)
	}
	// Reserved until attach stores the host itself.
	w.hosts[octet] = &wanHost{name: name, octet: octet}
	w.mu.Unlock()
	addr, err := w.attach(name, octet, pid)
	if err != nil {
		w.mu.Lock()
		w.hosts[octet] = nil
		w.mu.Unlock()
	}
	return addr, err
}

// attach makes a TUN device for a host, moves it into the namespace of
// pid (0: the test's own), gives it the host's address and starts
// forwarding what it sends.
func (w *WAN) attach(name string, octet byte, pid int) (string, error) {
	dev := fmt.Sprintf("ckw%s%d", w.id, octet)
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		unix.Close(fd)
		return "", err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return "", fmt.Errorf("TUNSETIFF %s: %w", dev, err)
	}
	h := &wanHost{name: name, octet: octet, addr: w.addr(octet), dev: dev, tun: os.NewFile(uintptr(fd), dev)}
	// ip runs ip(8) in the test's namespace (in 0) or the host's.
	ip := func(in int, args ...string) error {
		argv := append([]string{"ip"}, args...)
		if in != 0 {
			argv = append([]string{"nsenter", "--target", fmt.Sprint(in), "--net", "--", "ip"}, args...)
		}
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	steps := [][]string{}
	if pid != 0 {
		if err := ip(0, "link", "set", dev, "netns", fmt.Sprint(pid)); err != nil {
			// Before the move the device is in the test's namespace.
			h.tun.Close()
			return "", err
		}
		steps = append(steps, []string{"link", "set", "lo", "up"})
	}
	steps = append(steps, []string{"addr", "add", h.addr + "/24", "dev", dev}, []string{"link", "set", dev, "up"})
	for _, s := range steps {
		if err := ip(pid, s...); err != nil {
			h.tun.Close()
			return "", err
		}
	}
	w.mu.Lock()
	w.hosts[octet] = h
	w.mu.Unlock()
	w.wg.Add(1)
	go w.forward(h)
	return h.addr, nil
}

// forward reads what h sends and carries it to its destination.
func (w *WAN) forward(h *wanHost) {
	defer w.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := h.tun.Read(buf)
		if err != nil {
			return
		}
		p := buf[:n]
		// IPv4 only; the destination's last octet names the host.
		if n < 20 || p[0]>>4 != 4 || [3]byte(p[16:19]) != w.subnet {
			continue
		}
		w.route(h, p[19], p)
	}
}

func (w *WAN) route(from *wanHost, octet byte, p []byte) {
	w.mu.Lock()
	to := w.hosts[octet]
	if to == nil || to.tun == nil || to == from { // absent, or being attached
		w.mu.Unlock()
		return
	}
	var rule Link
	if from.name != hostName && to.name != hostName {
		rule = w.rules[[2]string{from.name, to.name}]
	}
	drop := rule.Down || rule.Loss > 0 && w.rng.Float64() < rule.Loss
	var q chan wanP
	if !drop && rule.Latency > 0 {
		q = w.queueLocked(from.octet, to)
	}
	w.mu.Unlock()
	switch {
	case drop:
		w.dropped.Add(1)
	case q != nil:
		select {
		case q <- wanP{data: append([]byte(nil), p...), due: time.Now().Add(rule.Latency)}:
		default:
			w.dropped.Add(1) // the link's queue is full
		}
	default:
		to.tun.Write(p)
	}
}

// queueLocked returns the queue of delayed packets of the link from one
// host to another, which keeps their order. Callers hold mu.
func (w *WAN) queueLocked(from byte, to *wanHost) chan wanP {
	k := [2]byte{from, to.octet}
	q := w.queue[k]
	if q == nil {
		q = make(chan wanP, 8192)
		w.queue[k] = q
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-w.closing:
					return
				case p := <-q:
					if d := time.Until(p.due); d > 0 {
						select {
						case <-w.closing:
							return
						case <-time.After(d):
						}
					}
					to.tun.Write(p.data)
				}
			}
		}()
	}
	return q
}

// Set sets the rule of the link from one site to another.
func (w *WAN) Set(from, to string, l Link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rules[[2]string{from, to}] = l
}

// Cut takes the links between every site of a and every site of b down:
// both ways, or only from a to b.
func (w *WAN) Cut(a, b []string, oneWay bool) {
	w.update(a, b, oneWay, func(l *Link) { l.Down = true })
}

// Heal brings the links between a and b up again (both ways).
func (w *WAN) Heal(a, b []string) {
	w.update(a, b, false, func(l *Link) { l.Down = false })
}

// SetLatency gives every link between two sites one-way latency d, so
// that a round trip takes 2d.
func (w *WAN) SetLatency(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.hosts {
		for _, b := range w.hosts {
			if a != nil && b != nil && a != b && a.name != hostName && b.name != hostName {
				l := w.rules[[2]string{a.name, b.name}]
				l.Latency = d
				w.rules[[2]string{a.name, b.name}] = l
			}
		}
	}
}

// SetLoss makes every link between a and b lose packets with probability p.
func (w *WAN) SetLoss(a, b []string, p float64) {
	w.update(a, b, false, func(l *Link) { l.Loss = p })
}

func (w *WAN) update(a, b []string, oneWay bool, f func(*Link)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			l := w.rules[[2]string{x, y}]
			f(&l)
			w.rules[[2]string{x, y}] = l
			if !oneWay {
				l := w.rules[[2]string{y, x}]
				f(&l)
				w.rules[[2]string{y, x}] = l
			}
		}
	}
}

// Dropped returns how many packets the rules dropped so far.
func (w *WAN) Dropped() uint64 { return w.dropped.Load() }

// close stops forwarding and closes every device, which removes it.
func (w *WAN) close() {
	close(w.closing)
	w.mu.Lock()
	hosts := w.hosts
	w.mu.Unlock()
	for _, h := range hosts {
		if h != nil {
			h.tun.Close()
		}
	}
	w.wg.Wait()
}
