package zkbridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_LivenessForeignNodes: another client's ephemeral nodes
// where Flink keeps its leader election and locks (possible wherever
// Flink's ACL is open, its default) do not count as a JobManager, in
// every layout family: names Flink never gives a node there, and leader
// information nodes whose data is not Flink's leader information. Every
// node the emulated JobManager made still counts. The foreign nodes are
// reported (Liveness.Foreign, the takeover report, status, a warning
// naming znode and session, once), and once the JobManager is gone a
// takeover goes through beside them. A node that imitates Flink
// perfectly counts.
func TestIntegration_LivenessForeignNodes(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	type variant struct {
		name   string
		layout flinkemu.Layout
		oldHA  bool
	}
	var variants []variant
	for _, l := range flinkemu.Layouts() {
		variants = append(variants, variant{l.String(), l, false})
	}
	variants = append(variants, variant{"1.15-1.17 use-old-ha-services", flinkemu.Flink1_17, true})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(v.layout, false, func(cfg *flinkemu.Config) { cfg.OldHAServices = v.oldHA })
			job, job2 := flinkemu.NewJobID(), flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{})
			if err != nil {
				t.Fatal(err)
			}
			if err := jm.SubmitJob(job2); err != nil {
				t.Fatal(err)
			}
			ns := jm.Namespace()
			graph := ns + "/jobgraphs/" + job
			if v.layout == flinkemu.Flink2 {
				graph = ns + "/execution-plans/" + job
			}
			pointerLocks, graphLocks := cp.Znode, graph
			if v.layout.LocksChild() {
				pointerLocks, graphLocks = pointerLocks+"/locks", graphLocks+"/locks"
			}
			var jmNodes []string
			for p, n := range e.flinkTree(jm.Conn()) {
				if n.Ephemeral {
					jmNodes = append(jmNodes, p)
				}
			}
			slices.Sort(jmNodes)

			squatter := zktest.Connect(t, c.Servers())
			foreign := map[string][]byte{
				ns + "/leader/squat":           []byte("x"),
				ns + "/leader/connection_info": []byte("not leader information"),
				pointerLocks + "/squat":        nil,
				graphLocks + "/squat":          nil,
			}
			if v.layout == flinkemu.Flink1_13 {
				foreign[ns+"/leaderlatch/squat"] = nil
			}
			if v.layout == flinkemu.Flink1_14 || v.oldHA {
				foreign[ns+"/jobs/"+job+"/leader/squat"] = nil
			}
			var want []string
			for p, data := range foreign {
				if _, err := squatter.Create(p, data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatalf("create %s: %v", p, err)
				}
				want = append(want, p)
			}
			slices.Sort(want)
			session := SessionID(squatter.SessionID())

			logger, logs := newLogRecorder(t)
			b := e.bridge("dc2", func(cfg *Config) { cfg.Logger = logger })
			ctx := testContext(t, time.Minute)
			check := func(when string, jmAlive bool) *Liveness {
				t.Helper()
				live, err := b.Liveness(ctx)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				var counted, reported []string
				for _, n := range live.Nodes {
					counted = append(counted, n.Path)
				}
				for _, n := range live.Foreign {
					reported = append(reported, n.Path)
					if n.Owner != session || n.Why == "" {
						t.Errorf("%s: foreign node %+v, want the squatter's session %s and why", when, n, session)
					}
				}
				slices.Sort(counted)
				slices.Sort(reported)
				wantCounted := []string(nil)
				if jmAlive {
					wantCounted = jmNodes
				}
				if !slices.Equal(counted, wantCounted) || live.Alive != jmAlive {
					t.Errorf("%s: counted %v (alive %v), want the JobManager's %v", when, counted, live.Alive, wantCounted)
				}
				if !slices.Equal(reported, want) {
					t.Errorf("%s: reported foreign %v, want %v", when, reported, want)
				}
				return live
			}
			check("JobManager running", true)
			lines, _ := logs.since(0)
			for _, p := range want {
				if w := matching(lines, slog.LevelWarn, p, session.String()); len(w) != 1 {
					t.Errorf("warnings naming %s and session %s: %v, want one", p, session, w)
				}
			}

			jm.Close()
			live := check("JobManager gone", false)
			if s := live.String(); !strings.Contains(s, "no JobManager alive") || !strings.Contains(s, fmt.Sprintf("not counted: %d ephemeral node(s)", len(want))) || !strings.Contains(s, live.Foreign[0].Path) {
				t.Errorf("liveness says %q, want no JobManager and the foreign nodes", s)
			}
			st, err := b.Status(ctx)
			if err != nil || len(st.JobManager.Foreign) != len(want) {
				t.Errorf("status: %+v, %v; want the foreign nodes", st.JobManager, err)
			}
			rep, err := b.Takeover(ctx, TakeoverOptions{Wait: 2 * time.Second})
			if err != nil || !rep.Activated || len(rep.JobManager.Foreign) != len(want) {
				t.Fatalf("takeover beside foreign nodes only: %v, %+v", err, rep)
			}
			lines, _ = logs.since(0)
			for _, p := range want {
				if w := matching(lines, slog.LevelWarn, p, session.String()); len(w) != 1 {
					t.Errorf("warnings naming %s: %d, want one for the bridge's life", p, len(w))
				}
			}

			// A perfect imitation of a latch node counts: nothing tells it
			// apart, and waiting is the safe side.
			latch := ns + "/leader/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-latch-0000000099"
			if _, err := squatter.Create(latch, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			if live, err := b.Liveness(ctx); err != nil || !live.Alive || len(live.Nodes) != 1 || live.Nodes[0].Path != latch {
				t.Errorf("liveness with a node imitating a latch: %+v, %v; want it counted", live, err)
			}
			if _, err := b.Takeover(ctx, TakeoverOptions{Wait: 300 * time.Millisecond}); !errors.Is(err, ErrJobManagerAlive) {
				t.Errorf("takeover beside a perfect imitation: %v, want ErrJobManagerAlive", err)
			}
		})
	}
}

