package mounttest

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// Visibility is a settable manifest.Visibility: everything is visible
// unless a verdict says otherwise. A listing through a replica mount asks
// about every entry, so Visible neither allocates nor excludes other
// readers, as manifest.Catalog does not: benchmarks then measure the
// mount, not the fake.
type Visibility struct {
	mu sync.RWMutex
	// verdicts are by directory (relative to the mount root, "" for the
	// root), then name. GUARDED_BY(mu)
	verdicts map[string]map[string]error
}

// NewVisibility returns a Visibility that shows everything.
func NewVisibility() *Visibility { return &Visibility{verdicts: make(map[string]map[string]error)} }

// Set records the verdict for rel; nil makes it visible again.
func (v *Visibility) Set(rel string, err error) {
	dir, name := path.Split(path.Clean(rel))
	dir = strings.TrimSuffix(dir, "/")
	v.mu.Lock()
	defer v.mu.Unlock()
	if err == nil {
		delete(v.verdicts[dir], name)
		return
	}
	if v.verdicts[dir] == nil {
		v.verdicts[dir] = make(map[string]error)
	}
	v.verdicts[dir][name] = err
}

// Visible implements manifest.Visibility.
func (v *Visibility) Visible(dir, name string) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.verdicts[dir][name]
}

// SealerCall is one call a Sealer received.
type SealerCall struct {
	// Op is "written", "nochecksum" (FileWrittenWithoutChecksum),
	// "removed", "renamed" or "committed".
	Op   string
	Rel  string
	Size int64
	CRC  uint32
	At   time.Time
	// NewRel and Exchange are set for "renamed".
	NewRel   string
	Exchange bool
}

func (c SealerCall) String() string {
	switch c.Op {
	case "written":
		return fmt.Sprintf("%s %s size=%d crc=%08x", c.Op, c.Rel, c.Size, c.CRC)
	case "renamed":
		if c.Exchange {
			return fmt.Sprintf("exchanged %s %s", c.Rel, c.NewRel)
		}
		return fmt.Sprintf("renamed %s to %s", c.Rel, c.NewRel)
	}
	return c.Op + " " + c.Rel
}

// Sealer is a manifest.Sealer that records its calls.
type Sealer struct {
	mu    sync.Mutex
	calls []SealerCall // GUARDED_BY(mu)
}

// FileWritten implements manifest.Sealer.
func (s *Sealer) FileWritten(rel string, v manifest.FileVersion, crc32c uint32, at time.Time) {
	s.add(SealerCall{Op: "written", Rel: rel, Size: v.Size(), CRC: crc32c, At: at})
}

// FileWrittenWithoutChecksum implements manifest.Sealer.
func (s *Sealer) FileWrittenWithoutChecksum(rel string, at time.Time) {
	s.add(SealerCall{Op: "nochecksum", Rel: rel, At: at})
}

// FileRemoved implements manifest.Sealer.
func (s *Sealer) FileRemoved(rel string) { s.add(SealerCall{Op: "removed", Rel: rel}) }

// Renamed implements manifest.Sealer.
func (s *Sealer) Renamed(oldRel, newRel string, exchange bool) {
	s.add(SealerCall{Op: "renamed", Rel: oldRel, NewRel: newRel, Exchange: exchange})
}

// MetadataCommitted implements manifest.Sealer.
func (s *Sealer) MetadataCommitted(rel string) { s.add(SealerCall{Op: "committed", Rel: rel}) }

func (s *Sealer) add(c SealerCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// Calls returns the calls so far, oldest first.
func (s *Sealer) Calls() []SealerCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SealerCall(nil), s.calls...)
}

// Reset forgets the calls so far.
func (s *Sealer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Verifier is a verifier with the default settings over a resolver of
// maps and roots (manifest.NewResolver).
func Verifier(t testing.TB, maps []manifest.Mapping, roots ...string) *manifest.Verifier {
	t.Helper()
	res, err := manifest.NewResolver(maps, roots)
	if err != nil {
		t.Fatal(err)
	}
	vcfg := manifest.DefaultVerifierConfig()
	vcfg.Resolver = res
	v, err := manifest.NewVerifier(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Catalog is a replica catalog over backing with the default settings,
// not yet refreshed: the catalog a daemon serves, without the daemon.
func Catalog(t testing.TB, backing string) *manifest.Catalog {
	t.Helper()
	ccfg := manifest.DefaultCatalogConfig()
	ccfg.Backing, ccfg.Verifier = backing, Verifier(t, nil, backing)
	c, err := manifest.NewCatalog(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
