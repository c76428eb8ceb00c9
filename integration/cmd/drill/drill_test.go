package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// binDir holds the commands binaries built, if it ran.
var binDir string

// binaries builds ckptfs and this drill once per test binary.
var binaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ckptfs-drill-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	for pkg, name := range map[string]string{"github.com/ckptfs/ckptfs/cmd/ckptfs": "ckptfs", ".": "drill"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	// Every ckptfs command of these tests waits this lease.
	mounttest.UseLease(mounttest.TestLease)
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// bins returns the built ckptfs and drill commands.
func bins(t *testing.T) (ckptfs, drill string) {
	t.Helper()
	dir, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "ckptfs"), filepath.Join(dir, "drill")
}

// testLogger logs to t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// sh runs a command line of the drill as an operator would paste it.
func sh(t *testing.T, line string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("%s: %v", line, err)
	return "", -1
}

// runDrill runs the command line of drill in-process.
func runDrill(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return o.String(), e.String(), code
}

// TestDrill lays the drill on a real ZooKeeper for every Flink layout,
// runs each command it prints, and checks the exit status and the lines
// it says each shows, then what they did in JSON and in ZooKeeper.
func TestDrill(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ckptfs, self := bins(t)
	conn := zktest.Connect(t, c.Servers())
	for _, release := range []string{"1.20", "2.3", "1.17", "1.14", "1.13"} {
		t.Run(release, func(t *testing.T) {
			staging := filepath.Join(t.TempDir(), "staging")
			args := []string{"-zk", c.ConnectString(), "-staging", staging, "-flink", release,
				"-cluster-id", "drill-" + strings.ReplaceAll(release, ".", "-"), "-ckptfs", ckptfs, "-self", self}
			o, _, code := parse(args, os.Stderr)
			if code >= 0 {
				t.Fatalf("parse %q: exit %d", args, code)
			}
			d, err := lay(context.Background(), o, testLogger(t))
			// A failed step leaves the drill: remove it for the next.
			t.Cleanup(func() { runDrill("-clean", "-staging", staging) })
			if err != nil {
				t.Fatal(err)
			}
			var printed bytes.Buffer
			d.print(&printed)
			t.Log("\n" + printed.String())
			cfg := "--config " + d.config
			newest := d.pointers[len(d.pointers)-1]
			for i, s := range d.steps {
				if !strings.Contains(printed.String(), fmt.Sprintf("%d. %s\n   $ %s\n   exit status %d\n", i+1, s.title, s.cmd, s.exit)) {
					t.Fatalf("step %s is not printed as it runs", s.name)
				}
				out, code := sh(t, s.cmd)
				if code != s.exit {
					t.Fatalf("step %d (%s): %s\nexit status %d, the drill says %d:\n%s", i+1, s.name, s.cmd, code, s.exit, out)
				}
				for _, l := range s.shows {
					if !strings.Contains(out, l) {
						t.Errorf("step %d (%s): %s\ndoes not show %q:\n%s", i+1, s.name, s.cmd, l, out)
					}
				}
				switch s.name {
				case "verify":
					var v verifyDoc
					jsonOf(t, ckptfs+" verify -o json "+cfg+" "+filepath.Join(d.replica, "checkpoints"), 1, &v)
					if len(v.Jobs) != 1 || v.Jobs[0].JobID != d.st.JobID || v.Jobs[0].Newest != newest || v.Jobs[0].NewestComplete == nil || *v.Jobs[0].NewestComplete != newest-1 {
						t.Errorf("verify: %+v, want job %s newest %d, newest complete %d", v, d.st.JobID, newest, newest-1)
					}
					for _, cp := range v.Jobs[0].Checkpoints {
						if want := cp.ID != newest; cp.Complete != want {
							t.Errorf("verify: checkpoint %d complete %v, want %v", cp.ID, cp.Complete, want)
						}
						if cp.ID == newest && (len(cp.Problems) != 1 || cp.Problems[0].Problem != "missing" || !strings.HasSuffix(cp.Problems[0].Path, filepath.Base(d.missing))) {
							t.Errorf("verify: checkpoint %d problems %+v, want the missing %s", cp.ID, cp.Problems, d.missing)
						}
					}
				case "takeover":
					st := statusOf(t, ckptfs, cfg)
					if st.ActiveSite != standbySite || st.Epoch != 1 || len(st.Jobs) != 1 {
						t.Fatalf("status after takeover: active %q epoch %d, %d jobs", st.ActiveSite, st.Epoch, len(st.Jobs))
					}
					j := st.Jobs[0]
					if j.Newest == nil || *j.Newest != newest-1 || j.NewestComplete == nil || *j.NewestComplete != newest-1 || !slices.Equal(j.Pruned, []int64{newest}) {
						t.Errorf("status after takeover: newest %v, complete %v, pruned %v; want %d, %d, [%d]", j.Newest, j.NewestComplete, j.Pruned, newest-1, newest-1, newest)
					}
					backup := fmt.Sprintf("%s/pruned/%s/%019d", d.ckptfsZ, d.st.JobID, newest)
					if ok, _, err := conn.Exists(backup); err != nil || !ok {
						t.Errorf("backup %s: exists %v, %v", backup, ok, err)
					}
				case "status-restored":
					j := statusOf(t, ckptfs, cfg).Jobs[0]
					if j.Newest == nil || *j.Newest != newest || j.NewestComplete == nil || *j.NewestComplete != newest || len(j.Pruned) != 0 {
						t.Errorf("status after restore-pruned: newest %v, complete %v, pruned %v; want %d, %d, []", j.Newest, j.NewestComplete, j.Pruned, newest, newest)
					}
				}
			}
			out, errOut, code := runDrill("-clean", "-staging", staging)
			if code != 0 {
				t.Fatalf("-clean: exit %d\n%s%s", code, out, errOut)
			}
			for _, z := range d.st.Znodes {
				if ok, _, err := conn.Exists(z); err != nil || ok {
					t.Errorf("after -clean %s exists %v, %v", z, ok, err)
				}
			}
			if _, err := os.Stat(staging); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("after -clean %s: %v, want it gone", staging, err)
			}
		})
	}
	for _, z := range []string{"/ckptfs-drill", "/ckptfs"} {
		if ok, _, err := conn.Exists(z); err != nil || ok {
			t.Errorf("after every -clean %s exists %v, %v", z, ok, err)
		}
	}
}

