package flinkemu

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestIntegration_Layouts checks the znodes each layout writes against
// docs/flink-formats.md §1.2 to §1.5.
func TestIntegration_Layouts(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for i, layout := range Layouts() {
		t.Run(layout.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Servers = c.Servers()
			cfg.Layout = layout
			cfg.PathRoot = "/flink" + string(rune('a'+i))
			cfg.Storage = t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			jm, err := Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer jm.Close()
			job := NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			var all []*Checkpoint
			for range 5 {
				cp, err := jm.CompleteCheckpoint(job, CheckpointSpec{})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, cp)
			}
			obs := zktest.Connect(t, c.Servers())
			tree, err := Dump(obs.Conn, cfg.PathRoot)
			if err != nil {
				t.Fatal(err)
			}
			ns := cfg.Namespace()
			// want: relative path -> "p" persistent, "e" ephemeral, "e*"
			// a node with exactly one ephemeral child.
			var want map[string]string
			switch layout {
			case Flink1_4:
				want = map[string]string{
					"leaderlatch/" + legacyJobID + "/job_manager_lock": "e*",
					"leader/" + legacyJobID + "/job_manager_lock":      "e",
					"jobgraphs/" + job: "e*",
					"checkpoints/" + job + "/0000000000000000005": "e*",
					"checkpoint-counter/" + job:                   "p",
				}
			case Flink1_13:
				want = map[string]string{
					"leaderlatch/resource_manager_lock":           "e*",
					"leaderlatch/" + job + "/job_manager_lock":    "e*",
					"leader/resource_manager_lock":                "e",
					"leader/dispatcher_lock":                      "e",
					"leader/rest_server_lock":                     "e",
					"leader/" + job + "/job_manager_lock":         "e",
					"jobgraphs/" + job:                            "e*",
					"checkpoints/" + job + "/0000000000000000005": "e*",
					"checkpoint-counter/" + job:                   "p",
					"running_job_registry/" + job:                 "p",
				}
			case Flink1_14:
				want = map[string]string{
					"leader/resource_manager/latch":                    "e*",
					"leader/resource_manager/connection_info":          "e",
					"leader/dispatcher/connection_info":                "e",
					"leader/rest_server/connection_info":               "e",
					"jobs/" + job + "/leader/latch":                    "e*",
					"jobs/" + job + "/leader/connection_info":          "e",
					"jobgraphs/" + job:                                 "e*",
					"jobs/" + job + "/checkpoints/0000000000000000005": "e*",
					"jobs/" + job + "/checkpoint_id_counter":           "p",
					"running_job_registry/" + job:                      "p",
				}
			default:
				jobLeader, graphs := job, "jobgraphs"
				if layout >= Flink1_20 {
					jobLeader = "job-" + job
				}
				if layout == Flink2 {
					graphs = "execution-plans"
				}
				want = map[string]string{
					"leader/latch": "e*",
					"leader/resource_manager/connection_info":                "e",
					"leader/" + jobLeader + "/connection_info":               "e",
					graphs + "/" + job + "/locks":                            "e*",
					"jobs/" + job + "/checkpoints/0000000000000000005/locks": "e*",
					"jobs/" + job + "/checkpoint_id_counter":                 "p",
				}
			}
			for rel, kind := range want {
				n, ok := tree[ns+"/"+rel]
				switch {
				case !ok:
					t.Errorf("%s missing; tree:\n%s", rel, tree)
				case kind == "e" && !n.Ephemeral, kind == "p" && n.Ephemeral:
					t.Errorf("%s ephemeral=%v, want %s", rel, n.Ephemeral, kind)
				case kind == "e*" && (len(n.Children) != 1 || !tree[ns+"/"+rel+"/"+n.Children[0]].Ephemeral):
					t.Errorf("%s children %v: want one ephemeral", rel, n.Children)
				}
			}
			absent := map[string]bool{
				"running_job_registry": layout >= Flink1_17 || layout == Flink1_4, // the JobResultStore; none in legacy mode
				"checkpoints":          layout >= Flink1_14,                       // moved to jobs/<job>
				"leaderlatch":          layout >= Flink1_14,
				"jobgraphs":            layout == Flink2, // execution-plans
				// The legacy JobManager elects itself alone: no component
				// of its own, no JobMaster per job.
				"leader/dispatcher_lock":            layout == Flink1_4,
				"leaderlatch/" + job:                layout == Flink1_4,
				"leader/" + job:                     layout == Flink1_4,
				"leaderlatch/" + legacyJobID:        layout != Flink1_4,
				"leader/" + legacyJobID:             layout != Flink1_4,
				"leaderlatch/resource_manager_lock": layout == Flink1_4,
			}
			for dir, mustLack := range absent {
				if _, ok := tree[ns+"/"+dir]; ok && mustLack {
					t.Errorf("%s exists in %s", dir, layout)
				}
			}

			// Retained 3: 1 and 2 were subsumed with their HA file and data.
			for _, cp := range all {
				_, exists := tree[cp.Znode]
				_, haErr := os.Stat(cp.HAFile)
				_, dirErr := os.Stat(cp.Dir)
				if retained := cp.ID >= 3; exists != retained || (haErr == nil) != retained || (dirErr == nil) != retained {
					t.Errorf("checkpoint %d: znode %v, HA file %v, dir %v; retained %v", cp.ID, exists, haErr, dirErr, retained)
				}
			}
			// The bytes: pointer -> HA file -> checkpoint; counter; leader.
			// The HA files lie in ha/<cluster>, in 1.4 in ha itself.
			cp := all[4]
			haDir := filepath.Join(cfg.Storage, "ha", cfg.ClusterID)
			if layout == Flink1_4 {
				haDir = filepath.Join(cfg.Storage, "ha")
			}
			if filepath.Dir(cp.HAFile) != haDir {
				t.Errorf("HA file %s, want one in %s", cp.HAFile, haDir)
			}
			h, err := flinkha.DecodeStateHandle(tree[cp.Znode].Data)
			if err != nil {
				t.Fatal(err)
			}
			ha, _ := os.ReadFile(cp.HAFile)
			if p, _ := h.Path(); p != cp.HAFlinkPath || h.Size != int64(len(ha)) || !strings.HasPrefix(filepath.Base(cp.HAFile), "completedCheckpoint") || len(filepath.Base(cp.HAFile)) != len("completedCheckpoint")+12 {
				t.Errorf("pointer names %s (%d bytes), want %s (%d)", p, h.Size, cp.HAFlinkPath, len(ha))
			}
			cc, err := flinkha.DecodeCompletedCheckpoint(ha)
			pointer := cp.FlinkDir
			if layout == Flink1_4 {
				pointer = "" // not externalized: 1.4 names no directory
			}
			if err != nil || cc.CheckpointID != 5 || cc.JobID != job || cc.ExternalPointer != pointer || cc.FieldSet != cfg.FieldSet() {
				t.Errorf("HA file: %+v, %v", cc, err)
			}
			if layout == Flink1_4 {
				// No _metadata: chk-N holds the state files alone, which
				// the HA file names with their absolute paths.
				names, _ := filepath.Glob(filepath.Join(cp.Dir, "*"))
				if cp.Metadata != "" || !slices.Equal(names, slices.Sorted(slices.Values(cp.StateFiles))) {
					t.Errorf("chk-5 holds %v (metadata %q), want the state files %v alone", names, cp.Metadata, cp.StateFiles)
				}
				var refs []string
				for _, f := range cc.Files {
					refs = append(refs, f.Path)
					if !strings.HasSuffix(f.Class, ".FileStateHandle") {
						t.Errorf("HA file references %s by a %s, want a FileStateHandle", f.Path, f.Class)
					}
				}
				var want []string
				for _, f := range cp.StateFiles {
					want = append(want, cp.FlinkDir+"/"+filepath.Base(f))
				}
				if slices.Sort(refs); !slices.Equal(refs, slices.Sorted(slices.Values(want))) {
					t.Errorf("HA file references %v, want the state files %v", refs, want)
				}
			} else if m, err := metadata.DecodeFile(cp.Metadata, metadata.Options{}); err != nil || m.CheckpointID != 5 {
				t.Errorf("_metadata: %v", err)
			}
			var counterPath string
			for p := range tree {
				if strings.HasSuffix(p, "checkpoint-counter/"+job) || strings.HasSuffix(p, "checkpoint_id_counter") {
					counterPath = p
				}
			}
			if d := tree[counterPath].Data; len(d) != 4 || binary.BigEndian.Uint32(d) != 6 {
				t.Errorf("counter %s = %x, want 6", counterPath, d)
			}
			// Curator's default data, the host's address, in every lock
			// and every persistent locks child.
			for p, n := range tree {
				if strings.HasSuffix(p, "/locks") || strings.Contains(p, "/locks/") || (n.Ephemeral && !strings.HasSuffix(p, "connection_info") && !strings.HasSuffix(p, "_lock") && !strings.Contains(p, "-latch-")) {
					if string(n.Data) != "127.0.0.1" {
						t.Errorf("lock node %s holds %q, want Curator's default data 127.0.0.1", p, n.Data)
					}
				}
			}
			for p, n := range tree {
				if n.Ephemeral && (strings.HasSuffix(p, "connection_info") || strings.HasSuffix(p, "_lock")) {
					li, err := flinkha.DecodeLeaderInfo(n.Data)
					if err != nil || li == nil || !strings.Contains(li.Address, "jm-dc1:6123") || li.SessionID == "" {
						t.Errorf("leader node %s: %+v, %v", p, li, err)
					}
				}
			}

			// Closing the session removes exactly the ephemeral nodes.
			jm.Close()
			after, err := Dump(obs.Conn, cfg.PathRoot)
			if err != nil {
				t.Fatal(err)
			}
			if d := tree.WithoutEphemeral().Diff(after); len(d) > 0 {
				t.Errorf("after Close:\n%s", strings.Join(d, "\n"))
			}
		})
	}
}

