package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// The connection's settings are checked by config check and by every
// command that talks to ZooKeeper, naming the file and line, and a
// password never appears in an error.
func TestConnectionSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad-creds", "ckptfs secretpw\n")
	good := writeFile(t, dir, "creds", "ckptfs:secretpw\n")
	os.Chmod(good, 0o600)
	garbage := writeFile(t, dir, "garbage.pem", "not a certificate\n")
	for _, tc := range []struct{ name, file, want string }{
		{"scheme", "zk-auth-scheme: kerberos\nzk-auth-file: " + good + "\n", `:2: zk-auth-scheme "kerberos": want digest or sasl`},
		{"missing file", "zk-auth-file: " + filepath.Join(dir, "absent") + "\n", ":2: zk-auth-file: open "},
		{"no colon", "zk-auth-file: " + bad + "\n", ":2: zk-auth-file: " + bad + ": no colon"},
		{"cert without ca", "zk-tls-cert: " + garbage + "\nzk-tls-key: " + garbage + "\n", ":2: zk-tls-cert and zk-tls-key need zk-tls-ca"},
		{"garbage ca", "zk-tls-ca: " + garbage + "\n", ":2: zk-tls-ca, zk-tls-cert, zk-tls-key: CA file " + garbage + " holds no PEM certificate"},
		{"acl", "zk-acl: [world:anyone]\n", ":2: zk-acl: ACL entry \"world:anyone\": want scheme:id:perms"},
		{"acl locking out", "zk-auth-file: " + good + "\nzk-acl: ['digest:other:abc=:cdrwa']\n", "zk-acl: digest:other:abc=:rwcda grants digest:ckptfs no full access"},
		{"flink acl", "flink-zk-acl: closed\n", `:2: flink-zk-acl "closed": want open or creator`},
		{"session timeout", "zk-session-timeout: 100ms\n", ":2: zk-session-timeout: 100ms is below 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", "zk: 127.0.0.1:1\n"+tc.file)
			_, stderr, code := ckptfs(t, "config", "check", "--config", file)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "secretpw") {
				t.Errorf("config check: exit %d, stderr %q; want 3 and %q", code, stderr, tc.want)
			}
			r := runBinary(t, 15*time.Second, nil, "status", "--config", file)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "secretpw") {
				t.Errorf("status: exit %d, stderr %q; want 3 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// config check warns (exit 0) when ckptfs would connect anonymously, when
// a secured Flink cluster meets it so, when the credentials file is
// readable by others, and when digest credentials would go over plain
// TCP, where ZooKeeper's addauth digest carries the password as it is.
func TestConfigCheckWarnsAboutSecurity(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "creds", "ckptfs:pw\n")
	ca := zktest.NewCA(t, "zk CA")
	inClear := []string{"zk-auth-scheme digest sends the password of zk-auth-file to ZooKeeper in clear", "zk-tls-ca", "zk-auth-scheme: sasl"}
	for _, tc := range []struct {
		name, file string
		mode       os.FileMode
		want, not  []string
	}{
		{"anonymous", "zk: zk1:2181\n", 0o600, []string{"connects anonymously: its znodes"}, []string{"flink-zk-acl is creator", "in clear"}},
		{"secured flink", "zk: zk1:2181\nflink-zk-acl: creator\n", 0o600, []string{"flink-zk-acl is creator", "status, takeover and restore-pruned will be refused"}, nil},
		{"readable credentials", "zk: zk1:2181\nflink-zk-acl: creator\nzk-auth-scheme: sasl\nzk-auth-file: " + creds + "\n", 0o644, []string{"is readable by others (mode 0644)"}, []string{"anonymous"}},
		{"digest in clear", "zk: zk1:2181\nzk-auth-file: " + creds + "\n", 0o600, inClear, []string{"anonymous"}},
		{"quiet", "zk: zk1:2181\nflink-zk-acl: creator\nzk-auth-scheme: sasl\nzk-auth-file: " + creds + "\n", 0o600, nil, []string{"warning"}},
		{"quiet digest over TLS", "zk: zk1:2281\nzk-tls-ca: " + ca.CertFile + "\nzk-auth-file: " + creds + "\n", 0o600, nil, []string{"warning"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Chmod(creds, tc.mode)
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
			stdout, stderr, code := ckptfs(t, "config", "check", "--config", file)
			if code != exitOK {
				t.Fatalf("config check: exit %d, %s", code, stderr)
			}
			// The identity by scheme and user; the digest identity's
			// hash, which allows guessing the password offline, only as
			// the ACL id for zk-acl (whoever runs config check on the
			// file reads zk-auth-file anyway).
			aclID := zk.DigestACL(zk.PermAll, "ckptfs", "pw")[0]
			id := "ZooKeeper identity: digest:ckptfs; in ACLs (zk-acl) digest:" + aclID.ID + ","
			if strings.Contains(tc.file, "sasl") {
				id = "ZooKeeper identity: sasl:ckptfs (also in ACLs, zk-acl)"
			}
			if strings.Contains(tc.file, "zk-auth-file") != strings.Contains(stdout, id) {
				t.Errorf("stdout %q: the identity line %q only with zk-auth-file", stdout, id)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr %q has %q", stderr, w)
				}
			}
		})
	}
}

