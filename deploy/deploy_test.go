package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The paths the units and the installation use.
const (
	binPath    = "/usr/local/bin/ckptfs"
	helperPath = "/sbin/mount.fuse.ckptfs"
	unitDir    = "/etc/systemd/system"
	configPath = "/etc/ckptfs/ckptfs.yaml"
	dropinDir  = "/usr/local/share/ckptfs/systemd"
)

// units are the units make install puts into unitDir.
var units = []string{"flink.mount", "ckptfs.service", "ckptfs-takeover.service"}

// requireTool finds a program the test needs; missing, it skips, or fails
// under CKPTFS_REQUIRE_SYSTEMD=1.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CKPTFS_REQUIRE_SYSTEMD") == "1" {
		t.Fatalf("%s is required (CKPTFS_REQUIRE_SYSTEMD=1): %v; make deps installs it", name, err)
	}
	t.Skipf("%s not found (set CKPTFS_REQUIRE_SYSTEMD=1 to fail instead): %v", name, err)
	return ""
}

// installRoot runs `make install` into a staging root and returns it.
func installRoot(t *testing.T) string {
	t.Helper()
	makeBin := requireTool(t, "make")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	cmd := exec.Command(makeBin, "-C", repo, "install", "DESTDIR="+root,
		"BIN="+filepath.Join(t.TempDir(), "bin"), "GO="+filepath.Join(runtime.GOROOT(), "bin", "go"))
	// Not part of an outer make's job server.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	return root
}

// TestUnitsVerify installs everything into a staging root, as an operator
// would on a Flink machine, and has systemd-analyze verify the units
// (not in -short mode, which runs nothing from systemd).
func TestUnitsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("systemd-analyze is not run in -short mode")
	}
	analyze := requireTool(t, "systemd-analyze")
	root := installRoot(t)

	// The binary and the helper are where the units and mount(8) look.
	if fi, err := os.Stat(filepath.Join(root, binPath)); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v", binPath, err)
	}
	if target, err := os.Readlink(filepath.Join(root, helperPath)); err != nil || target != binPath {
		t.Fatalf("%s -> %q, %v; want %s", helperPath, target, err, binPath)
	}
	// The operator's side: systemd's own units, a JobManager and a
	// TaskManager unit with the drop-ins copied next to them.
	copySystemUnits(t, filepath.Join(root, "usr/lib/systemd/system"))
	for _, role := range []string{"jobmanager", "taskmanager"} {
		script := "/opt/flink/bin/" + role + ".sh"
		writeFile(t, filepath.Join(root, script), "#!/bin/sh\n", 0o755)
		writeFile(t, filepath.Join(root, unitDir, "flink-"+role+".service"),
			"[Unit]\nDescription=Flink "+role+"\n\n[Service]\nExecStart="+script+" start-foreground\n\n[Install]\nWantedBy=multi-user.target\n", 0o644)
		dropin := "flink-" + role + ".service.d/ckptfs.conf"
		data, err := os.ReadFile(filepath.Join(root, dropinDir, dropin))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, unitDir, dropin), string(data), 0o644)
	}

	verify := func(names ...string) (string, error) {
		args := append([]string{"verify", "--root=" + root, "--man=no"}, names...)
		out, err := exec.Command(analyze, args...).CombinedOutput()
		return string(out), err
	}
	names := append(slices.Clone(units), "flink-jobmanager.service", "flink-taskmanager.service")
	if out, err := verify(names...); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", strings.Join(names, " "), err, out)
	}

	// The harness catches what verify only warns about: a misspelt key
	// in a copy of the takeover unit, and a command that is not there.
	data, err := os.ReadFile(filepath.Join(root, unitDir, "ckptfs-takeover.service"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), "RemainAfterExit=", "RemainAfterExits=", 1)
	writeFile(t, filepath.Join(root, unitDir, "ckptfs-broken.service"), broken, 0o644)
	if out, _ := verify("ckptfs-broken.service"); !strings.Contains(out, "RemainAfterExits") {
		t.Errorf("verify did not notice a misspelt key:\n%s", out)
	}
	missing := strings.Replace(string(data), binPath, "/usr/local/bin/ckptfs-absent", 1)
	writeFile(t, filepath.Join(root, unitDir, "ckptfs-missing.service"), missing, 0o644)
	if out, err := verify("ckptfs-missing.service"); err == nil || !strings.Contains(out, "ckptfs-absent") {
		t.Errorf("verify did not notice a missing command: %v\n%s", err, out)
	}
}

