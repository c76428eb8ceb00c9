package zkbridge

import (
	"slices"
	"testing"
	"time"
)

func TestAddressHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"pekko.tcp://flink@10.0.0.5:6123/user/rpc/dispatcher_1", "10.0.0.5", "6123"},
		{"akka.tcp://flink@JM1.dc2.example:6123/user/rpc/resourcemanager_0", "jm1.dc2.example", "6123"},
		{"http://127.0.0.1:8081", "127.0.0.1", "8081"},
		{"akka://flink/user/rpc/dispatcher", "flink", ""},
		{"[::1]:6123", "::1", "6123"},
		{"jm2", "jm2", ""},
	} {
		h, p, ok := AddressHostPort(tc.in)
		if !ok || h != tc.host || p != tc.port {
			t.Errorf("%q: %q %q %v, want %q %q", tc.in, h, p, ok, tc.host, tc.port)
		}
	}
	if _, _, ok := AddressHostPort("pekko.tcp://flink@/user"); ok {
		t.Error("an address without a host has one")
	}
}

func TestMatchesJobManager(t *testing.T) {
	addr := "pekko.tcp://flink@10.0.0.5:6123/user/rpc/dispatcher_1"
	for _, tc := range []struct {
		patterns []string
		want     bool
	}{
		{[]string{"10.0.0.5"}, true},
		{[]string{"10.0.0.5:6123"}, true},
		{[]string{"10.0.0.5:6124"}, false},
		{[]string{"10.0.0.6", "10.0.0.5:6123"}, true},
		{[]string{"10.0.0.50"}, false},
		{nil, false},
	} {
		if got := MatchesJobManager(addr, tc.patterns); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.patterns, got, tc.want)
		}
	}
}

// TestOtherSitesLeading: an automatic takeover of dc2 waits for every
// session that leads or locks and is not dc2's, and for no latch-only
// session.
func TestOtherSitesLeading(t *testing.T) {
	live := &Liveness{Alive: true, Nodes: []EphemeralNode{
		// dc1's leader: latch, leader node with its address, a lock.
		{Path: "/f/leaderlatch/a", Kind: KindLatch, Owner: 1},
		{Path: "/f/leader/dispatcher/connection_info", Kind: KindLeader, Owner: 1, Address: "pekko.tcp://flink@10.1.0.1:6123/user/rpc/dispatcher_1"},
		{Path: "/f/jobs/j/checkpoints/1/locks/x", Kind: KindCheckpointLock, Owner: 1},
		// dc2's JobManager, leading already (held by the mount).
		{Path: "/f/leaderlatch/b", Kind: KindLatch, Owner: 2},
		{Path: "/f/leader/rest_server/connection_info", Kind: KindLeader, Owner: 2, Address: "http://10.2.0.1:8081"},
		// A standby contender: latch only.
		{Path: "/f/leaderlatch/c", Kind: KindLatch, Owner: 3},
	}}
	own := []string{"10.2.0.1"}
	if got := live.SessionsAt(own); !slices.Equal(got, []SessionID{2}) {
		t.Errorf("dc2's sessions %v, want [0x2]", got)
	}
	got := OtherSitesLeading(own)(live)
	if !got.Alive || !slices.Equal(got.Sessions(), []SessionID{1}) || len(got.Nodes) != 3 {
		t.Errorf("counted %+v; want dc1's three nodes", got)
	}
	// dc1 gone: nothing counts, although dc2 leads and a contender waits.
	gone := live.Keep(func(n EphemeralNode) bool { return n.Owner != 1 })
	if got := OtherSitesLeading(own)(gone); got.Alive {
		t.Errorf("dc1 gone, still counted: %+v", got)
	}
	// Without dc2's addresses its leading session counts.
	if got := OtherSitesLeading(nil)(gone); !slices.Equal(got.Sessions(), []SessionID{2}) {
		t.Errorf("no own addresses: counted %v, want [0x2]", got.Sessions())
	}
}

func TestLeaseRule(t *testing.T) {
	r := LeaseRule{Duration: 8e9}
	if r.RenewEvery() != 1e9 || r.HolderLapse() != 4e9 || r.WatchdogAfter() != 6e9 || r.ObserverDead() != 8e9 {
		t.Errorf("rule %v: renew %v lapse %v watchdog %v dead %v", r.Duration, r.RenewEvery(), r.HolderLapse(), r.WatchdogAfter(), r.ObserverDead())
	}
	if (LeaseRule{Duration: MinLeaseDuration - 1}).Validate() == nil {
		t.Error("a too short lease validates")
	}
	// The proofs' margins (design §5.10, §5.14): with the holder's clock
	// slow and the observer's fast, by rho each, the holder stops claiming
	// (rho < 1/3), and its watchdog fires (rho < 1/7), before the
	// observer concludes; at the bound itself they meet.
	for _, c := range []struct {
		name  string
		after time.Duration
		rho   float64
	}{{"claim", r.HolderLapse(), 1.0 / 3}, {"watchdog", r.WatchdogAfter(), 1.0 / 7}} {
		at := func(rho float64) (holder, observer float64) {
			return float64(c.after) / (1 - rho), float64(r.ObserverDead()) / (1 + rho)
		}
		if h, o := at(c.rho * 0.999); h >= o {
			t.Errorf("%s: below rho %.4f the holder's end %v is not before the observer's conclusion %v", c.name, c.rho, h, o)
		}
		if h, o := at(c.rho * 1.001); h < o {
			t.Errorf("%s: above rho %.4f the holder's end %v is still before the observer's conclusion %v: the bound is not tight", c.name, c.rho, h, o)
		}
	}
}
