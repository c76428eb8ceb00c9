package deploy

import (
	"bufio"
	"bytes"
	"errors"
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

// The paths the units and the package use.
const (
	binPath    = "/usr/bin/ckptfs"
	helperPath = "/usr/sbin/mount.fuse.ckptfs"
	unitDir    = "/usr/lib/systemd/system"
	adminDir   = "/etc/systemd/system" // where the operator puts Flink's units
	configPath = "/etc/ckptfs/ckptfs.yaml"
	dropinDir  = "/usr/share/ckptfs/systemd"
)

// units are the units the package puts into unitDir.
var units = []string{"ckptfs.service", "ckptfs-takeover.service"}

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
	if target, err := filepath.EvalSymlinks(filepath.Join(root, helperPath)); err != nil || target != filepath.Join(root, binPath) {
		t.Fatalf("%s -> %q, %v; want %s", helperPath, target, err, binPath)
	}
	// The operator's side: systemd's own units, a JobManager and a
	// TaskManager unit with the drop-ins copied next to them.
	copySystemUnits(t, filepath.Join(root, unitDir))
	for _, role := range []string{"jobmanager", "taskmanager"} {
		script := "/opt/flink/bin/" + role + ".sh"
		writeFile(t, filepath.Join(root, script), "#!/bin/sh\n", 0o755)
		writeFile(t, filepath.Join(root, adminDir, "flink-"+role+".service"),
			"[Unit]\nDescription=Flink "+role+"\n\n[Service]\nExecStart="+script+" start-foreground\n\n[Install]\nWantedBy=multi-user.target\n", 0o644)
		dropin := "flink-" + role + ".service.d/ckptfs.conf"
		data, err := os.ReadFile(filepath.Join(root, dropinDir, dropin))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(root, adminDir, dropin), string(data), 0o644)
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
	writeFile(t, filepath.Join(root, adminDir, "ckptfs-broken.service"), broken, 0o644)
	if out, _ := verify("ckptfs-broken.service"); !strings.Contains(out, "RemainAfterExits") {
		t.Errorf("verify did not notice a misspelt key:\n%s", out)
	}
	missing := strings.Replace(string(data), binPath, "/usr/local/bin/ckptfs-absent", 1)
	writeFile(t, filepath.Join(root, adminDir, "ckptfs-missing.service"), missing, 0o644)
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
	for name, u := range map[string]unitFile{"ckptfs.service": service, "ckptfs-takeover.service": takeover} {
		expect(name+" RequiresMountsFor=", u.get("Unit", "RequiresMountsFor"), cfg.Backing)
	}
	// The service owns the mount: readiness and restarts. A Conflicts= on
	// the mount unit systemd makes of its own mount cancels every start.
	expect("ckptfs.service Type=", service.get("Service", "Type"), "notify")
	expect("ckptfs.service Restart=", service.get("Service", "Restart"), "on-failure")
	if c := service.get("Unit", "Conflicts"); len(c) != 0 {
		t.Errorf("ckptfs.service Conflicts=%q", c)
	}
	// The takeover: a oneshot after the mount that stays active while
	// Flink runs, is run again at the next start of Flink, and ends only
	// once the mount writes.
	expect("ckptfs-takeover.service Type=", takeover.get("Service", "Type"), "oneshot")
	expect("ckptfs-takeover.service RemainAfterExit=", takeover.get("Service", "RemainAfterExit"), "yes")
	expect("ckptfs-takeover.service StopWhenUnneeded=", takeover.get("Unit", "StopWhenUnneeded"), "yes")
	expect("ckptfs-takeover.service After=", takeover.get("Unit", "After"), "ckptfs.service")
	if post := takeover.get("Service", "ExecStartPost"); len(post) != 1 || !strings.Contains(post[0], " health ") || !strings.Contains(post[0], "--writable") {
		t.Errorf("ckptfs-takeover.service ExecStartPost=%q, want the health check of a writable mount", post)
	}
	if s := takeover.get("Service", "SuccessExitStatus"); len(s) != 0 {
		t.Errorf("SuccessExitStatus=%q would let Flink start after a refused takeover", s)
	}
	// The JobManager needs the mount and a successful takeover, and
	// starts after both; TaskManagers need the mount. Requires= (not
	// BindsTo=) restarts them with a daemon systemd restarted.
	expect("the JobManager drop-in's Requires=", jm.get("Unit", "Requires"), "ckptfs.service", "ckptfs-takeover.service")
	expect("the JobManager drop-in's After=", jm.get("Unit", "After"), "ckptfs.service", "ckptfs-takeover.service")
	expect("the TaskManager drop-in's Requires=", tm.get("Unit", "Requires"), "ckptfs.service")
	expect("the TaskManager drop-in's After=", tm.get("Unit", "After"), "ckptfs.service")

	// Every ExecStart= is a valid ckptfs command line (flags and
	// configuration), checked with the installed binary.
	for name, u := range map[string]unitFile{"ckptfs.service": service, "ckptfs-takeover.service": takeover} {
		for _, line := range append(u.get("Service", "ExecStart"), u.get("Service", "ExecStartPost")...) {
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
