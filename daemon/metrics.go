package daemon

import (
	"crypto/tls"
	"net"
)

// listenMetrics listens for the metrics and health endpoint. An address
// without a host (:9477) listens on loopback only: the endpoint is
// unauthenticated unless MetricsTLS asks for client certificates, and
// what it tells (sites, jobs, the lag, the active site) is for this
// machine's monitoring unless the operator names an interface. With
// tlsCfg it serves TLS only.
func listenMetrics(addr string, tlsCfg *tls.Config) (net.Listener, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil || tlsCfg == nil {
		return ln, err
	}
	return tls.NewListener(ln, tlsCfg), nil
}
