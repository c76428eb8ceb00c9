package zkbridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

const (
	flinkUser, flinkPassword = "flink", "flinkpw"
	superPassword            = "superpw"
)

func digest(user, password string) *Credentials {
	return &Credentials{Scheme: SchemeDigest, User: user, Password: password}
}

// aclOf reads a znode's ACL through conn.
func aclOf(t *testing.T, conn *zk.Conn, path string) []zk.ACL {
	t.Helper()
	acl, _, err := conn.GetACL(path)
	if err != nil {
		t.Fatalf("ACL of %s: %v", path, err)
	}
	return acl
}

// requireNotAuthorized fails unless err is ZooKeeper's refusal of an
// anonymous ckptfs, saying so.
func requireNotAuthorized(t *testing.T, what string, err error, enforced bool) {
	t.Helper()
	var ae *AuthError
	if !errors.Is(err, ErrNotAuthorized) || !errors.As(err, &ae) {
		t.Fatalf("%s: %v, want ErrNotAuthorized", what, err)
	}
	if ae.Identity != "" || ae.Enforced != enforced || !strings.Contains(err.Error(), "anonymously: no credentials") {
		t.Errorf("%s: %v (identity %q, enforced %v), want an anonymous refusal, enforced=%v", what, err, ae.Identity, ae.Enforced, enforced)
	}
}

