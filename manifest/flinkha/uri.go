package flinkha

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Flink keeps a file's location as org.apache.flink.core.fs.Path, whose only
// serialized field is a java.net.URI. The URI holds the escaped form
// (spaces as %20); _metadata, logs and Path.toString() use the unescaped
// form. PathToURI and URIToPath convert between them the way Flink and the
// JDK do, so that paths from znodes and HA files compare equal to paths
// from _metadata.

// PathToURI returns the java.net.URI string that new Path(p) holds in Flink:
// p is split into scheme, authority and path without unescaping, the path
// is normalized (backslashes to slashes, repeated slashes and a trailing
// slash removed), then escaped and normalized as java.net.URI does.
func PathToURI(p string) (string, error) {
	if p == "" {
		return "", errors.New("flinkha: cannot make a Path from an empty string")
	}
	if hasWindowsDrive(p, false) {
		p = "/" + p
	}
	var scheme, authority string
	hasScheme, hasAuthority := false, false
	start := 0
	colon, slash := strings.IndexByte(p, ':'), strings.IndexByte(p, '/')
	if colon != -1 && (slash == -1 || colon < slash) {
		scheme, hasScheme, start = p[:colon], true, colon+1
	}
	if strings.HasPrefix(p[start:], "//") && len(p)-start > 2 {
		end := len(p)
		if i := strings.IndexByte(p[start+2:], '/'); i >= 0 {
			end = start + 2 + i
		}
		authority, hasAuthority, start = p[start+2:end], true, end
	}
	path := normalizeFlinkPath(p[start:])

	// new URI(scheme, authority, path, null, null)
	var b strings.Builder
	if hasScheme {
		b.WriteString(scheme)
		b.WriteByte(':')
	}
	if hasAuthority {
		b.WriteString("//")
		b.WriteString(quoteAuthority(authority))
	}
	b.WriteString(quote(path, pathChars))
	if hasScheme && path != "" && path[0] != '/' {
		return "", fmt.Errorf("flinkha: path %q: relative path in absolute URI", p)
	}
	u, err := parseURI(b.String())
	if err != nil {
		return "", fmt.Errorf("flinkha: path %q: %w", p, err)
	}
	return u.normalize(), nil
}

// URIToPath returns Flink's Path.toString() of a Path holding the URI s:
// scheme, authority, path and fragment, unescaped; the query is dropped
// (Flink never makes one).
func URIToPath(s string) (string, error) {
	u, err := parseURI(s)
	if err != nil {
		return "", err
	}
	if u.opaque {
		return "", fmt.Errorf("flinkha: URI %q is not hierarchical", s)
	}
	var b strings.Builder
	if u.hasScheme {
		b.WriteString(u.scheme)
		b.WriteByte(':')
	}
	if u.authority != "" {
		b.WriteString("//")
		b.WriteString(unescape(u.authority))
	}
	path := unescape(u.path)
	if strings.HasPrefix(path, "/") && hasWindowsDrive(path, true) && !u.hasScheme && u.authority == "" {
		path = path[1:]
	}
	b.WriteString(path)
	if u.hasFragment {
		b.WriteByte('#')
		b.WriteString(unescape(u.fragment))
	}
	return b.String(), nil
}

// hasWindowsDrive reports a drive letter ("C:") at the start of p, after a
// slash when slashed is set.
func hasWindowsDrive(p string, slashed bool) bool {
	start := 0
	if slashed {
		start = 1
	}
	if len(p) < start+2 || (slashed && p[0] != '/') || p[start+1] != ':' {
		return false
	}
	c := p[start]
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

// normalizeFlinkPath is Path.normalizePath.
func normalizeFlinkPath(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	if strings.HasSuffix(p, "/") && p != "/" && !isWindowsRootDir(p) {
		p = p[:len(p)-1]
	}
	return p
}

// isWindowsRootDir matches "/<letters>:/".
func isWindowsRootDir(p string) bool {
	if len(p) < 4 || p[0] != '/' || !strings.HasSuffix(p, ":/") {
		return false
	}
	for _, c := range p[1 : len(p)-2] {
		if c > unicode.MaxASCII || !unicode.IsLetter(c) {
			return false
		}
	}
	return true
}

// Character classes of java.net.URI (RFC 2396) for ASCII characters.
const (
	alnumChars    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	markChars     = "-_.!~*'()"
	pathChars     = alnumChars + markChars + ":@&=+$," + ";/"
	regNameChars  = alnumChars + markChars + "$,;:@&=+"
	userInfoChars = alnumChars + markChars + ";:&=+$,"
	authChars     = regNameChars + "[]" // reg_name and server
	uricChars     = alnumChars + markChars + ";/?:@&=+$,[]"
	schemeChars   = alnumChars + "+-."
	hexDigitChars = "0123456789ABCDEFabcdef"
)

// quote escapes what java.net.URI.quote escapes for a component that
// allows escapes (and thus other non-ASCII characters): ASCII characters
// outside allowed, and non-ASCII space and control characters.
func quote(s, allowed string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			if r != 0 && strings.IndexRune(allowed, r) >= 0 {
				b.WriteRune(r)
			} else {
				escapeByte(&b, byte(r))
			}
		case isJavaSpaceChar(r) || (r >= 0x80 && r <= 0x9F):
			var buf [utf8.UTFMax]byte
			for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
				escapeByte(&b, c)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// quoteAuthority quotes an authority as URI's constructor does, leaving a
// bracketed IPv6 address alone.
func quoteAuthority(a string) string {
	if strings.HasPrefix(a, "[") {
		if end := strings.IndexByte(a, ']'); end != -1 && strings.IndexByte(a, ':') != -1 {
			return a[:end+1] + quote(a[end+1:], authChars)
		}
	}
	return quote(a, authChars)
}

func escapeByte(b *strings.Builder, c byte) {
	const hex = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&15])
}

