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

// serverLimits are the endpoint's limits.
var serverLimits = limits{
	readHeader: 10 * time.Second,
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