// Flink's znodes made with creator ACLs by a JobManager with a digest
// identity (Flink 1.20's high-availability.zookeeper.client.authorization
// with client.acl creator), on an ensemble with a super user, and on one
// that also enforces authentication: anonymous ckptfs is refused, naming
// the missing credentials, and changes nothing; with Flink's identity it
// takes over; the super user restores; the restored pointers carry their
// original ACLs, and a JobManager of that identity locks them again.
// The super user's ckptfs lists Flink's identity in zk-acl: the
// takeover's ckptfs znodes are that identity's.
func TestIntegration_SecuredCreatorACL(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  zktest.Security
	}{
		{"digest", zktest.Security{SuperPassword: superPassword}},
		{"enforced", zktest.Security{SuperPassword: superPassword, EnforceAuth: []string{"digest"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) { cfg.Security = &tc.sec })
			e := newEnv(t, c)
			flinkIdentity := func(cfg *flinkemu.Config) { cfg.Digest, cfg.CreatorACL = flinkUser+":"+flinkPassword, true }
			s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false, flinkIdentity)
			super := zktest.Connect(t, c.Servers(), zktest.WithDigest("super", superPassword))
			ctx := testContext(t, 2*time.Minute)

			// Every znode of Flink's is its identity's only.
			flinkID := digest(flinkUser, flinkPassword).Identity()
			before := e.flinkTree(super.Conn)
			acls := map[string][]zk.ACL{}
			for path := range before {
				acls[path] = aclOf(t, super.Conn, path)
			}
			for _, id := range []int64{3, 4, 5} {
				for _, p := range []string{s.cps[id].Znode, s.cps[id].Znode + "/locks"} {
					if got := acls[p]; !slices.Equal(got, []zk.ACL{flinkID}) {
						t.Fatalf("ACL of %s is %v, want only %v (creator)", p, got, flinkID)
					}
				}
			}

			anon := e.bridge("dc2")
			_, err := anon.Status(ctx)
			requireNotAuthorized(t, "status without credentials", err, tc.name == "enforced")
			s.jm.Close()
			_, err = anon.Takeover(ctx, TakeoverOptions{})
			requireNotAuthorized(t, "takeover without credentials", err, tc.name == "enforced")
			requireSameTree(t, "a refused takeover", before.WithoutEphemeral(), e.flinkTree(super.Conn))

			// Flink's identity takes over; the backups hold the ACLs.
			b := e.bridge("dc2", func(cfg *Config) { cfg.Auth = digest(flinkUser, flinkPassword) })
			st, err := b.Status(ctx)
			if err != nil || len(st.Jobs) != 1 {
				t.Fatalf("status with Flink's identity: %+v, %v", st, err)
			}
			rep, err := b.Takeover(ctx, TakeoverOptions{})
			if err != nil || !slices.Equal(jobReport(t, rep, s.job).Retracted, []int64{5, 3}) {
				t.Fatalf("takeover with Flink's identity: %+v, %v", rep, err)
			}
			for _, id := range []int64{3, 5} {
				data, _, err := super.Get(e.ckptfs + "/default/pruned/" + s.job + "/" + checkpointName(id))
				if err != nil {
					t.Fatal(err)
				}
				bk, err := decodeBackup(data)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(toZK(bk.ACL), acls[s.cps[id].Znode]) || !slices.Equal(toZK(bk.LocksACL), acls[s.cps[id].Znode+"/locks"]) {
					t.Errorf("backup %d holds ACLs %v and %v, the znodes had %v and %v", id, bk.ACL, bk.LocksACL, acls[s.cps[id].Znode], acls[s.cps[id].Znode+"/locks"])
				}
			}

			// The super user restores; every znode is as Flink left it,
			// ACLs included. ckptfs's own znodes are Flink's identity's
			// (the takeover's): zk-acl names it beside the super user,
			// as docs/deploy.md asks, or they would not be ckptfs's.
			for _, undo := range s.undo {
				undo()
			}
			sb := e.bridge("dc2", func(cfg *Config) {
				cfg.Auth = digest("super", superPassword)
				cfg.ACL = []zk.ACL{flinkID, {Perms: zk.PermAll, Scheme: "auth"}}
			})
			rr, err := sb.RestorePruned(ctx, RestoreOptions{})
			if err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{3, 5}) {
				t.Fatalf("restore by the super user: %+v, %v", rr, err)
			}
			requireSameTree(t, "takeover and restore", before.WithoutEphemeral(), e.flinkTree(super.Conn))
			for path := range before.WithoutEphemeral() {
				if got := aclOf(t, super.Conn, path); !slices.Equal(got, acls[path]) {
					t.Errorf("ACL of %s after restore: %v, was %v", path, got, acls[path])
				}
			}

			// A JobManager with Flink's identity recovers and locks them.
			jm, _ := e.startJM(flinkemu.Flink1_20, false, flinkIdentity)
			res, err := jm.Recover(s.job, flinkemu.RestoreOptions{})
			if err != nil || res.CheckpointID != 5 {
				t.Fatalf("recovery from the restored pointers: %+v, %v", res, err)
			}
			for _, id := range []int64{3, 4, 5} {
				if kids, _, err := super.Children(s.cps[id].Znode + "/locks"); err != nil || len(kids) != 1 {
					t.Errorf("pointer %d's locks after recovery: %v, %v; want the JobManager's lock", id, kids, err)
				}
			}
		})
	}
}

// staticMarkers is a MarkerSource of fixed markers, all complete at L1.
type staticMarkers []Marker

func (m staticMarkers) Markers(context.Context) ([]Marker, error) { return m, nil }
func (m staticMarkers) Level(context.Context, string, int64) (manifest.Level, error) {
	return manifest.L1, nil
}

