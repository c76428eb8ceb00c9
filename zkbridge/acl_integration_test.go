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
	"github.com/ckptfs/ckptfs/manifest"
)

// TestIntegration_SquattedCkptfsZnodes: another client created ckptfs's
// root, the cluster's znode and active-site first, open to everyone.
// ckptfs, authenticated, must not trust them: a takeover (dry run too),
// restore-pruned, status, ActiveSite, the publisher and the sweeper
// refuse with an error naming each znode, its ACL and the remedy, and
// write nothing. Once the super user set the ACLs the error names, they
// work, and the squatter can no longer move active-site. Anonymous,
// ckptfs accepts them (its znodes are open by design). Identities that
// zk-acl names are ckptfs's too.
func TestIntegration_SquattedCkptfsZnodes(t *testing.T) {
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.Security = &zktest.Security{SuperPassword: superPassword} })
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	ctx := testContext(t, 2*time.Minute)
	paths := newCkptfsPaths(e.ckptfs, "default")
	squatter := zktest.Connect(t, c.Servers())
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{e.ckptfs, paths.base, paths.activeSite()} {
		if _, err := squatter.Create(p, []byte("dc9"), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	creds := digest("ckptfs", "ckptfspw")
	mine := creds.Identity()
	b := e.bridge("dc2", func(cfg *Config) { cfg.Auth = creds })
	before := e.dump(squatter.Conn)

	refused := func(what string, err error) {
		t.Helper()
		var fe *ForeignACLError
		if !errors.Is(err, ErrForeignACL) || !errors.As(err, &fe) {
			t.Fatalf("%s: %v, want ErrForeignACL", what, err)
		}
		var named []string
		for _, z := range fe.Znodes {
			named = append(named, z.Znode)
		}
		slices.Sort(named)
		want := []string{e.ckptfs, paths.base, paths.activeSite()}
		slices.Sort(want)
		msg := err.Error()
		if !slices.Equal(named, want) || !strings.Contains(msg, "ACL "+FormatACL(open)+" lets "+FormatACL(open)+" change it") || !strings.Contains(msg, "setAcl "+paths.activeSite()+" "+FormatACL([]zk.ACL{mine})+",world:anyone:r") || !strings.Contains(msg, creds.String()) {
			t.Errorf("%s: %v; want every squatted znode %v, its ACL, ckptfs's identity and the setAcl that mends it", what, err, want)
		}
	}
	_, err := b.Takeover(ctx, TakeoverOptions{})
	refused("takeover", err)
	_, err = b.Takeover(ctx, TakeoverOptions{DryRun: true})
	refused("dry-run takeover", err)
	_, err = b.RestorePruned(ctx, RestoreOptions{})
	refused("restore-pruned", err)
	_, err = b.Status(ctx)
	refused("status", err)
	_, _, err = b.ActiveSite(ctx)
	refused("ActiveSite", err)
	pub, err := b.NewPublisher(staticMarkers{{JobID: s.job, CheckpointID: 4, Level: manifest.L1}})
	if err != nil {
		t.Fatal(err)
	}
	refused("publisher", pub.Sync(ctx))
	requireSameTree(t, "refused operations", before, e.dump(squatter.Conn))

	// Anonymous, ckptfs's znodes are open by design: no check.
	anon := e.bridge("dc2")
	if site, _, err := anon.ActiveSite(ctx); err != nil || site != "dc9" {
		t.Errorf("anonymous ActiveSite: %q, %v", site, err)
	}

	// The super user mends them as the error says; the refusal is
	// checked again (not cached for the connection's life).
	super := zktest.Connect(t, c.Servers(), zktest.WithDigest("super", superPassword))
	for _, p := range []string{e.ckptfs, paths.base, paths.activeSite()} {
		if _, err := super.SetACL(p, []zk.ACL{mine, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}, -1); err != nil {
			t.Fatal(err)
		}
	}
	var rep *TakeoverReport
	waitFor(t, 30*time.Second, "the takeover to pass once the ACLs are mended", func() (bool, error) {
		rep, err = b.Takeover(ctx, TakeoverOptions{})
		if errors.Is(err, ErrForeignACL) {
			return false, nil
		}
		return err == nil && rep.Activated, err
	})
	if _, err := squatter.Set(paths.activeSite(), []byte("dc9"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("the squatter sets active-site afterwards: %v, want NoAuth", err)
	}

	// A later foreign grant below (a backup open to everyone) is not
	// seen by this connection (checked once), but by the next one.
	backup := paths.pruned(s.job, 5)
	if _, err := super.SetACL(backup, open, -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.ActiveSite(ctx); err != nil {
		t.Errorf("ActiveSite on the connection that checked: %v", err)
	}
	b2 := e.bridge("dc2", func(cfg *Config) { cfg.Auth = creds })
	_, err = b2.RestorePruned(ctx, RestoreOptions{})
	var fe *ForeignACLError
	if !errors.As(err, &fe) || len(fe.Znodes) != 1 || fe.Znodes[0].Znode != backup || !strings.Contains(err.Error(), "setAcl "+backup+" "+FormatACL([]zk.ACL{mine})) {
		t.Errorf("restore-pruned with an open backup: %v; want it named, with the ACL ckptfs gives a backup", err)
	}

	// An identity zk-acl names is ckptfs's: another site's ckptfs.
	other := digest("ckptfs-dc1", "pw1")
	if _, err := super.SetACL(backup, []zk.ACL{mine, other.Identity()}, -1); err != nil {
		t.Fatal(err)
	}
	b3 := e.bridge("dc2", func(cfg *Config) { cfg.Auth = creds })
	if _, err := b3.RestorePruned(ctx, RestoreOptions{DryRun: true}); !errors.Is(err, ErrForeignACL) {
		t.Errorf("a grant to an identity zk-acl does not name: %v, want ErrForeignACL", err)
	}
	b4 := e.bridge("dc2", func(cfg *Config) {
		cfg.Auth = creds
		cfg.ACL = []zk.ACL{mine, other.Identity()}
	})
	if _, err := b4.RestorePruned(ctx, RestoreOptions{DryRun: true}); err != nil {
		t.Errorf("a grant to an identity zk-acl names: %v", err)
	}
}

// TestIntegration_SquattedLater: the cluster's znodes do not exist when
// ckptfs first looks (nothing to check); another client creates them
// open afterwards. The same connection notices (a watch on the missing
// node) and refuses from then on.
func TestIntegration_SquattedLater(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b := e.bridge("dc2", func(cfg *Config) { cfg.Auth = digest("ckptfs", "ckptfspw"); cfg.ClusterID = "default" })
	ctx := testContext(t, time.Minute)
	if site, _, err := b.ActiveSite(ctx); err != nil || site != "" {
		t.Fatalf("ActiveSite before any takeover: %q, %v", site, err)
	}
	paths := newCkptfsPaths(e.ckptfs, "default")
	squatter := zktest.Connect(t, c.Servers())
	for _, p := range []string{e.ckptfs, paths.base, paths.activeSite()} {
		if _, err := squatter.Create(p, []byte("dc9"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "ActiveSite to refuse the squatted znodes", func() (bool, error) {
		_, _, err := b.ActiveSite(ctx)
		return errors.Is(err, ErrForeignACL), nil
	})
}
