package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/internal/logkeys"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// daemonHealth reads the daemon's /healthz.
func daemonHealth(t *testing.T, addr string) metrics.Health {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h metrics.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestIntegration_DaemonSurvivesZooKeeperOutage (issue 18, item 3): every
// server of a three-server ensemble that enforces authentication and
// serves clients over TLS only stops
// for longer than every timeout of the daemon (its session, 4s, and the
// retry of its calls, 12s); meanwhile health says since when the session
// is down and the replica receives a checkpoint whole. The servers start
// again: the daemon has a session again, authenticated, within a session
// timeout; its marker catches up with what the replica received; it
// follows active-site again (a takeover by its site promotes it within a
// session timeout); and health and the metrics say how long the outage
// lasted.
func TestIntegration_DaemonSurvivesZooKeeperOutage(t *testing.T) {
	mounttest.RequireFUSE(t)
	const sessionTimeout = 4 * time.Second
	const outage = 16 * time.Second // > the session timeout and the 12s retry
	c := zktest.StartCluster(t, 3, func(cfg *zktest.Config) {
		cfg.Security = &zktest.Security{EnforceAuth: []string{"digest"}, TLS: true}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	top := t.TempDir()
	storage, mnt := filepath.Join(top, "storage"), filepath.Join(top, "mnt")
	os.MkdirAll(storage, 0o755)
	os.MkdirAll(mnt, 0o755)
	creds := writeFile(t, top, "zk-auth", "ckptfs:ckptfspw\n")
	os.Chmod(creds, 0o600)
	zkArgs := []string{"--zk", c.ConnectString(), "--cluster-id", "default", "--zk-auth-file", creds, "--zk-tls-ca", c.CA().CertFile}

	// DC1 is active; its JobManager writes checkpoints, the replica lacks
	// a file of the third; then DC1's Flink is gone.
	if out, stderr, code := ckptfs(t, append([]string{"takeover", "--site", "dc1"}, zkArgs...)...); code != exitOK {
		t.Fatalf("first takeover of dc1: exit %d\n%s%s", code, out, stderr)
	}
	fcfg := flinkemu.DefaultConfig()
	fcfg.Servers, fcfg.Storage, fcfg.Digest, fcfg.TLS = c.Servers(), storage, "flink:flinkpw", c.CA().ClientTLS(t, nil)
	jm, err := flinkemu.Start(ctx, fcfg)
	if err != nil {
		t.Fatal(err)
	}
	job := flinkemu.NewJobID()
	if err := jm.SubmitJob(job); err != nil {
		t.Fatal(err)
	}
	var third *flinkemu.Checkpoint
	for range 3 {
		if third, err = jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	jm.Close()
	missing := third.StateFiles[0]
	if err := os.Rename(missing, missing+".away"); err != nil {
		t.Fatal(err)
	}

	d := startMount(t, append([]string{"--log-format", "json", "--mode", "replica", "--site", "dc2", "--map", fcfg.Mapping(),
		"--poll", "200ms", "--zk-session-timeout", sessionTimeout.String(), "--metrics-addr", "127.0.0.1:0"}, append(zkArgs, storage, mnt)...)...)
	addr := d.metricsAddr(t)
	url := "http://" + addr
	observer := zktest.Connect(t, c.Servers(), zktest.WithDigest("ckptfs", "ckptfspw"), zktest.WithTLS(c.CA().ClientTLS(t, nil)))
	marker := "/ckptfs/default/sites/dc2/jobs/" + job
	markerID := func() int64 {
		data, _, err := observer.Get(marker)
		if err != nil {
			return -2
		}
		var m zkbridge.Marker
		if json.Unmarshal(data, &m) != nil {
			return -2
		}
		return m.CheckpointID
	}
	waitUntil(t, 30*time.Second, "the marker of checkpoint 2", func() bool { return markerID() == 2 })
	waitHealth(t, exitOK, "--metrics-url", url)

	// Every server stops.
	for i := range c.Size() {
		if err := c.Stop(i); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	out := waitHealth(t, exitUnhealthy, "--metrics-url", url)
	if !regexp.MustCompile(`ZooKeeper session (connecting|disconnected) since \S+ \(\d+s\)`).MatchString(out) {
		t.Errorf("health during the outage:\n%s", out)
	}
	if err := os.Rename(missing+".away", missing); err != nil { // the replica catches up
		t.Fatal(err)
	}
	time.Sleep(time.Until(stopped.Add(outage)))
	if h := daemonHealth(t, addr); h.OK || h.Mode != "replica" || h.ZooKeeper.Session == zkbridge.SessionConnected {
		t.Errorf("health at the end of the outage: %+v", h)
	}

	// Every server starts again (together: one alone has no quorum).
	var wg sync.WaitGroup
	errs := make([]error, c.Size())
	for i := range c.Size() {
		wg.Go(func() { errs[i] = c.Start(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	back := time.Now()
	waitUntil(t, 30*time.Second, "a session again", func() bool {
		return daemonHealth(t, addr).ZooKeeper.Session == zkbridge.SessionConnected
	})
	if took := time.Since(back); took > sessionTimeout {
		t.Errorf("the daemon had a session again %v after the servers served, more than its session timeout %v", took, sessionTimeout)
	}
	waitUntil(t, 30*time.Second, "the marker of checkpoint 3", func() bool { return markerID() == 3 })
	t.Logf("marker resynced %v after the servers served", time.Since(back).Round(time.Millisecond))

	// It follows active-site again.
	if out, stderr, code := ckptfs(t, append([]string{"takeover", "--site", "dc2", "--wait", "0", "--map", fcfg.Mapping()}, zkArgs...)...); code != exitOK {
		t.Fatalf("takeover of dc2: exit %d\n%s%s", code, out, stderr)
	} else if !strings.Contains(out, "rollback window: 0 checkpoints (restores 3, the newest Flink completed)") {
		t.Errorf("takeover of dc2 names no rollback window of 0 from checkpoint 3:\n%s", out)
	}
	activated := time.Now()
	waitUntil(t, 30*time.Second, "the mount to turn primary", func() bool { return daemonHealth(t, addr).Mode == "primary" })
	if took := time.Since(activated); took > sessionTimeout {
		t.Errorf("the mount turned primary %v after the takeover, more than the session timeout %v", took, sessionTimeout)
	}

	// Health and the metrics say what happened.
	out = waitHealth(t, exitOK, "--metrics-url", url)
	m := regexp.MustCompile(`note: ZooKeeper: the last outage lasted (\d+)s and ended \S+ ago \((\d+) session loss`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("health after the outage has no note of it:\n%s", out)
	}
	if secs, _ := strconv.Atoi(m[1]); secs < int(outage/time.Second)-1 {
		t.Errorf("health says the outage lasted %ss, it lasted at least %v:\n%s", m[1], outage, out)
	}
	fams := scrapeDaemon(t, addr)
	if v, ok := seriesValue(fams, "ckptfs_zookeeper_last_outage_seconds", "", ""); !ok || v < outage.Seconds()-1 {
		t.Errorf("ckptfs_zookeeper_last_outage_seconds = %v (present %v), want at least %v", v, ok, outage.Seconds())
	}
	if v, ok := seriesValue(fams, "ckptfs_zookeeper_session_losses_total", "", ""); !ok || v < 1 {
		t.Errorf("ckptfs_zookeeper_session_losses_total = %v (present %v)", v, ok)
	}
	for _, line := range d.allLines() {
		keys, _, err := jsonKeys(line)
		if err != nil {
			t.Errorf("not one JSON object: %v: %s", err, line)
		}
		for _, k := range keys {
			if _, ok := logkeys.Keys[k]; !ok && !slices.Contains(logkeys.Reserved, k) {
				t.Errorf("log key %q is not in the vocabulary: %s", k, line)
			}
		}
		if strings.Contains(line, "ckptfspw") {
			t.Errorf("the daemon logged its password: %s", line)
		}
	}
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