// TestIntegration_LivenessHarvestedFlink loads the ZooKeeper trees real
// Flink wrote (integration/realflink/testdata: 1.4.2, 1.13.6, 1.14.6,
// 1.15.4, 1.20.5, 2.3.0) into a real ZooKeeper, each ephemeral node from a live
// session of its owner: every one of them counts as the JobManager, none
// is foreign, and the leader addresses decode.
func TestIntegration_LivenessHarvestedFlink(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "integration", "realflink", "testdata", "*", "zk.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no harvested trees: %v", err)
	}
	c := zktest.StartCluster(t, 1)
	for _, zkJSON := range dirs {
		dir := filepath.Dir(zkJSON)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var meta struct {
				JobID     string `json:"job_id"`
				ClusterID string `json:"cluster_id"`
				PathRoot  string `json:"path_root"`
			}
			var tree struct {
				Sessions []string `json:"sessions"`
				Nodes    []struct {
					Path    string `json:"path"`
					Kind    string `json:"kind"`
					Session string `json:"session"`
					Data    []byte `json:"data"`
				} `json:"nodes"`
			}
			for file, v := range map[string]any{"meta.json": &meta, "zk.json": &tree} {
				data, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(data, v); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
			}
			e := newEnv(t, c)
			path := func(p string) string {
				p = strings.NewReplacer("{cluster}", strings.Trim(meta.ClusterID, "/"), "{job}", meta.JobID).Replace(p)
				rest, ok := strings.CutPrefix(p, meta.PathRoot+"/")
				if !ok {
					t.Fatalf("%s is not below %s", p, meta.PathRoot)
				}
				return e.root + "/" + rest
			}
			admin := zktest.Connect(t, c.Servers())
			if _, err := admin.Create(e.root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			owners := map[string]*zktest.Client{}
			for _, s := range tree.Sessions {
				owners[s] = zktest.Connect(t, c.Servers())
			}
			var ephemeral []string
			for _, n := range tree.Nodes {
				p := path(n.Path)
				var err error
				switch n.Kind {
				case "persistent":
					_, err = admin.Create(p, n.Data, 0, zk.WorldACL(zk.PermAll))
				case "ephemeral":
					_, err = owners[n.Session].Create(p, n.Data, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
					ephemeral = append(ephemeral, p)
				default:
					t.Fatalf("%s: a %s node", p, n.Kind)
				}
				if err != nil {
					t.Fatalf("create %s: %v", p, err)
				}
			}
			b := e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = meta.ClusterID })
			live, err := b.Liveness(testContext(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var counted []string
			for _, n := range live.Nodes {
				counted = append(counted, n.Path)
			}
			slices.Sort(counted)
			slices.Sort(ephemeral)
			if !slices.Equal(counted, ephemeral) || len(live.Foreign) > 0 {
				t.Errorf("counted %v, foreign %+v; want every ephemeral node Flink wrote, %v, and none foreign", counted, live.Foreign, ephemeral)
			}
			// Leader information: <component>/connection_info from 1.14
			// on, before leader/<component>_lock (the dispatcher's, the
			// resource manager's, the REST server's, the job master's),
			// in 1.4 only the legacy JobManager's leader/<job 0>/
			// job_manager_lock.
			leaders := 0
			for _, n := range tree.Nodes {
				if n.Kind == "ephemeral" && strings.Contains(n.Path, "/leader/") &&
					(strings.HasSuffix(n.Path, "/connection_info") || strings.HasSuffix(n.Path, "_lock")) {
					leaders++
				}
			}
			if a := live.Addresses(); leaders == 0 || len(a) != leaders {
				t.Errorf("leader addresses %v, want one for each of the %d leader information nodes", a, leaders)
			}
		})
	}
}