// isJavaSpaceChar is Character.isSpaceChar: Unicode space, line and
// paragraph separators.
func isJavaSpaceChar(r rune) bool {
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// uri holds the raw (escaped) components of a parsed java.net.URI.
type uri struct {
	hasScheme   bool
	scheme      string
	opaque      bool   // scheme:ssp without a slash after the colon
	authority   string // "" when absent or empty, as URI.getRawAuthority
	path        string
	hasQuery    bool
	query       string
	hasFragment bool
	fragment    string
	raw         string
}

// parseURI checks s against the grammar java.net.URI accepts (RFC 2396
// with the JDK's deviations) far enough that a string it accepts is one
// the JDK reads back, and splits it into components. Like the JDK it
// accepts the empty relative reference "".
func parseURI(s string) (*uri, error) {
	fail := func(format string, args ...any) (*uri, error) {
		return nil, fmt.Errorf("flinkha: invalid URI %q: %s", s, fmt.Sprintf(format, args...))
	}
	if !utf8.ValidString(s) {
		return fail("not valid UTF-8")
	}
	u := &uri{raw: s}
	rest := s
	if i := strings.IndexAny(s, ":/?#"); i >= 0 && s[i] == ':' {
		if i == 0 {
			return fail("expected scheme name at index 0")
		}
		scheme := s[:i]
		if !isAlpha(scheme[0]) || !onlyASCII(scheme, schemeChars) {
			return fail("illegal character in scheme name")
		}
		u.hasScheme, u.scheme, rest = true, scheme, s[i+1:]
		if !strings.HasPrefix(rest, "/") {
			ssp, frag, hasFrag := strings.Cut(rest, "#")
			if ssp == "" {
				return fail("expected scheme-specific part")
			}
			if err := checkComponent(ssp, uricChars); err != nil {
				return fail("opaque part: %v", err)
			}
			u.opaque, u.path = true, ssp
			rest = ""
			if hasFrag {
				rest = "#" + frag
			}
		}
	}
	if !u.opaque {
		if strings.HasPrefix(rest, "//") {
			rest = rest[2:]
			end := strings.IndexAny(rest, "/?#")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 && len(rest) == 0 {
				return fail("expected authority")
			}
			u.authority, rest = rest[:end], rest[end:]
			if err := checkAuthority(u.authority); err != nil {
				return fail("authority: %v", err)
			}
		}
		end := strings.IndexAny(rest, "?#")
		if end < 0 {
			end = len(rest)
		}
		u.path, rest = rest[:end], rest[end:]
		if err := checkComponent(u.path, pathChars); err != nil {
			return fail("path: %v", err)
		}
		if strings.HasPrefix(rest, "?") {
			end := strings.IndexByte(rest, '#')
			if end < 0 {
				end = len(rest)
			}
			u.hasQuery, u.query, rest = true, rest[1:end], rest[end:]
			if err := checkComponent(u.query, uricChars); err != nil {
				return fail("query: %v", err)
			}
		}
	}
	if strings.HasPrefix(rest, "#") {
		u.hasFragment, u.fragment = true, rest[1:]
		if err := checkComponent(u.fragment, uricChars); err != nil {
			return fail("fragment: %v", err)
		}
	}
	return u, nil
}

// checkAuthority accepts what the JDK accepts as an authority. Without
// brackets any registry-based authority will do. '[' and ']' are legal
// only around an IPv6 host of a server-based authority,
// [userinfo@][ipv6[%scope]][:port].
func checkAuthority(a string) error {
	if !strings.ContainsAny(a, "[]") {
		return checkComponent(a, regNameChars)
	}
	rest := a
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		if err := checkComponent(rest[:i], userInfoChars); err != nil {
			return fmt.Errorf("user info: %w", err)
		}
		rest = rest[i+1:]
	}
	end := strings.IndexByte(rest, ']')
	if !strings.HasPrefix(rest, "[") || end < 0 {
		return errors.New("brackets outside an IPv6 host")
	}
	addr, scope, hasScope := strings.Cut(rest[1:end], "%")
	if ip, err := netip.ParseAddr(addr); err != nil || !ip.Is6() || ip.Zone() != "" {
		return fmt.Errorf("malformed IPv6 address %q", addr)
	}
	if hasScope && (scope == "" || !onlyASCII(scope, alnumChars+"_.")) {
		return fmt.Errorf("malformed IPv6 scope id %q", scope)
	}
	if port, ok := strings.CutPrefix(rest[end+1:], ":"); ok {
		if _, err := strconv.ParseUint(port, 10, 31); port != "" && err != nil { // an int
			return fmt.Errorf("malformed port %q", port)
		}
	} else if rest[end+1:] != "" {
		return fmt.Errorf("%q after the IPv6 host", rest[end+1:])
	}
	return nil
}

