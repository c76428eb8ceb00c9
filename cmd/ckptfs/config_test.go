package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// mountSettings runs `ckptfs mount args...` in-process and returns the
// configuration the daemon would have been given, stderr and the exit
// code.
func mountSettings(t *testing.T, args ...string) (*mountConfig, string, int) {
	t.Helper()
	var got *mountConfig
	root := newRoot(func(_ *cobra.Command, cfg *mountConfig) error {
		c := *cfg
		got = &c
		return nil
	})
	var stderr bytes.Buffer
	code := run(root, append([]string{"mount"}, args...), &bytes.Buffer{}, &stderr)
	if code == 0 && got == nil {
		t.Fatal("mount succeeded without reaching the daemon")
	}
	return got, stderr.String(), code
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Flags win over the environment, the environment over the file, the
// file over defaults; for every kind of setting.
func TestSettingsPrecedence(t *testing.T) {
	file := writeFile(t, t.TempDir(), "ckptfs.yaml", `
backing: /nas
mountpoint: /flink
mode: primary        # file only
site: from-file      # file, environment and flag
poll: 5s             # file and environment
map: [/flink=/nas, "hdfs://nn/x=/nas/x"]
hidden: "*.tmp"      # a single value for a list
zk: zk1:2181
lease-duration: 9s
passthrough: false
cluster-id: ~        # null: the default
`)
	t.Setenv("CKPTFS_SITE", "from-env")
	t.Setenv("CKPTFS_POLL", "7s")
	t.Setenv("CKPTFS_ROOT", "/r1, /r2")
	t.Setenv("CKPTFS_LOG_LEVEL", "") // empty counts as unset
	t.Setenv(mounttest.LeaseEnv, "")
	cfg, stderr, code := mountSettings(t, "--config", file, "--site", "from-flag")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := defaultMountConfig()
	want.Backing, want.MountPoint, want.Mode = "/nas", "/flink", "primary"
	want.Site, want.Poll = "from-flag", 7*time.Second
	want.Maps, want.Hidden, want.Roots = []string{"/flink=/nas", "hdfs://nn/x=/nas/x"}, []string{"*.tmp"}, []string{"/r1", "/r2"}
	want.ZK, want.LeaseDuration, want.Passthrough = "zk1:2181", 9*time.Second, false
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("got  %+v\nwant %+v", *cfg, want)
	}

	// Arguments win over the backing and mountpoint settings; the file
	// comes from $CKPTFS_CONFIG when --config is absent.
	t.Setenv("CKPTFS_CONFIG", file)
	t.Setenv("CKPTFS_MAP", "/a=/b")
	cfg, stderr, code = mountSettings(t, "/other", "/mnt")
	if code != 0 || cfg.Backing != "/other" || cfg.MountPoint != "/mnt" || cfg.Site != "from-env" || !reflect.DeepEqual(cfg.Maps, []string{"/a=/b"}) {
		t.Errorf("exit %d %s: %+v", code, stderr, cfg)
	}
	// A repeated flag replaces the file's list rather than adding to it.
	cfg, _, _ = mountSettings(t, "--map", "/c=/d", "--map", "/e=/f")
	if !reflect.DeepEqual(cfg.Maps, []string{"/c=/d", "/e=/f"}) {
		t.Errorf("maps %q", cfg.Maps)
	}
}

func TestSettingsErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		env        map[string]string
		args       []string
		want       string
	}{
		{name: "unknown key", file: "backing: /nas\nmountpiont: /flink\n", want: `:2: unknown key "mountpiont" (did you mean "mountpoint"?)`},
		{name: "unknown key, no suggestion", file: "metrics-adress-of-doom: x\n", want: `:1: unknown key "metrics-adress-of-doom"` + "\n"},
		{name: "bad duration", file: "backing: /a\nmountpoint: /b\npoll: 5x\n", want: `:3: poll: invalid value "5x"`},
		{name: "list for one value", file: "mode: [primary]\n", want: ":1: mode: want one value, not a list"},
		{name: "mapping", file: "map:\n  a: b\n", want: ":1: map: want a value or a list of values"},
		{name: "bad bool", file: "passthrough: yes\n", want: `:1: passthrough: invalid value "yes"`},
		{name: "retired key", file: "lease: true\n", want: `:1: lease is retired: with zk every mount holds its site's lease (lease-duration`},
		{name: "repeated key", file: "mode: primary\nmode: replica\n", want: `:2: key "mode" repeats line 1`},
		{name: "not a mapping", file: "- mode\n", want: ":1: want a mapping of settings"},
		{name: "not yaml", file: "mode: [\n", want: "yaml:"},
		{name: "two documents", file: "mode: primary\n---\nmode: replica\n", want: "more than one YAML document"},
		{name: "env", env: map[string]string{"CKPTFS_POLL": "soon"}, args: []string{"/a", "/b"}, want: `CKPTFS_POLL: poll: invalid value "soon"`},
		{name: "validation", args: []string{"--mode", "fenced", "/a", "/b"}, want: `mode "fenced": want replica or primary`},
		{name: "validation of a file value", file: "log-format: xml\n", args: []string{"/a", "/b"}, want: `log-format "xml": want text or json`},
		{name: "one argument", args: []string{"/a"}, want: "want BACKING and MOUNTPOINT, or neither"},
		{name: "missing file", args: []string{"--config", filepath.Join(dir, "absent.yaml")}, want: "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)}, args...)
			}
			_, stderr, code := mountSettings(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 3 and %q", code, stderr, tc.want)
			}
		})
	}
}

