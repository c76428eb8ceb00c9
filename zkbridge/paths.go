package zkbridge

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Flink's namespace is <path.root>/<cluster-id>, but the two generations
// join them differently (docs/flink-formats.md §1.1).

// legacyNamespace is Flink 1.4-1.14: prepend "/" to the cluster id if
// missing, strip one trailing "/" from the cluster id and from the root,
// concatenate.
func legacyNamespace(root, clusterID string) string {
	if !strings.HasPrefix(clusterID, "/") {
		clusterID = "/" + clusterID
	}
	clusterID = strings.TrimSuffix(clusterID, "/")
	root = strings.TrimSuffix(root, "/")
	return root + clusterID
}

// modernNamespace is Flink 1.15+: trim every segment's leading and
// trailing slashes, drop empty segments, join with "/", prefix "/".
func modernNamespace(root, clusterID string) string {
	var parts []string
	for _, s := range []string{root, clusterID} {
		if s = strings.Trim(s, "/"); s != "" {
			parts = append(parts, s)
		}
	}
	return "/" + strings.Join(parts, "/")
}

// namespaceCandidates returns the distinct valid namespaces both
// generations would use, modern first.
func namespaceCandidates(root, clusterID string) []string {
	var out []string
	for _, ns := range []string{modernNamespace(root, clusterID), legacyNamespace(root, clusterID)} {
		if checkAbsPath(ns) == nil && (len(out) == 0 || out[0] != ns) {
			out = append(out, ns)
		}
	}
	return out
}

// clusterKey names a Flink cluster below CkptfsRoot: the cluster id
// without leading and trailing slashes, inner slashes escaped.
func clusterKey(clusterID string) string {
	return url.PathEscape(strings.Trim(clusterID, "/"))
}

// checkpointName is Flink's znode name for a checkpoint id.
func checkpointName(id int64) string { return fmt.Sprintf("%019d", id) }

// parseCheckpointName reads a %019d znode name.
func parseCheckpointName(name string) (int64, bool) {
	if len(name) != 19 {
		return 0, false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(name, 10, 64)
	return id, err == nil
}

// isJobID reports whether s looks like a Flink JobID (32 hex digits).
func isJobID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func join(parts ...string) string { return strings.Join(parts, "/") }

// ckptfsPaths are ckptfs's own znodes for one Flink cluster.
type ckptfsPaths struct {
	base string // <CkptfsRoot>/<cluster key>
}

func newCkptfsPaths(root, clusterID string) ckptfsPaths {
	return ckptfsPaths{base: join(strings.TrimSuffix(root, "/"), clusterKey(clusterID))}
}

// epoch holds the activation counter in decimal; every retraction checks
// its version, every activation bumps it.
func (p ckptfsPaths) epoch() string { return join(p.base, "epoch") }

// activeSite holds the name of the site allowed to write.
func (p ckptfsPaths) activeSite() string { return join(p.base, "active-site") }

// takeover is the parent of the takeover lock's ephemeral sequential
// children.
func (p ckptfsPaths) takeover() string { return join(p.base, "takeover") }

func (p ckptfsPaths) prunedRoot() string          { return join(p.base, "pruned") }
func (p ckptfsPaths) prunedJob(job string) string { return join(p.base, "pruned", job) }
func (p ckptfsPaths) pruned(job string, id int64) string {
	return join(p.base, "pruned", job, checkpointName(id))
}

// restored holds restore-pruned's records of the pointers it put back.
func (p ckptfsPaths) restoredRoot() string          { return join(p.base, "restored") }
func (p ckptfsPaths) restoredJob(job string) string { return join(p.base, "restored", job) }
func (p ckptfsPaths) restored(job string, id int64) string {
	return join(p.base, "restored", job, checkpointName(id))
}

func (p ckptfsPaths) syncRoot() string          { return join(p.base, "sync") }
func (p ckptfsPaths) syncJob(job string) string { return join(p.base, "sync", job) }
func (p ckptfsPaths) syncAck(job, site string) string {
	return join(p.base, "sync", job, syncAckPrefix+site)
}

func (p ckptfsPaths) sites() string              { return join(p.base, "sites") }
func (p ckptfsPaths) site(site string) string    { return join(p.base, "sites", site) }
func (p ckptfsPaths) markers(site string) string { return join(p.base, "sites", site, "jobs") }
func (p ckptfsPaths) marker(site, job string) string {
	return join(p.base, "sites", site, "jobs", job)
}