// What ckptfs creates is ckptfs's: another ZooKeeper client, anonymous
// or with another identity, cannot write active-site, the epoch, the
// takeover lock, markers, backups or the records of put-backs, nor
// create or delete beside them; it may read active-site, the epoch and
// the markers, not the lock, the backups or the records.
func TestIntegration_CkptfsZnodesACL(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	b := e.bridge("dc2", func(cfg *Config) { cfg.Auth = digest("ckptfs", "ckptfspw") })
	ctx := testContext(t, time.Minute)
	if _, err := b.Takeover(ctx, TakeoverOptions{}); err != nil {
		t.Fatal(err)
	}
	// 3 and 5 go back with their records; 4's backup (kept) stays.
	if rr, err := b.RestorePruned(ctx, RestoreOptions{Unverified: true}); err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{3, 5}) {
		t.Fatalf("restore-pruned: %+v, %v", rr, err)
	}
	pub, err := b.NewPublisher(staticMarkers{{JobID: s.job, CheckpointID: 4, Level: manifest.L1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	paths := newCkptfsPaths(e.ckptfs, "default")
	lock, err := b.acquireLock(ctx, paths, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.releaseLock(lock)
	backup := paths.pruned(s.job, 4)
	record := paths.restored(s.job, 5)
	marker := paths.marker("dc2", s.job)

	mine := digest("ckptfs", "ckptfspw").Identity()
	for path, want := range map[string][]zk.ACL{
		paths.activeSite(): {mine, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}},
		marker:             {mine, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}},
		backup:             {mine},
		record:             {mine},
		lock.node:          {mine},
	} {
		if got := aclOf(t, b.Conn(), path); !slices.Equal(got, want) {
			t.Errorf("ACL of %s: %v, want %v", path, got, want)
		}
	}

	for _, intruder := range []struct {
		name string
		opts []zktest.ConnectOption
	}{{"anonymous", nil}, {"another identity", []zktest.ConnectOption{zktest.WithDigest("intruder", "x")}}} {
		t.Run(intruder.name, func(t *testing.T) {
			cl := zktest.Connect(t, c.Servers(), intruder.opts...)
			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, zk.ErrNoAuth) {
					t.Errorf("%s: %v, want NoAuth", what, err)
				}
			}
			for _, p := range []string{paths.activeSite(), paths.epoch(), lock.node, marker, backup, record} {
				_, err := cl.Set(p, []byte("dc1"), -1)
				refused("set "+p, err)
				refused("delete "+p, cl.Delete(p, -1))
			}
			for _, p := range []string{paths.takeover() + "/_c_0-lock-", paths.pruned(s.job, 6), paths.restored(s.job, 6), paths.marker("dc2", flinkemu.NewJobID()), paths.base + "/x"} {
				_, err := cl.Create(p, nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				refused("create "+p, err)
			}
			_, err := cl.SetACL(paths.activeSite(), zk.WorldACL(zk.PermAll), -1)
			refused("set the ACL of active-site", err)
			for _, p := range []string{paths.activeSite(), paths.epoch(), marker} {
				if _, _, err := cl.Get(p); err != nil {
					t.Errorf("read %s: %v, want readable by everyone", p, err)
				}
			}
			for _, p := range []string{backup, record, lock.node} {
				_, _, err := cl.Get(p)
				refused("read "+p, err)
			}
		})
	}
}

