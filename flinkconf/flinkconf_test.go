package flinkconf

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestZooKeeperHAFixtures(t *testing.T) {
	cases := []struct {
		path    string
		format  Format
		want    ZooKeeperHA
		sources map[string]string // option key -> Source.String()
	}{
		{
			path:   "testdata/flink-1.4/flink-conf.yaml",
			format: Legacy,
			want: ZooKeeperHA{
				Quorum:   []string{"zk1.dc1.example:2181", "zk2.dc2.example:2181", "zk3.dc3.example:2182"},
				PathRoot: "/flink-prod", ClusterID: "/analytics", SessionTimeout: 30 * time.Second,
				StorageDir: "file:///flink/ha", CheckpointsDir: "file:///flink/checkpoints",
			},
			sources: map[string]string{
				HAType.Key:          "recovery.mode, the deprecated key of high-availability.type (line 6)",
				HAClusterID.Key:     "recovery.zookeeper.path.namespace, the deprecated key of high-availability.cluster-id (line 9)",
				CheckpointsDir.Key:  "state.backend.fs.checkpointdir, the deprecated key of execution.checkpointing.dir (line 14)",
				ZooKeeperRoot.Key:   "recovery.zookeeper.path.root, the deprecated key of high-availability.zookeeper.path.root (line 8)",
				HAStorageDir.Key:    "recovery.zookeeper.storageDir, the deprecated key of high-availability.storageDir (line 10)",
				ZooKeeperQuorum.Key: "recovery.zookeeper.quorum, the deprecated key of high-availability.zookeeper.quorum (line 7)",
			},
		},
		{
			path:   "testdata/flink-1.16/flink-conf.yaml",
			format: Legacy,
			want: ZooKeeperHA{
				Quorum: []string{"zk1.dc1.example:2181", "zk2.dc1.example:2181", "zk3.dc2.example:2181",
					"zk4.dc2.example:2181", "zk5.dc3.example:2181"},
				PathRoot: "/flink", ClusterID: "/orders", SessionTimeout: 45 * time.Second,
				StorageDir: "file:///flink/ha/", CheckpointsDir: "file:///flink/checkpoints",
				SavepointsDir: "file:///flink/savepoints",
			},
			sources: map[string]string{
				HAType.Key:         "high-availability, the deprecated key of high-availability.type (line 13)",
				HAStorageDir.Key:   "high-availability.storageDir (line 14)",
				ZooKeeperRoot.Key:  "Flink's default (high-availability.zookeeper.path.root is not set)",
				CheckpointsDir.Key: "state.checkpoints.dir, the deprecated key of execution.checkpointing.dir (line 25)",
			},
		},
		{
			path:   "testdata/flink-1.20/config.yaml",
			format: Standard,
			want: ZooKeeperHA{
				Quorum:   []string{"zk1.dc1.example:2181", "zk2.dc1.example:2181", "zk3.dc2.example:2181"},
				PathRoot: "/flink", ClusterID: "orders", SessionTimeout: 90 * time.Second,
				StorageDir: "file:///flink/ha", CheckpointsDir: "file:///flink/checkpoints",
				SavepointsDir: "file:///flink/savepoints",
			},
			sources: map[string]string{
				HAType.Key:                  "high-availability.type (line 11)",
				ZooKeeperRoot.Key:           "high-availability.zookeeper.path.root (line 17)",
				ZooKeeperSessionTimeout.Key: "high-availability.zookeeper.client.session-timeout (line 19)",
				CheckpointsDir.Key:          "execution.checkpointing.dir (line 25)",
			},
		},
		{
			path:   "testdata/flink-2.0/config.yaml",
			format: Standard,
			want: ZooKeeperHA{
				Quorum:   []string{"zk1.dc1.example:2181", "zk2.dc2.example:2181", "zk3.dc3.example:2181"},
				PathRoot: "/flink", ClusterID: "/default", SessionTimeout: time.Minute,
				StorageDir:     "hdfs://nn1.dc1.example:8020/flink/ha",
				CheckpointsDir: "hdfs://nn1.dc1.example:8020/flink/checkpoints",
			},
			sources: map[string]string{
				HAType.Key:         "high-availability.type (line 4)",
				HAClusterID.Key:    "Flink's default (high-availability.cluster-id is not set)",
				CheckpointsDir.Key: "execution.checkpointing.dir (line 10)",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			c, err := Load(tc.path, Auto)
			if err != nil {
				t.Fatal(err)
			}
			if c.Format != tc.format {
				t.Errorf("format %v, want %v", c.Format, tc.format)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings: %q", c.Warnings)
			}
			ha, err := c.ZooKeeperHA()
			if err != nil {
				t.Fatal(err)
			}
			got := *ha
			got.Sources = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			for key, want := range tc.sources {
				if s := ha.Sources[key].String(); s != want {
					t.Errorf("source of %s: %q, want %q", key, s, want)
				}
			}
		})
	}
}

