package zkbridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
// (docs/deploy.md#security): the takeover lock and the backups get the
// configured ACL, which by default lets only ckptfs's identity in;
// everything else (active-site, the epoch, the markers and the parents
// above them) gets it plus world read, so that people, dashboards and
// other sites' monitors can read where the cluster stands without
// ckptfs's credentials. Nothing that can be written is open: writing,
// creating and deleting children (which deleting a node needs on its
// parent) stay with the configured ACL.
type aclPolicy struct {
	root    string   // CkptfsRoot
	private []zk.ACL // takeover/..., pruned/...
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
	if len(parts) >= 2 && (parts[1] == "takeover" || parts[1] == "pruned") {
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
	a, stat, err := b.zk.getACL(ctx, p.Znode)
	if err != nil {
		return nil, nil, false, err
	}
	if stat.Aversion != p.Stat.Aversion {
		return nil, nil, false, nil
	}
	acl = fromZK(a)
	if p.HasLocksNode {
		la, _, err := b.zk.getACL(ctx, join(p.Znode, "locks"))
		if err != nil {
			return nil, nil, false, err
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
