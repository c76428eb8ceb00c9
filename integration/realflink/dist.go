package realflink

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RequireEnv turns a missing Flink distribution (or root, or a JDK) from a
// skip into a failure when set to "1": in CI they are present and these
// tests must run.
const RequireEnv = "CKPTFS_REQUIRE_FLINK"

// CacheEnv names the cache that flink/fetch.sh fills (default
// /var/cache/ckptfs): distributions under flink/dist/<version>, built
// jobs under flink/job/.
const CacheEnv = "CKPTFS_CACHE"

var warnOnce sync.Once

// skipShort skips the test in -short mode, before looking for anything.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("realflink: real Flink is not run in -short mode")
	}
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("realflink: %s is missing and %s=1", what, RequireEnv)
	}
	msg := fmt.Sprintf("realflink: %s is missing; SKIPPING the tests with real Flink (run `make flink`, or set %s=1 to make this fatal)", what, RequireEnv)
	warnOnce.Do(func() { fmt.Fprintln(os.Stderr, "WARNING: "+msg) })
	t.Skip(msg)
}

// Release is one row of flink/versions.tsv.
type Release struct {
	Version string // "1.20.5"
	Package string // where it comes from
	File    string // the file downloaded
	SHA256  string
	Use     string // test, runs, tried or fails
	Note    string
	Java    string // the Java major version it runs on: "17", the system's, or a row of flink/java.tsv
}