// The two formats read the same bytes differently, as Flink does.
func TestLegacyAndStandardDiffer(t *testing.T) {
	data := []byte("a.quoted: \"x\"\nb.nospace:value\nc.comment: v # note\n\n: orphan\n")
	legacy, err := Parse("flink-conf.yaml", data, Auto)
	if err != nil {
		t.Fatal(err)
	}
	if legacy.Format != Legacy {
		t.Fatalf("format %v", legacy.Format)
	}
	for key, want := range map[string]string{"a.quoted": `"x"`, "c.comment": "v"} {
		if v, ok := legacy.Get(key); !ok || v.Value != want {
			t.Errorf("legacy %s = %q, want %q", key, v.Value, want)
		}
	}
	if _, ok := legacy.Get("b.nospace"); ok {
		t.Error("legacy: a line without ': ' was read")
	}
	if len(legacy.Warnings) != 2 || !strings.Contains(legacy.Warnings[0], ":2: not a key-value pair") || !strings.Contains(legacy.Warnings[1], ":5: key or value is empty") {
		t.Errorf("legacy warnings %q", legacy.Warnings)
	}

	std, err := Parse("config.yaml", []byte("a.quoted: \"x\"\nc:\n  comment: v # note\n  list: [1, 2]\n"), Auto)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a.quoted": "x", "c.comment": "v", "c.list": "[1, 2]"} {
		if v, ok := std.Get(key); !ok || v.Value != want {
			t.Errorf("standard %s = %q, want %q", key, v.Value, want)
		}
	}
}

func TestDeprecatedKeyOrderAndLastValue(t *testing.T) {
	// The current key wins over deprecated ones whatever the order; a key
	// given twice keeps its later value, with a warning.
	c, err := Parse("flink-conf.yaml", []byte(
		"state.checkpoints.dir: file:///old\n"+
			"execution.checkpointing.dir: file:///new\n"+
			"high-availability.zookeeper.quorum: a:1\n"+
			"high-availability.zookeeper.quorum: b:2\n"), Auto)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Lookup(CheckpointsDir); v.Value != "file:///new" || v.Line != 2 {
		t.Errorf("checkpoints dir %+v", v)
	}
	if v, _ := c.Lookup(ZooKeeperQuorum); v.Value != "b:2" || v.Line != 4 {
		t.Errorf("quorum %+v", v)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "also set on line 3") {
		t.Errorf("warnings %q", c.Warnings)
	}

	// In config.yaml a nested and a dotted spelling are the same key.
	c, err = Parse("config.yaml", []byte("high-availability.cluster-id: one\nhigh-availability:\n  cluster-id: two\n"), Auto)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Lookup(HAClusterID); v.Value != "two" || len(c.Warnings) != 1 {
		t.Errorf("cluster id %+v, warnings %q", v, c.Warnings)
	}
}

