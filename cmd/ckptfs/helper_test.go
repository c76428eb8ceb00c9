package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The options a .mount unit, fstab or mount(8) pass: the generic ones are
// ignored, every mount setting is an option, anything else is refused.
func TestMountHelperOptions(t *testing.T) {
	cases := []struct {
		args []string
		want string
		fake bool
	}{
		{[]string{"/nas", "/flink", "-o", "rw,_netdev,nofail,noauto,x-systemd.requires=nas.mount,x-systemd.automount,x-mount.mkdir,defaults,allow_other,site=dc2,config=/etc/ckptfs/ckptfs.yaml,dev,suid,exec,noatime,relatime,comment=systemd.automount,user,auto"},
			"mount --allow-other --site=dc2 --config=/etc/ckptfs/ckptfs.yaml /nas /flink", false},
		// What mount(8) adds: -n, -s, -v, and -t TYPE or -N NAMESPACE with
		// an argument.
		{[]string{"-n", "/nas", "-s", "/flink", "-t", "fuse.ckptfs", "-N", "/proc/1/ns/mnt", "-v", "-o", "mode=primary"},
			"mount --mode=primary /nas /flink", false},
		// -f (fake), also among other short flags.
		{[]string{"/nas", "/flink", "-f", "-o", "site=dc1"}, "mount --site=dc1 /nas /flink", true},
		{[]string{"-nfv", "/nas", "/flink"}, "mount /nas /flink", true},
		{[]string{"/nas", "/flink", "-omode=replica,poll=1s"}, "mount --mode=replica --poll=1s /nas /flink", false},
		// A quoted value keeps its commas, as libmount quotes them.
		{[]string{"/nas", "/flink", "-o", `zk="zk1:2181,zk2:2181,zk3:2181",cluster-id=/orders`},
			"mount --zk=zk1:2181,zk2:2181,zk3:2181 --cluster-id=/orders /nas /flink", false},
		// FUSE spells allow_other with "_"; so may every setting.
		{[]string{"/nas", "/flink", "-o", "allow_other=false,seal_read_unwritten,lease_duration=30s,log_level=debug,path-root=/f"},
			"mount --allow-other=false --seal-read-unwritten --lease-duration=30s --log-level=debug --path-root=/f /nas /flink", false},
		{[]string{"/nas", "/flink", "-o", "map=hdfs://nn/flink=/nas,map=/flink=/nas", "-o", "hidden=*.part"},
			"mount --map=hdfs://nn/flink=/nas --map=/flink=/nas --hidden=*.part /nas /flink", false},
		{[]string{"/nas", "/flink"}, "mount /nas /flink", false},
	}
	for _, tc := range cases {
		got, fake, err := mountHelperArgs(tc.args)
		if err != nil || strings.Join(got, " ") != tc.want || fake != tc.fake {
			t.Errorf("%q:\n got %q, fake %v, %v\nwant %q, fake %v", tc.args, strings.Join(got, " "), fake, err, tc.want, tc.fake)
		}
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"/nas", "/flink", "-o", "frob=1"}, `unknown mount option "frob" (ckptfs takes allow-other, audit-period, backing, backing-concurrency, backing-timeout, cluster-id, config,`},
		{[]string{"/nas", "/flink", "-o", "fsname=x"}, `unknown mount option "fsname"`},
		{[]string{"/nas", "/flink", "-o", "dry-run"}, `unknown mount option "dry-run"`},
		{[]string{"/nas", "/flink", "-o", "site"}, "mount option site needs a value (site=...)"},
		{[]string{"/nas", "/flink", "-o", `zk="zk1:2181,zk2:2181`}, "unbalanced quote"},
		{[]string{"/nas", "/flink", "-o"}, "-o needs options"},
		{[]string{"/nas"}, "usage: mount.fuse.ckptfs SOURCE MOUNTPOINT"},
		{[]string{"/nas", "/flink", "/extra"}, "usage:"},
	}
	for _, tc := range bad {
		if _, _, err := mountHelperArgs(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.args, err, tc.want)
		}
	}
}

// The helper checks the settings before it starts the daemon, so that
// mount(8) and systemd show the error and its exit status.
func TestMountHelperRefusesBeforeStarting(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, helperName)
	if err := os.Symlink(binary, helper); err != nil {
		t.Fatal(err)
	}
	conf := writeFile(t, dir, "ckptfs.yaml", "mode: primary\nsiet: dc2\n")
	for _, tc := range []struct {
		opts, want string
	}{
		{"mode=fenced", `mode "fenced": want replica or primary`},
		{"poll=5x", `invalid argument "5x" for "--poll"`},
		{"config=" + conf, `ckptfs.yaml:2: unknown key "siet" (did you mean "site"?)`},
		{"zk=zk1:2181", "site is required with ZooKeeper"},
		{"bogus", `unknown mount option "bogus"`},
	} {
		cmd := exec.Command(helper, dir, dir, "-o", "rw,_netdev,"+tc.opts)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), tc.want) {
			t.Errorf("-o %s: %v\n%s\nwant exit 3 and %q", tc.opts, err, out, tc.want)
		}
	}
	// -f (mount -f) checks and mounts nothing.
	good := writeFile(t, dir, "good.yaml", "mode: primary\nsite: dc2\npoll: 1s\n")
	backing, mnt := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	if out, err := exec.Command(helper, backing, mnt, "-f", "-o", "rw,_netdev,config="+good).CombinedOutput(); err != nil {
		t.Errorf("-f: %v\n%s", err, out)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), " "+mnt+" ") {
		t.Errorf("-f mounted %s", mnt)
	}
}