// checkComponent accepts ASCII characters from allowed, well-formed %XX
// escapes and non-ASCII characters other than spaces and controls.
func checkComponent(s, allowed string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Errorf("malformed escape pair at index %d", i)
			}
			i += 3
		case c < utf8.RuneSelf:
			if c == 0 || strings.IndexByte(allowed, c) < 0 {
				return fmt.Errorf("illegal character %q at index %d", c, i)
			}
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if isJavaSpaceChar(r) || (r >= 0x80 && r <= 0x9F) {
				return fmt.Errorf("illegal character %q at index %d", r, i)
			}
			i += n
		}
	}
	return nil
}

func isAlpha(c byte) bool { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') }

func isHex(c byte) bool { return strings.IndexByte(hexDigitChars, c) >= 0 }

func onlyASCII(s, allowed string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(allowed, s[i]) < 0 {
			return false
		}
	}
	return true
}

// unescape is java.net.URI.decode: %XX sequences are bytes of UTF-8 text,
// malformed sequences become U+FFFD.
func unescape(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '%' {
			r, n := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += n
			continue
		}
		var bs []byte
		for i+2 < len(s) && s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) {
			bs = append(bs, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 3
		}
		if len(bs) == 0 { // not reached for strings parseURI accepted
			b.WriteByte(s[i])
			i++
			continue
		}
		for len(bs) > 0 {
			r, n := utf8.DecodeRune(bs)
			b.WriteRune(r) // RuneError for malformed input, as the JDK's REPLACE
			bs = bs[n:]
		}
	}
	return b.String()
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// normalize is URI.normalize().toString(): when removing "." and ".."
// segments changes the path, the string is rebuilt from the components.
func (u *uri) normalize() string {
	if u.opaque || u.path == "" {
		return u.raw
	}
	np := normalizeSegments(u.path)
	if np == u.path {
		return u.raw
	}
	var b strings.Builder
	if u.hasScheme {
		b.WriteString(u.scheme)
		b.WriteByte(':')
	}
	if u.authority != "" {
		b.WriteString("//")
		b.WriteString(u.authority)
	}
	b.WriteString(np)
	if u.hasQuery {
		b.WriteByte('?')
		b.WriteString(u.query)
	}
	if u.hasFragment {
		b.WriteByte('#')
		b.WriteString(u.fragment)
	}
	return b.String()
}

// normalizeSegments removes "." segments and "x/.." pairs from a path the
// way java.net.URI.normalize does: repeated slashes collapse, a path that
// ended in a removed segment keeps a trailing slash, ".." segments that
// cannot be removed stay, and a relative path whose first segment holds a
// colon gets a leading "./".
func normalizeSegments(p string) string {
	abs := strings.HasPrefix(p, "/")
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	trailing := strings.HasSuffix(p, "/")
	var out []string
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == ".":
			if last {
				trailing = true
			}
			continue
		case s == ".." && len(out) > 0 && out[len(out)-1] != "..":
			out = out[:len(out)-1]
			if last {
				trailing = true
			}
			continue
		}
		out = append(out, s)
	}
	if !abs && len(out) > 0 && strings.Contains(out[0], ":") {
		out = append([]string{"."}, out...)
	}
	s := strings.Join(out, "/")
	if abs {
		s = "/" + s
	}
	if trailing && len(out) > 0 {
		s += "/"
	}
	return s
}
