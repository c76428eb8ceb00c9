package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConfigCheckRunsEachCommandsValidation: config check refuses what
// the commands refuse, through their own validation, and the commands
// name the file and line of a bad value as config check does; values the
// command line may still give (backing, site) are not required of the
// file.
func TestConfigCheckRunsEachCommandsValidation(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		// cmd is a command that refuses the file, with its arguments.
		cmd  []string
		want string
	}{
		{"mode", "site: dc2\nmode: standby\n", []string{"mount", "/a", "/b"}, `:2: mode "standby": want replica or primary`},
		{"log format", "log-format: xml\n", []string{"mount", "/a", "/b"}, `:1: log-format "xml": want text or json`},
		{"log format of status", "zk: 127.0.0.1:1\nlog-format: xml\n", []string{"status"}, `:2: log-format "xml": want text or json`},
		{"log level", "log-level: verbose\n", []string{"mount", "/a", "/b"}, `:1: log-level "verbose": `},
		{"metrics address", "metrics-addr: 9477\n", []string{"mount", "/a", "/b"}, `:1: metrics-addr "9477": want HOST:PORT`},
		{"lag interval", "lag-interval: 1ms\n", []string{"mount", "/a", "/b"}, `:1: lag-interval 1ms is too short`},
		{"backing timeout of status", "zk: 127.0.0.1:1\nbacking-timeout: 1ms\n", []string{"status"}, `:2: backing-timeout 1ms is too short`},
		{"zk", "site: dc2\nzk: zk1:2181,\n", []string{"mount", "/a", "/b"}, `:2: zk "zk1:2181,": server 2 is empty`},
		{"path root", "zk: 127.0.0.1:1\npath-root: flink\n", []string{"status"}, `:2: path-root: "flink" is not an absolute ZooKeeper path`},
		{"flink version", "zk: 127.0.0.1:1\nflink-version: one\n", []string{"status"}, `:2: flink-version: Flink version "one"`},
		{"map", "map: [nodir]\n", []string{"verify", "DIR"}, `:1: map: mapping "nodir": want URI_PREFIX=LOCAL_DIR`},
		{"hidden", "hidden: ['[']\n", []string{"mount", "/a", "/b"}, `:1: hidden "[": syntax error in pattern`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.file)
			if _, stderr, code := ckptfs(t, "config", "check", "--config", file); code != exitUsage || !strings.Contains(stderr, file+tc.want) {
				t.Errorf("config check: exit %d, stderr %q; want 3 and %q", code, stderr, file+tc.want)
			}
			args := append([]string{tc.cmd[0], "--config", file}, tc.cmd[1:]...)
			for i, a := range args {
				if a == "DIR" {
					args[i] = dir
				}
			}
			r := runBinary(t, 15*time.Second, nil, args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, file+tc.want) {
				t.Errorf("%s: exit %d, stderr %q; want 3 and %q", tc.cmd[0], r.code, r.stderr, file+tc.want)
			}
		})
	}

	// The environment is named like a file line.
	if r := runBinary(t, 15*time.Second, []string{"CKPTFS_MODE=standby"}, "mount", "/a", "/b"); r.code != exitUsage || !strings.Contains(r.stderr, `CKPTFS_MODE: mode "standby": want replica or primary`) {
		t.Errorf("CKPTFS_MODE: exit %d, stderr %q", r.code, r.stderr)
	}

	// A file that leaves BACKING, MOUNTPOINT and site to the command line
	// is valid; so is zk with blanks.
	partial := writeFile(t, dir, "partial.yaml", "zk: zk1:2181, zk2:2181\nlease-duration: 30s\nmode: primary\n")
	out, stderr, code := ckptfs(t, "config", "check", "--config", partial)
	if code != exitOK || !regexp.MustCompile(`lease-duration +line 2 +used by mount`).MatchString(out) {
		t.Errorf("partial file: exit %d %s\n%s", code, stderr, out)
	}
	// With Flink's configuration, its retention and restart strategy
	// are checked too (issue 16): warnings with the keys, exit 0.
	flinkConf := writeFile(t, dir, "config.yaml", "execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION\nrestart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 3\n")
	if _, stderr, code := ckptfs(t, "config", "check", "--config", partial, "--flink-conf", flinkConf); code != exitOK ||
		!strings.Contains(stderr, "restart-strategy.fixed-delay.attempts 3") || !strings.Contains(stderr, "set restart-strategy.type: exponential-delay") || strings.Contains(stderr, "retention") {
		t.Errorf("--flink-conf: exit %d, stderr %q", code, stderr)
	}
	// With replication-mode strict, what it needs of Flink too.
	strict := writeFile(t, dir, "strict.yaml", "zk: zk1:2181\nmode: primary\nreplication-mode: strict\nsync-timeout: 30s\n")
	if _, stderr, code := ckptfs(t, "config", "check", "--config", strict, "--flink-conf", flinkConf); code != exitOK ||
		!strings.Contains(stderr, "tolerable-failed-checkpoints is 0, from Flink's default") || strings.Contains(stderr, "checkpoint timeout") {
		t.Errorf("--flink-conf with replication-mode strict: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := ckptfs(t, "config", "check", "--config", filepath.Join(dir, "absent.yaml")); code != exitUsage || !strings.Contains(stderr, "no such file") {
		t.Errorf("absent file: exit %d %s", code, stderr)
	}
}
