package fusefs

import (
	"strconv"
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	if ok, n := l.allow("a", t0); !ok || n != 0 {
		t.Fatalf("first line: %v, %d suppressed", ok, n)
	}
	for range 3 {
		if ok, _ := l.allow("a", t0.Add(time.Second)); ok {
			t.Error("repeat within the interval let through")
		}
	}
	if ok, _ := l.allow("b", t0.Add(time.Second)); !ok {
		t.Error("other key suppressed")
	}
	if ok, n := l.allow("a", t0.Add(logInterval)); !ok || n != 3 {
		t.Errorf("line after the interval: %v, %d suppressed, want it with 3", ok, n)
	}
	if ok, n := l.allow("a", t0.Add(3*logInterval)); !ok || n != 0 {
		t.Errorf("line after a quiet interval: %v, %d suppressed, want it with 0", ok, n)
	}
}

// TestLogLimiterCap: past its cap the limiter forgets quiet keys first,
// so a key still repeating stays limited.
func TestLogLimiterCap(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	for i := range logLimiterCap - 1 {
		l.allow(strconv.Itoa(i), t0)
	}
	l.allow("busy", t0.Add(logInterval))
	if ok, _ := l.allow("new", t0.Add(logInterval)); !ok {
		t.Fatal("a new key suppressed")
	}
	if len(l.keys) != 2 {
		t.Errorf("%d keys kept, want the 2 recent ones", len(l.keys))
	}
	if ok, _ := l.allow("busy", t0.Add(logInterval+time.Second)); ok {
		t.Error("the busy key was forgotten")
	}
}
