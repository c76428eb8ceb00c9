package zkbridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestParseCredentials(t *testing.T) {
	c, err := ParseCredentials([]byte("ckptfs:pa:ss word\n"), SchemeDigest)
	if err != nil || c.User != "ckptfs" || c.Password != "pa:ss word" {
		t.Fatalf("ParseCredentials = %+v, %v", c, err)
	}
	// The identity is what ZooKeeper's digest provider computes, as
	// go-zookeeper's DigestACL does.
	if got, want := c.Identity(), zk.DigestACL(zk.PermAll, "ckptfs", "pa:ss word")[0]; got != want {
		t.Errorf("Identity() = %v, want %v", got, want)
	}
	if s := c.String(); s != "digest:ckptfs" {
		t.Errorf("String() = %q, want digest:ckptfs: the scheme and the user, never the password nor its hash", s)
	}
	if c, err := ParseCredentials([]byte("flink:pw\r\n"), SchemeSASL); err != nil || c.Identity() != (zk.ACL{Perms: zk.PermAll, Scheme: "sasl", ID: "flink"}) {
		t.Errorf("sasl: %+v, %v", c, err)
	}
	for _, tc := range []struct{ data, scheme, want string }{
		{"ckptfs", SchemeDigest, "no colon"},
		{":pw", SchemeDigest, "empty user"},
		{"u:", SchemeDigest, "empty password"},
		{"u:p\nv:q", SchemeDigest, "more than one line"},
		{"u v:p", SchemeDigest, "blank"},
		{"u:p\x00", SchemeDigest, "control"},
		{"u,v:p", SchemeSASL, "SASL DIGEST-MD5"},
		{"u:p", "kerberos", "want digest or sasl"},
		{"u:\xff", SchemeDigest, "UTF-8"},
	} {
		_, err := ParseCredentials([]byte(tc.data), tc.scheme)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCredentials(%q, %s) = %v, want %q", tc.data, tc.scheme, err, tc.want)
		}
	}
	if _, err := ParseCredentials([]byte("user:secretpw\x01"), SchemeDigest); err == nil || strings.Contains(err.Error(), "secretpw") {
		t.Errorf("error %v must say what is wrong without the password", err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("x", maxCredentialsFile+1)), 0o600)
	if _, err := ReadCredentials(big, SchemeDigest); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a large file: %v", err)
	}
	if _, err := ReadCredentials(filepath.Join(dir, "missing"), SchemeDigest); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestParseACL(t *testing.T) {
	acl, err := ParseACL([]string{"world:anyone:r", "auth::cdrwa", "digest:ckptfs:abc=:rwcda", "x509:CN=ck,O=a:b:cd", "sasl:flink:a"})
	want := []zk.ACL{
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
		{Perms: zk.PermAll, Scheme: "auth", ID: ""},
		{Perms: zk.PermAll, Scheme: "digest", ID: "ckptfs:abc="},
		{Perms: zk.PermCreate | zk.PermDelete, Scheme: "x509", ID: "CN=ck,O=a:b"},
		{Perms: zk.PermAdmin, Scheme: "sasl", ID: "flink"},
	}
	if err != nil || !slices.Equal(acl, want) {
		t.Fatalf("ParseACL = %v, %v; want %v", acl, err, want)
	}
	if got := FormatACL(want[:3]); got != "world:anyone:r,auth::rwcda,digest:ckptfs:abc=:rwcda" {
		t.Errorf("FormatACL = %q", got)
	}
	for _, tc := range []struct{ entry, want string }{
		{"world:anyone", "want scheme:id:perms"},
		{"world:someone:r", "one id anyone"},
		{"auth:x:r", "takes no id"},
		{"digest:ckptfs:r", "user:BASE64-SHA1"},
		{"sasl::r", "empty id"},
		{"world:anyone:rx", `permission 'x'`},
		{"world:anyone:", "no permissions"},
	} {
		if _, err := ParseACL([]string{tc.entry}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseACL(%q) = %v, want %q", tc.entry, err, tc.want)
		}
	}
}

func TestACLPolicy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CkptfsRoot = "/ckptfs"
	if got := newACLPolicy(&cfg).forPath("/ckptfs/c/active-site"); !slices.Equal(got, zk.WorldACL(zk.PermAll)) {
		t.Errorf("anonymous ckptfs: %v, want open (Flink's default)", got)
	}
	cfg.Auth = digestCreds("ckptfs", "pw")
	p := newACLPolicy(&cfg)
	private := zk.AuthACL(zk.PermAll)
	public := append(zk.AuthACL(zk.PermAll), zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"})
	for path, want := range map[string][]zk.ACL{
		"/ckptfs":                          public,
		"/ckptfs/c":                        public,
		"/ckptfs/c/epoch":                  public,
		"/ckptfs/c/active-site":            public,
		"/ckptfs/c/sites/dc1/jobs/j":       public,
		"/ckptfs/c/takeover":               private,
		"/ckptfs/c/takeover/_c_x-lock-1":   private,
		"/ckptfs/c/pruned":                 private,
		"/ckptfs/c/pruned/j/0000000000001": private,
	} {
		if got := p.forPath(path); !slices.Equal(got, want) {
			t.Errorf("forPath(%s) = %v, want %v", path, got, want)
		}
	}
	// An explicit ACL that already lets everyone read is not doubled.
	cfg.ACL = []zk.ACL{{Perms: zk.PermAll, Scheme: "auth"}, {Perms: zk.PermRead | zk.PermWrite, Scheme: "world", ID: "anyone"}}
	if got := newACLPolicy(&cfg).forPath("/ckptfs/c/epoch"); !slices.Equal(got, cfg.ACL) {
		t.Errorf("forPath with world read in the ACL: %v", got)
	}
	// An ACL naming ckptfs's own digest identity is fine.
	cfg.ACL = []zk.ACL{digestCreds("ckptfs", "pw").Identity()}
	if err := cfg.checkACL(); err != nil {
		t.Errorf("an ACL of ckptfs's own identity: %v", err)
	}
}

