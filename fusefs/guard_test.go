package fusefs_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

// guardOf protects job/chk-5 and one shared file, as the catalog does
// for the newest complete checkpoint.
type guardOf struct{}

func (guardOf) ProtectsDeletion(rel string) error {
	if rel == "job/shared/sst-1" || rel == "job/chk-5" || strings.HasPrefix(rel, "job/chk-5/") {
		return fmt.Errorf("%w: %s", manifest.ErrProtected, rel)
	}
	return nil
}

func guardedMount(t *testing.T, grace time.Duration, hold bool) *mounttest.Mount {
	t.Helper()
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModeReplica, Configure: func(c *fusefs.Config) {
		c.DeleteGuard, c.DeleteGrace, c.DeleteHold = guardOf{}, grace, hold
	}})
	for _, f := range []string{"job/chk-5/_metadata", "job/chk-5/state", "job/chk-4/_metadata", "job/shared/sst-1", "job/shared/sst-0"} {
		if err := os.MkdirAll(filepath.Dir(m.OrigPath(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		m.WriteOrig(f, []byte("x"))
	}
	return m
}

// TestIntegration_DeleteGuard: after a promotion, rm -r of the newest
// complete checkpoint (and of a shared file it needs) is refused with
// EPERM for the grace period and counted; older checkpoints go; after
// the grace period everything may go. A primary that was never promoted
// has no guard.
func TestIntegration_DeleteGuard(t *testing.T) {
	m := guardedMount(t, time.Hour, false)
	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	if out, err := run("rm", "-rf", m.Path("job/chk-5")); err == nil {
		t.Fatalf("rm -rf of the protected checkpoint succeeded: %s", out)
	}
	wantErrno(t, "unlink shared", os.Remove(m.Path("job/shared/sst-1")), syscall.EPERM)
	for _, f := range []string{"job/chk-5/_metadata", "job/chk-5/state", "job/shared/sst-1"} {
		if _, err := os.Stat(m.OrigPath(f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if out, err := run("rm", "-rf", m.Path("job/chk-4"), m.Path("job/shared/sst-0")); err != nil {
		t.Fatalf("rm of an older checkpoint: %v %s", err, out)
	}
	if st := m.Server.Stats(); st.DeletionsRefused < 3 || st.DeletionsHeld != 0 {
		t.Errorf("stats %+v", st)
	}

	// Never promoted: no guard.
	p := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Configure: func(c *fusefs.Config) {
		c.DeleteGuard, c.DeleteGrace = guardOf{}, time.Hour
	}})
	if err := os.MkdirAll(p.OrigPath("job/chk-5"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.WriteOrig("job/chk-5/_metadata", []byte("x"))
	if out, err := run("rm", "-rf", p.Path("job/chk-5")); err != nil {
		t.Fatalf("rm on a primary never promoted: %v %s", err, out)
	}
}

// TestIntegration_DeleteGuardHold: with hold, a protected deletion waits
// for the grace period and then happens; it is counted as held.
func TestIntegration_DeleteGuardHold(t *testing.T) {
	const grace = 1500 * time.Millisecond
	m := guardedMount(t, grace, true)
	promoted := time.Now()
	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.Path("job/chk-5/state")); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(promoted); waited < grace-100*time.Millisecond {
		t.Errorf("held deletion returned after %v, before the grace period of %v", waited, grace)
	}
	if _, err := os.Stat(m.OrigPath("job/chk-5/state")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after the hold: %v", err)
	}
	if st := m.Server.Stats(); st.DeletionsHeld != 1 || st.DeletionsRefused != 0 {
		t.Errorf("stats %+v", st)
	}
	// The grace period is over: nothing is held any more.
	if err := os.RemoveAll(m.Path("job/chk-5")); err != nil || m.Server.Stats().DeletionsHeld != 1 {
		t.Errorf("after the grace period: %v, stats %+v", err, m.Server.Stats())
	}
}
