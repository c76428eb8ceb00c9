package zkbridge

import (
	"context"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// ACL is one entry of a znode's ACL as ckptfs records it in a backup:
// ZooKeeper's permission bits (read 1, write 2, create 4, delete 8,
// admin 16), the scheme and the id.
type ACL struct {
	Perms  int32  `json:"perms"`
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

func fromZK(acl []zk.ACL) []ACL {
	if acl == nil {
		return nil
	}
	out := make([]ACL, len(acl))
	for i, a := range acl {
		out[i] = ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

func toZK(acl []ACL) []zk.ACL {
	out := make([]zk.ACL, len(acl))
	for i, a := range acl {
		out[i] = zk.ACL{Perms: a.Perms, Scheme: a.Scheme, ID: a.ID}
	}
	return out
}

// permLetters are zkCli's letters for the permission bits, in its order.
const permLetters = "rwcda"

// FormatACL writes an ACL as zkCli's setAcl takes it:
// scheme:id:perms,... (perms as letters, for example cdrwa).
func FormatACL(acl []zk.ACL) string {
	parts := make([]string, len(acl))
	for i, a := range acl {
		parts[i] = a.Scheme + ":" + a.ID + ":" + formatPerms(a.Perms)
	}
	return strings.Join(parts, ",")
}

func formatPerms(p int32) string {
	var b strings.Builder
	for i, l := range []byte(permLetters) {
		if p&(1<<i) != 0 {
			b.WriteByte(l)
		}
	}
	return b.String()
}

// ParseACL parses ACL entries scheme:id:perms as zkCli's setAcl takes
// them (world:anyone:r, auth::cdrwa, digest:user:HASH:cdrwa, sasl:user:cdrwa,
// x509:CN=...:cdrwa, ip:10.0.0.0/8:r). The id may hold colons: the scheme
// ends at the first colon, the permissions start after the last.
func ParseACL(entries []string) ([]zk.ACL, error) {
	var out []zk.ACL
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		scheme, rest, ok1 := strings.Cut(e, ":")
		i := strings.LastIndexByte(rest, ':')
		if !ok1 || i < 0 || scheme == "" {
			errs = append(errs, fmt.Errorf("ACL entry %q: want scheme:id:perms", e))
			continue
		}
		id, letters := rest[:i], rest[i+1:]
		perms, err := parsePerms(letters)
		if err != nil {
			errs = append(errs, fmt.Errorf("ACL entry %q: %w", e, err))
			continue
		}
		switch {
		case scheme == "world" && id != "anyone":
			errs = append(errs, fmt.Errorf("ACL entry %q: the world scheme has the one id anyone", e))
		case scheme == "auth" && id != "":
			errs = append(errs, fmt.Errorf("ACL entry %q: the auth scheme takes no id (auth::%s)", e, letters))
		case scheme != "auth" && id == "":
			errs = append(errs, fmt.Errorf("ACL entry %q: empty id", e))
		case scheme == "digest" && strings.Count(id, ":") != 1:
			errs = append(errs, fmt.Errorf("ACL entry %q: a digest id is user:BASE64-SHA1 (see ckptfs config check)", e))
		default:
			out = append(out, zk.ACL{Perms: perms, Scheme: scheme, ID: id})
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no ACL entries"))
	}
	return out, errors.Join(errs...)
}

func parsePerms(letters string) (int32, error) {
	if letters == "" {
		return 0, errors.New("no permissions")
	}
	var p int32
	for _, l := range letters {
		i := strings.IndexRune(permLetters, l)
		if i < 0 {
			return 0, fmt.Errorf("permission %q is not one of r, w, c, d, a", l)
		}
		p |= 1 << i
	}
	return p, nil
}

// aclPolicy gives every znode ckptfs creates below CkptfsRoot its ACL
// (docs/deploy.md#security): the takeover lock, the backups and the
// records of put-backs get the configured ACL, which by default lets
// only ckptfs's identity in; everything else (active-site, the epoch,
// the markers, the site duty and the parents above them) gets it plus
// world read, so
// that people, dashboards and other sites' monitors can read where the
// cluster stands without ckptfs's credentials. Nothing that can be written is open: writing,
// creating and deleting children (which deleting a node needs on its
// parent) stay with the configured ACL.
type aclPolicy struct {
	root    string   // CkptfsRoot
	private []zk.ACL // takeover/..., pruned/..., restored/...
	public  []zk.ACL // the rest
}

func newACLPolicy(cfg *Config) aclPolicy {
	private := cfg.effectiveACL()
	return aclPolicy{root: strings.TrimSuffix(cfg.CkptfsRoot, "/"), private: private, public: withWorldRead(private)}
}

// forPath is the ACL of a znode ckptfs creates below its root.
func (p aclPolicy) forPath(path string) []zk.ACL {
	rel, ok := strings.CutPrefix(path, p.root+"/")
	if !ok {
		return p.public // the root itself
	}
	// <cluster>/<kind>/...
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) >= 2 && (parts[1] == "takeover" || parts[1] == "pruned" || parts[1] == "restored") {
		return p.private
	}
	return p.public
}

// withWorldRead adds read for everyone to acl.
func withWorldRead(acl []zk.ACL) []zk.ACL {
	out := slices.Clone(acl)
	for i, a := range out {
		if a.Scheme == "world" && a.ID == "anyone" {
			out[i].Perms |= zk.PermRead
			return out
		}
	}
	return append(out, zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"})
}

// effectiveACL is Config.ACL, or by default: only the session's own
// identity (ZooKeeper's auth scheme, which the server replaces by the
// identities the session authenticated with) when ckptfs authenticates,
// by credentials or by a TLS client certificate; open to everyone when
// it connects anonymously, as Flink's default ACL ("open") is.
func (c *Config) effectiveACL() []zk.ACL {
	switch {
	case len(c.ACL) > 0:
		return c.ACL
	case c.authenticated():
		return zk.AuthACL(zk.PermAll)
	}
	return zk.WorldACL(zk.PermAll)
}

// authenticated reports whether ckptfs's sessions have an identity.
func (c *Config) authenticated() bool {
	return c.Auth != nil || (c.TLS != nil && (len(c.TLS.Certificates) > 0 || c.TLS.GetClientCertificate != nil))
}

// checkACL refuses an ACL that would lock ckptfs out of its own znodes:
// some entry must grant every permission to everyone, to the session's
// identities (auth), to ckptfs's credentials, or to an identity ckptfs
// cannot evaluate here (ip, x509, ...).
func (c *Config) checkACL() error {
	if len(c.ACL) == 0 {
		return nil
	}
	for _, a := range c.ACL {
		if a.Perms&^zk.PermAll != 0 || a.Perms == 0 {
			return fmt.Errorf("%s: permissions %#x are not a subset of cdrwa", FormatACL([]zk.ACL{a}), a.Perms)
		}
		if a.Scheme == "auth" && !c.authenticated() {
			return fmt.Errorf("%s names the session's own identity, but ckptfs connects anonymously (no credentials, no client certificate)", FormatACL([]zk.ACL{a}))
		}
	}
	var mine *zk.ACL
	if c.Auth != nil {
		id := c.Auth.Identity()
		mine = &id
	}
	for _, a := range c.ACL {
		if a.Perms != zk.PermAll {
			continue
		}
		switch {
		case a.Scheme == "world", a.Scheme == "auth":
			return nil
		case mine != nil && a.Scheme == mine.Scheme && a.ID == mine.ID:
			return nil
		case a.Scheme != "digest" && a.Scheme != "sasl":
			return nil // ip, x509, ...: not decidable here
		}
	}
	who := "anonymous ckptfs"
	if c.Auth != nil {
		who = c.Auth.String()
	}
	return fmt.Errorf("%s grants %s no full access (cdrwa): ckptfs could not write, or delete, its own znodes", FormatACL(c.ACL), who)
}

// backupACLs reads the ACLs a retraction removes with a pointer: the
// pointer's and, when it has one, its locks child's. A backup holds them
// so that RestorePruned puts the znodes back exactly, and Flink, whose
// ACL may let only its own identity in (creator), can lock them again.
// It returns false when the pointer's ACL version moved since read.
func (b *Bridge) backupACLs(ctx context.Context, p *Pointer) (acl, locksACL []ACL, same bool, err error) {
	// The locks child's ACL is read beside the pointer's.
	var (
		la      []zk.ACL
		laErr   error
		wg      sync.WaitGroup
		hasLock = p.HasLocksNode
	)
	if hasLock {
		wg.Go(func() { la, _, laErr = b.zk.getACL(ctx, join(p.Znode, "locks")) })
	}
	a, stat, err := b.zk.getACL(ctx, p.Znode)
	wg.Wait()
	if err != nil {
		return nil, nil, false, err
	}
	if stat.Aversion != p.Stat.Aversion {
		return nil, nil, false, nil
	}
	acl = fromZK(a)
	if hasLock {
		if laErr != nil {
			return nil, nil, false, laErr
		}
		locksACL = fromZK(la)
	}
	return acl, locksACL, true, nil
}

// flinkDefaultACL is the ACL of Flink's znodes with its default
// high-availability.zookeeper.client.acl "open" (Curator's
// DefaultACLProvider: ZooDefs.Ids.OPEN_ACL_UNSAFE). A backup written
// before backups recorded ACLs is restored with it.
var flinkDefaultACL = []ACL{{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}}

// restoreACLs are the ACLs RestorePruned creates a pointer and its locks
// child with: those the backup recorded, else Flink's default.
func (bk *Backup) restoreACLs() (pointer, locks []zk.ACL) {
	pointer, locks = toZK(flinkDefaultACL), toZK(flinkDefaultACL)
	if len(bk.ACL) > 0 {
		pointer = toZK(bk.ACL)
	}
	if len(bk.LocksACL) > 0 {
		locks = toZK(bk.LocksACL)
	}
	return pointer, locks
}

// changePerms are the permissions that let a client change a znode or
// what is below it: write its data, create or delete children, set its
// ACL.
const changePerms = zk.PermWrite | zk.PermCreate | zk.PermDelete | zk.PermAdmin

// sessionIdentities are the identities ZooKeeper gives ckptfs's sessions
// (what the ACL scheme auth stands for): its credentials' and its TLS
// client certificate's subject (x509, as ZooKeeper's x509 provider names
// it by default). A certificate ckptfs cannot read gives none.
func (c *Config) sessionIdentities() []zk.ACL {
	var ids []zk.ACL
	if c.Auth != nil {
		ids = append(ids, c.Auth.Identity())
	}
	if c.TLS != nil && len(c.TLS.Certificates) > 0 && len(c.TLS.Certificates[0].Certificate) > 0 {
		if cert, err := x509.ParseCertificate(c.TLS.Certificates[0].Certificate[0]); err == nil {
			if subject, err := rfc2253(cert.RawSubject); err == nil {
				ids = append(ids, zk.ACL{Perms: zk.PermAll, Scheme: "x509", ID: subject})
			}
		}
	}
	return ids
}

// ckptfsIdentities are the identities whose grants on ckptfs's znodes are
// ckptfs's own, each with the permissions it may hold: the session's,
// with every permission, and the entries of the configured ACL (zk-acl:
// another site's ckptfs, an operator), auth expanded to the session's.
// nil when ckptfs connects anonymously: its znodes are open by design,
// and nothing is checked.
func (c *Config) ckptfsIdentities() []zk.ACL {
	if !c.authenticated() {
		return nil
	}
	session := c.sessionIdentities()
	ids := slices.Clone(session)
	for _, a := range c.effectiveACL() {
		if a.Scheme != "auth" {
			ids = append(ids, a)
			continue
		}
		for _, s := range session {
			ids = append(ids, zk.ACL{Perms: a.Perms, Scheme: s.Scheme, ID: s.ID})
		}
	}
	if ids == nil {
		ids = []zk.ACL{} // authenticated, but no identity ckptfs can name
	}
	return ids
}

// expandAuth replaces the auth entries of acl by the identities ids, as
// ZooKeeper does when it creates a znode: what to set by hand.
func expandAuth(acl, ids []zk.ACL) []zk.ACL {
	var out []zk.ACL
	for _, a := range acl {
		if a.Scheme != "auth" {
			out = append(out, a)
			continue
		}
		for _, id := range ids {
			out = append(out, zk.ACL{Perms: a.Perms, Scheme: id.Scheme, ID: id.ID})
		}
	}
	return out
}

// foreignGrants returns the entries of acl that let a client change the
// znode (changePerms) beyond what ids grant that client: another
// client's. The super user passes every check whatever the ACL, so no
// entry can grant or deny it anything.
func foreignGrants(acl, ids []zk.ACL) []zk.ACL {
	var out []zk.ACL
	for _, a := range acl {
		p := a.Perms & changePerms
		if p == 0 {
			continue
		}
		var allowed int32
		for _, id := range ids {
			if id.Scheme == "world" && id.ID == "anyone" || id.Scheme == a.Scheme && id.ID == a.ID {
				allowed |= id.Perms
			}
		}
		if p&^allowed != 0 {
			out = append(out, a)
		}
	}
	return out
}

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// (RFC 2253) writes by keyword; others as their OID with #hex.
var rfc2253Keywords = map[string]string{
	"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "STREET",
	"2.5.4.10": "O", "2.5.4.11": "OU", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}

// rfc2253 writes a DER distinguished name as ZooKeeper's x509 provider
// names a client by default (X500Principal.getName(), RFC 2253): the
// RDNs last first, joined by commas, the values of a multi-valued RDN
// by +, string values escaped, anything else as #hex of its DER.
func rfc2253(der []byte) (string, error) {
	var rdns []asn1.RawValue
	if rest, err := asn1.Unmarshal(der, &rdns); err != nil || len(rest) > 0 {
		return "", fmt.Errorf("distinguished name: %v", err)
	}
	type atv struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}
	parts := make([]string, 0, len(rdns))
	for i := len(rdns) - 1; i >= 0; i-- {
		var set []atv
		if _, err := asn1.UnmarshalWithParams(rdns[i].FullBytes, &set, "set"); err != nil {
			return "", fmt.Errorf("distinguished name: %v", err)
		}
		var avas []string
		for _, a := range set {
			kw, known := rfc2253Keywords[a.Type.String()]
			s, isString := derString(a.Value)
			if !known || !isString {
				avas = append(avas, a.Type.String()+"=#"+hex.EncodeToString(a.Value.FullBytes))
				continue
			}
			avas = append(avas, kw+"="+escape2253(s))
		}
		parts = append(parts, strings.Join(avas, "+"))
	}
	return strings.Join(parts, ","), nil
}

// derString decodes the string types of a distinguished name that
// certificates use (UTF8String, PrintableString, IA5String); others,
// which the JDK names its own way (BMPString, for one), are not taken
// for strings: such a subject must be listed in zk-acl.
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String:
		return string(v.Bytes), true
	}
	return "", false
}

// escape2253 escapes a value as X500Principal.getName() does (RFC 2253
// §2.4, and =).
func escape2253(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(`,+="\<>;`, r),
			i == 0 && (r == '#' || r == ' '),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ErrForeignACL means a znode ckptfs relies on lets another client than
// ckptfs's identities change it, so what it holds cannot be trusted.
var ErrForeignACL = errors.New("zkbridge: ckptfs's znodes are not ckptfs's alone")

// ForeignACLError names the znodes of ckptfs's whose ACL lets other
// clients change them, with the ACL each should have.
type ForeignACLError struct {
	// Identities are ckptfs's (ckptfsIdentities), as scheme:id.
	Identities []string
	Znodes     []ForeignACL
}

// ForeignACL is one znode of ckptfs's that others may change.
type ForeignACL struct {
	Znode string
	// ACL is its ACL (nil when ckptfs may not read it: then it is
	// another client's too); Foreign the entries that grant others too
	// much.
	ACL     []zk.ACL
	Foreign []zk.ACL
	// Want is the ACL ckptfs gives such a znode.
	Want []zk.ACL
}

// maxForeignShown bounds the znodes an error names one by one.
const maxForeignShown = 5

func (e *ForeignACLError) Error() string {
	who := "no identity ckptfs can name"
	if len(e.Identities) > 0 {
		who = strings.Join(e.Identities, ", ")
	}
	var found, remedy []string
	for i, z := range e.Znodes {
		if i == maxForeignShown {
			found = append(found, fmt.Sprintf("and %d more", len(e.Znodes)-maxForeignShown))
			remedy = append(remedy, "the same for the others")
			break
		}
		if z.ACL == nil {
			found = append(found, z.Znode+": its ACL does not let ckptfs's identities read it")
		} else {
			found = append(found, fmt.Sprintf("%s: ACL %s lets %s change it", z.Znode, FormatACL(z.ACL), FormatACL(z.Foreign)))
		}
		remedy = append(remedy, fmt.Sprintf("setAcl %s %s", z.Znode, FormatACL(z.Want)))
	}
	return fmt.Sprintf("zkbridge: znodes of ckptfs's that other clients than ckptfs's identities (%s) may change, so ckptfs does not trust what they hold (another client created them first, or an anonymous ckptfs did): %s. "+
		"As ZooKeeper's super user (zkCli.sh: addauth digest super:PASSWORD), give each the ACL ckptfs gives it: %s; or delete them (deleteall) if they hold nothing ckptfs needs. Identities zk-acl lists count as ckptfs's (docs/runbook.md)",
		who, strings.Join(found, "; "), strings.Join(remedy, "; "))
}

// Unwrap gives ErrForeignACL.
func (e *ForeignACLError) Unwrap() error { return ErrForeignACL }