// TestReleaseDetails: what changes inside a layout family follows
// Config.Release (default Layout.Version()), and a release outside the
// layout's family is refused.
func TestReleaseDetails(t *testing.T) {
	for _, c := range []struct {
		layout   Layout
		release  string
		metadata int32
		apps     bool
	}{
		{Flink1_4, "", 2, false},
		{Flink1_4, "1.4.2", 2, false},
		{Flink1_13, "", 3, false},
		{Flink1_14, "", 3, false},
		{Flink1_17, "1.15", 3, false},
		{Flink1_17, "", 4, false},
		{Flink1_20, "1.18.1", 4, false},
		{Flink1_20, "", 4, false},
		{Flink2, "", 5, false},
		{Flink2, "2.1", 6, false},
		{Flink2, "2.3.0", 6, true},
	} {
		cfg := DefaultConfig()
		cfg.Servers, cfg.Storage, cfg.Layout, cfg.Release = []string{"127.0.0.1:2181"}, "/x", c.layout, c.release
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s %q: %v", c.layout, c.release, err)
		}
		if v, apps := cfg.metadataVersion(), cfg.applicationStore(); v != c.metadata || apps != c.apps {
			t.Errorf("%s %q: _metadata version %d, application store %v; want %d, %v", c.layout, c.release, v, apps, c.metadata, c.apps)
		}
	}
	for _, c := range []struct {
		layout  Layout
		release string
	}{{Flink1_20, "2.0"}, {Flink2, "1.20"}, {Flink1_17, "1.18"}, {Flink2, "2"}, {Flink2, "two.three"}, {Flink1_13, "1.4"}, {Flink1_4, "1.5"}} {
		cfg := DefaultConfig()
		cfg.Servers, cfg.Storage, cfg.Layout, cfg.Release = []string{"127.0.0.1:2181"}, "/x", c.layout, c.release
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s with release %q validates", c.layout, c.release)
		}
	}
	cfg := DefaultConfig()
	cfg.Servers, cfg.Storage, cfg.Address = []string{"127.0.0.1:2181"}, "/x", "jm-dc1"
	if err := cfg.Validate(); err == nil {
		t.Error("a host name as Address validates")
	}
}

