package zkbridge

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// wantGeneration is what discovery must find for each emulated layout.
var wantGeneration = map[flinkemu.Layout]Generation{
	flinkemu.Flink1_4:  GenUnknown, // candidates 1.4 and 1.5-1.13 (wantCandidates14)
	flinkemu.Flink1_13: Gen1_5,
	flinkemu.Flink1_14: Gen1_14,
	flinkemu.Flink1_17: Gen1_15,
	flinkemu.Flink1_20: Gen1_18,
	flinkemu.Flink2:    Gen2,
}

func TestIntegration_Discovery(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range flinkemu.Layouts() {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(layout, false)
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
					t.Fatal(err)
				}
			}
			b := e.bridge("dc2")
			ctx := testContext(t, time.Minute)
			check := func(when string) {
				t.Helper()
				l, err := b.Discover(ctx)
				if err != nil {
					t.Fatalf("%s: Discover: %v", when, err)
				}
				if l.Namespace != e.root+"/default" || l.ClusterID != "default" {
					t.Errorf("%s: namespace %q cluster %q", when, l.Namespace, l.ClusterID)
				}
				// The legacy JobManager elects as 1.5 and 1.6 do in legacy
				// mode: ZooKeeper does not tell them apart.
				if wantCandidates14 := []Generation{Gen1_4, Gen1_5}; layout == flinkemu.Flink1_4 && !slices.Equal(l.Candidates, wantCandidates14) {
					t.Errorf("%s: candidates %v, want %v", when, l.Candidates, wantCandidates14)
				}
				if l.Generation != wantGeneration[layout] {
					t.Errorf("%s: generation %v (candidates %v), want %v; evidence:\n%s", when, l.Generation, l.Candidates, wantGeneration[layout], strings.Join(l.Evidence, "\n"))
				}
				if len(l.Jobs) != 1 || l.Jobs[0].JobID != job {
					t.Fatalf("%s: jobs %+v, want one %s", when, l.Jobs, job)
				}
				jl := l.Jobs[0]
				wantStyle := LockDirect
				if layout.LocksChild() {
					wantStyle = LockChild
				}
				if jl.LockStyle != wantStyle {
					t.Errorf("%s: lock style %v, want %v", when, jl.LockStyle, wantStyle)
				}
				cp := jm.Checkpoints(job)[0]
				if !strings.HasPrefix(cp.Znode, jl.PointerDir+"/") || jl.CounterPath == "" || jl.JobGraph == "" {
					t.Errorf("%s: job layout %+v does not hold pointer %s", when, jl, cp.Znode)
				}
			}
			check("JobManager alive")
			jm.Close()
			check("JobManager gone") // only persistent nodes left
		})
	}

	t.Run("cluster id discovery", func(t *testing.T) {
		e := newEnv(t, c)
		jm1, _ := e.startJM(flinkemu.Flink1_20, false)
		_ = jm1
		b := e.bridge("dc2")
		l, err := b.Discover(testContext(t, time.Minute))
		if err != nil || l.ClusterID != "default" {
			t.Fatalf("one cluster: %+v, %v", l, err)
		}
		e.startJM(flinkemu.Flink1_20, false, func(cfg *flinkemu.Config) { cfg.ClusterID = "application_17_0001" })
		// Not a Flink namespace: ignored.
		if _, err := b.Conn().Create(e.root+"/unrelated", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		_, err = b.Discover(testContext(t, time.Minute))
		if !errors.Is(err, ErrAmbiguousCluster) || !strings.Contains(err.Error(), "application_17_0001") || !strings.Contains(err.Error(), "default") || strings.Contains(err.Error(), "unrelated") {
			t.Fatalf("two clusters: err = %v, want ErrAmbiguousCluster naming both", err)
		}
		b2 := e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "/application_17_0001" })
		l, err = b2.Discover(testContext(t, time.Minute))
		if err != nil || l.Namespace != e.root+"/application_17_0001" {
			t.Fatalf("explicit cluster id: %+v, %v", l, err)
		}
		b3 := e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "nope" })
		if _, err := b3.Discover(testContext(t, time.Minute)); !errors.Is(err, ErrNoNamespace) {
			t.Fatalf("missing cluster: %v", err)
		}
	})

	t.Run("childless pointers are ambiguous without evidence", func(t *testing.T) {
		e := newEnv(t, c)
		b := e.bridge("dc2")
		job := flinkemu.NewJobID()
		ns := e.root + "/default"
		acl := zk.WorldACL(zk.PermAll)
		for _, p := range []string{e.root, ns, ns + "/jobs", ns + "/jobs/" + job, ns + "/jobs/" + job + "/checkpoints",
			ns + "/jobs/" + job + "/checkpoints/0000000000000000005"} {
			if _, err := b.Conn().Create(p, nil, 0, acl); err != nil {
				t.Fatal(err)
			}
		}
		l, err := b.Discover(testContext(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if l.Generation != GenUnknown || l.JobsLockStyle != LockStyleUnknown || l.Jobs[0].LockStyle != LockStyleUnknown {
			t.Errorf("generation %v style %v/%v: want unknown (1.14 or 1.15+)", l.Generation, l.JobsLockStyle, l.Jobs[0].LockStyle)
		}
		if !slices.Contains(l.Candidates, Gen1_14) || !slices.Contains(l.Candidates, Gen1_15) {
			t.Errorf("candidates %v", l.Candidates)
		}
		_, err = b.Takeover(testContext(t, time.Minute), TakeoverOptions{DryRun: true})
		if !errors.Is(err, ErrAmbiguousLayout) {
			t.Errorf("takeover on an ambiguous layout: %v, want ErrAmbiguousLayout", err)
		}
		for version, style := range map[string]LockStyle{"1.14": LockDirect, "1.17": LockChild} {
			g, _ := ParseGeneration(version)
			bo := e.bridge("dc2", func(cfg *Config) { cfg.FlinkVersion = g })
			l, err := bo.Discover(testContext(t, time.Minute))
			if err != nil || !l.Overridden || l.Jobs[0].LockStyle != style {
				t.Errorf("override %s: %+v, %v; want lock style %v", version, l, err, style)
			}
		}
	})
}

func TestIntegration_Liveness(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range flinkemu.Layouts() {
		t.Run(layout.String(), func(t *testing.T) {
			e := newEnv(t, c)
			jm, _ := e.startJM(layout, false)
			job := flinkemu.NewJobID()
			if err := jm.SubmitJob(job); err != nil {
				t.Fatal(err)
			}
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
				t.Fatal(err)
			}
			job2 := flinkemu.NewJobID()
			if err := jm.SubmitJob(job2); err != nil {
				t.Fatal(err)
			}
			b := e.bridge("dc2")
			ctx := testContext(t, time.Minute)
			live, err := b.Liveness(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !live.Alive {
				t.Fatalf("JobManager running, liveness %v", live)
			}
			kinds := map[EphemeralKind]bool{}
			for _, n := range live.Nodes {
				kinds[n.Kind] = true
				if n.Owner != SessionID(jm.Conn().SessionID()) {
					t.Errorf("node %s owned by %v, want the JobManager's session", n.Path, n.Owner)
				}
			}
			for _, k := range []EphemeralKind{KindLatch, KindLeader, KindCheckpointLock, KindJobGraphLock} {
				if !kinds[k] {
					t.Errorf("no %s node among %+v", k, live.Nodes)
				}
			}
			// Flink names its RPC endpoints from one counter per
			// JobManager process (RpcServiceUtils.createRandomName):
			// resourcemanager_0, dispatcher_1, then jobmanager_<n> for
			// each JobMaster in the order the jobs start.
			rpc := "://flink@jm-dc1:6123/user/rpc/"
			want := map[string]string{
				"resource_manager": rpc + "resourcemanager_0", "dispatcher": rpc + "dispatcher_1", "rest_server": "http://jm-dc1:6123",
				job: rpc + "jobmanager_2", job2: rpc + "jobmanager_3",
			}
			if layout == flinkemu.Flink1_4 {
				// The legacy JobManager, elected for job 0, runs every job.
				want = map[string]string{"00000000000000000000000000000000": "akka.tcp://flink@jm-dc1:6123/user/jobmanager"}
			}
			found := map[string]bool{}
			for _, n := range live.Nodes {
				if n.Address == "" {
					continue
				}
				for key, addr := range want {
					if strings.Contains(n.Path, key) {
						found[key] = true
						if !strings.HasSuffix(n.Address, addr) {
							t.Errorf("leader node %s: address %q, want ...%s", n.Path, n.Address, addr)
						}
					}
				}
			}
			if len(found) != len(want) {
				t.Errorf("addresses %q: leader nodes of %v found, want those of %v", live.Addresses(), found, want)
			}
			jm.Close()
			live, err = b.Liveness(ctx)
			if err != nil || live.Alive {
				t.Fatalf("after Close: %v, %v; want no JobManager", live, err)
			}
		})
	}

	t.Run("expired session", func(t *testing.T) {
		e := newEnv(t, c)
		jm, proxies := e.startJM(flinkemu.Flink1_17, true)
		job := flinkemu.NewJobID()
		if err := jm.SubmitJob(job); err != nil {
			t.Fatal(err)
		}
		b := e.bridge("dc2")
		ctx := testContext(t, time.Minute)
		if live, err := b.Liveness(ctx); err != nil || !live.Alive {
			t.Fatalf("liveness %v, %v", live, err)
		}
		zktest.ExpireConnSession(t, jm.Conn(), proxies)
		// The JobManager's client reconnects with a new session, but its
		// ephemeral nodes went with the old one.
		if live, err := b.Liveness(ctx); err != nil || live.Alive {
			t.Fatalf("after expiry: %v, %v; want no JobManager", live, err)
		}
	})
}
