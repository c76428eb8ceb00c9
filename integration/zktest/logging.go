package zktest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// testLog forwards to t.Log until the test's cleanup closes it. Output
// written later (a JVM's last words, a zk client goroutine that outlives
// Close) is dropped instead of panicking with "Log in goroutine after Test
// has completed".
type testLog struct {
	t      testing.TB
	prefix string

	mu     sync.Mutex
	closed bool // GUARDED_BY(mu)
}

// newTestLog must be called before anything that may log is started: its
// cleanup then runs after theirs.
func newTestLog(t testing.TB, prefix string) *testLog {
	l := &testLog{t: t, prefix: prefix}
	t.Cleanup(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
	})
	return l
}

// Printf implements zk.Logger.
func (l *testLog) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(l.prefix + fmt.Sprintf(format, args...))
	}
}

// tailLines is how many output lines of each server are kept for error
// messages.
const tailLines = 30

// lineSink is the stdout and stderr of one server across its restarts: it
// splits the output into lines, logs each one and keeps the last few.
type lineSink struct {
	log *testLog

	mu      sync.Mutex
	partial []byte   // GUARDED_BY(mu): an unfinished line
	tail    []string // GUARDED_BY(mu): at most tailLines last lines
}

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.addLocked(string(bytes.TrimRight(s.partial[:i], "\r")))
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

// Note records a line of the harness's own among the server's output.
func (s *lineSink) Note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked("--- " + fmt.Sprintf(format, args...))
}

func (s *lineSink) addLocked(line string) {
	s.log.Printf("%s", line)
	if len(s.tail) == tailLines {
		copy(s.tail, s.tail[1:])
		s.tail = s.tail[:tailLines-1]
	}
	s.tail = append(s.tail, line)
}

// Tail returns the last lines, including an unfinished one.
func (s *lineSink) Tail() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.tail...)
	if len(s.partial) > 0 {
		out = append(out, string(s.partial))
	}
	return out
}
