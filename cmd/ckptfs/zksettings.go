package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/internal/tlsconf"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// zkSettings locate Flink's HA data in ZooKeeper and name this site: the
// settings of every command that talks to ZooKeeper (mount, status,
// takeover, restore-pruned). bridgeConfig is their one mapping onto
// zkbridge.Config.
type zkSettings struct {
	ZK        string
	Site      string
	ClusterID string
	PathRoot  string
	// FlinkVersion, CheckpointsDirs and FlinkSessionTimeout are settings
	// of the commands that read Flink's pointers, not of mount.
	FlinkVersion        string
	CheckpointsDirs     []string
	FlinkSessionTimeout time.Duration
	// LeaseDuration is the lease's D (design §5.10): the same on every
	// site, for the mount and the takeover alike.
	LeaseDuration time.Duration
	// JobResultStore is Flink's job-result-store.storage-path ("" is
	// Flink's default).
	JobResultStore string
	// The connection (addConnectionSettings): who ckptfs is to ZooKeeper,
	// how it talks to it, and the ACL of what it creates.
	AuthFile       string
	AuthScheme     string
	TLSCA          string
	TLSCert        string
	TLSKey         string
	ACL            []string
	SessionTimeout time.Duration
	// FlinkACL is Flink's high-availability.zookeeper.client.acl, for
	// config check's warnings.
	FlinkACL string
}

func defaultZKSettings() zkSettings {
	d := zkbridge.DefaultConfig()
	return zkSettings{PathRoot: d.PathRoot, FlinkSessionTimeout: d.FlinkSessionTimeout, LeaseDuration: d.LeaseDuration,
		AuthScheme: zkbridge.SchemeDigest, SessionTimeout: d.SessionTimeout, FlinkACL: "open"}
}

// retryPerSession is how many session timeouts one ZooKeeper call is
// retried while the client reconnects (zkbridge.Config.RetryTimeout: 30s
// for the default 10s session).
const retryPerSession = 3

// addConnectionSettings defines the settings of the ZooKeeper connection,
// the same for every command that talks to ZooKeeper.
func addConnectionSettings(f *pflag.FlagSet, s *zkSettings) {
	f.StringVar(&s.AuthFile, "zk-auth-file", "", "`FILE` holding ckptfs's ZooKeeper credentials, one line user:password (credentials are never given on the command line)")
	f.StringVar(&s.AuthScheme, "zk-auth-scheme", s.AuthScheme, "how the credentials of zk-auth-file authenticate: digest (ZooKeeper's addauth: Flink 1.20's client.authorization, the super user) or sasl (SASL DIGEST-MD5: a JAAS DigestLoginModule)")
	f.StringVar(&s.TLSCA, "zk-tls-ca", "", "connect over TLS (ZooKeeper's secureClientPort) and verify the servers against the CA certificates in `FILE` (PEM)")
	f.StringVar(&s.TLSCert, "zk-tls-cert", "", "client certificate `FILE` (PEM) for TLS: ckptfs's x509 identity to ZooKeeper")
	f.StringVar(&s.TLSKey, "zk-tls-key", "", "the client certificate's key `FILE` (PEM)")
	f.StringArrayVar(&s.ACL, "zk-acl", nil, "ACL of the znodes ckptfs creates: `ENTRY` scheme:id:perms (repeatable), or open, or creator (default: creator, ckptfs's own identity, when it authenticates; open when anonymous)")
	f.DurationVar(&s.SessionTimeout, "zk-session-timeout", s.SessionTimeout, "ckptfs's own ZooKeeper session timeout (calls are retried 3 times as long while it reconnects)")
	f.StringVar(&s.FlinkACL, "flink-zk-acl", s.FlinkACL, "Flink's high-availability.zookeeper.client.acl: open or creator (config check warns when creator meets an anonymous ckptfs)")
}

// addLeaseSetting defines lease-duration, a setting of the mount and of
// the commands that take over.
func addLeaseSetting(f *pflag.FlagSet, s *zkSettings) {
	f.DurationVar(&s.LeaseDuration, "lease-duration", s.LeaseDuration, "the lease's D, the same on every site: the active site's daemons renew it every D/8 and their mounts write until D/2 after a renewal; a takeover waits until it stayed unchanged for D (design §5.10)")
}

// zkFieldSettings names the setting behind each zkbridge.Config field
// that bridgeConfig fills from one.
var zkFieldSettings = map[string]string{
	"Servers":             "zk",
	"Site":                "site",
	"ClusterID":           "cluster-id",
	"PathRoot":            "path-root",
	"FlinkVersion":        "flink-version",
	"CheckpointsDirs":     "checkpoints-dir",
	"JobResultStore":      "job-result-store",
	"FlinkSessionTimeout": "flink-session-timeout",
	"LeaseDuration":       "lease-duration",
	"Auth":                "zk-auth-file",
	"ACL":                 "zk-acl",
	"SessionTimeout":      "zk-session-timeout",
	"RetryTimeout":        "zk-session-timeout",
}

