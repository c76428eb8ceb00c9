package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// Problems an operator's trial found (issue 31), each through the built
// binary.

// TestStatusBeforeFlinksFirstStart: before Flink's first start ZooKeeper
// holds no namespace of the cluster; status says so, and what else would
// explain it, with exit 0, in text and JSON. An unreachable ZooKeeper
// stays exit 3. (Before, status exited 3 with "no Flink namespace
// found".)
func TestStatusBeforeFlinksFirstStart(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	zkArgs := []string{"status", "--zk", c.ConnectString(), "--site", "dc1"}

	r := runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders")...)
	if want := "cluster /orders (/flink/orders): no Flink job under /flink/orders yet: Flink has not started with this cluster id, or path-root or cluster-id differ from Flink's"; r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("a fresh ensemble: exit %d\n%s%s\nwant exit 0 and %q", r.code, r.stdout, r.stderr, want)
	}
	if !strings.Contains(r.stdout, "active site: none yet; epoch 0") || !strings.Contains(r.stdout, "JobManager: no JobManager alive") {
		t.Errorf("a fresh ensemble: lacks the site and JobManager lines\n%s", r.stdout)
	}
	r = runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders", "-o", "json")...)
	var rep struct {
		NoNamespace string            `json:"no_namespace"`
		Jobs        []json.RawMessage `json:"jobs"`
		ActiveSite  string            `json:"active_site"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil || rep.Jobs == nil || len(rep.Jobs) != 0 ||
		!strings.HasPrefix(rep.NoNamespace, "no Flink job under /flink/orders yet") {
		t.Errorf("-o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	// Without a cluster id: the path root.
	if r = runBinary(t, time.Minute, nil, zkArgs...); r.code != exitOK || !strings.Contains(r.stdout, "no Flink job under /flink yet: Flink has not started under this path root") {
		t.Errorf("no cluster id: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Another cluster beside it: a misspelt cluster id is as likely.
	client := zktest.Connect(t, c.Servers())
	for _, p := range []string{"/flink", "/flink/payments", "/flink/payments/jobs"} {
		if _, err := client.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r = runBinary(t, time.Minute, nil, append(zkArgs, "--cluster-id", "/orders")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "no Flink job under /flink/orders yet") || !strings.Contains(r.stdout, "/flink holds Flink cluster(s) payments: check the cluster id and path root") {
		t.Errorf("another cluster beside: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A path root ckptfs may not list: an error, as before.
	if _, err := client.Create("/locked", nil, 0, zk.DigestACL(zk.PermAll, "someone", "pw")); err != nil {
		t.Fatal(err)
	}
	if r = runBinary(t, time.Minute, nil, append(zkArgs, "--path-root", "/locked", "--cluster-id", "/orders")...); r.code != exitUsage {
		t.Errorf("a path root ckptfs may not list: exit %d\n%s%s\nwant 3", r.code, r.stdout, r.stderr)
	}
	// ZooKeeper unreachable: an error, as before.
	r = runBinary(t, time.Minute, nil, "status", "--zk", freeAddr(t), "--zk-session-timeout", "1s", "--cluster-id", "/orders")
	if r.code != exitUsage {
		t.Errorf("unreachable ZooKeeper: exit %d\n%s%s\nwant 3", r.code, r.stdout, r.stderr)
	}
}

// TestConfigCheckWarnsOfUnguardedMounts: config check warns, naming the
// keys to set, when metrics-addr serves beyond loopback without TLS and
// client certificates, and when a primary has no zk and so no fence;
// the file stays valid (exit 0). (Before, both passed silently.)
func TestConfigCheckWarnsOfUnguardedMounts(t *testing.T) {
	dir := t.TempDir()
	ca := zktest.NewCA(t, "metrics CA")
	server := ca.Issue(t, "ckptfs-daemon")
	const (
		plain   = "serves /metrics and /healthz beyond loopback over plain HTTP"
		noCA    = "serves /metrics and /healthz beyond loopback to every client that reaches the port: set metrics-tls-client-ca"
		noFence = "mode primary without zk: nothing fences this mount"
	)
	tls := "metrics-tls-cert: " + server.CertFile + "\nmetrics-tls-key: " + server.KeyFile + "\n"
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"every interface", "metrics-addr: 0.0.0.0:9477\n", []string{"metrics-addr 0.0.0.0:9477 " + plain, "set metrics-tls-cert and metrics-tls-key (HTTPS) and metrics-tls-client-ca"}},
		{"an interface by name", "metrics-addr: flink1.dc1:9477\n", []string{"metrics-addr flink1.dc1:9477 " + plain}},
		{"TLS without client certificates", "metrics-addr: '[::]:9477'\n" + tls, []string{"metrics-addr [::]:9477 " + noCA}},
		{"TLS with client certificates", "metrics-addr: 0.0.0.0:9477\n" + tls + "metrics-tls-client-ca: " + ca.CertFile + "\n", nil},
		{"loopback", "metrics-addr: 127.0.0.1:9477\n", nil},
		{"no host", "metrics-addr: :9477\n", nil},
		{"localhost", "metrics-addr: localhost:9477\n", nil},
		{"primary without zk", "mode: primary\n", []string{noFence, "set zk and cluster-id"}},
		{"primary with zk", "mode: primary\nsite: dc1\nzk: zk1:2181\nzk-acl: [open]\n", nil},
		{"replica without zk", "mode: replica\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
			_, stderr, code := ckptfs(t, "config", "check", "--config", file)
			if code != exitOK {
				t.Fatalf("exit %d, want 0\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for _, w := range []string{plain, noCA, noFence} {
				if len(tc.want) == 0 && strings.Contains(stderr, w) {
					t.Errorf("stderr warns %q:\n%s", w, stderr)
				}
			}
		})
	}
}
