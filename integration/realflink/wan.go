//go:build linux

package realflink

import (
	"testing"

	"github.com/ckptfs/ckptfs/integration/wan"
)

// NewWAN makes the network between sites that are network hosts
// (integration/wan, shared with the other harnesses that put sites
// apart). It skips like every test that needs root.
func NewWAN(t testing.TB) *wan.WAN {
	t.Helper()
	RequireRoot(t)
	return wan.New(t)
}

// NewNetSite makes a site that is a network host as well: a mount and a
// network namespace of its own, attached to the WAN with the address
// Addr. Its processes bind that address (or every address of their
// namespace) and reach other sites only through the WAN.
func NewNetSite(t testing.TB, name, logDir string, w *wan.WAN) *Site {
	t.Helper()
	s := newSite(t, name, logDir, true)
	addr, err := w.Attach(name, s.PID())
	if err != nil {
		t.Fatalf("realflink: site %s on the WAN: %v", name, err)
	}
	s.Addr = addr
	return s
}

// Do runs f in the site's network namespace, on an OS thread of its own:
// sockets f opens belong to the site and keep working afterwards, from
// any goroutine (a listener of the site, a dial from it).
func (s *Site) Do(f func() error) error {
	if !s.net {
		return f()
	}
	return wan.Do(s.PID(), f)
}