// bridgeConfig maps the settings onto zkbridge's configuration, logging
// to log, and validates it. Each problem names its setting (settingError).
func (s *zkSettings) bridgeConfig(log *slog.Logger) (zkbridge.Config, error) {
	cfg := zkbridge.DefaultConfig()
	var errs []error
	if s.ZK == "" {
		errs = append(errs, missingSetting("zk", "zk is required: --zk, CKPTFS_ZK or zk in the configuration file"))
	} else {
		servers, err := zkbridge.ParseServers(s.ZK)
		for _, e := range leaves(err) {
			errs = append(errs, badSetting("zk", "zk %q: %w", s.ZK, e))
		}
		cfg.Servers = servers
	}
	gen, err := zkbridge.ParseGeneration(s.FlinkVersion)
	if err != nil {
		errs = append(errs, badSetting("flink-version", "flink-version: %w", err))
	}
	cfg.Site, cfg.ClusterID, cfg.PathRoot = s.Site, s.ClusterID, s.PathRoot
	cfg.FlinkVersion, cfg.CheckpointsDirs, cfg.FlinkSessionTimeout = gen, s.CheckpointsDirs, s.FlinkSessionTimeout
	cfg.JobResultStore, cfg.LeaseDuration = s.JobResultStore, s.LeaseDuration
	cfg.SessionTimeout, cfg.RetryTimeout = s.SessionTimeout, retryPerSession*s.SessionTimeout
	cfg.Logger = log
	errs = append(errs, s.connection(&cfg)...)
	for _, e := range leaves(cfg.Validate()) {
		var fe *zkbridge.FieldError
		name := ""
		if errors.As(e, &fe) {
			name = zkFieldSettings[fe.Field]
		}
		switch {
		case name == "zk":
			// ParseServers, which holds Validate's rule, said it.
		case name != "":
			errs = append(errs, badSetting(name, "%s: %w", name, fe.Err))
		default:
			errs = append(errs, e)
		}
	}
	return cfg, errors.Join(errs...)
}

// connection maps the settings of the connection onto cfg: credentials
// read from their file, TLS from its files, the ACL.
func (s *zkSettings) connection(cfg *zkbridge.Config) []error {
	var errs []error
	if s.AuthScheme != zkbridge.SchemeDigest && s.AuthScheme != zkbridge.SchemeSASL {
		errs = append(errs, badSetting("zk-auth-scheme", "zk-auth-scheme %q: want digest or sasl", s.AuthScheme))
	} else if s.AuthFile != "" {
		creds, err := zkbridge.ReadCredentials(s.AuthFile, s.AuthScheme)
		if err != nil {
			errs = append(errs, badSetting("zk-auth-file", "zk-auth-file: %w", err))
		}
		cfg.Auth = creds
	}
	switch {
	case s.TLSCA == "" && (s.TLSCert != "" || s.TLSKey != ""):
		errs = append(errs, badSetting("zk-tls-cert", "zk-tls-cert and zk-tls-key need zk-tls-ca: TLS verifies the servers against it"))
	case s.TLSCA != "":
		tc, err := tlsconf.Client(s.TLSCA, s.TLSCert, s.TLSKey)
		if err != nil {
			errs = append(errs, badSetting("zk-tls-ca", "zk-tls-ca, zk-tls-cert, zk-tls-key: %w", err))
		}
		cfg.TLS = tc
	}
	switch {
	case len(s.ACL) == 1 && strings.EqualFold(s.ACL[0], "open"):
		cfg.ACL = zk.WorldACL(zk.PermAll)
	case len(s.ACL) == 1 && strings.EqualFold(s.ACL[0], "creator"):
		cfg.ACL = zk.AuthACL(zk.PermAll)
	case len(s.ACL) > 0:
		acl, err := zkbridge.ParseACL(s.ACL)
		for _, e := range leaves(err) {
			errs = append(errs, badSetting("zk-acl", "zk-acl: %w", e))
		}
		cfg.ACL = acl
	}
	if !strings.EqualFold(s.FlinkACL, "open") && !strings.EqualFold(s.FlinkACL, "creator") {
		errs = append(errs, badSetting("flink-zk-acl", "flink-zk-acl %q: want open or creator, as Flink's high-availability.zookeeper.client.acl", s.FlinkACL))
	}
	return errs
}

// credentialsInClear reports whether the connection sends ckptfs's
// password as it is: digest credentials (ZooKeeper's addauth digest
// carries user:password, on every connection) over plain TCP (no
// zk-tls-ca). SASL DIGEST-MD5 answers a challenge and never sends the
// password; TLS encrypts the addauth. The one rule of config check's
// warning and of the line the commands that connect log at their start.
func (s *zkSettings) credentialsInClear() bool {
	return s.AuthFile != "" && s.AuthScheme == zkbridge.SchemeDigest && s.TLSCA == ""
}

