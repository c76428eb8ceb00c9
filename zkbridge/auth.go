package zkbridge

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"
)

// Authentication schemes of Credentials.
const (
	// SchemeDigest is ZooKeeper's digest scheme (addauth digest
	// user:password): the identity digest:<user>:<base64 sha1>, which
	// Flink 1.20+ uses with high-availability.zookeeper.client.
	// authorization, and the super user of
	// zookeeper.DigestAuthenticationProvider.superDigest.
	SchemeDigest = "digest"
	// SchemeSASL is SASL DIGEST-MD5 over ZooKeeper's SASL requests: the
	// identity sasl:<user> of a JAAS DigestLoginModule, the one Flink's
	// ZooKeeper client has when its JAAS Client section logs in with a
	// user name and password.
	SchemeSASL = "sasl"
)

// maxCredentialsFile bounds what ReadCredentials reads.
const maxCredentialsFile = 4 << 10

// Credentials are who ckptfs is to ZooKeeper. They are applied on every
// connection before its first request (design §5.8).
type Credentials struct {
	// Scheme is SchemeDigest or SchemeSASL.
	Scheme string
	// User and Password; the password may hold colons, as ZooKeeper's
	// digest provider splits user:password at the first one.
	User     string
	Password string
}

// ReadCredentials reads a credentials file: one line user:password (a
// final newline is dropped), for the given scheme. The file is the only
// way credentials reach ckptfs: never a command line, where other users
// see them.
func ReadCredentials(path, scheme string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCredentialsFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxCredentialsFile {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a credentials file (want one line user:password)", path, maxCredentialsFile)
	}
	c, err := ParseCredentials(data, scheme)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCredentials parses user:password for scheme. Errors never show
// the password.
func ParseCredentials(data []byte, scheme string) (*Credentials, error) {
	if scheme != SchemeDigest && scheme != SchemeSASL {
		return nil, fmt.Errorf("scheme %q: want %s or %s", scheme, SchemeDigest, SchemeSASL)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	switch {
	case !utf8.Valid(data):
		return nil, errors.New("not UTF-8 text (want one line user:password)")
	case bytes.ContainsAny(data, "\n\r"):
		return nil, errors.New("more than one line (want one line user:password)")
	}
	user, password, ok := strings.Cut(string(data), ":")
	switch {
	case !ok:
		return nil, errors.New("no colon (want one line user:password)")
	case user == "":
		return nil, errors.New("empty user name (want user:password)")
	case password == "":
		return nil, fmt.Errorf("empty password for user %q", user)
	case strings.IndexFunc(user, unicode.IsSpace) >= 0 || strings.IndexFunc(user, unicode.IsControl) >= 0:
		return nil, fmt.Errorf("user name %q holds a blank or control character", user)
	case strings.IndexFunc(password, unicode.IsControl) >= 0:
		return nil, fmt.Errorf("the password of user %q holds a control character", user)
	}
	if scheme == SchemeSASL && strings.ContainsAny(user, `"\,`) {
		return nil, fmt.Errorf("user name %q holds a quote, backslash or comma, which SASL DIGEST-MD5 cannot carry here", user)
	}
	return &Credentials{Scheme: scheme, User: user, Password: password}, nil
}

// Identity is the ACL id ZooKeeper gives a session with these
// credentials: digest:<user>:<base64 sha1 of user:password> or
// sasl:<user>. It holds no password, but the digest's hash is an
// unsalted SHA-1 of user:password that allows guessing the password
// offline: it goes into ACLs, never into messages, logs or health
// (String).
func (c *Credentials) Identity() zk.ACL {
	if c.Scheme == SchemeSASL {
		return zk.ACL{Scheme: "sasl", ID: c.User, Perms: zk.PermAll}
	}
	sum := sha1.Sum([]byte(c.User + ":" + c.Password))
	return zk.ACL{Scheme: "digest", ID: c.User + ":" + base64.StdEncoding.EncodeToString(sum[:]), Perms: zk.PermAll}
}

// String names the identity by what identifies without revealing: the
// scheme and the user, digest:<user> or sasl:<user>; never the password
// nor the digest's hash. ZooKeeper itself shows a digest ACL to a reader
// without the admin permission as digest:<user>:x.
func (c *Credentials) String() string {
	return c.Scheme + ":" + c.User
}

// ErrNotAuthorized means ZooKeeper refused ckptfs: a znode's ACL does not
// let ckptfs's identity do what it asked (NoAuth), or the ensemble
// requires an authentication ckptfs did not give (enforce.auth.schemes:
// the server closes the session), or refused the one it gave (SASL).
var ErrNotAuthorized = errors.New("not authorized by ZooKeeper")

// AuthError is a refusal of ZooKeeper, for one operation.
type AuthError struct {
	// What names the operation, for example "list /flink".
	What string
	// Identity is who ckptfs was, Credentials.String ("" when
	// anonymous).
	Identity string
	// Enforced: the ensemble requires authentication and closed the
	// session (enforce.auth.schemes), or refused the authentication.
	Enforced bool
	Err      error
}

func (e *AuthError) Error() string {
	who := "anonymously: no credentials are configured"
	if e.Identity != "" {
		who = "as " + e.Identity
	}
	if e.Enforced {
		return fmt.Sprintf("zkbridge: %s: ZooKeeper closed the session: the ensemble requires an authentication it did not get (enforce.auth.schemes, or a refused SASL login); ckptfs connected %s: %v", e.What, who, e.Err)
	}
	return fmt.Sprintf("zkbridge: %s: ZooKeeper refused it: the znode's ACL does not let ckptfs's identity do that; ckptfs connected %s: %v", e.What, who, e.Err)
}

// Unwrap gives ErrNotAuthorized and ZooKeeper's error.
func (e *AuthError) Unwrap() []error { return []error{ErrNotAuthorized, e.Err} }

// errAuthRequiredCode is ZooKeeper's SESSIONCLOSEDREQUIRESASLAUTH (-124),
// the reply to a request on a session that has not authenticated with a
// scheme of enforce.auth.schemes (ZooKeeper 3.7+). go-zookeeper does not
// know the code: it reports "unknown error: -124".
const errAuthRequiredCode = -124

// authRequired reports whether err is ZooKeeper's -124.
func authRequired(err error) bool {
	return err != nil && strings.HasSuffix(err.Error(), fmt.Sprintf("unknown error: %d", errAuthRequiredCode))
}