// TestUnitsAgree checks what verify cannot: the commands the units run
// are valid, the paths they name agree with the example configuration,
// and the takeover gates the JobManager.
func TestUnitsAgree(t *testing.T) {
	root := installRoot(t)
	bin := filepath.Join(root, binPath)
	conf := filepath.Join(root, configPath)

	// The example configuration is valid for every command.
	if out, err := exec.Command(bin, "config", "check", "--config", conf).CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	var cfg struct {
		Backing     string `yaml:"backing"`
		MountPoint  string `yaml:"mountpoint"`
		MetricsAddr string `yaml:"metrics-addr"`
		MetricsURL  string `yaml:"metrics-url"`
	}
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil || cfg.Backing == "" || cfg.MountPoint == "" {
		t.Fatalf("%s: %+v, %v", configPath, cfg, err)
	}
	// The dashboard and the alert rules need the daemon's metrics, and
	// `ckptfs health` asks the daemon where it serves them.
	_, port, err := net.SplitHostPort(cfg.MetricsAddr)
	if err != nil {
		t.Errorf("%s: metrics-addr %q does not serve metrics: %v", configPath, cfg.MetricsAddr, err)
	}
	if u, err := url.Parse(cfg.MetricsURL); err != nil || u.Port() != port {
		t.Errorf("%s: metrics-url %q does not name the port of metrics-addr %q (%v)", configPath, cfg.MetricsURL, cfg.MetricsAddr, err)
	}

	read := func(rel string) unitFile { return readUnit(t, filepath.Join(root, rel)) }
	mount := read(unitDir + "/flink.mount")
	service := read(unitDir + "/ckptfs.service")
	takeover := read(unitDir + "/ckptfs-takeover.service")
	jm := read(dropinDir + "/flink-jobmanager.service.d/ckptfs.conf")
	tm := read(dropinDir + "/flink-taskmanager.service.d/ckptfs.conf")

	expect := func(what string, got []string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s is %q, want it to hold %q", what, got, w)
			}
		}
	}
	// The mount unit: its name is its Where=, which is the mountpoint;
	// it serves the backing, after the NAS is mounted.
	if want := escapePath(cfg.MountPoint) + ".mount"; want != "flink.mount" {
		t.Errorf("the mountpoint %s needs a unit named %s", cfg.MountPoint, want)
	}
	expect("flink.mount Where=", mount.get("Mount", "Where"), cfg.MountPoint)
	expect("flink.mount What=", mount.get("Mount", "What"), cfg.Backing)
	expect("flink.mount Type=", mount.get("Mount", "Type"), "fuse.ckptfs")
	expect("flink.mount Options=", strings.Split(strings.Join(mount.get("Mount", "Options"), ","), ","), "_netdev", "config="+configPath)
	for name, u := range map[string]unitFile{"flink.mount": mount, "ckptfs.service": service, "ckptfs-takeover.service": takeover} {
		expect(name+" RequiresMountsFor=", u.get("Unit", "RequiresMountsFor"), cfg.Backing)
	}
	// The service form: readiness and restarts.
	expect("ckptfs.service Type=", service.get("Service", "Type"), "notify")
	expect("ckptfs.service Restart=", service.get("Service", "Restart"), "on-failure")
	expect("ckptfs.service Conflicts=", service.get("Unit", "Conflicts"), "flink.mount")
	// The takeover: a oneshot that stays active while Flink runs, and is
	// run again at the next start of Flink.
	expect("ckptfs-takeover.service Type=", takeover.get("Service", "Type"), "oneshot")
	expect("ckptfs-takeover.service RemainAfterExit=", takeover.get("Service", "RemainAfterExit"), "yes")
	expect("ckptfs-takeover.service StopWhenUnneeded=", takeover.get("Unit", "StopWhenUnneeded"), "yes")
	if s := takeover.get("Service", "SuccessExitStatus"); len(s) != 0 {
		t.Errorf("SuccessExitStatus=%q would let Flink start after a refused takeover", s)
	}
	// The JobManager needs the mount and a successful takeover, and
	// starts after both; TaskManagers need the mount.
	expect("the JobManager drop-in's BindsTo=", jm.get("Unit", "BindsTo"), "flink.mount")
	expect("the JobManager drop-in's Requires=", jm.get("Unit", "Requires"), "ckptfs-takeover.service")
	expect("the JobManager drop-in's After=", jm.get("Unit", "After"), "flink.mount", "ckptfs-takeover.service")
	expect("the TaskManager drop-in's BindsTo=", tm.get("Unit", "BindsTo"), "flink.mount")
	expect("the TaskManager drop-in's After=", tm.get("Unit", "After"), "flink.mount")

	// Every ExecStart= is a valid ckptfs command line (flags and
	// configuration), checked with the installed binary.
	for name, u := range map[string]unitFile{"ckptfs.service": service, "ckptfs-takeover.service": takeover} {
		for _, line := range u.get("Service", "ExecStart") {
			args := strings.Fields(line)
			if len(args) < 2 || args[0] != binPath {
				t.Errorf("%s: ExecStart=%s does not run %s", name, line, binPath)
				continue
			}
			args = args[1:]
			for i, a := range args {
				args[i] = strings.Replace(a, configPath, conf, 1)
			}
			if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s: %s --help: %v\n%s", name, line, err, out)
			}
			if !slices.Contains(args, conf) {
				t.Errorf("%s: ExecStart=%s does not read %s", name, line, configPath)
			}
		}
	}
	// The mount unit's options, as mount(8) hands them to the helper,
	// checked by the helper itself without mounting (mount -f).
	helper := filepath.Join(t.TempDir(), "mount.fuse.ckptfs")
	if err := os.Symlink(bin, helper); err != nil {
		t.Fatal(err)
	}
	opts := strings.ReplaceAll(strings.Join(mount.get("Mount", "Options"), ","), configPath, conf)
	if out, err := exec.Command(helper, cfg.Backing, cfg.MountPoint, "-f", "-o", opts).CombinedOutput(); err != nil {
		t.Errorf("mount.fuse.ckptfs -f -o %s: %v\n%s", opts, err, out)
	}
}