// TestIntegration_RPCNames: the leader addresses name the RPC endpoints
// as Flink's RpcServiceUtils.createRandomName does, from one counter per
// JobManager process: resourcemanager_0, dispatcher_1, a JobMaster per
// job from 2 on, in the order the jobs start; a JobManager started after
// a failover (a new process) counts from 0 again, and a failed recovery
// still used a name (Flink restores in the JobMaster's constructor).
func TestIntegration_RPCNames(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	obs := zktest.Connect(t, c.Servers())
	for _, layout := range []Layout{Flink1_13, Flink1_20} {
		t.Run(layout.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := DefaultConfig()
			cfg.Servers = c.Servers()
			cfg.Layout = layout
			cfg.ClusterID = "rpc-names-" + layout.Version()
			cfg.Storage = t.TempDir()
			// address returns what a leader node holds, after the last
			// "/" of the RPC path.
			address := func(leader string) string {
				t.Helper()
				data, _, err := obs.Conn.Get(leader)
				if err != nil {
					t.Fatalf("leader node %s: %v", leader, err)
				}
				li, err := flinkha.DecodeLeaderInfo(data)
				if err != nil || li == nil {
					t.Fatalf("leader node %s: %+v, %v", leader, li, err)
				}
				return li.Address[strings.LastIndexByte(li.Address, '/')+1:]
			}
			p := paths{l: layout, ns: cfg.Namespace()}
			jobLeader := func(job string) string { return p.jobComponent(job, cfg.Host, "").leader }
			want := func(what, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s: endpoint %s, want %s", what, got, want)
				}
			}

			jm, err := Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer jm.Close()
			cluster := p.clusterComponents(cfg.Host, "", "")
			want("resource manager", address(cluster[0].leader), "resourcemanager_0")
			want("dispatcher", address(cluster[1].leader), "dispatcher_1")
			jobs := []string{NewJobID(), NewJobID(), NewJobID()}
			for _, job := range jobs {
				if err := jm.SubmitJob(job); err != nil {
					t.Fatal(err)
				}
			}
			for _, job := range jobs[:2] {
				if _, err := jm.CompleteCheckpoint(job, CheckpointSpec{}); err != nil {
					t.Fatal(err)
				}
			}
			for i, job := range jobs {
				want(fmt.Sprintf("JobMaster of job %d", i+1), address(jobLeader(job)), fmt.Sprintf("jobmanager_%d", i+2))
			}

			// Failover: a new JobManager recovers the second job, fails
			// to recover the third (no checkpoint), recovers the first.
			jm.Close()
			cfg.Host = "jm-dc2:6123"
			jm2, err := Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer jm2.Close()
			want("resource manager after failover", address(cluster[0].leader), "resourcemanager_0")
			want("dispatcher after failover", address(cluster[1].leader), "dispatcher_1")
			if _, err := jm2.Recover(jobs[1], RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := jm2.Recover(jobs[2], RestoreOptions{Attempts: 1}); err == nil {
				t.Fatal("recovered a job without a checkpoint")
			}
			if _, err := jm2.Recover(jobs[0], RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			want("recovered JobMaster of job 2", address(jobLeader(jobs[1])), "jobmanager_2")
			want("recovered JobMaster of job 1", address(jobLeader(jobs[0])), "jobmanager_4")
			if ok, _, err := obs.Conn.Exists(jobLeader(jobs[2])); err != nil || ok {
				t.Errorf("job 3's leader node after a failed recovery: exists %v, %v", ok, err)
			}
		})
	}
}

// TestLayoutOf: each release falls in its family; others are refused.
func TestLayoutOf(t *testing.T) {
	for release, want := range map[string]Layout{
		"1.4.2": Flink1_4, "1.10.3": Flink1_13, "1.13": Flink1_13, "1.14.6": Flink1_14,
		"1.15.4": Flink1_17, "1.17": Flink1_17, "1.20.5": Flink1_20, "2.3.0": Flink2,
	} {
		if got, err := LayoutOf(release); err != nil || got != want {
			t.Errorf("LayoutOf(%s) = %v, %v; want %v", release, got, err, want)
		}
	}
	for _, release := range []string{"1.3", "3.0", "x"} {
		if got, err := LayoutOf(release); err == nil {
			t.Errorf("LayoutOf(%s) = %v, want an error", release, got)
		}
	}
}
