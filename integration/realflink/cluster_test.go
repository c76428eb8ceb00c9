//go:build linux

package realflink

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// TestResourceKey: BashJavaUtils' answers are shared by clusters that
// differ only in where they run, never by clusters sized differently.
func TestResourceKey(t *testing.T) {
	d := Dist{Release: Release{Version: "1.20.5"}, Home: "flink-1.20.5", Java: "java"}
	a := ClusterConfig{Dist: d, Dir: "a", Addr: "10.0.0.1", RESTPort: 1, RPCPort: 2, ZK: "z1", PathRoot: "/f", ClusterID: "c1",
		CheckpointsDir: "a/chk", HADir: "a/ha"}
	b := ClusterConfig{Dist: d, Dir: "b", Addr: "10.0.0.2", RESTPort: 3, RPCPort: 4, ZK: "z2", PathRoot: "/g", ClusterID: "c2",
		CheckpointsDir: "b/chk", HADir: "b/ha"}
	if resourceKey(a, "GET_TM_RESOURCE_PARAMS") != resourceKey(b, "GET_TM_RESOURCE_PARAMS") {
		t.Error("clusters that differ only in where they run have different keys")
	}
	if resourceKey(a, "GET_TM_RESOURCE_PARAMS") == resourceKey(a, "GET_JM_RESOURCE_PARAMS") {
		t.Error("the JobManager's and the TaskManager's answers share a key")
	}
	c := b
	c.Extra = map[string]string{"taskmanager.memory.process.size": "2g"}
	if resourceKey(a, "GET_TM_RESOURCE_PARAMS") == resourceKey(c, "GET_TM_RESOURCE_PARAMS") {
		t.Error("clusters of different memory share a key")
	}
	e := b
	e.Dist.Home = "flink-2.3.0"
	if resourceKey(a, "GET_TM_RESOURCE_PARAMS") == resourceKey(e, "GET_TM_RESOURCE_PARAMS") {
		t.Error("two releases share a key")
	}
}

// TestVersionTable: flink/versions.tsv reads, and every release's Java
// is the system's or one that flink/fetch.sh brings.
func TestVersionTable(t *testing.T) {
	rs, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("no release in flink/versions.tsv")
	}
}

// TestJarSetTable: every jar set of flink/jars.tsv has its pom and its
// lock, and the table holds the lock's sha256 (lock.sh rewrote a lock the
// table does not know otherwise).
func TestJarSetTable(t *testing.T) {
	rows, err := readTable("jars.tsv", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no jar set in flink/jars.tsv")
	}
	for _, r := range rows {
		dir := filepath.Join(RepoRoot(), "flink")
		if _, err := os.Stat(filepath.Join(dir, "assemble", r[0], "pom.xml")); err != nil {
			t.Errorf("jar set %s: %v", r[0], err)
		}
		data, err := os.ReadFile(filepath.Join(dir, r[0]+".lock"))
		if err != nil {
			t.Errorf("jar set %s: %v", r[0], err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != r[1] {
			t.Errorf("jar set %s: %s.lock has sha256 %x, the table says %s", r[0], r[0], sum, r[1])
		}
	}
}