// Every command that connects to ZooKeeper (mount, status, takeover,
// restore-pruned) logs once at its start that digest credentials go
// over plain TCP in clear, and how to avoid it; with SASL DIGEST-MD5 or
// TLS it does not.
func TestCommandsWarnCredentialsInClear(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "creds", "ckptfs:pw\n")
	os.Chmod(creds, 0o600)
	ca := zktest.NewCA(t, "zk CA")
	// Nothing listens there: the command logs, tries to connect until
	// runBinary stops it.
	unreachable := freeAddr(t)
	const warning = "zk-auth-scheme digest sends the password of zk-auth-file to ZooKeeper in clear"
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"status", []string{"status"}, true},
		{"takeover", []string{"takeover", "--map", "file:///flink=" + dir}, true},
		{"restore-pruned", []string{"restore-pruned", "--map", "file:///flink=" + dir}, true},
		// The mount point is missing: the daemon fails at once, after
		// the command's start.
		{"mount", []string{"mount", "--log-format", "json", t.TempDir(), filepath.Join(dir, "absent")}, true},
		{"status sasl", []string{"status", "--zk-auth-scheme", "sasl"}, false},
		{"status tls", []string{"status", "--zk-tls-ca", ca.CertFile}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(tc.args, "--zk", unreachable, "--site", "dc2", "--zk-auth-file", creds)
			r := runBinary(t, 3*time.Second, nil, args...)
			if n := strings.Count(r.stderr, warning); n != map[bool]int{true: 1, false: 0}[tc.warn] ||
				tc.warn && (!strings.Contains(r.stderr, "zk-tls-ca") || !strings.Contains(r.stderr, "zk-auth-scheme: sasl")) {
				t.Errorf("%s: exit %d, stderr:\n%s\nwant the warning %v (once, naming zk-tls-ca and zk-auth-scheme: sasl)", tc.name, r.code, r.stderr, tc.warn)
			}
		})
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// from-flink reads Flink 1.20's client.authorization and client.acl: it
// writes Flink's digest identity into --auth-file (0600) and names it,
// never printing the password; it says what Kerberos needs instead.
func TestConfigFromFlinkSecurity(t *testing.T) {
	dir := t.TempDir()
	flink := writeFile(t, dir, "config.yaml", `high-availability:
  type: zookeeper
  storageDir: file:///flink/ha
  zookeeper:
    quorum: zk1:2181
    client:
      acl: creator
      authorization: "digest:'flink:s3cret:pw'"
execution.checkpointing.dir: file:///flink/checkpoints
`)
	authFile := filepath.Join(dir, "zk-auth")
	// Neither the password nor the hash of Flink's digest identity
	// shows: the derived file need not be as private as zk-auth-file.
	hash := strings.TrimPrefix(zk.DigestACL(zk.PermAll, "flink", "s3cret:pw")[0].ID, "flink:")
	out, stderr, code := ckptfs(t, "config", "from-flink", "--site", "dc2", "--backing", "/mnt/nas", "--auth-file", authFile, flink)
	if code != exitOK || strings.Contains(out+stderr, "s3cret") || strings.Contains(out+stderr, hash) {
		t.Fatalf("from-flink: exit %d, the password and its hash must not show:\n%s%s", code, out, stderr)
	}
	for _, w := range []string{"flink-zk-acl: creator # high-availability.zookeeper.client.acl (line 7)",
		"zk-auth-file: " + authFile + " # Flink's identity digest:flink, from high-availability.zookeeper.client.authorization (line 8)"} {
		if !strings.Contains(out, w) {
			t.Errorf("from-flink output lacks %q:\n%s", w, out)
		}
	}
	st, err := os.Stat(authFile)
	data, _ := os.ReadFile(authFile)
	if err != nil || st.Mode().Perm() != 0o600 || string(data) != "flink:s3cret:pw\n" {
		t.Errorf("auth file: %v, mode %v, %q", err, st.Mode(), data)
	}
	// The derived file is valid; its one warning is that digest
	// credentials go in clear without zk-tls-ca (as Flink's do, unless
	// its JVM options set up TLS to ZooKeeper, which from-flink does not
	// read).
	derived := writeFile(t, dir, "ckptfs.yaml", out)
	if _, stderr, code := ckptfs(t, "config", "check", "--config", derived); code != exitOK || strings.Count(stderr, "warning") != 1 || !strings.Contains(stderr, "in clear") {
		t.Errorf("config check of the derived file: exit %d, %s", code, stderr)
	}
	// Again: the same file is fine; another content is refused.
	if _, stderr, code := ckptfs(t, "config", "from-flink", "--backing", "/mnt/nas", "--auth-file", authFile, flink); code != exitOK {
		t.Errorf("from-flink again: exit %d %s", code, stderr)
	}
	os.WriteFile(authFile, []byte("other:pw\n"), 0o600)
	if _, stderr, code := ckptfs(t, "config", "from-flink", "--backing", "/mnt/nas", "--auth-file", authFile, flink); code != exitUsage || !strings.Contains(stderr, "exists with other content") {
		t.Errorf("from-flink over another auth file: exit %d %s", code, stderr)
	}
	// Without --auth-file: what to add, without the password.
	out, _, code = ckptfs(t, "config", "from-flink", "--backing", "/mnt/nas", flink)
	if code != exitOK || !strings.Contains(out, "zk-auth-file: Flink authenticates as digest:flink (") || strings.Contains(out, "s3cret") || strings.Contains(out, hash) {
		t.Errorf("from-flink without --auth-file: exit %d\n%s", code, out)
	}
	kerberos := writeFile(t, dir, "flink-conf.yaml", `high-availability: zookeeper
high-availability.storageDir: file:///flink/ha
high-availability.zookeeper.quorum: zk1:2181
high-availability.zookeeper.client.acl: creator
security.kerberos.login.contexts: Client
state.checkpoints.dir: file:///flink/checkpoints
`)
	out, _, code = ckptfs(t, "config", "from-flink", "--backing", "/mnt/nas", kerberos)
	if code != exitOK || !strings.Contains(out, "logs in to ZooKeeper by Kerberos") || !strings.Contains(out, "super user") {
		t.Errorf("from-flink of a Kerberos Flink: exit %d\n%s", code, out)
	}
}

