package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate and its key into dir.
func selfSigned(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ := x509.MarshalPKCS8PrivateKey(k)
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600)
	return cert, key
}

func TestClientAndServer(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "a")
	c, err := Client(cert, cert, key)
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.MinVersion != tls.VersionTLS12 {
		t.Fatalf("Client = %+v, %v", c, err)
	}
	s, err := Server(cert, key, cert)
	if err != nil || s.ClientAuth != tls.RequireAndVerifyClientCert || s.ClientCAs == nil {
		t.Fatalf("Server = %+v, %v", s, err)
	}
	if s, err := Server(cert, key, ""); err != nil || s.ClientAuth != tls.NoClientCert {
		t.Errorf("Server without client CA = %v, %v", s.ClientAuth, err)
	}
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not PEM"), 0o644)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(Client(garbage, "", "")), "no PEM certificate"},
		{second(Client(filepath.Join(dir, "missing"), "", "")), "no such file"},
		{second(Client("", cert, "")), "both its certificate and its key"},
		{second(Client("", cert, garbage)), "with key"},
		{second(Server("", "", "")), "certificate and its key"},
		{second(Server(cert, key, garbage)), "no PEM certificate"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%v, want %q", tc.err, tc.want)
		}
	}
}

func second(_ *tls.Config, err error) error { return err }
