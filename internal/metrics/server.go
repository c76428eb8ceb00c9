package metrics

import (
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// limits are what one client may hold of the endpoint's server: how long
// a request may take to arrive, its answer to leave, and a connection to
// stay idle (zero: no limit, as in http.Server), and how many
// connections may be open at once (zero: no limit).
type limits struct {
	readHeader, read, write, idle time.Duration
	conns                         int
}

// serverLimits are the endpoint's limits. The handlers' own work is
// bounded: /metrics and /healthz read what the daemon holds (no
// ZooKeeper or NAS I/O while a scrape waits), and their answers are
// small. So the limits bound only what a client holds, and every
// local user is one: the endpoint serves loopback without
// authentication by default.
var serverLimits = limits{
	// A request is a GET without a body: 10s for its header, and for
	// all of it, is ample on any network (a TLS handshake gets the
	// least of these timeouts, 10s too).
	readHeader: 10 * time.Second,
	read:       10 * time.Second,
	// From a request's header to the end of its answer: writing a
	// scrape takes milliseconds; 30s leaves a slow reader room and is
	// above Prometheus's default scrape timeout (10s), so Prometheus
	// gives up first.
	write: 30 * time.Second,
	// A keep-alive connection waiting for its next request: 90s
	// outlasts Prometheus's default scrape interval (1m), so that a
	// scraper keeps its connection, and closes what was abandoned.
	idle: 90 * time.Second,
	// Prometheus servers and health checks need a few connections; a
	// client that opens more, each holding a goroutine, buffers and a
	// file descriptor of the daemon that serves the FUSE mount too, gets
	// the extra ones closed at once. A local user who keeps them all
	// busy can keep scrapes out (a target down, which alerts), not take
	// the mount's memory or file descriptors.
	conns: 64,
}

// NewServer returns the http.Server of the metrics and health endpoint:
// h, with the endpoint's limits, logging its errors to errorLog.
func NewServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return newServer(h, errorLog, serverLimits)
}

func newServer(h http.Handler, errorLog *log.Logger, l limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		ConnState:         limitConns(l.conns),
		ErrorLog:          errorLog,
	}
}

// limitConns is a ConnState hook that closes a new connection while n
// others are open (nil for n 0: no limit). A connection counts from
// StateNew until StateClosed or StateHijacked, one of which net/http
// reports for every connection it accepted, one closed here too.
func limitConns(n int) func(net.Conn, http.ConnState) {
	if n <= 0 {
		return nil
	}
	var open atomic.Int64
	return func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			if open.Add(1) > int64(n) {
				c.Close()
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
}
