package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const flinkFixtures = "../../flinkconf/testdata"

// from-flink on both of Flink's formats: what it derives, why (the
// comments), and that every command takes the result as it is.
func TestConfigFromFlink(t *testing.T) {
	cases := []struct {
		fixture string
		want    map[string]any
		why     []string // comments the output must carry
	}{
		{
			fixture: "flink-1.16/flink-conf.yaml",
			want: map[string]any{
				"site": "dc2", "zk": "zk1.dc1.example:2181,zk2.dc1.example:2181,zk3.dc2.example:2181,zk4.dc2.example:2181,zk5.dc3.example:2181",
				"path-root": "/flink", "cluster-id": "/orders", "flink-session-timeout": "45s",
				"checkpoints-dir": []any{"file:///flink/checkpoints"}, "mountpoint": "/flink",
				"backing": "/mnt/nas", "map": []any{"file:///flink=/mnt/nas"},
			},
			why: []string{
				"read as flink-conf.yaml (flat key: value lines)",
				"path-root: /flink # Flink's default (high-availability.zookeeper.path.root is not set)",
				"checkpoints-dir: # state.checkpoints.dir, the deprecated key of execution.checkpointing.dir (line 25)",
			},
		},
		{
			fixture: "flink-1.4/flink-conf.yaml",
			want: map[string]any{
				"site": "dc2", "zk": "zk1.dc1.example:2181,zk2.dc2.example:2181,zk3.dc3.example:2182",
				"path-root": "/flink-prod", "cluster-id": "/analytics", "flink-session-timeout": "30s",
				"checkpoints-dir": []any{"file:///flink/checkpoints"}, "mountpoint": "/flink",
				"backing": "/mnt/nas", "map": []any{"file:///flink=/mnt/nas"},
			},
			why: []string{"# recovery.zookeeper.quorum, the deprecated key of high-availability.zookeeper.quorum (line 7)"},
		},
		{
			fixture: "flink-1.20/config.yaml",
			want: map[string]any{
				"site": "dc2", "zk": "zk1.dc1.example:2181,zk2.dc1.example:2181,zk3.dc2.example:2181",
				"path-root": "/flink", "cluster-id": "orders", "flink-session-timeout": "1m30s",
				"checkpoints-dir": []any{"file:///flink/checkpoints"}, "mountpoint": "/flink",
				"backing": "/mnt/nas", "map": []any{"file:///flink=/mnt/nas"},
			},
			why: []string{
				"read as config.yaml (standard YAML)",
				"cluster-id: orders # high-availability.cluster-id (line 13)",
				"# execution.checkpointing.dir (line 25)",
			},
		},
		{
			fixture: "flink-2.0/config.yaml",
			want: map[string]any{
				"site": "dc2", "zk": "zk1.dc1.example:2181,zk2.dc2.example:2181,zk3.dc3.example:2181",
				"path-root": "/flink", "cluster-id": "/default", "flink-session-timeout": "1m0s",
				"backing": "/mnt/nas", "checkpoints-dir": []any{"hdfs://nn1.dc1.example:8020/flink/checkpoints"},
				"map": []any{"hdfs://nn1.dc1.example:8020/flink=/mnt/nas"},
			},
			why: []string{
				"cluster-id: /default # Flink's default (high-availability.cluster-id is not set); on YARN and Kubernetes",
				"# Note: Flink writes to hdfs://nn1.dc1.example:8020/flink, not to a local directory",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			path := filepath.Join(flinkFixtures, tc.fixture)
			out, stderr, code := ckptfs(t, "config", "from-flink", "--backing", "/mnt/nas", "--site", "dc2", path)
			// Only 1.20's fixture retains checkpoints on cancellation; the
			// others are warned about it, and about nothing else.
			retention := "ckptfs: warning: checkpoint retention is NO_EXTERNALIZED_CHECKPOINTS, from Flink's default"
			wantStderr := retention
			if strings.HasPrefix(tc.fixture, "flink-1.20/") {
				wantStderr = ""
			}
			if code != 0 || !strings.HasPrefix(stderr, wantStderr) || strings.Count(stderr, "\n") > min(1, len(wantStderr)) {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got map[string]any
			if err := yaml.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v\n%s", got, tc.want, out)
			}
			for _, w := range tc.why {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			js, _, code := ckptfs(t, "config", "from-flink", "-o", "json", "--backing", "/mnt/nas", "--site", "dc2", path)
			var gotJSON map[string]any
			if err := json.Unmarshal([]byte(js), &gotJSON); code != 0 || err != nil || !reflect.DeepEqual(gotJSON, tc.want) {
				t.Errorf("json: exit %d, %v: %s", code, err, js)
			}

			// Every command takes the file as it is.
			conf := writeFile(t, t.TempDir(), "ckptfs.yaml", out)
			if _, stderr, code := ckptfs(t, "config", "check", "--config", conf); code != 0 {
				t.Errorf("config check: exit %d: %s", code, stderr)
			}
			if _, ok := tc.want["mountpoint"]; ok {
				cfg, stderr, code := mountSettings(t, "--config", conf)
				if code != 0 || cfg.Backing != "/mnt/nas" || cfg.MountPoint != tc.want["mountpoint"] || cfg.Site != "dc2" ||
					cfg.ZK != tc.want["zk"] || cfg.ClusterID != tc.want["cluster-id"] || cfg.PathRoot != tc.want["path-root"] ||
					len(cfg.Maps) != 1 || cfg.Maps[0] != tc.want["map"].([]any)[0] {
					t.Errorf("mount: exit %d %s: %+v", code, stderr, cfg)
				}
			}
			takeover, _, _ := newRoot(nil).Find([]string{"takeover"})
			if err := takeover.ParseFlags([]string{"--config", conf}); err != nil {
				t.Fatal(err)
			}
			if err := applySettings(takeover); err != nil {
				t.Fatal(err)
			}
			dirs, _ := takeover.Flags().GetStringArray("checkpoints-dir")
			timeout, _ := takeover.Flags().GetDuration("flink-session-timeout")
			want, _ := time.ParseDuration(tc.want["flink-session-timeout"].(string))
			if len(dirs) != 1 || dirs[0] != tc.want["checkpoints-dir"].([]any)[0] || timeout != want {
				t.Errorf("takeover: checkpoints-dir %q, flink-session-timeout %v", dirs, timeout)
			}
		})
	}
}

func TestConfigFromFlinkDirectoryAndTodo(t *testing.T) {
	// A conf directory with config.yaml only; no --backing or --site: the
	// output says what to add, and is still a valid file.
	home := t.TempDir()
	dir := filepath.Join(home, "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(flinkFixtures, "flink-1.20/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "config.yaml", string(data))
	out, stderr, code := ckptfs(t, "config", "from-flink", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"# To add:", "#   site: this site's name", "#   backing: where this site mounts", "#   map: [file:///flink=<backing>]"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "\nbacking:") || strings.Contains(out, "\nmap:") || strings.Contains(out, "\nsite:") {
		t.Errorf("output invents settings:\n%s", out)
	}
	conf := writeFile(t, t.TempDir(), "ckptfs.yaml", out)
	if _, stderr, code := ckptfs(t, "config", "check", "--config", conf); code != 0 {
		t.Errorf("config check: exit %d: %s", code, stderr)
	}

	// Lines Flink skips are warned about, on stderr only.
	legacy := writeFile(t, dir, "flink-conf.yaml", "high-availability: zookeeper\n"+
		"high-availability.zookeeper.quorum:zk1:2181\n"+ // no space: Flink skips it
		"high-availability.zookeeper.quorum: zk1:2181\n"+
		"high-availability.storageDir: file:///flink/ha\nstate.checkpoints.dir: file:///flink/checkpoints\n")
	out, stderr, code = ckptfs(t, "config", "from-flink", legacy)
	if code != 0 || !strings.Contains(stderr, "flink-conf.yaml:2: not a key-value pair") || strings.Contains(out, "not a key-value") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	// The directory now holds both files: Flink 1.x reads flink-conf.yaml,
	// 2.x config.yaml; with no distribution beside it to tell, refused.
	if _, stderr, code := ckptfs(t, "config", "from-flink", dir); code != 3 || !strings.Contains(stderr, "holds both") {
		t.Errorf("directory with both files, no distribution: exit %d, %s", code, stderr)
	}
	if err := os.Mkdir(filepath.Join(home, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, "lib"), "flink-dist-1.20.5.jar", "")
	if out, _, _ := ckptfs(t, "config", "from-flink", dir); !strings.Contains(out, "read as flink-conf.yaml") {
		t.Errorf("directory lookup beside Flink 1.20.5:\n%s", out)
	}
}

func TestConfigFromFlinkBadInput(t *testing.T) {
	dir := t.TempDir()
	complete := "high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: zk1:2181\n" +
		"high-availability.storageDir: file:///flink/ha\nexecution.checkpointing.dir: file:///flink/checkpoints\n"
	// A conf directory whose flink-conf.yaml cannot be read (root reads
	// any file, but not a directory).
	unreadable := filepath.Join(dir, "unreadable")
	if err := os.MkdirAll(filepath.Join(unreadable, "flink-conf.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{filepath.Join(dir, "absent.yaml")}, "no such file"},
		{"unreadable", []string{unreadable}, "is a directory"},
		{"not yaml", []string{writeFile(t, dir, "config.yaml", "high-availability:\n  type: zookeeper\n quorum\n")}, "not YAML"},
		{"binary", []string{writeFile(t, dir, "bin.yaml", "\x7fELF\x02\x01\x01\x00\x00")}, "not a text file"},
		{"ha none", []string{writeFile(t, dir, "none.yaml", "high-availability:\n  type: NONE\n")}, `high availability is "NONE", from high-availability.type (line 2)`},
		{"ha kubernetes", []string{writeFile(t, dir, "k8s.yaml", "high-availability.type: kubernetes\n")}, `high availability is "kubernetes"`},
		{"ha unset", []string{writeFile(t, dir, "unset.yaml", "rest.port: 8081\n")}, `"NONE", from Flink's default (high-availability.type is not set)`},
		{"no checkpoint dir", []string{writeFile(t, dir, "nochk.yaml", strings.Replace(complete, "execution.checkpointing.dir", "execution.checkpointing.interval", 1))},
			"neither execution.checkpointing.dir nor state.checkpoints.dir"},
		{"no common directory", []string{writeFile(t, dir, "apart.yaml", strings.Replace(complete, "file:///flink/ha", "file:///ha", 1))},
			"share no directory"},
		{"different file systems", []string{writeFile(t, dir, "mixed.yaml", strings.Replace(complete, "file:///flink/ha", "hdfs://nn:8020/flink/ha", 1))},
			"share no directory"},
		{"relative backing", []string{"--backing", "nas", writeFile(t, dir, "ok.yaml", complete)}, `--backing "nas" must be an absolute path`},
		{"backing in the mountpoint", []string{"--backing", "/flink/nas", filepath.Join(dir, "ok.yaml")}, "must not contain each other"},
		{"bad output", []string{"-o", "xml", filepath.Join(dir, "ok.yaml")}, `output format "xml"`},
		{"bad format", []string{"--format", "toml", filepath.Join(dir, "ok.yaml")}, `format "toml"`},
		{"no argument", nil, "accepts 1 arg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := ckptfs(t, append([]string{"config", "from-flink"}, tc.args...)...)
			if code != exitUsage || out != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 3 and %q", code, out, stderr, tc.want)
			}
		})
	}
}