// TestDrillRefuses checks that the drill lays nothing over data it did
// not lay, unless told, and that -clean removes only what it laid.
func TestDrillRefuses(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ckptfs, self := bins(t)
	conn := zktest.Connect(t, c.Servers())
	// A path root shared with something else, which -clean must keep.
	for _, p := range []string{"/shared", "/shared/other"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	staging := filepath.Join(dir, "a")
	base := []string{"-zk", c.ConnectString(), "-path-root", "/shared", "-ckptfs", ckptfs, "-self", self}
	layAt := func(staging string, extra ...string) (string, string, int) {
		return runDrill(append(append(slices.Clone(base), "-staging", staging), extra...)...)
	}
	if out, errOut, code := layAt(staging); code != 0 {
		t.Fatalf("first drill: exit %d\n%s%s", code, out, errOut)
	}
	first, err := readState(staging)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, code int, errOut, want string) {
		t.Helper()
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", what, code, errOut, want)
		}
	}
	// The same namespace from another directory.
	_, errOut, code := layAt(filepath.Join(dir, "b"))
	expect("the namespace again", code, errOut, "/shared/drill already exists in ZooKeeper")
	if _, err := os.Stat(filepath.Join(dir, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused drill left its directory: %v", err)
	}
	// The same directory, without -replace.
	_, errOut, code = layAt(staging)
	expect("the directory again", code, errOut, "holds the drill laid at")
	// A directory holding something else, even with -replace.
	foreign := filepath.Join(dir, "c")
	if err := os.MkdirAll(filepath.Join(foreign, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = layAt(foreign, "-replace", "-cluster-id", "other")
	expect("a foreign directory", code, errOut, "is not empty and holds no drill")
	if _, err := os.Stat(filepath.Join(foreign, "data")); err != nil {
		t.Errorf("the foreign directory lost its content: %v", err)
	}
	// -replace lays a new drill over the old one.
	if out, errOut, code := layAt(staging, "-replace"); code != 0 {
		t.Fatalf("-replace: exit %d\n%s%s", code, out, errOut)
	}
	second, err := readState(staging)
	if err != nil {
		t.Fatal(err)
	}
	if second.JobID == first.JobID || second.PathRootCreated {
		t.Errorf("after -replace: job %s (was %s), path root created %v", second.JobID, first.JobID, second.PathRootCreated)
	}
	kids, _, err := conn.Children("/shared/drill/jobgraphs")
	if err != nil || !slices.Equal(kids, []string{second.JobID}) {
		t.Errorf("after -replace the job graphs are %v, %v; want only %s", kids, err, second.JobID)
	}
	// -clean removes the drill and keeps the path root it did not create.
	out, errOut, code := runDrill("-clean", "-staging", staging)
	if code != 0 {
		t.Fatalf("-clean: exit %d\n%s%s", code, out, errOut)
	}
	for _, z := range []string{"/shared/drill", "/ckptfs/drill"} {
		if ok, _, _ := conn.Exists(z); ok {
			t.Errorf("after -clean %s exists", z)
		}
	}
	if ok, _, _ := conn.Exists("/shared/other"); !ok {
		t.Error("-clean removed /shared/other, which the drill did not lay")
	}
	_, errOut, code = runDrill("-clean", "-staging", staging)
	expect("-clean again", code, errOut, "nothing to clean")
}

// TestStateCheck checks that a drill.json naming what no drill lays is
// refused before anything is removed.
func TestStateCheck(t *testing.T) {
	good := state{Format: 1, PathRoot: "/ckptfs-drill", ClusterID: "drill",
		Znodes: []string{"/ckptfs-drill/drill", "/ckptfs/drill"}, Dirs: []string{"dc1", "dc2"}}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*state){
		"znode elsewhere": func(s *state) { s.Znodes = append(s.Znodes, "/flink") },
		"root znode":      func(s *state) { s.Znodes = []string{"/"} },
		"directory up":    func(s *state) { s.Dirs = []string{".."} },
		"cluster id path": func(s *state) { s.ClusterID, s.Znodes = "a/b", []string{"/ckptfs-drill/a/b"} },
	} {
		s := good
		s.Znodes, s.Dirs = slices.Clone(good.Znodes), slices.Clone(good.Dirs)
		mutate(&s)
		if err := s.check(); err == nil {
			t.Errorf("%s: %+v passes", name, s)
		}
	}
}

// TestUsage checks the command line's refusals, which need no ZooKeeper.
func TestUsage(t *testing.T) {
	staging := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-zk", "localhost:2181"}, "-staging is required"},
		{[]string{"-staging", staging}, "-zk is required"},
		{[]string{"-staging", staging, "-zk", "localhost:2181,"}, "server 2 is empty"},
		{[]string{"-staging", staging, "-zk", "localhost:2181", "-cluster-id", "a/b"}, "-cluster-id"},
		{[]string{"-staging", staging, "-zk", "localhost:2181", "-path-root", "/ckptfs/x"}, "must not contain each other"},
		{[]string{"-staging", staging, "-zk", "localhost:2181", "-flink", "1.10"}, "want a release from 1.11"},
		{[]string{"-staging", staging, "-clean", "-recover"}, "exclude each other"},
		{[]string{"-staging", staging, "extra"}, "unexpected arguments"},
	} {
		if _, errOut, code := runDrill(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("drill %q: exit %d, %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, errOut, code := runDrill("-h"); code != 0 || !strings.Contains(errOut, "drill -clean -staging DIR") {
		t.Errorf("drill -h: exit %d\n%s", code, errOut)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/drill/dc2/ckptfs.yaml": "/srv/drill/dc2/ckptfs.yaml",
		"/srv/my drill":              "'/srv/my drill'",
		"/srv/it's":                  `'/srv/it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
		if out, code := sh(t, "printf %s "+shellQuote(in)); code != 0 || out != in {
			t.Errorf("sh printf %s: %q, exit %d", shellQuote(in), out, code)
		}
	}
}

// verifyDoc is the part of `ckptfs verify -o json` the test reads.
type verifyDoc struct {
	Jobs []struct {
		JobID          string `json:"job_id"`
		Newest         int64  `json:"newest"`
		NewestComplete *int64 `json:"newest_complete"`
		Checkpoints    []struct {
			ID       int64 `json:"id"`
			Complete bool  `json:"complete"`
			Problems []struct {
				Path    string `json:"path"`
				Problem string `json:"problem"`
			} `json:"problems"`
		} `json:"checkpoints"`
	} `json:"jobs"`
}

// statusDoc is the part of `ckptfs status -o json` the test reads.
type statusDoc struct {
	ActiveSite string `json:"active_site"`
	Epoch      int64  `json:"epoch"`
	Jobs       []struct {
		Newest         *int64  `json:"newest"`
		NewestComplete *int64  `json:"newest_complete"`
		Pruned         []int64 `json:"pruned"`
	} `json:"jobs"`
}

func statusOf(t *testing.T, ckptfs, cfg string) statusDoc {
	t.Helper()
	var st statusDoc
	jsonOf(t, ckptfs+" status -o json "+cfg, 0, &st)
	return st
}

// jsonOf runs a command that prints JSON on stdout.
func jsonOf(t *testing.T, line string, exit int, v any) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if code != exit {
		t.Fatalf("%s: exit %d, want %d\n%s%s", line, code, exit, out, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}
