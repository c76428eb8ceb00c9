package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// TestAfterFirstPassWaits: the mount is served before the catalog's
// first pass; what it shows and what its deletion guard protects wait
// for that pass rather than answer from an empty catalog.
func TestAfterFirstPassWaits(t *testing.T) {
	backing := t.TempDir()
	c := mounttest.Catalog(t, backing)
	a := afterFirstPass{c}
	got := make(chan error, 2)
	go func() { got <- a.Visible("job", "chk-1") }()
	go func() { got <- a.ProtectsDeletion("job/chk-1/_metadata") }()
	select {
	case err := <-got:
		t.Fatalf("answered before the first pass: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	c.Refresh(context.Background())
	for range 2 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("still waiting after the first pass")
		}
	}
}
