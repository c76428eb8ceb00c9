package daemon

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// TestGateHoldsThenFails: with takeover auto and no primary mount, an
// open waits; it fails with EIO after HoldTimeout, at once after a
// refused takeover, and with the context's error when the kernel
// interrupts it. With takeover manual nothing is held.
func TestGateHoldsThenFails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Takeover, cfg.HoldTimeout = TakeoverAuto, 150*time.Millisecond
	f := newFailover(&cfg, slog.New(slog.DiscardHandler))
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
	manual := DefaultConfig()
	if err := newFailover(&manual, slog.New(slog.DiscardHandler)).Admit(context.Background(), "ha"); err != nil {
		t.Fatalf("takeover manual held: %v", err)
	}
}
