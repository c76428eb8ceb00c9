package flinkconf

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// The options of how Flink's JobManager authenticates to ZooKeeper and
// protects its znodes, with Flink 1.20's keys and defaults
// (HighAvailabilityOptions, SecurityOptions, CoreOptions; 2.3 has the
// same).
var (
	ZooKeeperACL = Option{Key: "high-availability.zookeeper.client.acl", Default: "open"}
	// ZooKeeperAuthorization is a map option (Flink 1.20+, FLINK-33376):
	// scheme:'auth data' pairs, or one key per scheme below it.
	ZooKeeperAuthorization = Option{Key: "high-availability.zookeeper.client.authorization"}
	ZooKeeperSASLDisable   = Option{Key: "zookeeper.sasl.disable", Default: "false"}
	ZooKeeperLoginContext  = Option{Key: "zookeeper.sasl.login-context-name", Default: "Client"}
	KerberosLoginContexts  = Option{Key: "security.kerberos.login.contexts"}
	JVMOptions             = Option{Key: "env.java.opts.all", Deprecated: []string{"env.java.opts"}}
	JobManagerJVMOptions   = Option{Key: "env.java.opts.jobmanager"}
)

// ZooKeeperSecurity is how Flink's JobManager authenticates to ZooKeeper
// and protects its znodes.
type ZooKeeperSecurity struct {
	// ACL is high-availability.zookeeper.client.acl in lower case: open
	// (every znode open to everyone) or creator (every znode its
	// creating identity's only, Flink's SecureAclProvider).
	ACL string
	// Authorization is high-availability.zookeeper.client.authorization
	// (Flink 1.20+): per scheme the auth data Curator adds to every
	// session (digest: user:password).
	Authorization map[string]string
	// SASLDisabled is zookeeper.sasl.disable.
	SASLDisabled bool
	// LoginContext is zookeeper.sasl.login-context-name, the JAAS section
	// Flink's ZooKeeper client logs in with by SASL.
	LoginContext string
	// Kerberos: security.kerberos.login.contexts names LoginContext, so
	// Flink logs in to ZooKeeper as a Kerberos principal (sasl:<name>).
	Kerberos bool
	// JAASFile is the -Djava.security.auth.login.config of the
	// JobManager's JVM options (env.java.opts.all, env.java.opts.jobmanager),
	// "" when none: its LoginContext section may log in by SASL.
	JAASFile string
	// Sources maps each option's key to where its value came from.
	Sources map[string]Source
}

// Secured reports whether Flink's znodes are its identity's only.
func (s *ZooKeeperSecurity) Secured() bool { return s.ACL == "creator" }

// ZooKeeperSecurity reads how Flink authenticates to ZooKeeper. It fails,
// naming the key, on a value Flink refuses.
func (c *Config) ZooKeeperSecurity() (*ZooKeeperSecurity, error) {
	s := &ZooKeeperSecurity{Sources: map[string]Source{}}
	lookup := func(o Option) (string, bool) {
		v, ok := c.Lookup(o)
		if !ok {
			if o.Default == "" {
				return "", false
			}
			s.Sources[o.Key] = Source{Option: o.Key, Key: o.Key}
			return o.Default, true
		}
		s.Sources[o.Key] = Source{Option: o.Key, Key: v.Key, Line: v.Line}
		return v.Value, true
	}
	var errs []error
	acl, _ := lookup(ZooKeeperACL)
	// ZkClientACLMode.fromConfig: open or creator, in any case.
	switch a := strings.ToLower(strings.TrimSpace(acl)); a {
	case "open", "creator":
		s.ACL = a
	default:
		errs = append(errs, fmt.Errorf("%s %q from %s: Flink accepts open or creator", ZooKeeperACL.Key, acl, s.Sources[ZooKeeperACL.Key]))
	}
	auth, err := c.lookupMap(ZooKeeperAuthorization, s.Sources)
	if err != nil {
		errs = append(errs, err)
	}
	s.Authorization = auth
	dis, _ := lookup(ZooKeeperSASLDisable)
	s.SASLDisabled = strings.EqualFold(strings.TrimSpace(dis), "true")
	s.LoginContext, _ = lookup(ZooKeeperLoginContext)
	if contexts, ok := lookup(KerberosLoginContexts); ok {
		for _, ctx := range strings.Split(contexts, ",") {
			if strings.TrimSpace(ctx) == s.LoginContext {
				s.Kerberos = true
			}
		}
	}
	for _, o := range []Option{JobManagerJVMOptions, JVMOptions} {
		if opts, ok := lookup(o); ok && s.JAASFile == "" {
			s.JAASFile = jaasFile(opts)
		}
	}
	if s.ACL == "creator" && s.SASLDisabled {
		// ZooKeeperUtils.startCuratorFramework refuses this.
		errs = append(errs, fmt.Errorf("%s creator with %s true: Flink refuses to start so (IllegalConfigurationException)", ZooKeeperACL.Key, ZooKeeperSASLDisable.Key))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", c.Path, err)
	}
	return s, nil
}