// credentialsInClearWarning is what credentialsInClear means, and the
// remedies.
const credentialsInClearWarning = "zk-auth-scheme digest sends the password of zk-auth-file to ZooKeeper in clear (addauth digest user:password, on every connection), and without zk-tls-ca the connection is plain TCP: whoever sees the traffic can authenticate as ckptfs; connect over TLS to ZooKeeper's secureClientPort (zk-tls-ca), or use SASL DIGEST-MD5 (zk-auth-scheme: sasl), which does not send the password (docs/deploy.md#tls)"

// warnAtStart logs, once at the start of a command that connects, what
// config check warns about the connection and still matters when it
// runs: credentials in clear.
func (s *zkSettings) warnAtStart(log *slog.Logger) {
	if s.credentialsInClear() {
		log.Warn(credentialsInClearWarning)
	}
}

// connectionWarnings are what config check says about a valid connection:
// an anonymous ckptfs, whose znodes everyone may write, and a secured
// Flink cluster it cannot act on; credentials others may read, or that
// go over the network in clear.
func (s *zkSettings) connectionWarnings() []string {
	var out []string
	anonymous := s.AuthFile == "" && s.TLSCert == ""
	if anonymous && strings.EqualFold(s.FlinkACL, "creator") {
		out = append(out, "flink-zk-acl is creator: Flink's znodes are its own identity's only, even to read, and ckptfs connects anonymously (no zk-auth-file, no zk-tls-cert): status, takeover and restore-pruned will be refused; give zk-auth-file Flink's identity or the ZooKeeper super user's (docs/deploy.md#security)")
	}
	if anonymous && len(s.ACL) == 0 {
		out = append(out, "ckptfs connects anonymously: its znodes (active-site, epoch, takeover lock, markers, backups) will be open to every ZooKeeper client, which could activate a site or fence one; give zk-auth-file (docs/deploy.md#security)")
	}
	if s.AuthFile != "" {
		if st, err := os.Stat(s.AuthFile); err == nil && st.Mode().Perm()&0o077 != 0 {
			out = append(out, fmt.Sprintf("zk-auth-file %s is readable by others (mode %04o): make it 0600, owned by the user ckptfs runs as", s.AuthFile, st.Mode().Perm()))
		}
	}
	if s.credentialsInClear() {
		out = append(out, credentialsInClearWarning)
	}
	return out
}

// fileConnectionWarnings are the connection warnings of a configuration
// file that sets zk, and a line naming the ZooKeeper identity its
// credentials give ("" when none). The line also has the digest
// identity's ACL id, for zk-acl entries: its hash allows guessing the
// password offline, but whoever runs config check on the file reads
// zk-auth-file anyway.
func fileConnectionWarnings(file *configFile) (warnings []string, identity string) {
	if _, ok := file.entries["zk"]; !ok {
		return nil, ""
	}
	s := defaultZKSettings()
	fs := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	addConnectionSettings(fs, &s)
	fs.VisitAll(func(f *pflag.Flag) {
		if e, ok := file.entries[f.Name]; ok {
			setFlagFromYAML(f, e.value) // check refused bad values already
		}
	})
	if s.AuthFile != "" {
		if c, err := zkbridge.ReadCredentials(s.AuthFile, s.AuthScheme); err == nil {
			identity = c.String()
			if id := c.Identity(); id.Scheme == zkbridge.SchemeDigest {
				identity += "; in ACLs (zk-acl) " + id.Scheme + ":" + id.ID + ", which allows guessing the password offline: keep it as private as zk-auth-file"
			} else {
				identity += " (also in ACLs, zk-acl)"
			}
		}
	}
	return s.connectionWarnings(), identity
}

// zkFail is fail for an error of ZooKeeper; a refusal of ckptfs's
// identity also names the settings that give it one.
func zkFail(err error) error {
	var ae *zkbridge.AuthError
	if errors.As(err, &ae) {
		hint := "give zk-auth-file credentials the znodes' ACLs allow: Flink's identity, or the ZooKeeper super user's (docs/deploy.md#security)"
		if ae.Identity != "" {
			hint = "check zk-auth-file and zk-auth-scheme: the identity must be Flink's (for its creator ACLs) or the ZooKeeper super user (docs/deploy.md#security)"
		}
		return fail("%v; %s", err, hint)
	}
	return fail("%v", err)
}

// checkLogFormat is the rule of the setting log-format.
func checkLogFormat(format string) error {
	if format != "text" && format != "json" {
		return badSetting("log-format", "log-format %q: want text or json", format)
	}
	return nil
}

// requireSite is the rule of the commands that write in ZooKeeper.
func requireSite(site string) error {
	if site == "" {
		return missingSetting("site", "site is required: --site, CKPTFS_SITE or site in the configuration file")
	}
	return nil
}
