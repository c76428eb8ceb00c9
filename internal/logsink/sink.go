package logsink

import (
	"errors"
	"fmt"
	"io"
	"log/syslog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Sink is an io.Writer whose destination can change while loggers write
// to it. The zero value is not usable; use New.
type Sink struct {
	// Fallback is the log file Detach appends to when there is no log
	// file, no journal and no syslog (set before Detach; empty: none).
	Fallback string

	// path: GUARDED_BY(mu). The log file; empty: standard error until
	// Detach.
	path string

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
	s.mu.Lock()
	path := s.path
	s.mu.Unlock()
	if path == "" {
		return nil
	}
	f, err := openLog(path)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.file
	s.file, s.w, s.where = f, f, path
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
// file, the journal, syslog or the Fallback file (see the package
// documentation), else nowhere, and standard input, output and error
// become /dev/null (the log file's descriptor for standard error). warn
// is called before, while lines still reach standard error, when they go
// to the Fallback file or nowhere. It reports where lines go from now on.
func (s *Sink) Detach(tag string, warn func(msg string, args ...any)) (string, error) {
	s.mu.Lock()
	hasFile := s.file != nil
	s.mu.Unlock()
	var (
		sys      *syslog.Writer
		fallback *os.File
	)
	switch {
	case hasFile:
	case isJournalStream(os.Getenv("JOURNAL_STREAM"), 2):
		// Standard error is the journal: nothing holds a caller's pipe.
		s.mu.Lock()
		defer s.mu.Unlock()
		s.where = "the journal"
		return s.where, nil
	default:
		w, serr := syslog.New(syslog.LOG_INFO|syslog.LOG_DAEMON, tag)
		if serr == nil {
			sys = w
			break
		}
		ferr := errors.New("none set")
		if s.Fallback != "" {
			if ferr = os.MkdirAll(filepath.Dir(s.Fallback), 0o750); ferr == nil {
				fallback, ferr = openLog(s.Fallback)
			}
		}
		if ferr == nil {
			warn("no log-file, no journal and no syslog: the log goes on in the fallback file; set log-file to choose it", "log", s.Fallback, "syslog", serr)
		} else {
			warn("no log-file, no journal, no syslog and no fallback file: the log after this line is discarded; set log-file", "syslog", serr, "fallback", ferr)
		}
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return s.Where(), err
	}
	defer null.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sys != nil:
		s.sys, s.w, s.where = sys, sys, "syslog"
	case fallback != nil:
		s.path, s.file, s.w, s.where = s.Fallback, fallback, fallback, s.Fallback
	case !hasFile:
		s.w, s.where = io.Discard, "nowhere (discarded)"
	}
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

// openLog opens a log file for appending, creating it 0640.
func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o640)
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
