package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// docCommands are the commands docs/runbook.md and docs/deploy.md give,
// in order: each line of a fenced block and each inline code span,
// with blanks collapsed and a trailing comment dropped.
func docCommands(t *testing.T, doc string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("(?ms)^[ \t]*```[a-z]*\n(.*?)^[ \t]*```")
	span := regexp.MustCompile("`([^`]+)`")
	var out []string
	add := func(s string) {
		if i := strings.Index(s, " #"); i >= 0 {
			s = s[:i]
		}
		if s = strings.Join(strings.Fields(s), " "); s != "" {
			out = append(out, s)
		}
	}
	text := string(data)
	for len(text) > 0 {
		loc := fence.FindStringSubmatchIndex(text)
		prose := text
		if loc != nil {
			prose = text[:loc[0]]
		}
		for _, m := range span.FindAllStringSubmatch(prose, -1) {
			add(m[1])
		}
		if loc == nil {
			break
		}
		for _, line := range strings.Split(text[loc[2]:loc[3]], "\n") {
			add(line)
		}
		text = text[loc[1]:]
	}
	return out
}

// TestDocZooKeeperCommands runs, as written, the commands the runbook and
// deploy.md give for a new cluster beside another and for cleaning up
// after it, against a real ZooKeeper: ckptfs's and ZooKeeper's client's,
// which the runbook names by its full path with a server ($ZKCLI). So
// the documentation cannot rot. (Issue 31: the runbook's `zkCli.sh
// create /flink/<id>` failed where /flink did not exist, and zkCli.sh is
// not on PATH with Debian's package.)
func TestDocZooKeeperCommands(t *testing.T) {
	var zkcli string
	var commands []string
	for _, doc := range []string{"runbook.md", "deploy.md"} {
		for _, c := range docCommands(t, doc) {
			if def, ok := strings.CutPrefix(c, "ZKCLI="); ok {
				zkcli = strings.Trim(def, `"`)
				continue
			}
			// Only zkCli's full path, with a server, runs as written.
			for _, m := range regexp.MustCompile(`\S*zkCli\.sh(?: -server \S+)?`).FindAllString(c, -1) {
				if !strings.HasPrefix(m, "/usr/share/zookeeper/bin/zkCli.sh -server ") {
					t.Errorf("%s: %q: name ZooKeeper's client by its full path, with -server", doc, c)
				}
			}
			if strings.Contains(c, "<") {
				continue // a placeholder
			}
			if strings.HasPrefix(c, "ckptfs takeover --new-cluster") || strings.HasPrefix(c, "$ZKCLI ") {
				commands = append(commands, c)
			}
		}
	}
	t.Logf("commands: %q", commands)
	for _, want := range []string{"ckptfs takeover --new-cluster --dry-run", "ckptfs takeover --new-cluster", "$ZKCLI deleteall /flink/orders", "$ZKCLI deleteall /ckptfs/orders"} {
		if !strings.Contains(strings.Join(commands, "\n")+"\n", want+"\n") {
			t.Fatalf("the docs no longer give %q: update this test with them", want)
		}
	}
	if zkcli == "" {
		t.Fatal(`the runbook defines no ZKCLI="..."`)
	}

	// DC1's cluster /orders ran under the path root /flink; /orders-2 is
	// new (runbook: "Start the job from the checkpoint DC2 holds, as a
	// new cluster").
	c := zktest.StartCluster(t, 1)
	client := zktest.Connect(t, c.Servers())
	for _, p := range []string{"/flink", "/flink/orders", "/flink/orders/jobs", "/ckptfs", "/ckptfs/orders", "/ckptfs/orders/sites"} {
		if _, err := client.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	conf := writeFile(t, dir, "ckptfs.yaml", "zk: "+c.ConnectString()+"\nsite: dc2\ncluster-id: /orders-2\nwait: 0s\nzk-acl: [open]\n")
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	if err := os.Symlink(binary, filepath.Join(bin, "ckptfs")); err != nil {
		t.Fatal(err)
	}
	zkcli = regexp.MustCompile(`-server \S+`).ReplaceAllString(zkcli, "-server "+c.ConnectString())
	if _, err := os.Stat(strings.Fields(zkcli)[0]); err != nil && os.Getenv(zktest.EnvRequire) != "1" {
		t.Logf("no ZooKeeper client (%v): its commands are skipped", err)
		zkcli = ""
	}
	for _, cmdline := range commands {
		if strings.HasPrefix(cmdline, "$ZKCLI") && zkcli == "" {
			continue
		}
		sh := exec.Command("sh", "-c", strings.ReplaceAll(cmdline, "/etc/ckptfs/ckptfs.yaml", conf))
		sh.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CKPTFS_CONFIG="+conf, "ZKCLI="+zkcli)
		var out bytes.Buffer
		sh.Stdout, sh.Stderr = &out, &out
		start := time.Now()
		err := sh.Run()
		t.Logf("$ %s (%v)\n%s", cmdline, time.Since(start).Round(time.Millisecond), out.String())
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmdline, err, out.String())
		}
		if cmdline == "ckptfs takeover --new-cluster --dry-run" {
			if ok, _, _ := client.Exists("/flink/orders-2"); ok || !strings.Contains(out.String(), "would create the empty namespace /flink/orders-2 of a new cluster") {
				t.Errorf("the dry run: namespace created %v\n%s", ok, out.String())
			}
		}
	}
	if ok, _, err := client.Exists("/flink/orders-2"); !ok || err != nil {
		t.Errorf("/flink/orders-2: %v, %v; want the new cluster's namespace", ok, err)
	}
	if data, _, err := client.Get("/ckptfs/orders-2/active-site"); err != nil || string(data) != "dc2" {
		t.Errorf("active-site of /orders-2: %q, %v; want dc2", data, err)
	}
	if zkcli != "" {
		for _, p := range []string{"/flink/orders", "/ckptfs/orders"} {
			if ok, _, _ := client.Exists(p); ok {
				t.Errorf("%s is still there after the runbook's deleteall", p)
			}
		}
	}
}
