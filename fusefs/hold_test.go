package fusefs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// testCloseGate holds the close of files named "held*" until released,
// then lets it end or fails it.
type testCloseGate struct {
	release chan error
	sizes   chan int64 // the size of each held file, seen through its fd
}

func (g *testCloseGate) Claims(rel string) bool {
	return strings.HasPrefix(filepath.Base(rel), "held")
}

func (g *testCloseGate) Hold(ctx context.Context, rel string, fd int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil {
		g.sizes <- st.Size
	}
	select {
	case err := <-g.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestIntegration_CloseGateHoldsCloses: close(2) of a written file the
// CloseGate claims returns only when the gate lets it, with all its bytes
// on the backing file meanwhile, and fails with EIO when the gate fails
// it; other files close at once.
func TestIntegration_CloseGateHoldsCloses(t *testing.T) {
	gate := &testCloseGate{release: make(chan error), sizes: make(chan int64, 4)}
	m := mounttest.New(t, &mounttest.Options{
		Mode:      fusefs.ModePrimary,
		Configure: func(c *fusefs.Config) { c.CloseGate = gate },
	})
	write := func(name string) (*os.File, error) {
		f, err := os.Create(filepath.Join(m.Mnt, name))
		if err != nil {
			return nil, err
		}
		_, err = f.Write([]byte("0123456789"))
		return f, err
	}
	f, err := write("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of a file the gate does not claim: %v", err)
	}

	for _, c := range []struct {
		name   string
		answer error
		want   error
	}{{"held-ok", nil, nil}, {"held-fail", errors.New("no other site holds it"), syscall.EIO}} {
		f, err := write(c.name)
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan error, 1)
		go func() { closed <- f.Close() }()
		select {
		case size := <-gate.sizes:
			if size != 10 {
				t.Errorf("%s: the gate saw %d bytes, want 10", c.name, size)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the gate was not asked", c.name)
		}
		select {
		case err := <-closed:
			t.Fatalf("%s: close returned (%v) while the gate held it", c.name, err)
		case <-time.After(200 * time.Millisecond):
		}
		gate.release <- c.answer
		if err := <-closed; !errors.Is(err, c.want) {
			t.Errorf("%s: close %v, want %v", c.name, err, c.want)
		}
	}
	if st := m.Server.Stats(); st.ClosesHeld != 2 || st.ClosesFailed != 1 {
		t.Errorf("closes held %d, failed %d; want 2 and 1", st.ClosesHeld, st.ClosesFailed)
	}
}
