package fusefs_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// testGate holds every admission until released, then admits or refuses.
type testGate struct {
	mu      sync.Mutex
	release chan struct{}
	err     error
	asked   []string
}

func (g *testGate) Admit(ctx context.Context, rel string) error {
	g.mu.Lock()
	g.asked = append(g.asked, rel)
	ch := g.release
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *testGate) hold() {
	g.mu.Lock()
	g.release, g.err = make(chan struct{}), nil
	g.mu.Unlock()
}

// open releases whatever waits, for good (a failed test must still
// unmount).
func (g *testGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release != nil {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}
	g.release = nil
}

func (g *testGate) decide(err error) {
	g.mu.Lock()
	g.err = err
	close(g.release)
	g.release = nil
	g.mu.Unlock()
}

// TestIntegration_GateHoldsOpens: with a Gate, an open and an opendir
// wait for it, then proceed or fail with the errno it wraps; lookups and
// stats are not held.
func TestIntegration_GateHoldsOpens(t *testing.T) {
	gate := &testGate{}
	vis := mounttest.NewVisibility()
	m := mounttest.New(t, &mounttest.Options{
		Mode: fusefs.ModeReplica, Visibility: vis,
		Configure: func(c *fusefs.Config) { c.Gate = gate },
	})
	t.Cleanup(gate.open) // before the unmount, which runs later
	m.WriteOrig("ha/job-result-store/x", []byte("x"))
	m.WriteOrig("ha/submittedJobGraph1", []byte("graph"))

	gate.hold()
	if _, err := os.Stat(m.Path("ha/submittedJobGraph1")); err != nil {
		t.Fatalf("stat while held: %v", err)
	}
	type result struct {
		what string
		err  error
	}
	done := make(chan result, 2)
	go func() { _, err := os.ReadFile(m.Path("ha/submittedJobGraph1")); done <- result{"read", err} }()
	go func() { _, err := os.ReadDir(m.Path("ha/job-result-store")); done <- result{"readdir", err} }()
	select {
	case r := <-done:
		t.Fatalf("%s passed a holding gate: %v", r.what, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	gate.decide(nil)
	for i := 0; i < 2; i++ {
		if r := <-done; r.err != nil {
			t.Errorf("%s after the gate admitted: %v", r.what, r.err)
		}
	}

	gate.hold()
	go func() { _, err := os.ReadFile(m.Path("ha/submittedJobGraph1")); done <- result{"read", err} }()
	time.Sleep(100 * time.Millisecond)
	gate.decide(fmt.Errorf("the takeover did not decide in time: %w", syscall.EIO))
	wantErrno(t, "open refused by the gate", (<-done).err, syscall.EIO)
}
