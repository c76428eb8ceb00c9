package logsink

import (
	"fmt"
	"io"
	"log/syslog"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Sink is an io.Writer whose destination can change while loggers write
// to it. The zero value is not usable; use New.
type Sink struct {
	path string // the log file; empty: standard error until Detach

	mu   sync.Mutex
	w    io.Writer // GUARDED_BY(mu)
	file *os.File  // GUARDED_BY(mu); the open log file, if any
	sys  *syslog.Writer
	// detached: GUARDED_BY(mu). Standard error is the log file's
	// descriptor (Detach), kept so after Reopen.
	detached bool
	// where: GUARDED_BY(mu). Says where lines go, for the last line
	// written before a move.
	where string
}

// New returns a Sink writing to the file at path (appending, created
// 0640), or to stderr when path is empty.
func New(path string, stderr io.Writer) (*Sink, error) {
	s := &Sink{path: path, w: stderr, where: "standard error"}
	if path != "" {
		if err := s.Reopen(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Write writes one log line (slog handlers write a line per call).
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Reopen reopens the log file (after logrotate moved it); without one it
// does nothing.
func (s *Sink) Reopen() error {
	if s.path == "" {
		return nil
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.file
	s.file, s.w, s.where = f, f, s.path
	if s.detached {
		if err := unix.Dup2(int(f.Fd()), 2); err != nil {
			return fmt.Errorf("log file: %w", err)
		}
	}
	if old != nil {
		old.Close()
	}
	return nil
}

// Where says where lines go now.
func (s *Sink) Where() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.where
}

// Detach stops using the process's standard streams: lines go to the log
// file, the journal or syslog (see the package documentation), and
// standard input, output and error become /dev/null. It reports where
// lines go from now on.
func (s *Sink) Detach(tag string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil && !isJournalStream(os.Getenv("JOURNAL_STREAM"), 2) {
		w, err := syslog.New(syslog.LOG_INFO|syslog.LOG_DAEMON, tag)
		if err != nil {
			return s.where, fmt.Errorf("no log file and no syslog (%v): keeping standard error", err)
		}
		s.sys, s.w, s.where = w, w, "syslog"
	}
	if s.file == nil && s.sys == nil {
		// Standard error is the journal: nothing holds a caller's pipe.
		s.where = "the journal"
		return s.where, nil
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return s.where, err
	}
	defer null.Close()
	// With a log file, what the Go runtime itself prints (a crash)
	// lands in it too.
	stderr := null
	if s.file != nil {
		stderr, s.detached = s.file, true
	}
	for fd, to := range []*os.File{null, null, stderr} {
		if err := unix.Dup2(int(to.Fd()), fd); err != nil {
			return s.where, fmt.Errorf("detaching fd %d: %w", fd, err)
		}
	}
	return s.where, nil
}

// isJournalStream reports whether fd is the journal stream systemd named
// in JOURNAL_STREAM ("DEVICE:INODE").
func isJournalStream(env string, fd int) bool {
	dev, ino, ok := strings.Cut(env, ":")
	if !ok {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	return strconv.FormatUint(st.Dev, 10) == dev && strconv.FormatUint(st.Ino, 10) == ino
}
