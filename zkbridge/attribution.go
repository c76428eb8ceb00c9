package zkbridge

import (
	"net"
	"slices"
	"strings"
)

// Attributing Flink's ZooKeeper sessions to sites (docs/design.md §5.11).
//
// ZooKeeper does not say where a session comes from. A JobManager that
// leads publishes its address in its leader nodes (the RPC address of
// its dispatcher, resource manager and job masters, the URL of its REST
// endpoint), and every ephemeral node of a JobManager is in its one
// session (§5.2). So a session is a site's when one of its leader nodes
// names a JobManager address of that site (the setting
// site-jobmanagers); a session that only takes part in the leader latch
// names no address and belongs to no site, but it leads nothing and so
// reads no pointer.

// AddressHostPort returns the host and port of a JobManager address as
// Flink publishes it: pekko.tcp://flink@host:port/user/rpc/...,
// akka.tcp://flink@host:port/..., http://host:port, or host:port. ok is
// false when it names no host.
func AddressHostPort(addr string) (host, port string, ok bool) {
	s := addr
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "", "", false
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		return strings.ToLower(h), p, h != ""
	}
	return strings.ToLower(strings.Trim(s, "[]")), "", true
}

// MatchesJobManager reports whether a published address is one of
// patterns: a pattern is HOST (any port) or HOST:PORT, compared without
// case. Host names are not resolved: list them as Flink publishes them
// (jobmanager.rpc.address, rest.address).
func MatchesJobManager(addr string, patterns []string) bool {
	host, port, ok := AddressHostPort(addr)
	if !ok {
		return false
	}
	for _, p := range patterns {
		ph, pp, pok := AddressHostPort(p)
		if pok && ph == host && (pp == "" || pp == port) {
			return true
		}
	}
	return false
}

// SessionsAt returns the sessions that own a leader node naming one of
// patterns' JobManagers, sorted.
func (l *Liveness) SessionsAt(patterns []string) []SessionID {
	var out []SessionID
	for _, n := range l.Nodes {
		if n.Address != "" && MatchesJobManager(n.Address, patterns) && !slices.Contains(out, n.Owner) {
			out = append(out, n.Owner)
		}
	}
	slices.Sort(out)
	return out
}

// Keep returns the liveness of the nodes keep accepts.
func (l *Liveness) Keep(keep func(EphemeralNode) bool) *Liveness {
	out := &Liveness{}
	for _, n := range l.Nodes {
		if keep(n) {
			out.Nodes = append(out.Nodes, n)
		}
	}
	out.Alive = len(out.Nodes) > 0
	return out
}

// leading returns the sessions that own something besides latch nodes.
func (l *Liveness) leading() []SessionID {
	var out []SessionID
	for _, n := range l.Nodes {
		if n.Kind != KindLatch && !slices.Contains(out, n.Owner) {
			out = append(out, n.Owner)
		}
	}
	return out
}

// OtherSitesLeading is what an automatic takeover by the site whose
// JobManagers are own waits for (TakeoverOptions.Counts): the nodes of
// sessions that own a leader node or a lock and are not this site's.
// This site's own JobManagers may lead already, since the mount holds
// their reads until the takeover decided (§5.12); a session that only
// takes part in the latch leads nothing.
func OtherSitesLeading(own []string) func(*Liveness) *Liveness {
	return func(l *Liveness) *Liveness {
		mine := l.SessionsAt(own)
		leading := l.leading()
		return l.Keep(func(n EphemeralNode) bool {
			return slices.Contains(leading, n.Owner) && !slices.Contains(mine, n.Owner)
		})
	}
}
