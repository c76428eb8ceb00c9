package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// A connect string with an empty or malformed server is refused by every
// command, from the flag, the environment, the file and the mount
// options alike, naming the setting and where it came from; mount refuses
// it before mounting.
func TestZooKeeperConnectStringRefused(t *testing.T) {
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	conf := writeFile(t, dir, "zk.yaml", "site: dc2\nzk: 127.0.0.1:1, 127.0.0.1:2,\n")
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"mount flag", nil, []string{"mount", "--site", "dc2", "--zk", "127.0.0.1:1,,127.0.0.1:2", backing, mnt},
			`zk "127.0.0.1:1,,127.0.0.1:2": server 2 is empty`},
		{"mount environment", []string{"CKPTFS_ZK=127.0.0.1:1, :2"}, []string{"mount", "--site", "dc2", backing, mnt},
			`CKPTFS_ZK: zk "127.0.0.1:1, :2": server ":2": want HOST:PORT`},
		{"mount file", nil, []string{"mount", "--config", conf, backing, mnt},
			`zk.yaml:2: zk "127.0.0.1:1, 127.0.0.1:2,": server 3 is empty`},
		{"mount bad port", nil, []string{"mount", "--site", "dc2", "--zk", "127.0.0.1:218100", backing, mnt},
			`zk "127.0.0.1:218100": server "127.0.0.1:218100": bad port`},
		{"config check", nil, []string{"config", "check", "--config", conf},
			`zk.yaml:2: zk "127.0.0.1:1, 127.0.0.1:2,": server 3 is empty`},
		{"status", nil, []string{"status", "--zk", "127.0.0.1:1,"}, `zk "127.0.0.1:1,": server 2 is empty`},
		{"takeover", []string{"CKPTFS_ZK=127.0.0.1:1 ,,"}, []string{"takeover", "--site", "dc2"}, `CKPTFS_ZK: zk "127.0.0.1:1 ,,": server 2 is empty`},
		{"restore-pruned", nil, []string{"restore-pruned", "--config", conf}, `zk.yaml:2: zk "127.0.0.1:1, 127.0.0.1:2,": server 3 is empty`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBinary(t, 15*time.Second, tc.env, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d (-1: still running after 15s), stderr %q; want exit 3 and %q", r.code, r.stderr, tc.want)
			}
			if isFUSEMount(t, mnt) {
				t.Errorf("mounted %s", mnt)
				syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
		})
	}

	// The mount helper checks it before it starts the daemon.
	helper := filepath.Join(dir, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts string
		code int
		want string
	}{
		{`site=dc2,zk="127.0.0.1:1,"`, exitUsage, `zk "127.0.0.1:1,": server 2 is empty`},
		{`site=dc2,zk="127.0.0.1:1, 127.0.0.1:2"`, exitOK, ""},
	} {
		out, err := exec.Command(helper, backing, mnt, "-f", "-o", tc.opts).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("helper -f -o %s: exit %d\n%s\nwant exit %d and %q", tc.opts, code, out, tc.code, tc.want)
		}
	}
}

// TestMountZooKeeperWithBlanks: blanks around the servers of the connect
// string, from the flag, the environment, the file or the mount options,
// do not keep the mount from ZooKeeper: it follows active-site and is
// promoted.
func TestMountZooKeeperWithBlanks(t *testing.T) {
	mounttest.RequireFUSE(t)
	cluster := zktest.StartCluster(t, 1)
	client := zktest.Connect(t, cluster.Servers())
	for _, p := range []string{"/ckptfs", "/ckptfs/c1"} {
		client.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
	}
	if _, err := client.Create("/ckptfs/c1/active-site", []byte("dc2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	addr := cluster.Servers()[0]
	blanks := " " + addr + " ,  " + addr + " "
	top := t.TempDir()
	conf := writeFile(t, top, "ckptfs.yaml", `zk: "`+blanks+`"`+"\n")
	promoted := func(t *testing.T, mnt string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("zk %q: the replica was not promoted within 15s", blanks)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, how := range []struct {
		name string
		env  string
		args []string
	}{
		{"flag", "", []string{"--zk", blanks}},
		{"environment", blanks, nil},
		{"file", "", []string{"--config", conf}},
	} {
		t.Run(how.name, func(t *testing.T) {
			if how.env != "" {
				t.Setenv("CKPTFS_ZK", how.env)
			}
			backing, mnt := filepath.Join(top, how.name, "backing"), filepath.Join(top, how.name, "mnt")
			os.MkdirAll(backing, 0o755)
			os.MkdirAll(mnt, 0o755)
			d := startMount(t, append(how.args, "--mode", "replica", "--site", "dc2", "--cluster-id", "c1", "--poll", "200ms", backing, mnt)...)
			promoted(t, mnt)
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM", code)
			}
		})
	}
	t.Run("mount option", func(t *testing.T) {
		backing, mnt := filepath.Join(top, "helper", "backing"), filepath.Join(top, "helper", "mnt")
		os.MkdirAll(backing, 0o755)
		os.MkdirAll(mnt, 0o755)
		helper := filepath.Join(top, helperName)
		if err := os.Symlink(binary, helper); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(top, "helper.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		h := exec.Command(helper, backing, mnt, "-o", `rw,mode=replica,site=dc2,cluster-id=c1,poll=200ms,zk="`+blanks+`"`)
		h.Stdout, h.Stderr = logf, logf
		if err := h.Run(); err != nil {
			out, _ := os.ReadFile(logf.Name())
			t.Fatalf("helper: %v\n%s", err, out)
		}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
		promoted(t, mnt)
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Error(err)
		}
	})
}
