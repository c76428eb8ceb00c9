package zktest

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  Security
		want string
	}{
		{"client auth without tls", Security{ClientAuth: "need"}, "need Security.TLS"},
		{"bad client auth", Security{TLS: true, ClientAuth: "maybe"}, "want need, want or none"},
		{"quote in sasl user", Security{SASLUsers: map[string]string{`a"b`: "x"}}, "JAAS"},
		{"bad scheme", Security{EnforceAuth: []string{"digest,sasl"}}, "plain scheme"},
	} {
		cfg := DefaultConfig()
		cfg.Security = &tc.sec
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Security = &Security{}
	cfg.Extra = map[string]string{"ssl.clientAuth": "none"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "generated from Security") {
		t.Errorf("an ssl. key in Extra beside Security: %v", err)
	}
	if got, want := SuperDigest("super", "superpw"), "super:g9oN2HttPfn8MMWJZ2r45Np/LIA="; got != want {
		// The value ZooKeeper 3.8's DigestAuthenticationProvider main class prints.
		t.Errorf("SuperDigest = %q, want %q", got, want)
	}
}

// A digest super user, enforced authentication and SASL users on one
// server: an anonymous session is closed, a digest and a SASL session
// each own what they create, and the super user reads it all.
func TestIntegration_SecuredDigestSASL(t *testing.T) {
	c := StartCluster(t, 1, func(cfg *Config) {
		cfg.Security = &Security{
			SuperPassword: "superpw",
			EnforceAuth:   []string{"digest", "sasl"},
			SASLUsers:     map[string]string{"flink": "flinkpw"},
		}
	})
	anon := Connect(t, c.Servers())
	if _, _, err := anon.Children("/"); err == nil || !strings.Contains(err.Error(), "-124") {
		t.Errorf("anonymous session under enforce.auth: %v, want ZooKeeper's -124 (authentication required)", err)
	}
	anon.Close()

	dig := Connect(t, c.Servers(), WithDigest("ckptfs", "pw"))
	if _, err := dig.Create("/d", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatalf("digest create: %v", err)
	}
	if acl, _, err := dig.GetACL("/d"); err != nil || len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, "ckptfs:") {
		t.Errorf("ACL of a creator node of digest ckptfs: %v, %v", acl, err)
	}
	sasl := Connect(t, c.Servers(), WithSASL("flink", "flinkpw"))
	if _, err := sasl.Create("/s", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatalf("sasl create: %v", err)
	}
	if acl, _, err := sasl.GetACL("/s"); err != nil || len(acl) != 1 || acl[0] != (zk.ACL{Perms: zk.PermAll, Scheme: "sasl", ID: "flink"}) {
		t.Errorf("ACL of a creator node of sasl flink: %v, %v", acl, err)
	}
	if _, _, err := dig.Get("/s"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("digest ckptfs reads sasl flink's node: %v, want NoAuth", err)
	}
	super := Connect(t, c.Servers(), WithDigest("super", "superpw"))
	for _, p := range []string{"/d", "/s"} {
		if _, err := super.Set(p, []byte("x"), -1); err != nil {
			t.Errorf("super user writes %s: %v", p, err)
		}
	}
}

// A TLS-only cluster: no plain port, a client that trusts the cluster's
// CA connects, one that trusts another CA does not, and a client
// certificate is the session's x509 identity.
func TestIntegration_SecuredTLS(t *testing.T) {
	c := StartCluster(t, 1, func(cfg *Config) { cfg.Security = &Security{TLS: true} })
	if _, err := FourLetterWord(c.Servers()[0], "srvr", 2*time.Second); err == nil {
		t.Errorf("a plain four-letter word reached the TLS-only port")
	}
	cert := c.CA().Issue(t, "ckptfs")
	cl := Connect(t, c.Servers(), WithTLS(c.CA().ClientTLS(t, &cert)))
	if _, err := cl.Create("/x", nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	if acl, _, err := cl.GetACL("/x"); err != nil || len(acl) != 1 || acl[0].Scheme != "x509" || acl[0].ID != cert.Subject {
		t.Errorf("ACL of a creator node over TLS with a client certificate: %v, %v; want x509:%s", acl, err, cert.Subject)
	}

	other := NewCA(t, "another CA")
	cfg := other.ClientTLS(t, nil)
	conn, err := net.DialTimeout("tcp", c.Servers()[0], 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := FourLetterWordTLS(c.Servers()[0], "srvr", 2*time.Second, cfg); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another CA: %v, want a certificate error", err)
	}
}
