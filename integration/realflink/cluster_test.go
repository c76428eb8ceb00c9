//go:build linux

package realflink

import "testing"

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
