//go:build linux

package realflink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_RealFlinkSecuredZooKeeper (issue 19): real Flink (the
// oldest release marked test that has
// high-availability.zookeeper.client.authorization, 1.20) with
// client.acl creator and a digest identity, on an ensemble that enforces
// digest authentication and has a super user. Flink's pointers are its
// identity's only. Anonymous ckptfs is refused, naming the credentials;
// with Flink's identity the takeover retracts the checkpoint this site
// does not hold, its backup recording the ACLs; the super user restores
// it once the site holds it, with exactly those ACLs; and Flink, started
// again, restores that checkpoint, locks its pointer and goes on
// checkpointing. About a minute.
func TestIntegration_RealFlinkSecuredZooKeeper(t *testing.T) {
	var d Dist
	for _, r := range TestReleases(t) {
		if r.AtLeast(1, 20) {
			d = FindDist(t, r)
			break
		}
	}
	if d.Version == "" {
		t.Fatal("no release marked test has client.authorization (1.20+)")
	}
	mounttest.RequireFUSE(t) // root, for the site's mount namespace
	c := zktest.StartCluster(t, 1, func(cfg *zktest.Config) {
		cfg.MaxSessionTimeout = 5 * time.Second
		cfg.Security = &zktest.Security{SuperPassword: "superpw", EnforceAuth: []string{"digest"}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*stepTimeout)
	defer cancel()
	root := t.TempDir()
	flinkDir := filepath.Join(root, "flink")
	clusterID := "/secured-" + strings.ReplaceAll(d.Version, ".", "_")
	site := NewSite(t, "dc1", filepath.Join(root, "log"))
	ports := freePorts(t, siteAddr, 2)
	fl, err := NewCluster(site, ClusterConfig{
		Dist: d, Dir: filepath.Join(root, "dc1"), Addr: siteAddr, RESTPort: ports[0], RPCPort: ports[1],
		ZK: c.ConnectString(), PathRoot: pathRoot, ClusterID: clusterID, SessionTimeout: flinkSession,
		CheckpointsDir: filepath.Join(flinkDir, "checkpoints"), HADir: filepath.Join(flinkDir, "ha"),
		Interval: interval, Retained: retained,
		Extra: map[string]string{
			"high-availability.zookeeper.client.acl":           "creator",
			"high-availability.zookeeper.client.authorization": "digest:'flink:flinkpw'",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) (jm, tm *Process) {
		jm, err := fl.StartJobManager(name + "-jobmanager")
		if err != nil {
			t.Fatal(err)
		}
		tm, err = fl.StartTaskManager(name + "-taskmanager")
		if err != nil {
			t.Fatal(err)
		}
		waitUntil(t, stepTimeout, "the TaskManager to register", func() bool {
			o, err := fl.REST.Overview(ctx)
			return err == nil && o.TaskManagers >= 1
		}, jm, tm)
		return jm, tm
	}
	jm, tm := start("first")
	job, err := fl.REST.Submit(ctx, JobJar(t, d), []string{"--report", filepath.Join(root, "report.txt"), "--rate", strconv.Itoa(rate),
		"--keys", strconv.Itoa(keys), "--payload", strconv.Itoa(payload), "--parallelism", strconv.Itoa(parallelism)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	super := zktest.Connect(t, c.Servers(), zktest.WithDigest("super", "superpw"))
	pointers := pathRoot + clusterID + "/jobs/" + job + "/checkpoints"
	var ids []int64
	waitUntil(t, stepTimeout, "three pointers", func() bool {
		ids = pointerIDs(super.Conn, pointers)
		return len(ids) >= 3
	}, jm, tm)
	jm.Kill()
	tm.Kill()

	// Flink's znodes are its identity's only.
	flinkACL := zk.DigestACL(zk.PermAll, "flink", "flinkpw")
	ids = pointerIDs(super.Conn, pointers)
	newest := ids[len(ids)-1]
	pointer := fmt.Sprintf("%s/%019d", pointers, newest)
	for _, p := range []string{pathRoot, pathRoot + clusterID, pointer, pointer + "/locks"} {
		if acl, _, err := super.GetACL(p); err != nil || !slices.Equal(acl, flinkACL) {
			t.Fatalf("ACL of %s: %v, %v; want Flink's creator ACL %v", p, acl, err, flinkACL)
		}
	}
	// This site lacks the newest checkpoint's _metadata.
	metadata := filepath.Join(flinkDir, "checkpoints", job, fmt.Sprintf("chk-%d", newest), "_metadata")
	if err := os.Rename(metadata, metadata+".away"); err != nil {
		t.Fatal(err)
	}

	creds := func(name, content string) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flinkCreds, superCreds := creds("flink-auth", "flink:flinkpw\n"), creds("super-auth", "super:superpw\n")
	run := func(args ...string) (int, string) {
		args = append(args, "--zk", c.ConnectString(), "--site", "dc1", "--cluster-id", clusterID, "--path-root", pathRoot,
			"--map", "file:"+flinkDir+"="+flinkDir, "--flink-session-timeout", flinkSession.String())
		out, err := exec.Command(binary, args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run("status"); code != 3 || !strings.Contains(out, "anonymously: no credentials") || !strings.Contains(out, "zk-auth-file") {
		t.Errorf("anonymous status: exit %d\n%s", code, out)
	}
	if code, out := run("takeover", "--zk-auth-file", flinkCreds, "--wait", "60s"); code != 0 || !strings.Contains(out, "retracted: "+strconv.FormatInt(newest, 10)) {
		t.Fatalf("takeover as Flink's identity: exit %d\n%s", code, out)
	}
	if ok, _, _ := super.Exists(pointer); ok {
		t.Fatalf("pointer %d not retracted", newest)
	}
	if err := os.Rename(metadata+".away", metadata); err != nil {
		t.Fatal(err)
	}
	// ckptfs's own znodes are Flink's identity's (the takeover's):
	// zk-acl names it beside the super user (docs/deploy.md).
	flinkID := "digest:" + flinkACL[0].ID + ":cdrwa"
	if code, out := run("restore-pruned", "--zk-auth-file", superCreds, "--zk-acl", flinkID, "--zk-acl", "auth::cdrwa"); code != 0 {
		t.Fatalf("restore-pruned as the super user: exit %d\n%s", code, out)
	}
	for _, p := range []string{pointer, pointer + "/locks"} {
		if acl, _, err := super.GetACL(p); err != nil || !slices.Equal(acl, flinkACL) {
			t.Errorf("ACL of %s after restore-pruned: %v, %v; want %v", p, acl, err, flinkACL)
		}
	}

	// Flink restores the restored pointer, locks it, and goes on.
	jm, tm = start("second")
	restored := waitRestored(ctx, t, fl, job)
	if restored.ID != newest {
		t.Errorf("Flink restored checkpoint %d, want the restored pointer %d", restored.ID, newest)
	}
	waitUntil(t, stepTimeout, "Flink's lock on the restored pointer", func() bool {
		kids, _, err := super.Children(pointer + "/locks")
		return err == nil && len(kids) == 1
	}, jm, tm)
	waitUntil(t, stepTimeout, "two new checkpoints", func() bool {
		cp, err := fl.REST.Checkpoints(ctx, job)
		return err == nil && cp.Latest.Completed != nil && cp.Latest.Completed.ID >= newest+2
	}, jm, tm)
	for _, p := range []*Process{jm, tm} {
		log, _ := os.ReadFile(p.FlinkLog)
		for _, refusal := range []string{"NoAuth", "InvalidACL", "AuthFailed"} {
			if strings.Contains(string(log), refusal) {
				t.Errorf("%s in %s: ZooKeeper refused Flink", refusal, p.FlinkLog)
			}
		}
	}
}

// pointerIDs lists the pointer ids under dir, ascending.
func pointerIDs(conn *zk.Conn, dir string) []int64 {
	names, _, err := conn.Children(dir)
	if err != nil {
		return nil
	}
	var ids []int64
	for _, n := range names {
		if id, err := strconv.ParseInt(n, 10, 64); err == nil && len(n) == 19 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
