//go:build linux

package realflink

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// wanLatencies are the one-way latencies between sites the WAN
// benchmark runs at (10-40 ms, and none as the baseline of the run).
var wanLatencies = []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}

// BenchmarkIntegration_WAN (make bench-wan): ZooKeeper's five servers
// placed two in DC1, two in DC2, one in DC3, on sites that are network
// hosts with latency between them, measures
//
//   - takeover20: `ckptfs takeover` run in DC2 for 20 jobs with 3
//     pointers each (every pointer verified at L2, one retraction per
//     job), the process's whole run, given DC2's servers (zk=dc2) or
//     DC3's only (zk=dc3: every read crosses the WAN);
//   - marker: from an emulated JobManager completing a checkpoint on
//     DC2's NAS to DC2's mount (in DC2, given DC2's servers) publishing
//     it in its marker, seen by a watcher.
//
// Each at every latency of wanLatencies; compare them with the same
// run's latency=0ms.
func BenchmarkIntegration_WAN(b *testing.B) {
	mounttest.RequireFUSE(b)
	root := b.TempDir()
	wan := NewWAN(b)
	sites := map[string]*Site{}
	for _, n := range []string{"dc1", "dc2", "dc3"} {
		sites[n] = NewNetSite(b, n, filepath.Join(root, n, "log"), wan)
	}
	c := zktest.StartCluster(b, 5, func(cfg *zktest.Config) {
		cfg.MaxSessionTimeout = 10 * time.Second
		cfg.Place = func(i int) zktest.Host {
			s := sites[zkSites[i]]
			return zktest.Host{Addr: s.Addr, Enter: append([]string{"nsenter"}, s.Enter()...)}
		}
	})
	dc2 := sites["dc2"]

	// takeover20: 20 jobs written straight onto DC2's NAS, each missing a
	// state file of its newest checkpoint.
	nas := filepath.Join(root, "dc2", "nas")
	jcfg := flinkemu.DefaultConfig()
	jcfg.Servers, jcfg.Storage, jcfg.ClusterID = c.Servers(), nas, "twenty"
	ctx := context.Background()
	jm, err := flinkemu.Start(ctx, jcfg)
	if err != nil {
		b.Fatal(err)
	}
	for range 20 {
		job := flinkemu.NewJobID()
		if err := jm.SubmitJob(job); err != nil {
			b.Fatal(err)
		}
		var last *flinkemu.Checkpoint
		for range 3 {
			if last, err = jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{4096, 4096, 4096, 4096}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Rename(last.StateFiles[0], last.StateFiles[0]+".away"); err != nil {
			b.Fatal(err)
		}
	}
	jm.Close()
	// zk is the servers ckptfs is given: go-zookeeper picks one of them
	// at random, and whether it is across the WAN decides what a read
	// costs, so each case names its servers.
	zk := c.ConnectString()
	ckptfs := func(s *Site, args ...string) ([]byte, error) {
		base := []string{"--zk", zk, "--site", "dc2", "--cluster-id", "twenty", "--path-root", jcfg.PathRoot,
			"--map", jcfg.FlinkStorage + "=" + nas}
		if s == nil {
			return execCombined(binary, append(args, base...)...)
		}
		cmd := s.Command(append([]string{binary}, append(args, base...)...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return out, err
	}
	observer := zktest.Connect(b, c.Servers())
	takeover20 := func(b *testing.B, lat time.Duration) {
		wan.SetLatency(lat)
		defer wan.SetLatency(0)
		var took []time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			// Not timed: the retracted pointers back, DC1 active.
			if out, err := ckptfs(nil, "restore-pruned", "--unverified"); err != nil {
				b.Fatalf("restore-pruned: %v\n%s", err, out)
			}
			if _, err := observer.Set("/ckptfs/twenty/active-site", []byte("dc1"), -1); err != nil && i > 0 {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			out, err := ckptfs(dc2, "takeover", "--wait", "0", "-o", "json")
			took = append(took, time.Since(start))
			b.StopTimer()
			var rep struct {
				Activated bool `json:"activated"`
				Jobs      []struct {
					Retracted []int64 `json:"retracted"`
				} `json:"jobs"`
			}
			if err != nil || json.Unmarshal(out, &rep) != nil || !rep.Activated || len(rep.Jobs) != 20 {
				b.Fatalf("takeover: %v\n%s", err, out)
			}
			for _, j := range rep.Jobs {
				if !slices.Equal(j.Retracted, []int64{3}) {
					b.Fatalf("takeover retracted %v, want [3]", j.Retracted)
				}
			}
			b.StartTimer()
		}
		reportQuantiles(b, took)
	}
	// DC2's own servers (reads answered in DC2), and DC3's (every read
	// crosses the WAN, as when DC2's servers are down).
	servers := []struct {
		name string
		idx  []int
	}{{"dc2", []int{0, 1}}, {"dc3", []int{2}}}
	for _, srv := range servers {
		for _, lat := range wanLatencies {
			b.Run(fmt.Sprintf("takeover20/zk=%s/latency=%dms", srv.name, lat.Milliseconds()), func(b *testing.B) {
				zk = c.ConnectString(srv.idx...)
				defer func() { zk = c.ConnectString() }()
				takeover20(b, lat)
			})
		}
	}

	// marker: an emulated JobManager completes checkpoints on DC1's NAS;
	// each is copied to DC2's, its _metadata last (renamed into place,
	// when the clock starts: the checkpoint cannot be complete before),
	// and DC2's mount (in DC2) publishes it in its marker, which a
	// watcher sees.
	src, mnas := filepath.Join(root, "dc1", "marker-nas"), filepath.Join(root, "dc2", "marker-nas")
	for _, d := range []string{src, mnas} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	mcfg := flinkemu.DefaultConfig()
	mcfg.Servers, mcfg.Storage, mcfg.ClusterID = c.Servers(), src, "markers"
	mjm, err := flinkemu.Start(ctx, mcfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mjm.Close)
	job := flinkemu.NewJobID()
	if err := mjm.SubmitJob(job); err != nil {
		b.Fatal(err)
	}
	mnt := filepath.Join(root, "dc2", "flink")
	if _, err := dc2.StartMount("ckptfs-markers", binary, "replica", mnas, mnt, "--zk", c.ConnectString(0, 1), "--cluster-id", "markers",
		"--path-root", mcfg.PathRoot, "--map", mcfg.FlinkStorage+"="+mnas, "--poll", "1s"); err != nil {
		b.Fatal(err)
	}
	path := "/ckptfs/markers/sites/dc2/jobs/" + job
	marker := func() int64 {
		data, _, err := observer.Get(path)
		if err != nil {
			return -1
		}
		var m struct {
			CheckpointID int64 `json:"checkpoint_id"`
		}
		if json.Unmarshal(data, &m) != nil {
			return -1
		}
		return m.CheckpointID
	}
	held := filepath.Join(root, "held-metadata")
	replicate := func(cp *flinkemu.Checkpoint) func() {
		if err := os.Rename(cp.Metadata, held); err != nil {
			b.Fatal(err)
		}
		if out, err := execCombined("cp", "-a", src+"/.", mnas+"/"); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		rel, err := filepath.Rel(src, cp.Metadata)
		if err != nil {
			b.Fatal(err)
		}
		dst := filepath.Join(mnas, rel)
		if out, err := execCombined("cp", "-a", held, dst+".tmp"); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		if err := os.Rename(held, cp.Metadata); err != nil {
			b.Fatal(err)
		}
		return func() {
			if err := os.Rename(dst+".tmp", dst); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, lat := range wanLatencies {
		b.Run(fmt.Sprintf("marker/latency=%dms", lat.Milliseconds()), func(b *testing.B) {
			wan.SetLatency(lat)
			defer wan.SetLatency(0)
			var took []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				cp, err := mjm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
				if err != nil {
					b.Fatal(err)
				}
				complete := replicate(cp)
				b.StartTimer()
				start := time.Now()
				complete()
				for marker() < cp.ID {
					if time.Since(start) > 30*time.Second {
						b.Fatalf("checkpoint %d not in DC2's marker after 30s", cp.ID)
					}
					time.Sleep(time.Millisecond)
				}
				took = append(took, time.Since(start))
			}
			reportQuantiles(b, took)
		})
	}
}

func reportQuantiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	if len(d) == 0 {
		return
	}
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	b.ReportMetric(ms(d[len(d)/2]), "ms-p50")
	b.ReportMetric(ms(d[len(d)-1]), "ms-max")
}

func execCombined(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}