// TestIntegration_SecuredCLI: the commands against an ensemble that
// enforces authentication, with Flink's znodes made with creator ACLs by
// an emulated JobManager of digest identity flink. Anonymous ckptfs
// exits 3 naming the missing credentials; with Flink's identity status
// and takeover work; the super user restores (zk-acl naming Flink's
// identity, whose ckptfs znodes are), with the original ACLs.
// Over TLS, status works with the cluster's CA and refuses another's.
func TestIntegration_SecuredCLI(t *testing.T) {
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.Security = &zktest.Security{SuperPassword: "superpw", EnforceAuth: []string{"digest"}}
	})
	storage := t.TempDir()
	cfg := flinkemu.DefaultConfig()
	cfg.Servers, cfg.Storage = c.Servers(), storage
	cfg.Digest, cfg.CreatorACL = "flink:flinkpw", true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jm, err := flinkemu.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	var last *flinkemu.Checkpoint
	for range 3 {
		if last, err = jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	jm.Close()
	// The replica lacks a file of the newest checkpoint.
	if err := os.Rename(last.StateFiles[0], last.StateFiles[0]+".away"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flinkCreds := writeFile(t, dir, "flink", "flink:flinkpw\n")
	superCreds := writeFile(t, dir, "super", "super:superpw\n")
	common := []string{"--zk", c.ConnectString(), "--site", "dc2", "--map", cfg.Mapping()}

	for _, cmd := range []string{"status", "takeover"} {
		out, stderr, code := ckptfs(t, append([]string{cmd}, common...)...)
		if code != exitUsage || !strings.Contains(stderr, "anonymously: no credentials") || !strings.Contains(stderr, "give zk-auth-file") {
			t.Errorf("anonymous %s: exit %d\n%s%s", cmd, code, out, stderr)
		}
	}
	out, stderr, code := ckptfs(t, append([]string{"status", "--zk-auth-file", flinkCreds}, common...)...)
	if code != exitOK || !strings.Contains(out, job) {
		t.Fatalf("status as Flink's identity: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = ckptfs(t, append([]string{"takeover", "--zk-auth-file", flinkCreds}, common...)...)
	if code != exitOK || !strings.Contains(out, "retracted: 3") {
		t.Fatalf("takeover as Flink's identity: exit %d\n%s%s", code, out, stderr)
	}
	super := zktest.Connect(t, c.Servers(), zktest.WithDigest("super", "superpw"))
	if err := os.Rename(last.StateFiles[0]+".away", last.StateFiles[0]); err != nil {
		t.Fatal(err)
	}
	// ckptfs's own znodes are Flink's identity's (the takeover's):
	// zk-acl names it beside the super user (docs/deploy.md).
	flinkID := "digest:" + zk.DigestACL(zk.PermAll, "flink", "flinkpw")[0].ID + ":cdrwa"
	out, stderr, code = ckptfs(t, append([]string{"restore-pruned", "--zk-auth-file", superCreds, "--zk-acl", flinkID, "--zk-acl", "auth::cdrwa"}, common...)...)
	if code != exitOK {
		t.Fatalf("restore-pruned as the super user: exit %d\n%s%s", code, out, stderr)
	}
	want := zk.DigestACL(zk.PermAll, "flink", "flinkpw")
	for _, p := range []string{last.Znode, last.Znode + "/locks"} {
		if acl, _, err := super.GetACL(p); err != nil || !slices.Equal(acl, want) {
			t.Errorf("ACL of %s after restore-pruned: %v, %v; want %v", p, acl, err, want)
		}
	}

	tc := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.Security = &zktest.Security{TLS: true} })
	args := []string{"status", "--zk", tc.ConnectString(), "--cluster-id", "default", "--zk-tls-ca"}
	out, stderr, code = ckptfs(t, append(args, tc.CA().CertFile)...)
	if code != exitOK || !strings.Contains(out, "yet") {
		// No Flink cluster yet: status reads and says the namespace is absent.
		t.Errorf("status over TLS with the cluster's CA: exit %d, %s%s", code, out, stderr)
	}
	_, stderr, code = ckptfs(t, append(args, zktest.NewCA(t, "other").CertFile)...)
	if code != exitUsage || !strings.Contains(stderr, "does not verify against the configured CA") {
		t.Errorf("status over TLS with another CA: exit %d, %s", code, stderr)
	}
}

// The connection settings map onto zkbridge's configuration.
func TestConnectionSettingsMapping(t *testing.T) {
	dir := t.TempDir()
	creds := writeFile(t, dir, "creds", "flink:pw\n")
	ca := zktest.NewCA(t, "ca")
	cert := ca.Issue(t, "ckptfs")
	s := defaultZKSettings()
	s.ZK, s.AuthFile, s.AuthScheme = "zk1:2181", creds, "sasl"
	s.TLSCA, s.TLSCert, s.TLSKey = ca.CertFile, cert.CertFile, cert.KeyFile
	s.SessionTimeout = 4 * time.Second
	for _, tc := range []struct {
		acl  []string
		want []zk.ACL
	}{
		{nil, nil},
		{[]string{"creator"}, zk.AuthACL(zk.PermAll)},
		{[]string{"Open"}, zk.WorldACL(zk.PermAll)},
		{[]string{"sasl:flink:cdrwa", "world:anyone:r"}, []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: "flink"}, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}},
	} {
		s.ACL = tc.acl
		cfg, err := s.bridgeConfig(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("zk-acl %q: %v", tc.acl, err)
		}
		if !slices.Equal(cfg.ACL, tc.want) {
			t.Errorf("zk-acl %q maps to %v, want %v", tc.acl, cfg.ACL, tc.want)
		}
		if cfg.Auth == nil || cfg.Auth.Scheme != "sasl" || cfg.Auth.User != "flink" || cfg.TLS == nil || len(cfg.TLS.Certificates) != 1 || cfg.TLS.RootCAs == nil ||
			cfg.SessionTimeout != 4*time.Second || cfg.RetryTimeout != 12*time.Second {
			t.Errorf("mapped: auth %+v, TLS %v, session %v, retry %v", cfg.Auth, cfg.TLS != nil, cfg.SessionTimeout, cfg.RetryTimeout)
		}
	}
}