// What ckptfs says about its identity (messages, logs, health) names the
// scheme and the user only: the digest identity's hash, an unsalted
// SHA-1 of user:password, lets whoever reads it guess the password
// offline.
func TestIdentityShowsNoDigest(t *testing.T) {
	c := digestCreds("ckptfs", "pw")
	hash := strings.TrimPrefix(c.Identity().ID, "ckptfs:")
	cfg := Config{Auth: c, ACL: []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "other:abc="}}}
	cl := &client{auth: c}
	for what, s := range map[string]string{
		"String":    c.String(),
		"identity":  cl.identity(),
		"AuthError": cl.explain("read /x", zk.ErrNoAuth).Error(),
		"enforced":  cl.explain("read /x", errors.New("zk: unknown error: -124")).Error(),
		"checkACL":  fmt.Sprint(cfg.checkACL()),
	} {
		if strings.Contains(s, hash) || !strings.Contains(s, "digest:ckptfs") {
			t.Errorf("%s: %q: want digest:ckptfs without the hash %s", what, s, hash)
		}
	}
	if s := (&Credentials{Scheme: SchemeSASL, User: "flink", Password: "pw"}).String(); s != "sasl:flink" {
		t.Errorf("SASL: String() = %q, want sasl:flink", s)
	}
}

func digestCreds(user, pw string) *Credentials {
	return &Credentials{Scheme: SchemeDigest, User: user, Password: pw}
}

// Which grants on an existing znode of ckptfs's are another client's
// (the guard's rule, docs/design.md §5.3).
func TestForeignGrants(t *testing.T) {
	cfg := DefaultConfig()
	if ids := cfg.ckptfsIdentities(); ids != nil {
		t.Errorf("anonymous ckptfs has identities %v: want none, nothing checked", ids)
	}
	me, other, ops := digestCreds("ckptfs", "pw"), digestCreds("ckptfs-dc1", "pw1"), digestCreds("ops", "pw2")
	cfg.Auth = me
	mine := me.Identity()
	read := zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}
	withPerms := func(a zk.ACL, p int32) zk.ACL { a.Perms = p; return a }
	cases := []struct {
		name    string
		acl     []zk.ACL // zk-acl
		node    []zk.ACL
		foreign []zk.ACL
	}{
		{"what ckptfs makes", nil, []zk.ACL{mine, read}, nil},
		{"open", nil, zk.WorldACL(zk.PermAll), zk.WorldACL(zk.PermAll)},
		{"world may create", nil, []zk.ACL{mine, {Perms: zk.PermRead | zk.PermCreate, Scheme: "world", ID: "anyone"}}, []zk.ACL{{Perms: zk.PermRead | zk.PermCreate, Scheme: "world", ID: "anyone"}}},
		{"another identity", nil, []zk.ACL{mine, other.Identity()}, []zk.ACL{other.Identity()}},
		{"another identity zk-acl names", []zk.ACL{{Perms: zk.PermAll, Scheme: "auth"}, other.Identity()}, []zk.ACL{mine, other.Identity()}, nil},
		{"more than zk-acl gives", []zk.ACL{{Perms: zk.PermAll, Scheme: "auth"}, withPerms(ops.Identity(), zk.PermRead)}, []zk.ACL{mine, ops.Identity()}, []zk.ACL{ops.Identity()}},
		{"read only is anyone's", nil, []zk.ACL{mine, withPerms(ops.Identity(), zk.PermRead), read}, nil},
		{"an open zk-acl", zk.WorldACL(zk.PermAll), zk.WorldACL(zk.PermAll), nil},
		{"an ip grant", nil, []zk.ACL{mine, {Perms: zk.PermWrite, Scheme: "ip", ID: "10.0.0.0/8"}}, []zk.ACL{{Perms: zk.PermWrite, Scheme: "ip", ID: "10.0.0.0/8"}}},
	}
	for _, tc := range cases {
		c := cfg
		c.ACL = tc.acl
		if got := foreignGrants(tc.node, c.ckptfsIdentities()); !slices.Equal(got, tc.foreign) {
			t.Errorf("%s: foreign %v, want %v", tc.name, got, tc.foreign)
		}
	}
	if got := expandAuth([]zk.ACL{{Perms: zk.PermAll, Scheme: "auth"}, read}, []zk.ACL{mine}); !slices.Equal(got, []zk.ACL{mine, read}) {
		t.Errorf("expandAuth: %v", got)
	}
}
