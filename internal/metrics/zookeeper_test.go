package metrics

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// oneMarker is a MarkerSource that holds one job's checkpoint at L2.
type oneMarker struct {
	job string
	id  int64
}

func (m oneMarker) Markers(context.Context) ([]zkbridge.Marker, error) {
	return []zkbridge.Marker{{JobID: m.job, CheckpointID: m.id, Level: manifest.L2}}, nil
}

func (m oneMarker) Level(_ context.Context, job string, id int64) (manifest.Level, error) {
	if job == m.job && id == m.id {
		return manifest.L2, nil
	}
	return manifest.LevelNone, nil
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIntegration_ScrapeZooKeeper runs the ZooKeeper side against a real
// server and an emulated Flink JobManager: the lag rises while Flink
// writes checkpoints the replica does not hold, falls to zero after a
// takeover, and the session state and expirations follow the real
// session.
func TestIntegration_ScrapeZooKeeper(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	storage := t.TempDir()
	fcfg := flinkemu.DefaultConfig()
	fcfg.Servers, fcfg.Storage, fcfg.KeepSubsumedData = c.Servers(), storage, true
	jm, err := flinkemu.Start(ctx, fcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer jm.Close()
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	checkpoint := func(i int) *flinkemu.Checkpoint {
		cp, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	checkpoint(1)
	checkpoint(2)

	var proxies []*zktest.Proxy
	bcfg := zkbridge.DefaultConfig()
	for _, s := range c.Servers() {
		p := zktest.NewProxy(t, s)
		proxies = append(proxies, p)
		bcfg.Servers = append(bcfg.Servers, p.Addr())
	}
	bcfg.Site = "dc2"
	mapping, err := manifest.ParseMapping(fcfg.Mapping())
	if err != nil {
		t.Fatal(err)
	}
	v := mounttest.Verifier(t, []manifest.Mapping{mapping})
	b, err := zkbridge.New(ctx, bcfg, zkbridge.NewSiteVerifier(v, manifest.DefaultCatalogConfig().BackingTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	z := &ZooKeeper{}
	src := Sources{Site: "dc2", ZooKeeper: z}
	if s := scrape(t, src); s.value(t, ZooKeeperSessionState, "state=disconnected") != 1 {
		t.Errorf("before the bridge: %s", s.series(ZooKeeperSessionState))
	}
	z.SetBridge(b)
	z.Lag = NewLagTracker(z.Status, time.Hour)
	if err := z.Lag.Update(ctx); err != nil {
		t.Fatal(err)
	}
	s := scrape(t, src)
	jobL := "job_id=" + job
	if s.value(t, ZooKeeperSessionState, "state=connected") != 1 || s.value(t, ZooKeeperSessionState, "state=connecting") != 0 {
		t.Errorf("session: %s", s.series(ZooKeeperSessionState))
	}
	if s.value(t, FlinkPointer, jobL) != 2 || s.value(t, LagCheckpoints, jobL) != 0 || s.value(t, LagSeconds, jobL) != 0 {
		t.Errorf("a replica that holds everything: pointer %s, lag %s", s.series(FlinkPointer), s.series(LagCheckpoints))
	}

	// DC1 goes on; the replica does not get checkpoints 3 and 4 whole.
	for i := 3; i <= 4; i++ {
		if err := os.Remove(checkpoint(i).StateFiles[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Lag.Update(ctx); err != nil {
		t.Fatal(err)
	}
	s = scrape(t, src)
	if got := s.value(t, FlinkPointer, jobL); got != 4 {
		t.Errorf("Flink's pointer = %v, want 4", got)
	}
	if got := s.value(t, FlinkCompletePointer, jobL); got != 2 {
		t.Errorf("complete pointer = %v, want 2", got)
	}
	if got := s.value(t, LagCheckpoints, jobL); got != 2 {
		t.Errorf("lag = %v checkpoints, want 2", got)
	}
	if got := s.value(t, LagSeconds, jobL); got != 120 {
		t.Errorf("lag = %v seconds, want 120 (two checkpoints a minute apart)", got)
	}
	if got := s.value(t, LagLastUpdate, "site=dc2"); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("lag computed at %v", got)
	}
	if code, h := healthz(t, src, "max_lag=1"); code != 503 || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], "2 checkpoints ahead") {
		t.Errorf("/healthz?max_lag=1: %d %q", code, h.Problems)
	}
	if code, h := healthz(t, src, "max_lag_seconds=60"); code != 503 || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], "120 seconds ahead") {
		t.Errorf("/healthz?max_lag_seconds=60: %d %q", code, h.Problems)
	}
	if code, h := healthz(t, src, "max_lag=2&max_lag_seconds=120"); code != 200 || !h.OK || h.ZooKeeper == nil || h.ZooKeeper.Session != zkbridge.SessionConnected {
		t.Errorf("/healthz?max_lag=2: %d %+v", code, h)
	}

	// The marker publisher's actions.
	pub, err := b.NewPublisher(oneMarker{job: job, id: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	z.SetPublisher(pub)
	s = scrape(t, src)
	if s.value(t, ReconcileActions, "action=write") != 1 || s.value(t, ReconcilePasses, "kind=full") != 1 || s.value(t, ReconcileActions, "action=refused") != 0 {
		t.Errorf("publisher: %s / %s", s.series(ReconcileActions), s.series(ReconcilePasses))
	}

	// DC1 is lost; the takeover retracts what dc2 cannot restore: the lag
	// falls to zero.
	jm.Close()
	rep, err := b.Takeover(ctx, zkbridge.TakeoverOptions{Wait: 30 * time.Second})
	if err != nil || !rep.Activated {
		t.Fatalf("takeover: %v %+v", err, rep)
	}
	site, epoch, err := b.ActiveSite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	z.SetActiveSite(site, epoch)
	if err := z.Lag.Update(ctx); err != nil {
		t.Fatal(err)
	}
	s = scrape(t, src)
	if s.value(t, FlinkPointer, jobL) != 2 || s.value(t, LagCheckpoints, jobL) != 0 {
		t.Errorf("after the takeover: pointer %s, lag %s", s.series(FlinkPointer), s.series(LagCheckpoints))
	}
	if s.value(t, SiteActive, "") != 1 || s.value(t, ActiveSiteEpoch, "") != 1 {
		t.Errorf("active site: %s, epoch %s", s.series(SiteActive), s.series(ActiveSiteEpoch))
	}
	if read := s.value(t, ActiveSiteLastRead, ""); time.Since(time.Unix(int64(read), 0)) > time.Minute {
		t.Errorf("active-site last read at %v", read)
	}
	// The active site's sweeper: nothing stray.
	sw, err := b.NewSweeper(0)
	if err != nil {
		t.Fatal(err)
	}
	if swept, err := sw.Pass(ctx); err != nil || len(swept) > 0 {
		t.Fatalf("sweep: %v %v", swept, err)
	}
	z.SetSweeper(sw)
	if s := scrape(t, src); s.value(t, SweepActions, "action=retract") != 0 || s.value(t, SweepActions, "action=failure") != 0 || s.value(t, SweepActions, "action=skipped_locked") != 0 {
		t.Errorf("sweeper: %s", s.series(SweepActions))
	}

	// The servers expire the session; the client gets a new one.
	zktest.ExpireConnSession(t, b.Conn(), proxies)
	waitUntil(t, "a new session", func() bool { return b.Session().State == zkbridge.SessionConnected })
	s = scrape(t, src)
	if s.value(t, ZooKeeperExpirations, "") != 1 || s.value(t, ZooKeeperSessionState, "state=connected") != 1 {
		t.Errorf("after an expiry: expirations %s, state %s", s.series(ZooKeeperExpirations), s.series(ZooKeeperSessionState))
	}
	// What happened meanwhile: a session lost, an outage of about the
	// session timeout, and health's note of it.
	if s.value(t, ZooKeeperSessionLosses, "") < 1 || s.value(t, ZooKeeperLastOutage, "") < 1 || s.value(t, ZooKeeperStateSince, "") <= 0 {
		t.Errorf("after an expiry: losses %s, last outage %s, since %s", s.series(ZooKeeperSessionLosses), s.series(ZooKeeperLastOutage), s.series(ZooKeeperStateSince))
	}
	if code, h := healthz(t, src, ""); code != 200 || len(h.Notes) != 1 || !strings.Contains(h.Notes[0], "the last outage lasted") ||
		h.ZooKeeper.LastOutage == nil || h.ZooKeeper.LastOutage.Seconds < 1 || h.ZooKeeper.Losses < 1 {
		t.Errorf("/healthz after an expiry: %d %+v", code, h)
	}

	// Cut off from every server: the session is down and health says so.
	for _, p := range proxies {
		p.Block()
		p.DropConns()
	}
	waitUntil(t, "the client to notice", func() bool { return b.Session().State != zkbridge.SessionConnected })
	if code, h := healthz(t, src, ""); code != 503 || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], "ZooKeeper session") || !strings.Contains(h.Problems[0], " since ") {
		t.Errorf("/healthz while cut off: %d %q", code, h.Problems)
	}
	for _, p := range proxies {
		p.Unblock()
	}
	b.Close()
	if s := scrape(t, src); s.value(t, ZooKeeperSessionState, "state=closed") != 1 {
		t.Errorf("after Close: %s", s.series(ZooKeeperSessionState))
	}
}

// TestIntegration_HealthIdentity: /healthz, served without
// authentication, names ckptfs's ZooKeeper identity by scheme and user,
// never with the hash of its digest identity (an unsalted SHA-1 of
// user:password, which lets a reader guess the password offline).
func TestIntegration_HealthIdentity(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	creds := &zkbridge.Credentials{Scheme: zkbridge.SchemeDigest, User: "ckptfs", Password: "ckptfspw"}
	bcfg := zkbridge.DefaultConfig()
	bcfg.Servers, bcfg.Auth = c.Servers(), creds
	b, err := zkbridge.New(context.Background(), bcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	z := &ZooKeeper{}
	z.SetBridge(b)
	_, h := healthz(t, Sources{Site: "dc2", ZooKeeper: z}, "")
	if h.ZooKeeper == nil || h.ZooKeeper.Identity != "digest:ckptfs" {
		t.Errorf("/healthz zookeeper: %+v, want the identity digest:ckptfs (not %s)", h.ZooKeeper, creds.Identity().ID)
	}
}