// SASL DIGEST-MD5: Flink's znodes made with creator ACLs by a JobManager
// logged in as sasl:flink (a JAAS DigestLoginModule), on an ensemble
// that enforces sasl: ckptfs logged in as the same user takes over and
// restores with the ACLs, also after its session expired (every new
// connection logs in again); a wrong password is a clear error at once.
func TestIntegration_SecuredSASL(t *testing.T) {
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.Security = &zktest.Security{EnforceAuth: []string{"sasl"}, SASLUsers: map[string]string{flinkUser: flinkPassword}}
	})
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false, func(cfg *flinkemu.Config) {
		cfg.SASL, cfg.CreatorACL = flinkUser+":"+flinkPassword, true
	})
	s.jm.Close()
	ctx := testContext(t, 2*time.Minute)

	start := time.Now()
	cfg := e.config("dc2")
	cfg.Auth = &Credentials{Scheme: SchemeSASL, User: flinkUser, Password: "wrong"}
	_, err := New(ctx, cfg, e.verifier())
	var ae *AuthError
	if !errors.As(err, &ae) || !ae.Enforced || ae.Identity != "sasl:flink" || !strings.Contains(err.Error(), "SASL DIGEST-MD5 login as flink") {
		t.Fatalf("a wrong SASL password: %v, want a refused login naming sasl:flink", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a refused login took %v to report", d)
	}

	var proxies []*zktest.Proxy
	b := e.bridge("dc2", func(cfg *Config) {
		cfg.Auth = &Credentials{Scheme: SchemeSASL, User: flinkUser, Password: flinkPassword}
		proxies, cfg.Servers = e.proxies()
	})
	rep, err := b.Takeover(ctx, TakeoverOptions{})
	if err != nil || !slices.Equal(jobReport(t, rep, s.job).Retracted, []int64{5, 3}) {
		t.Fatalf("takeover as sasl:flink: %+v, %v", rep, err)
	}
	zktest.ExpireConnSession(t, b.Conn(), proxies, zktest.WithSASL(flinkUser, flinkPassword))
	for _, undo := range s.undo {
		undo()
	}
	rr, err := b.RestorePruned(ctx, RestoreOptions{})
	if err != nil || !slices.Equal(rr.Jobs[0].Restored, []int64{3, 5}) {
		t.Fatalf("restore as sasl:flink after the session expired: %+v, %v", rr, err)
	}
	want := []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: flinkUser}}
	for _, p := range []string{s.cps[5].Znode, s.cps[5].Znode + "/locks"} {
		if got := aclOf(t, b.Conn(), p); !slices.Equal(got, want) {
			t.Errorf("ACL of %s after restore: %v, want %v", p, got, want)
		}
	}
}

// A TLS-only ensemble with an x509 super user, and Flink's znodes made
// with creator ACLs by a JobManager of digest identity: ckptfs connects
// with the CA, and anonymous it is refused; with the super user's client
// certificate it takes over (its own znodes are that x509 identity's);
// it refuses a server whose certificate it cannot verify, at once and
// saying so.
func TestIntegration_SecuredTLS(t *testing.T) {
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.Security = &zktest.Security{TLS: true, X509SuperUser: "CN=ckptfs-super"}
	})
	e := newEnv(t, c)
	ca := c.CA()
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false, func(cfg *flinkemu.Config) {
		cfg.TLS, cfg.Digest, cfg.CreatorACL = ca.ClientTLS(t, nil), flinkUser+":"+flinkPassword, true
	})
	s.jm.Close()
	ctx := testContext(t, time.Minute)

	b := e.bridge("dc2", func(cfg *Config) { cfg.TLS = ca.ClientTLS(t, nil) })
	_, err := b.Status(ctx)
	requireNotAuthorized(t, "status over TLS without an identity", err, false)
	cert := ca.Issue(t, "ckptfs-super")
	bc := e.bridge("dc2", func(cfg *Config) { cfg.TLS = ca.ClientTLS(t, &cert) })
	rep, err := bc.Takeover(ctx, TakeoverOptions{})
	if err != nil || !slices.Equal(jobReport(t, rep, s.job).Retracted, []int64{5, 3}) {
		t.Fatalf("takeover over TLS as the x509 super user: %+v, %v", rep, err)
	}
	want := []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: cert.Subject}, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}
	if got := aclOf(t, bc.Conn(), e.ckptfs+"/default/active-site"); !slices.Equal(got, want) {
		t.Errorf("ACL of active-site made with a client certificate: %v, want %v", got, want)
	}
	// Another connection with the certificate finds them its own: the
	// subject ckptfs computes is the x509 identity ZooKeeper gave.
	bc2 := e.bridge("dc2", func(cfg *Config) { cfg.TLS = ca.ClientTLS(t, &cert) })
	if _, err := bc2.Status(ctx); err != nil {
		t.Errorf("status with the same certificate: %v", err)
	}

	start := time.Now()
	cfg := e.config("dc2")
	cfg.TLS = zktest.NewCA(t, "another CA").ClientTLS(t, nil)
	_, err = New(ctx, cfg, e.verifier())
	if err == nil || !strings.Contains(err.Error(), "does not verify against the configured CA") {
		t.Fatalf("a server certificate of another CA: %v, want a verification error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %v to report", d)
	}
}

