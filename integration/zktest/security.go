package zktest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Security secures the servers of a cluster the ways a production
// ensemble is secured. Every part is optional; Config.Security nil
// secures nothing.
type Security struct {
	// SuperPassword, when set, makes "super" with this password
	// ZooKeeper's digest super user
	// (zookeeper.DigestAuthenticationProvider.superDigest): a session
	// that adds digest super:<password> may do anything to any znode,
	// whatever its ACL.
	SuperPassword string

	// EnforceAuth lists the schemes every session must authenticate with
	// before its first request (enforce.auth.enabled and
	// enforce.auth.schemes, ZooKeeper 3.7+), for example digest or sasl.
	// The server closes any other session.
	EnforceAuth []string

	// SASLUsers are the user names and passwords of SASL DIGEST-MD5: a
	// JAAS Server section with ZooKeeper's DigestLoginModule, and the
	// SASL authentication provider, so that a session that logs in as
	// user has the identity sasl:user.
	SASLUsers map[string]string

	// TLS serves clients over TLS only: every server listens on
	// secureClientPort (Netty) and on no plain client port, with a
	// certificate for 127.0.0.1 from the cluster's CA (Cluster.CA),
	// which it also trusts for client certificates. The harness speaks
	// TLS too (four-letter words) with a client certificate of its own.
	TLS bool
	// ClientAuth is ssl.clientAuth: need, want or none; empty means want
	// (a client certificate, when given, is verified and becomes the
	// session's x509 identity).
	ClientAuth string
	// X509SuperUser is the certificate subject, as ZooKeeper writes it
	// (for example CN=ckptfs-super), of the x509 super user
	// (zookeeper.X509AuthenticationProvider.superUser).
	X509SuperUser string
}

// validate reports every problem with s.
func (s *Security) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.ContainsAny(s.SuperPassword, "\n\r") {
		bad("Security.SuperPassword holds a line break")
	}
	for _, sc := range s.EnforceAuth {
		if sc == "" || strings.ContainsAny(sc, ", \n=") {
			bad("Security.EnforceAuth scheme %q is not a plain scheme name", sc)
		}
	}
	for u, p := range s.SASLUsers {
		if u == "" || strings.ContainsAny(u, "\"\\ \n=;") || strings.ContainsAny(p, "\"\\\n") {
			bad("Security.SASLUsers: user %q or its password cannot be written in a JAAS file", u)
		}
	}
	switch s.ClientAuth {
	case "", "need", "want", "none":
	default:
		bad("Security.ClientAuth %q: want need, want or none", s.ClientAuth)
	}
	if !s.TLS && (s.ClientAuth != "" || s.X509SuperUser != "") {
		bad("Security.ClientAuth and X509SuperUser need Security.TLS")
	}
	return errs
}

// securedKeys are the zoo.cfg keys Security writes.
var securedKeys = map[string]bool{
	"secureClientPort": true, "secureClientPortAddress": true, "serverCnxnFactory": true,
	"DigestAuthenticationProvider.superDigest": true, "enforce.auth.enabled": true, "enforce.auth.schemes": true,
	"authProvider.sasl": true, "authProvider.x509": true, "X509AuthenticationProvider.superUser": true,
}

