package realflink

import (
	"archive/zip"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/flinkconf"
)

// TestConfigLoaderMatchesFlink holds flinkconf, the reader behind
// `ckptfs config from-flink` and `config check`, against Flink's own
// GlobalConfiguration.loadConfiguration, per release: the configuration
// file the release ships (from its flink-dist jar), that file with a
// site's HA settings added as a user would add them, and files written to
// hit the corners of both syntaxes. Every key Flink reads must be read,
// with the value a string option of Flink's gets, and nothing else; a
// directory Flink refuses must be refused.
func TestConfigLoaderMatchesFlink(t *testing.T) {
	for _, r := range releasesPresent(t) {
		t.Run(r.Version, func(t *testing.T) {
			d := FindDist(t, r)
			jar := JobJar(t, d)
			dirs := confVariants(t, d)
			names := make([]string, 0, len(dirs))
			paths := make([]string, 0, len(dirs))
			for name, dir := range dirs {
				names = append(names, name)
				paths = append(paths, dir)
			}
			flink := dumpFlinkConf(t, d, jar, paths)
			for i, name := range names {
				want, ok := flink[paths[i]]
				if !ok {
					t.Errorf("%s: Flink's loader printed nothing", name)
					continue
				}
				ours, err := flinkconf.Load(paths[i], flinkconf.Auto)
				t.Logf("%s: Flink read %d keys, error %q; flinkconf: %v", name, len(want.values), want.err, err)
				switch {
				case want.err != "" && err == nil:
					t.Errorf("%s: Flink refuses the directory (%s); flinkconf read it", name, want.err)
					continue
				case want.err != "":
					continue
				case err != nil:
					t.Errorf("%s: flinkconf refuses what Flink reads: %v", name, err)
					continue
				}
				got := map[string]string{}
				for _, k := range ours.Keys() {
					v, _ := ours.Get(k)
					got[k] = v.Value
				}
				for k, fv := range want.values {
					if gv, ok := got[k]; !ok {
						t.Errorf("%s: Flink reads %s = %q; flinkconf has no such key", name, k, fv)
					} else if gv != fv {
						t.Errorf("%s: %s is %q for Flink, %q for flinkconf", name, k, fv, gv)
					}
				}
				for k, gv := range got {
					if _, ok := want.values[k]; !ok {
						t.Errorf("%s: flinkconf reads %s = %q; Flink has no such key", name, k, gv)
					}
				}
				if len(want.values) < 3 {
					t.Errorf("%s: Flink read only %d keys: the variant tests nothing", name, len(want.values))
				}
			}
		})
	}
}

// releasesPresent are the releases make test runs, and any other that
// runs here and is in the cache already.
func releasesPresent(t *testing.T) []Release {
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	var out []Release
	for _, r := range all {
		switch r.Use {
		case "test":
			out = append(out, r)
		case "runs":
			sum, err := os.ReadFile(filepath.Join(cacheDir(), "flink", "dist", r.Version, ".sha256"))
			if err == nil && strings.TrimSpace(string(sum)) == r.SHA256 {
				out = append(out, r)
			}
		}
	}
	return out
}

type flinkConf struct {
	values map[string]string
	err    string
}

// dumpFlinkConf runs ConfDump (job/src) on the directories, in one JVM.
func dumpFlinkConf(t *testing.T, d Dist, jar string, dirs []string) map[string]flinkConf {
	t.Helper()
	cp, err := d.Classpath()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(d.Java, append([]string{"-cp", jar + ":" + cp, "ckptfs.seqjob.ConfDump"}, dirs...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ConfDump: %v\n%s", err, tail(stderr.String(), 20))
	}
	out := map[string]flinkConf{}
	var dir string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "@confdump ")
		if !ok {
			continue // Flink's logging
		}
		switch {
		case strings.HasPrefix(line, "dir "):
			dir = strings.TrimPrefix(line, "dir ")
			out[dir] = flinkConf{values: map[string]string{}}
		case line == "end":
		case strings.HasPrefix(line, "error\t"):
			c := out[dir]
			c.err = unescapeConf(strings.TrimPrefix(line, "error\t"))
			out[dir] = c
		default:
			k, v, ok := strings.Cut(line, "\t")
			if !ok || dir == "" {
				t.Fatalf("ConfDump printed %q", line)
			}
			out[dir].values[unescapeConf(k)] = unescapeConf(v)
		}
	}
	return out
}