// A call whose context ends while ZooKeeper does not answer returns the
// context's error and leaves the connection to the next call; after the
// servers were stopped for longer than the session timeout, the same
// Bridge works again, authenticated (Flink's creator znodes are readable
// only so).
func TestIntegration_BridgeOutlivesContextsAndOutages(t *testing.T) {
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.Security = &zktest.Security{EnforceAuth: []string{"digest"}}
	})
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false, func(cfg *flinkemu.Config) {
		cfg.Digest, cfg.CreatorACL = flinkUser+":"+flinkPassword, true
	})
	s.jm.Close()
	var proxies []*zktest.Proxy
	b := e.bridge("dc2", func(cfg *Config) {
		cfg.Auth = digest(flinkUser, flinkPassword)
		proxies, cfg.Servers = e.proxies()
	})
	ctx := testContext(t, 2*time.Minute)
	if _, err := b.Status(ctx); err != nil {
		t.Fatal(err)
	}

	for _, p := range proxies {
		p.Block()
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	start := time.Now()
	_, err := b.Status(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("status whose context ended while ZooKeeper was cut off: %v after %v", err, time.Since(start))
	}
	for _, p := range proxies {
		p.Unblock()
	}
	if _, err := b.Status(ctx); err != nil {
		t.Fatalf("status on the same bridge afterwards: %v", err)
	}

	if err := c.Stop(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the bridge to lose its session", func() (bool, error) {
		return b.Session().State != SessionConnected, nil
	})
	time.Sleep(b.Config().SessionTimeout + time.Second)
	if err := c.Start(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the bridge's status to work again", func() (bool, error) {
		st, err := b.Status(ctx)
		return err == nil && len(st.Jobs) == 1, err
	})
	if ss := b.Session(); ss.State != SessionConnected || ss.Losses < 1 || ss.LastRegained.IsZero() || !ss.LastRegained.After(ss.LastLost) {
		t.Errorf("session after the outage: %+v, want connected, a loss and the last outage's bounds", ss)
	}
}

// TestIntegration_IdentityShowsNoDigest: with digest credentials, what
// the Bridge says about its identity (the session it reports to health
// and metrics, its refusals, its log) names the scheme and the user,
// never the hash ZooKeeper's digest identity holds.
func TestIntegration_IdentityShowsNoDigest(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	creds := digest("ckptfs", "ckptfspw")
	hash := strings.TrimPrefix(creds.Identity().ID, "ckptfs:")
	var logged syncBuffer
	b := e.bridge("dc2", func(cfg *Config) {
		cfg.Auth = creds
		cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logged, &testWriter{t: t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if got := b.Session().Identity; got != "digest:ckptfs" {
		t.Errorf("Session().Identity = %q, want digest:ckptfs", got)
	}
	other := zktest.Connect(t, c.Servers(), zktest.WithDigest("other", "x"))
	private := e.root + "-private"
	if _, err := other.Create(private, nil, 0, zk.AuthACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.zk.get(testContext(t, time.Minute), private)
	if !errors.Is(err, ErrNotAuthorized) || !strings.Contains(err.Error(), "as digest:ckptfs") || strings.Contains(err.Error(), hash) {
		t.Errorf("a refused read: %v; want ErrNotAuthorized naming digest:ckptfs without the hash %s", err, hash)
	}
	b.Close()
	if !strings.Contains(logged.String(), "identity=digest:ckptfs") || strings.Contains(logged.String(), hash) {
		t.Errorf("the log names the identity with its hash %s, or not at all:\n%s", hash, logged.String())
	}
}

// syncBuffer is a bytes.Buffer that several goroutines may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
