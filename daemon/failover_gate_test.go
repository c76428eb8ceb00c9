package daemon

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestGateHoldsThenFails: with takeover auto and no primary mount, an
// open waits; it fails with EIO after HoldTimeout, at once after a
// refused takeover, and with the context's error when the kernel
// interrupts it. With takeover manual nothing is held.
func TestGateHoldsThenFails(t *testing.T) {
	newGate := func(takeover TakeoverMode, hold time.Duration) *loop {
		return &loop{takeover: takeover, hold: hold, log: slog.New(slog.DiscardHandler), runs: map[string]uint64{}}
	}
	cfg := DefaultConfig()
	cfg.Takeover, cfg.HoldTimeout = TakeoverAuto, 150*time.Millisecond
	f := newGate(cfg.Takeover, cfg.HoldTimeout)
	start := time.Now()
	err := f.Admit(context.Background(), "ha/job-result-store/c")
	if !errors.Is(err, syscall.EIO) || time.Since(start) < cfg.HoldTimeout {
		t.Fatalf("held open: %v after %v, want EIO after %v", err, time.Since(start), cfg.HoldTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := f.Admit(ctx, "ha"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("interrupted open: %v", err)
	}
	f.mu.Lock()
	f.refused = "job x: none complete"
	f.mu.Unlock()
	start = time.Now()
	if err := f.Admit(context.Background(), "ha"); !errors.Is(err, syscall.EIO) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("open after a refusal: %v after %v, want EIO at once", err, time.Since(start))
	}
	if err := newGate(TakeoverManual, time.Minute).Admit(context.Background(), "ha"); err != nil {
		t.Fatalf("takeover manual held: %v", err)
	}
}

// TestDecideHold: the gate's rule with takeover auto.
func TestDecideHold(t *testing.T) {
	eio := errors.New("EIO")
	for _, tc := range []struct {
		name string
		o    HoldObservation
		hold bool
		err  error
	}{
		{"primary", HoldObservation{Site: "dc1", Mode: fusefs.ModePrimary, ActiveSite: "dc1"}, false, nil},
		{"replica of a standby site", HoldObservation{Site: "dc2", Mode: fusefs.ModeReplica, ActiveSite: "dc1", Lease: zkbridge.LeaseView{Owner: "dc1", State: zkbridge.LeaseFresh}}, true, nil},
		{"replica, nothing read yet", HoldObservation{Site: "dc2", Mode: fusefs.ModeReplica}, true, nil},
		{"replica after a refusal", HoldObservation{Site: "dc2", Mode: fusefs.ModeReplica, ActiveSite: "dc1", Refused: true}, false, eio},
		{"fenced, another site active and alive", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2", Lease: zkbridge.LeaseView{Owner: "dc2", State: zkbridge.LeaseFresh}}, false, nil},
		{"fenced, another site active, the lease nobody's", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2", Lease: zkbridge.LeaseView{Owner: "", State: zkbridge.LeaseFresh}}, true, nil},
		{"fenced, another site active without a lease", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2", Lease: zkbridge.LeaseView{State: zkbridge.LeaseAbsent}}, true, nil},
		{"fenced, alive active site, after a refusal", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2", Lease: zkbridge.LeaseView{Owner: "dc2", State: zkbridge.LeaseFresh}, Refused: true}, false, nil},
		{"fenced, the active site's lease expired", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2", Lease: zkbridge.LeaseView{Owner: "dc2", State: zkbridge.LeaseExpired}}, true, nil},
		{"fenced, the active site's lease not seen yet", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc2"}, true, nil},
		{"fenced, still named active, the lease another's", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced, ActiveSite: "dc1", Lease: zkbridge.LeaseView{Owner: "dc2", State: zkbridge.LeaseFresh}}, true, nil},
		{"fenced, no site ever active", HoldObservation{Site: "dc1", Mode: fusefs.ModeFenced}, true, nil},
	} {
		hold, err := DecideHold(tc.o)
		if hold != tc.hold || (err != nil) != (tc.err != nil) || (err != nil && !errors.Is(err, syscall.EIO)) {
			t.Errorf("%s: hold %v, err %v; want hold %v, err %v", tc.name, hold, err, tc.hold, tc.err)
		}
	}
}