// SuperDigest is the value of zookeeper.DigestAuthenticationProvider.
// superDigest for user with password: user:base64(sha1(user:password)),
// what ZooKeeper's DigestAuthenticationProvider main class prints.
func SuperDigest(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// zooCfgLines are the zoo.cfg lines of s for a server whose TLS files
// are in dir (tlsFiles).
func (s *Security) zooCfgLines(dir string) []string {
	var lines []string
	if s.SuperPassword != "" {
		lines = append(lines, "DigestAuthenticationProvider.superDigest="+SuperDigest("super", s.SuperPassword))
	}
	if len(s.EnforceAuth) > 0 {
		lines = append(lines, "enforce.auth.enabled=true", "enforce.auth.schemes="+strings.Join(s.EnforceAuth, ","))
	}
	if len(s.SASLUsers) > 0 {
		lines = append(lines, "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
	}
	if s.TLS {
		clientAuth := s.ClientAuth
		if clientAuth == "" {
			clientAuth = "want"
		}
		f := tlsFiles(dir)
		lines = append(lines,
			"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
			"ssl.keyStore.location="+f.keyStore, "ssl.keyStore.type=PEM",
			"ssl.trustStore.location="+f.trustStore, "ssl.trustStore.type=PEM",
			"ssl.clientAuth="+clientAuth,
			"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider")
		if s.X509SuperUser != "" {
			lines = append(lines, "X509AuthenticationProvider.superUser="+s.X509SuperUser)
		}
	}
	return lines
}

// jaasConf is the JAAS file of the SASL users.
func (s *Security) jaasConf() string {
	users := make([]string, 0, len(s.SASLUsers))
	for u := range s.SASLUsers {
		users = append(users, u)
	}
	sort.Strings(users)
	var b strings.Builder
	b.WriteString("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required")
	for _, u := range users {
		fmt.Fprintf(&b, "\n  user_%s=%q", u, s.SASLUsers[u])
	}
	b.WriteString(";\n};\n")
	return b.String()
}

type serverTLSFiles struct{ keyStore, trustStore string }

func tlsFiles(dir string) serverTLSFiles {
	return serverTLSFiles{keyStore: filepath.Join(dir, "server-keystore.pem"), trustStore: filepath.Join(dir, "ca.pem")}
}

// debianNettyCodec is the Netty codec jar, which Debian's zookeeper.jar
// does not name in its Class-Path but NettyServerCnxnFactory needs for
// TLS (io.netty.handler.codec.ByteToMessageDecoder).
var debianNettyCodec = "/usr/share/java/netty-codec.jar"

// CA is a test certificate authority: a key and a self-signed
// certificate in a directory of the test.
type CA struct {
	// CertFile is the CA certificate (PEM), what a client trusts.
	CertFile string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	mu     sync.Mutex
	serial int64 // GUARDED_BY(mu)
}

// NewCA makes a certificate authority named name in a new temporary
// directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := newCA(t.TempDir(), name)
	if err != nil {
		t.Fatalf("zktest: NewCA: %v", err)
	}
	return ca
}

func newCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{CertFile: filepath.Join(dir, "ca.pem"), dir: dir, cert: cert, key: key, serial: 1}
	if err := writePEM(ca.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issued is a certificate the CA issued, with its key, as PEM files.
type Issued struct {
	CertFile, KeyFile string
	// Subject is the certificate's subject as ZooKeeper's x509 provider
	// names it (X500Principal.getName: CN=...).
	Subject string
}

// Issue makes a certificate for cn, valid for TLS servers at the given
// IP addresses (none: a client certificate only) and for TLS clients.
func (ca *CA) Issue(t testing.TB, cn string, ips ...net.IP) Issued {
	t.Helper()
	is, err := ca.issue(cn, ips)
	if err != nil {
		t.Fatalf("zktest: CA.Issue %s: %v", cn, err)
	}
	return is
}

func (ca *CA) issue(cn string, ips []net.IP) (Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	ca.mu.Lock()
	ca.serial++
	serial := ca.serial
	ca.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	if len(ips) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Issued{}, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	base := filepath.Join(ca.dir, fmt.Sprintf("%s-%d", strings.Map(safeRune, cn), serial))
	is := Issued{CertFile: base + ".pem", KeyFile: base + ".key", Subject: "CN=" + cn}
	if err := writePEM(is.CertFile, "CERTIFICATE", der); err != nil {
		return Issued{}, err
	}
	if err := writePEM(is.KeyFile, "PRIVATE KEY", pk); err != nil {
		return Issued{}, err
	}
	return is, nil
}

func safeRune(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
		return r
	}
	return '_'
}

// ClientTLS is a TLS configuration that trusts the CA and, when cert is
// not nil, presents it.
func (ca *CA) ClientTLS(t testing.TB, cert *Issued) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		kp, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
		if err != nil {
			t.Fatalf("zktest: ClientTLS: %v", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

// serverKeyStore writes a server's PEM key store (its key, then its
// certificate, as ZooKeeper's PEM key store reads them) and trust store
// (the CA) into dir.
func (ca *CA) serverKeyStore(dir string) error {
	is, err := ca.issue("zookeeper", []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	key, err := os.ReadFile(is.KeyFile)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(is.CertFile)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return err
	}
	f := tlsFiles(dir)
	return errors.Join(os.WriteFile(f.keyStore, slices.Concat(key, cert), 0o600), os.WriteFile(f.trustStore, caPEM, 0o644))
}

func writePEM(path, typ string, der []byte) error {
	mode := os.FileMode(0o644)
	if typ == "PRIVATE KEY" {
		mode = 0o600
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
