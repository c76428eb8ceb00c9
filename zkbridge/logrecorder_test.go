package zkbridge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logRecorder keeps every record logged through it (with the attributes
// of the logger's With) and passes it on to the test's log.
type logRecorder struct {
	next  slog.Handler
	attrs []slog.Attr
	rec   *recorded
}

type recorded struct {
	mu    sync.Mutex
	lines []loggedLine
}

// loggedLine is one record: its level, message and attributes as
// key=value text.
type loggedLine struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l loggedLine) String() string {
	var b strings.Builder
	b.WriteString(l.Level.String() + " " + l.Msg)
	for k, v := range l.Attrs {
		b.WriteString(" " + k + "=" + v)
	}
	return b.String()
}

// newLogRecorder returns a logger for a Config and what it recorded.
func newLogRecorder(t testing.TB) (*slog.Logger, *recorded) {
	r := &recorded{}
	return slog.New(&logRecorder{next: testLogger(t).Handler(), rec: r}), r
}

func (h *logRecorder) Enabled(ctx context.Context, l slog.Level) bool { return true }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	line := loggedLine{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		line.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		line.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.lines = append(h.rec.lines, line)
	h.rec.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *logRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logRecorder{next: h.next.WithAttrs(attrs), attrs: append(append([]slog.Attr{}, h.attrs...), attrs...), rec: h.rec}
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	return &logRecorder{next: h.next.WithGroup(name), attrs: h.attrs, rec: h.rec}
}

// since returns the records from the n-th on, and how many there are.
func (r *recorded) since(n int) ([]loggedLine, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]loggedLine(nil), r.lines[n:]...), len(r.lines)
}

// matching returns the records at level or above whose message or
// attributes contain every one of words.
func matching(lines []loggedLine, level slog.Level, words ...string) []loggedLine {
	var out []loggedLine
	for _, l := range lines {
		if l.Level < level {
			continue
		}
		s := l.String()
		ok := true
		for _, w := range words {
			if !strings.Contains(s, w) {
				ok = false
			}
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
