package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// testUser is a system user the test creates and removes.
type testUser struct {
	name     string
	uid, gid uint32
}

// addUser creates a system user with its own group; a cleanup removes
// both. It fails the test when useradd is missing (a mount test runs as
// root on Linux, where it is part of passwd).
func addUser(t *testing.T, prefix string) testUser {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		t.Fatalf("useradd %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return testUser{name: name, uid: uint32(uid), gid: uint32(gid)}
}

// do runs a shell command as u and says how it ended: ok, or the errno
// the shell reports (EACCES, EPERM, EROFS, ENOENT).
func (u testUser) do(t *testing.T, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	switch s := string(out); {
	case err == nil:
		return "ok"
	case strings.Contains(s, "Permission denied"):
		return "EACCES"
	case strings.Contains(s, "Operation not permitted"):
		return "EPERM"
	case strings.Contains(s, "Read-only file system"):
		return "EROFS"
	case strings.Contains(s, "No such file"):
		return "ENOENT"
	default:
		return fmt.Sprintf("other (%v: %s)", err, strings.TrimSpace(s))
	}
}

// TestMountPermissionsNonRootUsers (issue 19, item 4): the mount runs as
// root with allow_other and default_permissions (the defaults). A
// non-root flink user may do through it exactly what the backing
// directory lets it do, no more: on a primary read and write its own
// job's files, not a root-owned file or directory; a second user may not
// even list flink's job. On a replica flink reads what is complete and
// every change fails with EROFS, and the second user still gets EACCES.
func TestMountPermissionsNonRootUsers(t *testing.T) {
	mounttest.RequireFUSE(t)
	flink := addUser(t, "ckflink")
	other := addUser(t, "ckother")

	top := t.TempDir()
	// t.TempDir's directories are root's only; users must traverse them.
	for d := top; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	backing, mnt := filepath.Join(top, "backing"), filepath.Join(top, "mnt")
	jobDir := filepath.Join(backing, "checkpoints", "0a1b2c3d4e5f60718293a4b5c6d7e8f9")
	writeCheckpoint(t, jobDir, 1, 10, 20)
	os.MkdirAll(mnt, 0o755)
	rootDir := filepath.Join(backing, "root-only")
	os.MkdirAll(rootDir, 0o755)
	os.WriteFile(filepath.Join(backing, "root-secret"), []byte("x"), 0o600)
	// Flink's job directory is flink's: 0750, files 0640.
	filepath.Walk(jobDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		os.Lchown(p, int(flink.uid), int(flink.gid))
		if info.IsDir() {
			return os.Chmod(p, 0o750)
		}
		return os.Chmod(p, 0o640)
	})
	os.Chmod(filepath.Join(backing, "checkpoints"), 0o755)

	rel := func(p string) string { r, _ := filepath.Rel(backing, p); return r }
	chk := filepath.Join(jobDir, "chk-1")
	type op struct {
		what   string
		script string
		path   string
	}
	ops := []op{
		{"read a state file", `cat "$1" >/dev/null`, filepath.Join(chk, "state-0")},
		{"list the job", `ls "$1" >/dev/null`, jobDir},
		{"create a file in the job", `echo x > "$1"`, filepath.Join(jobDir, "new-%s")},
		{"chmod a state file", `chmod 0600 "$1"`, filepath.Join(chk, "state-1")},
		{"read a root-only file", `cat "$1" >/dev/null`, filepath.Join(backing, "root-secret")},
		{"create in a root directory", `echo x > "$1"`, filepath.Join(rootDir, "new-%s")},
	}
	// What the backing directory allows each user, asked of it directly.
	allowed := map[string]string{}
	for _, u := range []testUser{flink, other} {
		for _, o := range ops {
			p := o.path
			if strings.Contains(p, "%s") {
				p = fmt.Sprintf(p, u.name+"-direct")
			}
			allowed[u.name+o.what] = u.do(t, o.script, p)
		}
	}
	for key, want := range map[string]string{
		flink.name + "read a state file": "ok", flink.name + "create a file in the job": "ok", flink.name + "chmod a state file": "ok",
		flink.name + "read a root-only file": "EACCES", flink.name + "create in a root directory": "EACCES",
		other.name + "read a state file": "EACCES", other.name + "list the job": "EACCES", other.name + "create a file in the job": "EACCES",
	} {
		if allowed[key] != want {
			t.Fatalf("the backing directory itself: %s: %s, want %s (the test's premise)", key, allowed[key], want)
		}
	}
	os.Chmod(filepath.Join(chk, "state-1"), 0o640)
	// The files the direct runs created are not part of a checkpoint.
	for _, u := range []testUser{flink, other} {
		os.Remove(filepath.Join(jobDir, "new-"+u.name+"-direct"))
	}

	for _, mode := range []string{"primary", "replica"} {
		t.Run(mode, func(t *testing.T) {
			d := startMount(t, "--mode", mode, backing, mnt)
			for _, u := range []testUser{flink, other} {
				for _, o := range ops {
					p := filepath.Join(mnt, rel(o.path))
					if strings.Contains(p, "%s") {
						p = fmt.Sprintf(p, u.name+"-"+mode)
					}
					want := allowed[u.name+o.what]
					changes := !strings.HasPrefix(o.what, "read") && !strings.HasPrefix(o.what, "list")
					if mode == "replica" && changes && want == "ok" {
						want = "EROFS" // what the backing allows, a replica refuses
					}
					if got := u.do(t, o.script, p); got != want {
						t.Errorf("%s through the %s mount: %s %s: %s, want %s", u.name, mode, o.what, p, got, want)
					}
				}
			}
			os.Chmod(filepath.Join(chk, "state-1"), 0o640)
			if code := d.stop(t); code != 0 {
				t.Errorf("unmount: exit %d", code)
			}
		})
	}
	// What flink wrote through the primary is flink's, in the backing.
	st, err := os.Stat(filepath.Join(jobDir, "new-"+flink.name+"-primary"))
	if err != nil || st.Sys().(*syscall.Stat_t).Uid != flink.uid {
		t.Errorf("a file flink created through the primary: %v, owner %v; want flink's", err, st)
	}
}
