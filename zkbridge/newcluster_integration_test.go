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
