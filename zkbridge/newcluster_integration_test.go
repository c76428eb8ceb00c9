package zkbridge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// The first start of Flink on the first site passes through the takeover
// before Flink has created its namespace: with the cluster id given and
// no other cluster under the path root, that is a new cluster, and the
// takeover activates the site without writing anything of Flink's.
func TestIntegration_TakeoverNewCluster(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, time.Minute)
	cluster := func(id string) func(*Config) { return func(c *Config) { c.ClusterID = id } }

	// Without a cluster id nothing tells a new cluster from a wrong path
	// root.
	if _, err := e.bridge("dc1").Takeover(ctx, TakeoverOptions{}); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("no cluster id: %v, want ErrNoNamespace", err)
	}

	b := e.bridge("dc1", cluster("/orders"))
	rep, err := b.Takeover(ctx, TakeoverOptions{Wait: time.Second})
	if err != nil || !rep.Activated || rep.Epoch != 1 || rep.ActiveSite != "dc1" || len(rep.Jobs) != 0 {
		t.Fatalf("new cluster: %+v, %v", rep, err)
	}
	if stat, _, err := b.Conn().Exists(e.root); err != nil || stat {
		t.Errorf("the takeover created Flink's path root (%v)", err)
	}
	if rep, err = b.Takeover(ctx, TakeoverOptions{}); err != nil || !rep.AlreadyActive || rep.Epoch != 1 {
		t.Errorf("again: %+v, %v", rep, err)
	}

	// Once Flink runs, the namespace exists and the takeover is the usual
	// one: a live JobManager makes it refuse.
	e.startJM(flinkemu.Flink1_20, false, func(c *flinkemu.Config) { c.ClusterID = "orders" })
	if _, err := e.bridge("dc2", cluster("/orders")).Takeover(ctx, TakeoverOptions{Wait: 300 * time.Millisecond}); !errors.Is(err, ErrJobManagerAlive) {
		t.Fatalf("with a JobManager: %v, want ErrJobManagerAlive", err)
	}

	// A misspelt cluster id beside the real cluster is an error naming
	// it, and activates nothing.
	_, err = e.bridge("dc2", cluster("ordres")).Takeover(ctx, TakeoverOptions{})
	if !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "holds Flink cluster(s) orders") {
		t.Fatalf("misspelt cluster id: %v", err)
	}
	if _, _, err := b.Conn().Get(e.ckptfs + "/ordres/active-site"); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("active-site of the misspelt cluster: %v", err)
	}

	// A misspelt path root: no namespace anywhere under it, but the
	// markers show that jobs of this cluster ran.
	wrongRoot := func(c *Config) { c.PathRoot = "/flnk" }
	markers := e.ckptfs + "/orders/sites/dc1/jobs/" + strings.Repeat("ab", 16)
	for _, p := range []string{e.ckptfs + "/orders/sites", e.ckptfs + "/orders/sites/dc1", e.ckptfs + "/orders/sites/dc1/jobs", markers} {
		b.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	_, err = e.bridge("dc2", cluster("orders"), wrongRoot).Takeover(ctx, TakeoverOptions{})
	if !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "check the path root") {
		t.Fatalf("misspelt path root: %v", err)
	}
}

// A new cluster beside another under the path root (issue 31): refused
// without NewCluster, naming it; with NewCluster a dry run creates
// nothing, and the takeover creates the empty namespace, open, with its
// missing parents, and activates; every later takeover finds it. Markers
// of the cluster's jobs still refuse it.
func TestIntegration_TakeoverNewClusterBesideAnother(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, time.Minute)
	cluster := func(id string) func(*Config) { return func(c *Config) { c.ClusterID = id } }
	e.startJM(flinkemu.Flink1_20, false, func(c *flinkemu.Config) { c.ClusterID = "orders" })
	// The new cluster's path root is below the emulator's, so that its
	// parents are missing too.
	nested := func(c *Config) { c.PathRoot = e.root + "/more/levels" }
	b := e.bridge("dc2", cluster("orders-2"))
	ns := e.root + "/orders-2"

	_, err := b.Takeover(ctx, TakeoverOptions{})
	if !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "holds Flink cluster(s) orders") || !strings.Contains(err.Error(), "--new-cluster") {
		t.Fatalf("without NewCluster: %v", err)
	}
	rep, err := b.Takeover(ctx, TakeoverOptions{NewCluster: true, DryRun: true})
	if err != nil || rep.NewNamespace != ns || rep.Activated {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if ok, _, _ := b.Conn().Exists(ns); ok {
		t.Fatal("a dry run created the namespace")
	}
	rep, err = b.Takeover(ctx, TakeoverOptions{NewCluster: true, Wait: time.Second})
	if err != nil || rep.NewNamespace != ns || !rep.Activated || rep.Epoch != 1 || len(rep.Jobs) != 0 {
		t.Fatalf("new cluster: %+v, %v", rep, err)
	}
	if acl, _, err := b.Conn().GetACL(ns); err != nil || len(acl) != 1 || acl[0] != zk.WorldACL(zk.PermAll)[0] {
		t.Errorf("the namespace's ACL: %v, %v; want world:anyone:cdrwa", acl, err)
	}
	if rep, err = b.Takeover(ctx, TakeoverOptions{}); err != nil || !rep.AlreadyActive || rep.NewNamespace != "" {
		t.Errorf("a later takeover without NewCluster: %+v, %v", rep, err)
	}

	b2 := e.bridge("dc2", cluster("fresh"), nested)
	if _, err := b2.Takeover(ctx, TakeoverOptions{NewCluster: true, Wait: time.Second}); err != nil {
		t.Fatalf("missing parents: %v", err)
	}
	if ok, _, err := b2.Conn().Exists(e.root + "/more/levels/fresh"); !ok || err != nil {
		t.Errorf("the namespace below missing parents: %v, %v", ok, err)
	}

	// Markers of the cluster's jobs: Flink ran with this id elsewhere.
	markers := e.ckptfs + "/ghost/sites/dc1/jobs/" + strings.Repeat("ab", 16)
	for _, p := range []string{e.ckptfs + "/ghost", e.ckptfs + "/ghost/sites", e.ckptfs + "/ghost/sites/dc1", e.ckptfs + "/ghost/sites/dc1/jobs", markers} {
		b.Conn().Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	_, err = e.bridge("dc2", cluster("ghost")).Takeover(ctx, TakeoverOptions{NewCluster: true})
	if !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "check the path root") {
		t.Fatalf("markers of the cluster's jobs with NewCluster: %v", err)
	}
	if ok, _, _ := b.Conn().Exists(e.root + "/ghost"); ok {
		t.Error("a refused NewCluster takeover created the namespace")
	}
}
