package zkbridge

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/manifest"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.Servers = []string{"127.0.0.1:2181", "zk2:2181"}
		c.Site = "dc2"
		return c
	}
	if c := valid(); c.Validate() != nil {
		t.Fatalf("valid config: %v", c.Validate())
	}
	if got := DefaultConfig(); got.DefaultTakeoverWait() != 75*time.Second {
		t.Errorf("default takeover wait %v, want Flink's 60s session timeout plus 15s", got.DefaultTakeoverWait())
	}
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no servers", func(c *Config) { c.Servers = nil }, "no ZooKeeper servers"},
		{"bad server", func(c *Config) { c.Servers = []string{"zk1"} }, `server "zk1"`},
		{"bad port", func(c *Config) { c.Servers = []string{"zk1:x"} }, "bad port"},
		{"short session", func(c *Config) { c.SessionTimeout = 10 * time.Millisecond }, "SessionTimeout"},
		{"retry below session", func(c *Config) { c.RetryTimeout = time.Second }, "RetryTimeout"},
		{"relative root", func(c *Config) { c.PathRoot = "flink" }, "PathRoot"},
		{"root slash", func(c *Config) { c.PathRoot = "/" }, "PathRoot"},
		{"root trailing slash", func(c *Config) { c.PathRoot = "/flink/" }, "PathRoot"},
		{"zookeeper root", func(c *Config) { c.CkptfsRoot = "/zookeeper/x" }, "CkptfsRoot"},
		{"nested roots", func(c *Config) { c.CkptfsRoot = "/flink/ckptfs" }, "must not contain each other"},
		{"slash cluster", func(c *Config) { c.ClusterID = "//" }, "ClusterID"},
		{"site with slash", func(c *Config) { c.Site = "dc/2" }, "Site"},
		{"jitter above interval", func(c *Config) { c.MarkerJitter = time.Hour }, "MarkerJitter"},
		{"retry above interval", func(c *Config) { c.MarkerRetryInterval = time.Hour }, "MarkerRetryInterval"},
		{"no logger", func(c *Config) { c.Logger = nil }, "Logger"},
		{"acl locks ckptfs out", func(c *Config) { c.ACL = zk.DigestACL(zk.PermAll, "someone", "else") }, "no full access"},
		{"acl only reads", func(c *Config) { c.ACL = zk.WorldACL(zk.PermRead) }, "no full access"},
		{"auth acl anonymous", func(c *Config) { c.ACL = zk.AuthACL(zk.PermAll) }, "connects anonymously"},
		{"bad perms", func(c *Config) { c.ACL = []zk.ACL{{Perms: 0x40, Scheme: "world", ID: "anyone"}} }, "not a subset"},
		{"bad credentials", func(c *Config) { c.Auth = &Credentials{Scheme: "kerberos", User: "u", Password: "p"} }, "Auth"},
		{"unknown generation", func(c *Config) { c.FlinkVersion = 99 }, "FlinkVersion"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.modify(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestNamespaces(t *testing.T) {
	tests := []struct {
		root, cluster, legacy, modern string
	}{
		{"/flink", "default", "/flink/default", "/flink/default"},
		{"/flink", "/default", "/flink/default", "/flink/default"},
		{"/flink/", "default/", "/flink/default", "/flink/default"},
		{"/flink", "application_1_2", "/flink/application_1_2", "/flink/application_1_2"},
		{"/flink//", "//x", "/flink///x", "/flink/x"},
		{"/a/b", "c/d", "/a/b/c/d", "/a/b/c/d"},
	}
	for _, tc := range tests {
		if got := legacyNamespace(tc.root, tc.cluster); got != tc.legacy {
			t.Errorf("legacyNamespace(%q, %q) = %q, want %q", tc.root, tc.cluster, got, tc.legacy)
		}
		if got := modernNamespace(tc.root, tc.cluster); got != tc.modern {
			t.Errorf("modernNamespace(%q, %q) = %q, want %q", tc.root, tc.cluster, got, tc.modern)
		}
	}
	if got := namespaceCandidates("/flink//", "//x"); len(got) != 1 || got[0] != "/flink/x" {
		t.Errorf("candidates drop invalid paths: got %q", got)
	}
	if got := clusterKey("/a/b/"); got != "a%2Fb" {
		t.Errorf("clusterKey = %q", got)
	}
}

func TestCheckpointNames(t *testing.T) {
	if got := checkpointName(42); got != "0000000000000000042" {
		t.Errorf("checkpointName(42) = %q", got)
	}
	for name, want := range map[string]int64{"0000000000000000042": 42, "9223372036854775807": 1<<63 - 1} {
		if id, ok := parseCheckpointName(name); !ok || id != want {
			t.Errorf("parseCheckpointName(%q) = %d, %v", name, id, ok)
		}
	}
	for _, bad := range []string{"42", "000000000000000004x", "-000000000000000042", "locks", "9999999999999999999"} {
		if _, ok := parseCheckpointName(bad); ok {
			t.Errorf("parseCheckpointName(%q) accepted", bad)
		}
	}
}

func TestParseGeneration(t *testing.T) {
	for in, want := range map[string]Generation{
		"": GenUnknown, "auto": GenUnknown, "1.4": Gen1_4, "1.5": Gen1_5, "1.13.6": Gen1_5, "1.4-1.13": Gen1_5,
		"1.14": Gen1_14, "1.14.6": Gen1_14, "1.15": Gen1_15, "1.17.2": Gen1_15, "1.15-1.17": Gen1_15,
		"1.18": Gen1_18, "1.20.1": Gen1_18, "2.0": Gen2, "2.x": Gen2, "2.2.0": Gen2,
	} {
		got, err := ParseGeneration(in)
		if err != nil || got != want {
			t.Errorf("ParseGeneration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"1.3", "1.21", "3.0", "x", "1"} {
		if _, err := ParseGeneration(bad); err == nil {
			t.Errorf("ParseGeneration(%q) accepted", bad)
		}
	}
}

func TestEvidenceResolve(t *testing.T) {
	var ev evidence
	ev.add(false, "jobs/", gensFrom(Gen1_14)...)
	ev.add(false, "leader/latch", gensFrom(Gen1_15)...)
	ev.add(false, "job-<id>", Gen1_18, Gen2)
	cands, _ := ev.resolve()
	if len(cands) != 2 || jobsLockStyle(cands) != LockChild {
		t.Errorf("candidates %v, lock style %v; want 1.18-1.20 and 2.x with locks-child", cands, jobsLockStyle(cands))
	}

	ev = evidence{}
	ev.add(false, "jobs/", gensFrom(Gen1_14)...)
	cands, _ = ev.resolve()
	if jobsLockStyle(cands) != LockStyleUnknown {
		t.Errorf("jobs/ alone must not decide the lock style: %v", cands)
	}

	// A weak clue that contradicts a strong one is ignored.
	ev = evidence{}
	ev.add(true, "pointer has locks", gensFrom(Gen1_15)...)
	ev.add(false, "leader/x/latch", Gen1_14)
	cands, notes := ev.resolve()
	if jobsLockStyle(cands) != LockChild || !strings.Contains(strings.Join(notes, "\n"), "ignored") {
		t.Errorf("candidates %v notes %q", cands, notes)
	}

	// Strong clues that contradict each other leave nothing.
	ev = evidence{}
	ev.add(true, "locks", gensFrom(Gen1_15)...)
	ev.add(true, "direct", Gen1_14)
	if cands, _ := ev.resolve(); len(cands) != 0 {
		t.Errorf("conflicting strong evidence gave %v", cands)
	}
}

func TestBackupRoundTrip(t *testing.T) {
	b := &Backup{Format: backupFormat, JobID: "j", CheckpointID: 7, Znode: "/flink/default/jobs/j/checkpoints/0000000000000000007",
		Data: []byte{0xac, 0xed, 0, 5, 1}, HadLocks: true, LocksData: []byte("10.0.0.7"), Reason: ReasonAboveNewestComplete,
		RetractedAt: time.Unix(1, 0).UTC()}
	data, err := b.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBackup(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Errorf("round trip: %+v, want %+v", got, b)
	}
	if !strings.Contains(string(data), `"locks_data":"MTAuMC4wLjc="`) {
		t.Errorf("backup JSON %s lacks locks_data in base64", data)
	}
	if !got.sameOriginal(b.Znode, b.Data, true) || got.sameOriginal(b.Znode, b.Data, false) || got.sameOriginal(b.Znode, []byte{1}, true) {
		t.Errorf("sameOriginal wrong for %+v", got)
	}
	// A backup written before locks_data existed still reads: its locks
	// child comes back empty; it holds the same pointer as a new one.
	old := `{"format":1,"job_id":"j","checkpoint_id":7,"znode":"/flink/default/jobs/j/checkpoints/0000000000000000007",` +
		`"data":"rO0ABQE=","had_locks":true,"counter_znode":"","reason":"above_newest_complete","site":"dc2","epoch":0,` +
		`"retracted_at":"1970-01-01T00:00:01Z"}`
	ob, err := decodeBackup([]byte(old))
	if err != nil {
		t.Fatalf("a backup without locks_data: %v", err)
	}
	if !ob.HadLocks || ob.LocksData != nil || !bytes.Equal(ob.Data, b.Data) || !ob.sameOriginal(b.Znode, b.Data, true) {
		t.Errorf("a backup without locks_data: %+v", ob)
	}
	// Empty locks data are left out, as in the old format.
	b.LocksData = nil
	if data, _ := b.encode(); strings.Contains(string(data), "locks_data") {
		t.Errorf("empty locks data encoded: %s", data)
	}
	for _, bad := range []string{`{}`, `{"format":1,"znode":"x","data":"AQ=="}`, `{"format":2,"znode":"/a","data":"AQ=="}`, `nope`} {
		if _, err := decodeBackup([]byte(bad)); err == nil {
			t.Errorf("decodeBackup(%s) accepted", bad)
		}
	}
}

// levels is a MarkerSource with fixed levels.
type levels map[int64]manifest.Level

func (l levels) Markers(context.Context) ([]Marker, error) { return nil, nil }
func (l levels) Level(_ context.Context, _ string, id int64) (manifest.Level, error) {
	return l[id], nil
}

// TestMarkerInvariant is docs/design.md §6.4: a marker never names a
// checkpoint that is not complete at its level on its site; "none" is
// always fine.
func TestMarkerInvariant(t *testing.T) {
	src := levels{4: manifest.L2, 5: manifest.L1, 6: manifest.LevelNone, 7: manifest.L3}
	m := func(id int64, l manifest.Level) Marker {
		return Marker{JobID: "j", CheckpointID: id, Level: l}
	}
	tests := []struct {
		marker Marker
		ok     bool
	}{
		{m(4, manifest.L2), true},
		{m(4, manifest.L1), true}, // lower than what the site holds
		{m(4, manifest.L3), false},
		{m(5, manifest.L1), true},
		{m(5, manifest.L2), false}, // L1 only: not restorable by failover
		{m(6, manifest.L1), false}, // not complete at all
		{m(8, manifest.L1), false}, // unknown to the source
		{m(7, manifest.L2), true},
		{m(4, manifest.LevelNone), false},
		{NoMarker("j"), true},
		{Marker{JobID: "j", CheckpointID: -1, Level: manifest.L2}, false},
	}
	for _, tc := range tests {
		err := checkMarker(context.Background(), src, tc.marker)
		if (err == nil) != tc.ok {
			t.Errorf("checkMarker(%d at %s) = %v, want ok=%v", tc.marker.CheckpointID, tc.marker.Level, err, tc.ok)
		}
		if err != nil && tc.marker.CheckpointID >= 0 && tc.marker.Level != manifest.LevelNone && !errors.Is(err, ErrMarkerAhead) {
			t.Errorf("checkMarker error %v does not wrap ErrMarkerAhead", err)
		}
	}
}

func TestMarkerSameState(t *testing.T) {
	a := Marker{JobID: "j", CheckpointID: 4, Level: manifest.L2, Path: "p", Files: 3, Bytes: 9, Site: "dc2",
		CheckpointTimestamp: time.Unix(100, 0), VerifiedAt: time.Unix(200, 0)}
	b := a
	b.VerifiedAt = time.Unix(300, 0)
	if !a.sameState(b) {
		t.Error("markers differing only in VerifiedAt must be the same state")
	}
	b.Level = manifest.L1
	if a.sameState(b) {
		t.Error("a lower level is a different state")
	}
}

// TestRollbackWindow: the window runs from the restored checkpoint to
// the newest visible pointer of any round, or a newer retracted one;
// its seconds come from the pointers' creation.
func TestRollbackWindow(t *testing.T) {
	ptr := func(id, ctime int64, visible bool) *Pointer {
		return &Pointer{ID: id, Visible: visible, Stat: zk.Stat{Ctime: ctime}}
	}
	first := &JobState{Pointers: []*Pointer{ptr(5, 1000, true), ptr(6, 2500, true), ptr(7, 5000, true), ptr(8, 9000, false)}}
	after := &JobState{Pointers: []*Pointer{ptr(5, 1000, true)}}

	w := newWindow(nil)
	w.saw(first)
	w.saw(after) // the round after the retractions
	r := w.rollback(after, 5)
	if r == nil || r.Completed != 7 || r.Restored != 5 || r.Checkpoints != 2 || r.Seconds == nil || *r.Seconds != 4 {
		t.Errorf("window %+v; want 7 completed, 5 restored, 2 checkpoints, 4 s", r)
	}
	if r := w.rollback(first, 7); r == nil || r.Checkpoints != 0 || r.Seconds == nil || *r.Seconds != 0 {
		t.Errorf("restoring the newest: %+v", r)
	}
	if r := w.rollback(first, -1); r != nil {
		t.Errorf("nothing restored: %+v", r)
	}

	w = newWindow([]int64{3, 9}) // retracted by an earlier run
	w.saw(after)
	if r := w.rollback(after, 5); r == nil || r.Completed != 9 || r.Checkpoints != 4 || r.Seconds != nil {
		t.Errorf("with 9 retracted earlier: %+v; want 9 completed, 4 checkpoints, no seconds", r)
	}
}