// lookupMap reads a map option as Flink's Configuration does: the
// option's own key holds k1:v1,k2:v2 (StructuredOptionsSplitter quoting);
// when it is absent, every key below it (key.k1: v1) is an entry.
func (c *Config) lookupMap(o Option, sources map[string]Source) (map[string]string, error) {
	if v, ok := c.Lookup(o); ok {
		sources[o.Key] = Source{Option: o.Key, Key: v.Key, Line: v.Line}
		m, err := parseMap(v.Value)
		if err != nil {
			return nil, fmt.Errorf("%s (line %d): %w", v.Key, v.Line, err)
		}
		return m, nil
	}
	prefix := o.Key + "."
	var keys []string
	for k := range c.entries {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	sort.Strings(keys)
	m := map[string]string{}
	for _, k := range keys {
		v := c.entries[k]
		m[strings.TrimPrefix(k, prefix)] = v.Value
		if _, ok := sources[o.Key]; !ok {
			sources[o.Key] = Source{Option: k, Key: k, Line: v.Line}
		}
	}
	return m, nil
}

// parseMap is Flink's ConfigurationUtils.convertToProperties: items split
// at commas, each split at colons into exactly a key and a value.
func parseMap(s string) (map[string]string, error) {
	items, err := splitEscaped(s, ',')
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, item := range items {
		kv, err := splitEscaped(item, ':')
		if err != nil {
			return nil, err
		}
		if len(kv) != 2 {
			return nil, errors.New("map item is not a key-value pair (missing ':'? quote a value with colons: digest:'user:password')")
		}
		m[kv[0]] = kv[1]
	}
	return m, nil
}

// splitEscaped is Flink's StructuredOptionsSplitter.splitEscaped: tokens
// between delimiters, a token that starts with ' or " quoted (the quote
// doubled inside stands for itself) and followed only by a delimiter, an
// unquoted token taken as it is (quotes inside it included), trimmed.
func splitEscaped(s string, delim rune) ([]string, error) {
	type token struct {
		kind byte // 'q' quoted, 'u' unquoted, 'd' delimiter
		s    string
		pos  int
	}
	var tokens []token
	r := []rune(s)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			closed := false
			for j < len(r) {
				if r[j] == c {
					if j+1 < len(r) && r[j+1] == c {
						b.WriteRune(c)
						j += 2
						continue
					}
					closed = true
					j++
					break
				}
				b.WriteRune(r[j])
				j++
			}
			if !closed {
				return nil, errors.New("quoting was not closed properly")
			}
			tokens = append(tokens, token{'q', b.String(), i})
			i = j
		case c == delim:
			tokens = append(tokens, token{'d', string(c), i})
			i++
		case unicode.IsSpace(c):
			i++
		default:
			j := i
			for j < len(r) && r[j] != delim {
				j++
			}
			tokens = append(tokens, token{'u', strings.TrimSpace(string(r[i:j])), i})
			i = j
		}
	}
	var out []string
	for i, t := range tokens {
		switch t.kind {
		case 'q':
			if i+1 < len(tokens) && tokens[i+1].kind != 'd' {
				return nil, fmt.Errorf("illegal quoting at position %d", tokens[i+1].pos-1)
			}
			out = append(out, t.s)
		case 'u':
			out = append(out, t.s)
		case 'd':
			if i+1 < len(tokens) && tokens[i+1].kind == 'd' {
				out = append(out, "")
			}
		}
	}
	return out, nil
}

// jaasFile finds -Djava.security.auth.login.config=PATH in JVM options.
func jaasFile(opts string) string {
	const flag = "-Djava.security.auth.login.config="
	for _, f := range strings.Fields(opts) {
		if v, ok := strings.CutPrefix(f, flag); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}
