package zktest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Mode is a server's role as reported by the srvr four-letter word.
type Mode string

// Modes a serving server reports.
const (
	ModeLeader     Mode = "leader"
	ModeFollower   Mode = "follower"
	ModeStandalone Mode = "standalone"
	ModeObserver   Mode = "observer"
	ModeReadOnly   Mode = "read-only"
)

// ErrNotServing is returned by Mode for a server that runs but does not
// serve clients, for example while it takes part in a leader election.
var ErrNotServing = errors.New("not serving requests")

// FourLetterWord sends a four-letter command (srvr, ruok, mntr, cons, dump,
// ...) to the ZooKeeper client address addr and returns the whole reply.
// The command must be in the server's 4lw.commands.whitelist.
func FourLetterWord(addr, word string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err = conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err = io.WriteString(conn, word); err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	return string(reply), nil
}

// FourLetterWordTLS is FourLetterWord over TLS, for a server whose
// clients must use TLS (secureClientPort).
func FourLetterWordTLS(addr, word string, timeout time.Duration, cfg *tls.Config) (string, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err = conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err = io.WriteString(conn, word); err != nil {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil && len(reply) == 0 {
		return "", fmt.Errorf("%s %s: %w", word, addr, err)
	}
	return string(reply), nil
}

// parseMode extracts the mode from a srvr reply.
func parseMode(srvr string) (Mode, error) {
	for line := range strings.Lines(srvr) {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return Mode(strings.TrimSpace(m)), nil
		}
	}
	if strings.Contains(srvr, "not currently serving") {
		return "", ErrNotServing
	}
	if strings.Contains(srvr, "not in the whitelist") {
		return "", fmt.Errorf("srvr is not whitelisted: %q", strings.TrimSpace(srvr))
	}
	return "", fmt.Errorf("no Mode in srvr reply %q", strings.TrimSpace(srvr))
}