// Minor returns the release's major and minor numbers.
func (r Release) Minor() (major, minor int) {
	parts := strings.SplitN(r.Version, ".", 3)
	if len(parts) >= 2 {
		major, _ = strconv.Atoi(parts[0])
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

// AtLeast reports whether the release is major.minor or newer.
func (r Release) AtLeast(major, minor int) bool {
	ma, mi := r.Minor()
	return ma > major || ma == major && mi >= minor
}

// RepoRoot is the repository's top directory (this file's ../..).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// Releases reads the version table, checked against the Java table.
func Releases() ([]Release, error) {
	javas, err := readTable("java.tsv", 6)
	if err != nil {
		return nil, err
	}
	rows, err := readTable("versions.tsv", 7)
	if err != nil {
		return nil, err
	}
	var out []Release
	for _, c := range rows {
		r := Release{Version: c[0], Package: c[1], File: c[2], SHA256: c[3], Use: c[4], Note: c[5], Java: c[6]}
		if !slices.Contains([]string{"test", "cold", "runs", "tried", "fails"}, r.Use) {
			return nil, fmt.Errorf("flink/versions.tsv: Flink %s: use %q, want test, cold, runs, tried or fails", r.Version, r.Use)
		}
		if r.Java != "17" && !slices.ContainsFunc(javas, func(j []string) bool { return j[0] == r.Java }) {
			return nil, fmt.Errorf("flink/versions.tsv: Flink %s runs on Java %q, which is neither the system's 17 nor a row of flink/java.tsv", r.Version, r.Java)
		}
		out = append(out, r)
	}
	return out, nil
}

// readTable reads a tab-separated table of flink/: its rows, each of
// exactly columns fields.
func readTable(name string, columns int) ([][]string, error) {
	path := filepath.Join(RepoRoot(), "flink", name)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != columns {
			return nil, fmt.Errorf("%s:%d: %d columns, want %d", path, n, len(c), columns)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// TestReleases returns the releases make test runs in every real-Flink
// test (use test).
func TestReleases(t testing.TB) []Release {
	t.Helper()
	return releasesFor(t, "test")
}

// FailoverReleases returns the releases make test runs the cold
// failover of: those of TestReleases, and one release of each older
// ZooKeeper layout family (use cold).
func FailoverReleases(t testing.TB) []Release {
	t.Helper()
	return releasesFor(t, "test", "cold")
}

func releasesFor(t testing.TB, uses ...string) []Release {
	t.Helper()
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	var out []Release
	for _, r := range all {
		if slices.Contains(uses, r.Use) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("realflink: no release with use %v in flink/versions.tsv", uses)
	}
	return out
}

func cacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return "/var/cache/ckptfs"
}

// Dist is an unpacked Flink distribution.
type Dist struct {
	Release
	Home string // holds lib/, opt/, plugins/, bin/
	Java string // the java launcher it runs with
}

// FindDist returns the distribution of a release from the cache, checked
// by flink/fetch.sh (its .sha256 matches the table), with the Java it
// runs on: the system's for 17, else the runtime fetch.sh put in the
// cache. CKPTFS_FLINK_JAVA names another launcher for the releases on
// 17. It skips in -short mode.
func FindDist(t testing.TB, r Release) Dist {
	t.Helper()
	skipShort(t)
	home := filepath.Join(cacheDir(), "flink", "dist", r.Version)
	sum, err := os.ReadFile(filepath.Join(home, ".sha256"))
	if err != nil || strings.TrimSpace(string(sum)) != r.SHA256 {
		missing(t, fmt.Sprintf("Flink %s in %s", r.Version, home))
	}
	if r.Java != "17" {
		java := filepath.Join(cacheDir(), "flink", "java", r.Java, "bin", "java")
		if _, err := os.Stat(java); err != nil {
			missing(t, fmt.Sprintf("Java %s for Flink %s (%s)", r.Java, r.Version, java))
		}
		return Dist{Release: r, Home: home, Java: java}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		missing(t, "a JDK (java)")
	}
	if j := os.Getenv("CKPTFS_FLINK_JAVA"); j != "" {
		java = j
	}
	return Dist{Release: r, Home: home, Java: java}
}

// Legacy reports whether the release runs the JobManager of Flink 1.4
// and before (Akka actors, the web monitor's REST API, flink-conf.yaml
// without memory model or BashJavaUtils) rather than the 1.5+ cluster
// entrypoints.
func (d Dist) Legacy() bool { return !d.AtLeast(1, 5) }

// Classpath is the distribution's lib/ jars, as Flink's scripts build it,
// after the shims fetch.sh compiled for it (shim/, flink/assemble): a
// shim replaces a class of a jar in lib/, so it comes first.
func (d Dist) Classpath() (string, error) {
	shims, err := filepath.Glob(filepath.Join(d.Home, "shim", "*.jar"))
	if err != nil {
		return "", err
	}
	slices.Sort(shims)
	jars := shims
	err = filepath.WalkDir(filepath.Join(d.Home, "lib"), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(p, ".jar") {
			jars = append(jars, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(jars) == len(shims) {
		return "", errors.New("no jar in " + filepath.Join(d.Home, "lib"))
	}
	return strings.Join(jars, ":"), nil
}

// jvmModuleFlags opens the JDK's modules to Flink as Flink's own default
// configuration does for Java 17 (env.java.opts.all up to 1.18,
// env.java.default-opts.all from 1.19).
var jvmModuleFlags = []string{
	"--add-exports=java.base/sun.net.util=ALL-UNNAMED",
	"--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED",
	"--add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED",
	"--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
	"--add-opens=java.base/java.lang=ALL-UNNAMED",
	"--add-opens=java.base/java.net=ALL-UNNAMED",
	"--add-opens=java.base/java.io=ALL-UNNAMED",
	"--add-opens=java.base/java.nio=ALL-UNNAMED",
	"--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens=java.base/java.text=ALL-UNNAMED",
	"--add-opens=java.base/java.time=ALL-UNNAMED",
	"--add-opens=java.base/java.util=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
}

// resourceParams asks Flink's BashJavaUtils, as Flink's start scripts do,
// for a process's JVM memory flags and the dynamic properties that fix
// its memory configuration. what is GET_JM_RESOURCE_PARAMS or
// GET_TM_RESOURCE_PARAMS.
func (d Dist) resourceParams(confDir, what string) (jvm, dynamic []string, err error) {
	if !d.AtLeast(1, 11) {
		return d.resourceParams110(confDir, what)
	}
	results, err := d.bashJavaUtils(confDir, what)
	if err != nil {
		return nil, nil, err
	}
	if len(results) < 2 {
		return nil, nil, fmt.Errorf("BashJavaUtils %s printed %d results, want 2", what, len(results))
	}
	return strings.Fields(results[len(results)-2]), strings.Fields(results[len(results)-1]), nil
}

// resourceParams110 answers resourceParams as Flink 1.10's scripts do:
// the JobManager has no memory model yet (its heap is
// jobmanager.heap.size, 1.10's default 1024m: config.sh), and
// BashJavaUtils answers a TaskManager's JVM flags and dynamic
// properties in two calls, GET_TM_RESOURCE_JVM_PARAMS and
// GET_TM_RESOURCE_DYNAMIC_CONFIGS (taskmanager.sh), of the class
// org.apache.flink.runtime.util.BashJavaUtils.
func (d Dist) resourceParams110(confDir, what string) (jvm, dynamic []string, err error) {
	if what == "GET_JM_RESOURCE_PARAMS" {
		return []string{"-Xms1024m", "-Xmx1024m"}, nil, nil
	}
	var last [2]string
	for i, q := range []string{"GET_TM_RESOURCE_JVM_PARAMS", "GET_TM_RESOURCE_DYNAMIC_CONFIGS"} {
		results, err := d.bashJavaUtils(confDir, q)
		if err != nil {
			return nil, nil, err
		}
		if len(results) == 0 {
			return nil, nil, fmt.Errorf("BashJavaUtils %s printed no result", q)
		}
		last[i] = results[len(results)-1]
	}
	return strings.Fields(last[0]), strings.Fields(last[1]), nil
}

// bashJavaUtils runs Flink's BashJavaUtils with command what and returns
// the results it printed.
func (d Dist) bashJavaUtils(confDir, what string) ([]string, error) {
	cp, err := d.Classpath()
	if err != nil {
		return nil, err
	}
	cp = filepath.Join(d.Home, "bin", "bash-java-utils.jar") + ":" + cp
	class := "org.apache.flink.runtime.util.bash.BashJavaUtils"
	if !d.AtLeast(1, 11) {
		class = "org.apache.flink.runtime.util.BashJavaUtils"
	}
	args := append(append([]string{}, jvmModuleFlags...), "-cp", cp, class, what, "--configDir", confDir)
	out, err := exec.Command(d.Java, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("BashJavaUtils %s: %w\n%s", what, err, tail(string(out), 20))
	}
	const prefix = "BASH_JAVA_UTILS_EXEC_RESULT:"
	var results []string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			results = append(results, rest)
		}
	}
	return results, nil
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// JarSet returns the directory holding a jar set of flink/jars.tsv, from
// the cache, checked by flink/fetch.sh (its .sha256 matches the table).
// It skips in -short mode.
func JarSet(t testing.TB, name string) string {
	t.Helper()
	skipShort(t)
	rows, err := readTable("jars.tsv", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, r := range rows {
		if r[0] == name {
			want = r[1]
		}
	}
	if want == "" {
		t.Fatalf("realflink: no jar set %s in flink/jars.tsv", name)
	}
	dir := filepath.Join(cacheDir(), "flink", "jars", name)
	sum, err := os.ReadFile(filepath.Join(dir, ".sha256"))
	if err != nil || strings.TrimSpace(string(sum)) != want {
		missing(t, fmt.Sprintf("the jar set %s in %s", name, dir))
	}
	return dir
}
