package fusefs

import (
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	var l logLimiter
	t0 := time.Unix(1000, 0)
	if !l.allow("a", t0) {
		t.Fatal("first line suppressed")
	}
	if l.allow("a", t0.Add(time.Second)) {
		t.Error("repeat within the interval let through")
	}
	if !l.allow("b", t0.Add(time.Second)) {
		t.Error("other key suppressed")
	}
	if !l.allow("a", t0.Add(logInterval)) {
		t.Error("line after the interval suppressed")
	}
}