func TestLoadDirectory(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	std := "high-availability:\n  type: zookeeper\n"
	if err := os.WriteFile(filepath.Join(dir, StandardFileName), []byte(std), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, Auto)
	if err != nil || c.Format != Standard || filepath.Base(c.Path) != StandardFileName {
		t.Fatalf("%+v %v", c, err)
	}
	// With both files, Flink 1.x reads flink-conf.yaml and 2.x
	// config.yaml: the distribution beside the directory decides, and
	// without one Load refuses to guess.
	if err := os.WriteFile(filepath.Join(dir, LegacyFileName), []byte("high-availability: zookeeper\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = Load(dir, Auto); err == nil || !strings.Contains(err.Error(), "holds both") {
		t.Fatalf("both files, no distribution: %+v %v, want a refusal", c, err)
	}
	lib := filepath.Join(home, "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		jar  string
		want Format
	}{
		{"flink-dist_2.12-1.15.4.jar", Legacy},
		{"flink-dist-1.20.5.jar", Legacy},
		{"flink-dist-2.3.0.jar", Standard},
	} {
		jar := filepath.Join(lib, tc.jar)
		if err := os.WriteFile(jar, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err = Load(dir, Auto); err != nil || c.Format != tc.want {
			t.Fatalf("both files beside %s: %+v %v, want %v", tc.jar, c, err, tc.want)
		}
		os.Remove(jar)
	}
	// An explicit format overrides the name.
	if c, err = Load(filepath.Join(dir, LegacyFileName), Standard); err != nil || c.Format != Standard {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	complete := "high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: zk:2181\n" +
		"high-availability.storageDir: file:///flink/ha\nexecution.checkpointing.dir: file:///flink/checkpoints\n"
	cases := []struct {
		name, content string
		format        Format
		want          []string // substrings of the error
	}{
		{"notyaml.yaml", "high-availability:\n  type: [zookeeper\n", Auto, []string{"not YAML"}},
		{"list.yaml", "- a\n- b\n", Auto, []string{"not a Flink configuration"}},
		{"dup.yaml", "a:\n  b: 1\n  b: 2\n", Auto, []string{":3: duplicate key a.b (first on line 2)"}},
		{"binary.yaml", "\x00\x01\x02", Auto, []string{"not a text file"}},
		{"none.yaml", "high-availability.type: NONE\n", Auto, []string{`high availability is "NONE"`, "high-availability.type (line 1)"}},
		{"unset.yaml", "jobmanager.rpc.address: x\n", Auto, []string{`"NONE", from Flink's default`}},
		{"k8s.yaml", "high-availability:\n  type: kubernetes\n", Auto, []string{`"kubernetes"`}},
		{"missing.yaml", "high-availability.type: zookeeper\n", Auto, []string{
			"high-availability.zookeeper.quorum is not set",
			"neither high-availability.storageDir nor",
			"neither execution.checkpointing.dir nor state.checkpoints.dir nor state.backend.fs.checkpointdir is set"}},
		{"flink-conf.yaml", complete + "high-availability.zookeeper.path.root: /\n", Auto, []string{"path root is empty"}},
		{"relative.yaml", strings.Replace(complete, "file:///flink/checkpoints", "flink/checkpoints", 1), Auto, []string{`"flink/checkpoints" is not an absolute path`}},
		{"chroot.yaml", strings.Replace(complete, "zk:2181", "zk:2181/chroot", 1), Auto, []string{"chroot"}},
		{"port.yaml", strings.Replace(complete, "zk:2181", "zk:99999", 1), Auto, []string{`"zk:99999": want HOST[:PORT]`}},
		{"laughs.yaml", billionLaughs(), Auto, []string{"aliases expanding"}},
		{"timeout.yaml", complete + "high-availability.zookeeper.client.session-timeout: 10 fortnights\n", Auto, []string{"unknown time unit"}},
		{"quoted", strings.Replace(complete, "file:///flink/ha", `"file:///flink/ha"`, 1), Legacy, []string{`high-availability.storageDir (line 3): "file:///flink/ha": flink-conf.yaml keeps quotes`}},
		{"flink-conf.yaml", strings.Replace(complete, "zk:2181", `'zk:2181,zk2:2181'`, 1), Auto, []string{"keeps quotes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(tc.name, tc.content), tc.format)
			if err == nil {
				_, err = c.ZooKeeperHA()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "absent.yaml"), Auto); err == nil {
		t.Error("a missing file was accepted")
	}
	if _, err := Load(t.TempDir(), Auto); err == nil || !strings.Contains(err.Error(), "holds neither") {
		t.Errorf("empty directory: %v", err)
	}
	unreadable := write("unreadable.yaml", complete)
	if err := os.Chmod(unreadable, 0); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root reads anything
		if _, err := Load(unreadable, Auto); err == nil {
			t.Error("an unreadable file was accepted")
		}
	}
	big := write("big.yaml", strings.Repeat("#", MaxFileSize+1))
	if _, err := Load(big, Auto); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
}

// billionLaughs is a YAML document whose aliases double at every level.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("l0: &l0 {a: x, b: y}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {a: *l%d, b: *l%d}\n", i, i, i-1, i-1)
	}
	return b.String()
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"60000": time.Minute, "60 s": time.Minute, "1min": time.Minute, "1 MIN": time.Minute,
		"2h": 2 * time.Hour, "500ms": 500 * time.Millisecond, "3 seconds": 3 * time.Second, "1d": 24 * time.Hour,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "s", "-1s", "1 lightyear", "99999999999999999999", "9999999999999d"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/flink-1.16/flink-conf.yaml", "testdata/flink-1.20/config.yaml", "testdata/flink-2.0/config.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, p == "testdata/flink-1.16/flink-conf.yaml")
	}
	f.Fuzz(func(t *testing.T, data []byte, legacy bool) {
		format := Standard
		if legacy {
			format = Legacy
		}
		c, err := Parse("fuzz.yaml", data, format)
		if err != nil {
			return
		}
		c.ZooKeeperHA()
		c.ZooKeeperSecurity()
	})
}