func unescapeConf(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\r`, "\r").Replace(s)
}

// shippedConf is the configuration file the release ships, as its
// flink-dist jar carries it: config.yaml from 1.19, flink-conf.yaml before.
func shippedConf(t *testing.T, d Dist) (name string, data []byte) {
	t.Helper()
	jars, _ := filepath.Glob(filepath.Join(d.Home, "lib", "flink-dist*.jar"))
	if len(jars) != 1 {
		t.Fatalf("want one flink-dist jar in %s, found %v", filepath.Join(d.Home, "lib"), jars)
	}
	z, err := zip.OpenReader(jars[0])
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, want := range []string{flinkconf.StandardFileName, flinkconf.LegacyFileName} {
		for _, f := range z.File {
			if f.Name != want {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			return want, data
		}
	}
	t.Fatalf("%s carries neither %s nor %s", jars[0], flinkconf.StandardFileName, flinkconf.LegacyFileName)
	return "", nil
}

// Site settings as the deploy guide has users add them, and the corners
// of each syntax.
const (
	haStandard = `
high-availability.type: zookeeper
high-availability.zookeeper.quorum: zk1.dc1:2181,zk2.dc2:2181,zk3.dc3:2181
high-availability.zookeeper.path.root: /flink
high-availability.cluster-id: /prod-cluster
high-availability.storageDir: file:///flink/ha
state.checkpoints.dir: file:///flink/checkpoints
execution.checkpointing.num-retained: 3
`
	haLegacy = `
high-availability: zookeeper
high-availability.zookeeper.quorum: zk1.dc1:2181,zk2.dc2:2181,zk3.dc3:2181
high-availability.zookeeper.path.root: /flink
high-availability.cluster-id: /prod-cluster
high-availability.storageDir: file:///flink/ha
state.checkpoints.dir: file:///flink/checkpoints
state.checkpoints.num-retained: 3
`
	cornersStandard = `# nested, dotted and mixed keys
high-availability:
  type: zookeeper
  zookeeper:
    quorum: "zk1:2181,zk2:2181"   # a comment after a quoted value
    path.root: /flink/root
    client:
      session-timeout: 60000
  storageDir: 'file:///nas/ha'
high-availability.cluster-id: /prod
state.checkpoints.dir: file:///nas/checkpoints#not-a-comment
execution.checkpointing.interval: 10 s
corner.int.hex: 0x1F
corner.int.octal: 0o17
corner.int.plus: +12
corner.int.zeros: 007
corner.int.underscore: 1_000
corner.int.big: 123456789012345678901234567890
corner.tagged: !!str 12
corner.inf: -.inf
corner.nan: .NaN
corner.float: 1.5e3
corner.float.dot: .5
corner.bool.capital: True
corner.bool.yes: yes
corner.emptyquoted: ""
corner.list.flow: [a, 'b c', "d,e"]
corner.list.typed: [1, '2', true, 0x10, 1.5e3, "x y", "a: b", 'it''s', "", ~, "tab\there"]
corner.list.nested: [[a, b], {k: v, n: 1}]
corner.list.block:
  - x
  - 2
corner.literal: |
  line1
  line2
corner.folded: >
  a
  b
corner.escaped: "a\tb\u00e9"
corner.anchor: &anc /shared/path
corner.alias: *anc
corner.spaces:    padded value   
`
	cornersLegacy = `# flat lines, as flink-conf.yaml
high-availability: zookeeper
high-availability.zookeeper.quorum: zk1:2181,zk2:2181 # a comment
high-availability.cluster-id: "/quoted"
 high-availability.storageDir :   file:///nas/ha   
state.checkpoints.dir:file:///missing-space
corner.colon: a: b
corner.empty: 
corner.hash: a#b
corner.tab:	tabbed
: no key
corner.repeated: first
corner.repeated: second
corner.yaml.list: [a, b]
`
)

// confVariants writes the configuration directories a release reads.
func confVariants(t *testing.T, d Dist) map[string]string {
	t.Helper()
	root := t.TempDir()
	dirs := map[string]string{}
	write := func(name string, files map[string]string) {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, data := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirs[name] = dir
	}
	name, shipped := shippedConf(t, d)
	write("shipped", map[string]string{name: string(shipped)})
	standard := d.AtLeast(1, 19)
	legacy := !d.AtLeast(2, 0)
	if standard {
		write("shipped+ha", map[string]string{name: string(shipped) + haStandard})
		write("corners-config.yaml", map[string]string{flinkconf.StandardFileName: cornersStandard})
		// Not YAML: both must refuse it.
		write("invalid-config.yaml", map[string]string{flinkconf.StandardFileName: "a.b: c\ncorner.colon: a: b\n"})
		// A key without a value: Flink refuses the whole file.
		write("null-config.yaml", map[string]string{flinkconf.StandardFileName: "a.b: c\na:\n  c: ~\n"})
		write("empty-config.yaml", map[string]string{flinkconf.StandardFileName: "a.b: c\ncorner.empty:\n"})
	}
	if legacy {
		write("corners-flink-conf.yaml", map[string]string{flinkconf.LegacyFileName: cornersLegacy})
		if name == flinkconf.LegacyFileName {
			write("shipped+ha", map[string]string{name: string(shipped) + haLegacy})
		}
	}
	// A directory with both files, as a migration leaves it, in a Flink
	// home whose lib/ holds the release's flink-dist jar.
	write("both-files/conf", map[string]string{
		flinkconf.LegacyFileName:   haLegacy + "origin: flink-conf.yaml\n",
		flinkconf.StandardFileName: haStandard + "origin: config.yaml\n",
	})
	jars, _ := filepath.Glob(filepath.Join(d.Home, "lib", "flink-dist*.jar"))
	if err := os.MkdirAll(filepath.Join(root, "both-files", "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, j := range jars {
		if err := os.Symlink(j, filepath.Join(root, "both-files", "lib", filepath.Base(j))); err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < 3 {
		t.Fatal(fmt.Sprintf("only %d variants for %s", len(dirs), d.Version))
	}
	return dirs
}
