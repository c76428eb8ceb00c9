package manifest

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// ErrOutsideRoot means a reference resolves outside every configured root,
// or names a remote file system that no mapping covers. Such a reference is
// never opened.
var ErrOutsideRoot = errors.New("outside the configured roots")

// Mapping says that Flink paths starting with Prefix are found under the
// local directory Dir (the --map URI_PREFIX=LOCAL_DIR flag).
type Mapping struct {
	Prefix string
	Dir    string
}

// ParseMapping parses "URI_PREFIX=LOCAL_DIR".
func ParseMapping(s string) (Mapping, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 || i == len(s)-1 {
		return Mapping{}, fmt.Errorf("mapping %q: want URI_PREFIX=LOCAL_DIR", s)
	}
	m := Mapping{Prefix: s[:i], Dir: s[i+1:]}
	if !filepath.IsAbs(m.Dir) {
		return Mapping{}, fmt.Errorf("mapping %q: local directory must be absolute", s)
	}
	return m, nil
}

func (m Mapping) String() string { return m.Prefix + "=" + m.Dir }

// Resolver turns the paths Flink stored (absolute URIs of the writing site,
// or plain paths) into local paths, and keeps every result inside the
// configured roots.
type Resolver struct {
	mappings []resolvedMapping // longest prefix first
	roots    []string
}

type resolvedMapping struct {
	prefix string // normalized
	dir    string
}

// NewResolver builds a resolver. Every mapping's directory is a root too.
func NewResolver(mappings []Mapping, roots []string) (*Resolver, error) {
	r := &Resolver{}
	for _, m := range mappings {
		p, err := normalizeFlinkPath(m.Prefix)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: %w", m, err)
		}
		if !filepath.IsAbs(m.Dir) {
			return nil, fmt.Errorf("mapping %s: local directory must be absolute", m)
		}
		dir := filepath.Clean(m.Dir)
		r.mappings = append(r.mappings, resolvedMapping{prefix: strings.TrimSuffix(p, "/"), dir: dir})
		r.roots = append(r.roots, dir)
	}
	for _, root := range roots {
		if !filepath.IsAbs(root) {
			return nil, fmt.Errorf("root %q must be absolute", root)
		}
		r.roots = append(r.roots, filepath.Clean(root))
	}
	sort.SliceStable(r.mappings, func(i, j int) bool { return len(r.mappings[i].prefix) > len(r.mappings[j].prefix) })
	return r, nil
}

// Mappings lists the mappings, longest prefix first, each prefix
// normalized (a local path for file URIs).
func (r *Resolver) Mappings() []Mapping {
	out := make([]Mapping, len(r.mappings))
	for i, m := range r.mappings {
		out[i] = Mapping{Prefix: m.prefix, Dir: m.dir}
		if m.prefix == "" {
			out[i].Prefix = "/"
		}
	}
	return out
}

// Roots lists the directories that resolved paths must stay inside.
func (r *Resolver) Roots() []string { return append([]string(nil), r.roots...) }

// Local resolves a Flink path (as written in _metadata or an HA file,
// unescaped) to a local path inside the roots.
func (r *Resolver) Local(flinkPath string) (string, error) {
	p, err := normalizeFlinkPath(flinkPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrOutsideRoot, err)
	}
	local := ""
	for _, m := range r.mappings {
		if rest, ok := cutPathPrefix(p, m.prefix); ok {
			local = m.dir + "/" + rest
			break
		}
	}
	if local == "" {
		if !strings.HasPrefix(p, "/") {
			return "", fmt.Errorf("%w: no --map covers %s", ErrOutsideRoot, flinkPath)
		}
		local = p
	}
	return r.Confine(local)
}

// Join resolves a relative reference against a local directory.
func (r *Resolver) Join(dir, rel string) (string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("%w: %q is not a relative path", ErrOutsideRoot, rel)
	}
	return r.Confine(dir + "/" + rel)
}

// Confine cleans a local path and checks that it lies inside a root. The
// check is lexical: ".." that climbs out of every root is refused before
// anything is opened.
func (r *Resolver) Confine(local string) (string, error) {
	if !filepath.IsAbs(local) {
		return "", fmt.Errorf("%w: %q is not absolute", ErrOutsideRoot, local)
	}
	clean := local
	if !isClean(local) {
		clean = filepath.Clean(local)
	}
	for _, root := range r.roots {
		if _, ok := cutPathPrefix(clean, root); ok {
			return clean, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrOutsideRoot, clean)
}

// cutPathPrefix reports whether p is prefix or lies below it, and returns
// the rest without a leading slash.
func cutPathPrefix(p, prefix string) (string, bool) {
	if prefix == "/" {
		return strings.TrimPrefix(p, "/"), strings.HasPrefix(p, "/")
	}
	if p == prefix {
		return "", true
	}
	if strings.HasPrefix(p, prefix) && p[len(prefix)] == '/' {
		return p[len(prefix)+1:], true
	}
	return "", false
}

// normalizeFlinkPath gives local files (file: URIs in any of their forms,
// or plain absolute paths) as plain paths, and remote file systems as
// scheme://authority/path with the scheme lower-cased.
func normalizeFlinkPath(s string) (string, error) {
	if strings.HasPrefix(s, "/") {
		return s, nil
	}
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/\\") {
		return "", fmt.Errorf("%q is neither an absolute path nor a URI", s)
	}
	scheme = strings.ToLower(scheme)
	if scheme == "file" {
		switch {
		case strings.HasPrefix(rest, "///"):
			return rest[2:], nil
		case strings.HasPrefix(rest, "//localhost/"):
			return rest[len("//localhost"):], nil
		case strings.HasPrefix(rest, "//"):
			return "", fmt.Errorf("file URI %q names a remote host", s)
		case strings.HasPrefix(rest, "/"):
			return rest, nil
		}
		return "", fmt.Errorf("file URI %q is not absolute", s)
	}
	if !strings.HasPrefix(rest, "//") {
		return "", fmt.Errorf("URI %q has no authority", s)
	}
	return scheme + ":" + rest, nil
}

// isClean reports whether filepath.Clean would return the absolute path p
// unchanged: no empty, "." or ".." element and no trailing slash.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || p[0] != '/' {
		return false
	}
	for rest := p[1:]; ; {
		i := strings.IndexByte(rest, '/')
		elem := rest
		if i >= 0 {
			elem = rest[:i]
		}
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
		if i < 0 {
			return true
		}
		rest = rest[i+1:]
	}
}
