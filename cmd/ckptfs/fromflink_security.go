package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ckptfs/ckptfs/flinkconf"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// deriveSecurity adds what Flink's ZooKeeper security implies: flink-zk-acl
// when Flink's znodes are its identity's only, and Flink's digest identity
// as zk-auth-file, written into authFile when given. Flink's other ways
// of authenticating get a note on what ckptfs needs instead.
func (d *derivedConfig) deriveSecurity(sec *flinkconf.ZooKeeperSecurity, authFile string) error {
	src := func(o flinkconf.Option) string { return sec.Sources[o.Key].String() }
	if sec.Secured() {
		d.add("flink-zk-acl", sec.ACL, src(flinkconf.ZooKeeperACL)+": Flink's znodes are its identity's only, even to read")
	}
	digest, hasDigest := sec.Authorization["digest"]
	switch {
	case hasDigest:
		creds, err := zkbridge.ParseCredentials([]byte(digest), zkbridge.SchemeDigest)
		if err != nil {
			return fmt.Errorf("%s: the digest identity: %w", flinkconf.ZooKeeperAuthorization.Key, err)
		}
		why := "Flink's identity " + creds.String() + ", from " + src(flinkconf.ZooKeeperAuthorization)
		if authFile == "" {
			d.todo = append(d.todo, "zk-auth-file: Flink authenticates as "+creds.String()+" ("+src(flinkconf.ZooKeeperAuthorization)+"): give --auth-file FILE to write its user:password there (mode 0600), or write them yourself and name the file here")
			break
		}
		if err := writeAuthFile(authFile, []byte(digest+"\n")); err != nil {
			return err
		}
		d.add("zk-auth-file", authFile, why)
	case sec.Kerberos:
		d.notes = append(d.notes, "Flink logs in to ZooKeeper by Kerberos ("+src(flinkconf.KerberosLoginContexts)+"), which ckptfs cannot: give ckptfs the ZooKeeper super user's credentials (zk-auth-file), or an x509 super user's certificate (zk-tls-cert), see docs/deploy.md#security")
	case sec.JAASFile != "":
		d.notes = append(d.notes, "Flink's JVM reads the JAAS file "+sec.JAASFile+": if its "+sec.LoginContext+" section logs in with ZooKeeper's DigestLoginModule, set zk-auth-scheme: sasl and zk-auth-file to a file with its username:password; if it uses Kerberos, give ckptfs the ZooKeeper super user's credentials")
	case sec.Secured():
		d.notes = append(d.notes, "Flink's znodes are its identity's only, and its configuration shows no identity (no client.authorization, Kerberos or JAAS file; a TLS client certificate from its JVM options would be one): give ckptfs that identity or the ZooKeeper super user's (zk-auth-file)")
	}
	return nil
}

// writeAuthFile writes credentials into a new file of mode 0600, or
// accepts a file that holds exactly them already.
func writeAuthFile(path string, data []byte) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("--auth-file %q must be an absolute path", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		old, rerr := os.ReadFile(path)
		if rerr == nil && bytes.Equal(old, data) {
			return nil
		}
		return fmt.Errorf("--auth-file %s exists with other content: remove it, or name another file", path)
	}
	if err != nil {
		return fmt.Errorf("--auth-file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("--auth-file: %w", err)
	}
	return f.Close()
}