// unitFile maps "Section.Key" to the values a unit file gives it.
type unitFile map[string][]string

func (u unitFile) get(section, key string) []string { return u[section+"."+key] }

// readUnit parses a unit file: sections, Key=Value lines (a key may be
// given several times; values of dependency lists are split at spaces),
// comments and continuation lines.
func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	var pending string
	for sc.Scan() {
		line := pending + strings.TrimSpace(sc.Text())
		pending = ""
		if strings.HasSuffix(line, "\\") {
			pending = strings.TrimSuffix(line, "\\") + " "
			continue
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not Key=Value", path, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "After", "Before", "Requires", "Wants", "BindsTo", "Conflicts", "RequiresMountsFor", "WantedBy":
				u[section+"."+k] = append(u[section+"."+k], strings.Fields(v)...)
			default:
				u[section+"."+k] = append(u[section+"."+k], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// escapePath is `systemd-escape --path` for paths of plain names.
func escapePath(p string) string {
	p = strings.Trim(p, "/")
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			b.WriteByte('-')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// copySystemUnits copies systemd's own units (sysinit.target and the
// like, which every unit depends on) into dst, files only.
func copySystemUnits(t *testing.T, dst string) {
	t.Helper()
	var src string
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			src = d
			break
		}
	}
	if src == "" {
		t.Fatal("no systemd unit directory (/usr/lib/systemd/system): install systemd")
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			continue // a dangling link
		}
		if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
			in.Close()
			continue
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			err = errors.Join(err, out.Close())
		}
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