// The file is shared: a key of another command is accepted and left to
// it, and the renamed key roots still works.
func TestSettingsSharedFile(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "shared.yaml", "backing: /nas\nmountpoint: /flink\nwait: 3m\nflink-session-timeout: 30s\nroots: [/old]\n")
	cfg, stderr, code := mountSettings(t, "--config", file)
	if code != 0 || !reflect.DeepEqual(cfg.Roots, []string{"/old"}) {
		t.Fatalf("exit %d %s: %+v", code, stderr, cfg)
	}

	// takeover takes wait, and counts it as given (its default is
	// computed when the flag is not given).
	root := newRoot(nil)
	takeover, _, err := root.Find([]string{"takeover"})
	if err != nil {
		t.Fatal(err)
	}
	if err := takeover.ParseFlags([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	if err := applySettings(takeover); err != nil {
		t.Fatal(err)
	}
	if w, _ := takeover.Flags().GetDuration("wait"); w != 3*time.Minute || !takeover.Flags().Changed("wait") {
		t.Errorf("wait %v, changed %v", w, takeover.Flags().Changed("wait"))
	}
	if d, _ := takeover.Flags().GetDuration("flink-session-timeout"); d != 30*time.Second {
		t.Errorf("flink-session-timeout %v", d)
	}
	if r, _ := takeover.Flags().GetStringArray("root"); !reflect.DeepEqual(r, []string{"/old"}) {
		t.Errorf("root %q", r)
	}
	// Per-run flags are not settings.
	if f := takeover.Flags().Lookup("dry-run"); isSetting(f) {
		t.Error("dry-run is a setting")
	}
}

// A key means the same thing to every command that uses it, and its
// environment variable is its own.
func TestSettingsAgreeAcrossCommands(t *testing.T) {
	root := newRoot(nil)
	types := map[string]string{}
	envs := map[string]string{}
	for _, c := range settingCommands(root) {
		for _, f := range commandSettings(c) {
			if typ, ok := types[f.Name]; ok && typ != f.Value.Type() {
				t.Errorf("%s: --%s is %s, elsewhere %s", c.Name(), f.Name, f.Value.Type(), typ)
			}
			types[f.Name] = f.Value.Type()
			if other, ok := envs[settingEnv(f.Name)]; ok && other != f.Name {
				t.Errorf("%s and %s share %s", f.Name, other, settingEnv(f.Name))
			}
			envs[settingEnv(f.Name)] = f.Name
		}
	}
	for _, name := range []string{"zk", "site", "cluster-id", "path-root", "map", "root", "checkpoints-dir", "wait", "backing", "mountpoint", "mode"} {
		if _, ok := types[name]; !ok {
			t.Errorf("%s is not a setting", name)
		}
	}
	if got := settingEnv("cluster-id"); got != "CKPTFS_CLUSTER_ID" {
		t.Errorf("env %s", got)
	}
	// The harness's own variables are not settings.
	for _, env := range []string{"CKPTFS_REQUIRE_ZK", "CKPTFS_READY_FD", "CKPTFS_FLINK_TESTDATA", configEnv} {
		if name, ok := envs[env]; ok {
			t.Errorf("%s is the variable of setting %s", env, name)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "zk: zk1:2181\nsite: dc2\nwait: 2m\nmap: [/flink=/nas]\n")
	out, stderr, code := ckptfs(t, "config", "check", "--config", good)
	if code != 0 || !strings.Contains(out, "4 keys, valid") || !strings.Contains(out, "wait") || !regexp.MustCompile(`map +line 4 +used by mount, restore-pruned, status, takeover, verify`).MatchString(out) {
		t.Errorf("exit %d %s\n%s", code, stderr, out)
	}
	bad := writeFile(t, dir, "bad.yaml", "zk: zk1:2181\nwait: later\n")
	if _, stderr, code := ckptfs(t, "config", "check", "--config", bad); code != 3 || !strings.Contains(stderr, `bad.yaml:2: wait: invalid value "later"`) {
		t.Errorf("exit %d %s", code, stderr)
	}
	if _, stderr, code := ckptfs(t, "config", "check"); code != 3 || !strings.Contains(stderr, "no configuration file") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if _, stderr, code := ckptfs(t, "config", "chekc"); code != 3 || !strings.Contains(stderr, `unknown command "chekc"`) {
		t.Errorf("exit %d %s", code, stderr)
	}
}

// TestExampleConfigFences (issue 29): the repository's example
// configuration, on a primary, gives a daemon that fences itself when it
// is cut off. Before issue 29 it set neither lease nor lease-duration, so
// a primary cut off from ZooKeeper stayed writable for good, and config
// check said nothing.
func TestExampleConfigFences(t *testing.T) {
	t.Setenv(mounttest.LeaseEnv, "")
	cfg, stderr, code := mountSettings(t, "--config", filepath.Join("..", "..", "deploy", "ckptfs.yaml"), "--mode", "primary")
	if code != 0 {
		t.Fatalf("the example configuration: exit %d: %s", code, stderr)
	}
	d, err := cfg.daemonConfig(slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.ZooKeeper == nil || d.ZooKeeper.LeaseDuration != 20*time.Second || d.Watchdog == nil {
		t.Fatalf("the example configuration's daemon: zk %v, watchdog %v: want the lease (20s) and a watchdog", d.ZooKeeper, d.Watchdog)
	}
}
