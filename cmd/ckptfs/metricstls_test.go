package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// The metrics endpoint listens on loopback for an address without a
// host, and with metrics-tls-* serves HTTPS only, to clients with a
// certificate of its client CA; ckptfs health follows with
// metrics-tls-ca and a client certificate.
func TestMountMetricsTLS(t *testing.T) {
	mounttest.RequireFUSE(t)
	ca := zktest.NewCA(t, "metrics CA")
	server := ca.Issue(t, "ckptfs-daemon", net.IPv4(127, 0, 0, 1))
	client := ca.Issue(t, "prometheus")
	stranger := zktest.NewCA(t, "another CA").Issue(t, "stranger")
	dir := t.TempDir()
	storage, mnt := filepath.Join(dir, "storage"), filepath.Join(dir, "mnt")
	os.MkdirAll(storage, 0o755)
	os.MkdirAll(mnt, 0o755)
	d := startMount(t, "--log-format", "json", "--metrics-addr", ":0",
		"--metrics-tls-cert", server.CertFile, "--metrics-tls-key", server.KeyFile, "--metrics-tls-client-ca", ca.CertFile, storage, mnt)
	addr := d.metricsAddr(t)
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("metrics-addr :0 listens on %s, want loopback", addr)
	}
	url := "https://" + addr
	out, code, _ := health(t, "--metrics-url", url, "--metrics-tls-ca", ca.CertFile,
		"--metrics-tls-client-cert", client.CertFile, "--metrics-tls-client-key", client.KeyFile)
	if code != exitOK || !strings.Contains(out, "ok: daemon healthy") {
		t.Errorf("health over TLS with a client certificate: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no client certificate", []string{"--metrics-url", url, "--metrics-tls-ca", ca.CertFile}},
		{"a stranger's certificate", []string{"--metrics-url", url, "--metrics-tls-ca", ca.CertFile,
			"--metrics-tls-client-cert", stranger.CertFile, "--metrics-tls-client-key", stranger.KeyFile}},
		{"plain HTTP", []string{"--metrics-url", "http://" + addr}},
		{"unverified server", []string{"--metrics-url", url, "--metrics-tls-client-cert", client.CertFile, "--metrics-tls-client-key", client.KeyFile}},
	} {
		if out, code, _ := health(t, tc.args...); code != exitUnhealthy || !strings.Contains(out, "daemon: ") {
			t.Errorf("health with %s: exit %d, want 1 and the daemon refused\n%s", tc.name, code, out)
		}
	}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := plain.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP served /metrics")
		}
	}
	if _, _, code := ckptfs(t, "health", "--metrics-url", url, "--metrics-tls-client-cert", client.CertFile); code != exitUsage {
		t.Errorf("a client certificate without its key: exit %d, want 3", code)
	}
}
