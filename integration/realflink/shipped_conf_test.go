//go:build linux

package realflink

import (
	"archive/zip"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/flinkconf"
)

// shippedConfig returns the conf/config.yaml a release ships: the
// distribution's flink-dist jar carries it (the PyPI packages have no
// conf/ directory).
func shippedConfig(t *testing.T, d Dist) []byte {
	t.Helper()
	jars, _ := filepath.Glob(filepath.Join(d.Home, "lib", "flink-dist*.jar"))
	if len(jars) != 1 {
		t.Fatalf("Flink %s: want one flink-dist jar, found %v", d.Version, jars)
	}
	z, err := zip.OpenReader(jars[0])
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	f, err := z.Open("config.yaml")
	if err != nil {
		t.Fatalf("Flink %s: %s holds no config.yaml: %v", d.Version, jars[0], err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// uncommentHA does what the shipped file tells a user to do to turn on
// ZooKeeper high availability and a checkpoint directory: it removes the
// "# " before the high-availability block's settings and before the
// checkpoint directory's line and its parents (state.checkpoints.dir in
// 1.19 and 1.20, execution.checkpointing.dir in 2.x), keeping the comments
// inside them, and puts a port where the file has the word port.
func uncommentHA(t *testing.T, data []byte) []byte {
	t.Helper()
	lines := strings.Split(string(data), "\n")
	setting := regexp.MustCompile(`^# ( *)([A-Za-z-]+):(.*)$`)
	uncomment := func(i int) {
		m := setting.FindStringSubmatch(lines[i])
		lines[i] = m[1] + m[2] + ":" + strings.Replace(m[3], ":port/", ":8020/", 1)
	}
	found := map[string]bool{}
	inHA := false
	for i, l := range lines {
		switch {
		case l == "# high-availability:":
			inHA = true
		case inHA && !strings.HasPrefix(l, "# "):
			inHA = false
		}
		m := setting.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if inHA {
			found[m[2]] = true
			uncomment(i)
			continue
		}
		if m[2] != "dir" {
			continue
		}
		// The parents: the nearest commented settings less indented.
		chain, indent := []int{i}, len(m[1])
		for j := i - 1; j >= 0 && indent > 0; j-- {
			if p := setting.FindStringSubmatch(lines[j]); p != nil && len(p[1]) < indent {
				chain, indent = append(chain, j), len(p[1])
			}
		}
		if len(chain) != 3 || indent != 0 {
			continue
		}
		parent := setting.FindStringSubmatch(lines[chain[1]])[2]
		if parent != "checkpoints" && parent != "checkpointing" {
			continue
		}
		for _, j := range chain {
			uncomment(j)
		}
		found["checkpoint dir"] = true
	}
	for _, k := range []string{"high-availability", "storageDir", "quorum", "checkpoint dir"} {
		if !found[k] {
			t.Fatalf("the shipped config.yaml has no commented %s to turn on", k)
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// TestShippedConfigYAML reads the config.yaml each release ships (1.19 and
// later write config.yaml only) as `ckptfs config from-flink` reads it:
// as shipped, it parses and has no ZooKeeper high availability, which
// ckptfs names; with the file's own high-availability and checkpointing
// lines uncommented, ckptfs derives Flink's settings from its nested
// YAML.
func TestShippedConfigYAML(t *testing.T) {
	for _, r := range TestReleases(t) {
		if !r.AtLeast(1, 19) {
			continue
		}
		t.Run(r.Version, func(t *testing.T) {
			data := shippedConfig(t, FindDist(t, r))
			c, err := flinkconf.Parse("config.yaml", data, flinkconf.Standard)
			if err != nil {
				t.Fatalf("the shipped config.yaml: %v", err)
			}
			if _, err := c.ZooKeeperHA(); err == nil || !strings.Contains(err.Error(), "high-availability") {
				t.Errorf("the shipped config.yaml (no high availability): %v, want an error naming high-availability", err)
			}
			c, err = flinkconf.Parse("config.yaml", uncommentHA(t, data), flinkconf.Standard)
			if err != nil {
				t.Fatalf("config.yaml with high availability turned on: %v", err)
			}
			ha, err := c.ZooKeeperHA()
			if err != nil {
				t.Fatalf("config.yaml with high availability turned on: %v", err)
			}
			ha.Sources = nil
			want := &flinkconf.ZooKeeperHA{Quorum: []string{"localhost:2181"}, PathRoot: "/flink", ClusterID: "/default",
				SessionTimeout: time.Minute, StorageDir: "hdfs:///flink/ha/", CheckpointsDir: "hdfs://namenode-host:8020/flink-checkpoints"}
			if !reflect.DeepEqual(ha, want) {
				t.Errorf("derived %+v, want %+v", ha, want)
			}
		})
	}
}
