package zktest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables the harness reads.
const (
	// EnvRequire, when "1", turns a missing ZooKeeper into a test failure
	// instead of a skip. CI sets it.
	EnvRequire = "CKPTFS_REQUIRE_ZK"
	// EnvClasspath overrides the server classpath entirely. It must contain
	// ZooKeeper and its dependencies; add an slf4j binding to get logs.
	EnvClasspath = "CKPTFS_ZK_CLASSPATH"
	// EnvHome points at an upstream binary distribution (the directory
	// holding lib/ and conf/).
	EnvHome = "ZOOKEEPER_HOME"
)

const quorumPeerMain = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

// Debian locations (variables so tests can point them elsewhere). zkEnv.sh
// sets CLASSPATH to the configuration directory and zookeeper.jar, whose
// manifest Class-Path names its dependencies; it ships no slf4j binding, so
// the server logs nothing unless one is added.
var (
	debianZkEnv = "/usr/share/zookeeper/bin/zkEnv.sh"
	debianJar   = "/usr/share/java/zookeeper.jar"
	debianJava  = "/usr/bin/java"
	debianSlf4j = "/usr/share/java/slf4j-log4j12.jar"
	debianLog4j = "/usr/share/java/log4j-1.2.jar"
)

// short reports -short mode, which skips every test that needs
// ZooKeeper; tests replace it.
var short = testing.Short

// errNotInstalled marks a ZooKeeper or Java that is absent, as opposed to
// one that is configured wrongly.
var errNotInstalled = errors.New("not installed")

// installation is how to launch a server.
type installation struct {
	java      string
	classpath string
	source    string // where the classpath came from, for logs
	logs      bool   // whether the classpath has a log4j binding
	debian    bool   // the classpath is Debian's package's
}

// findInstallation locates Java and the ZooKeeper classpath. An error that
// wraps errNotInstalled means nothing was found; any other error is a broken
// explicit setting.
func findInstallation() (installation, error) {
	var inst installation
	java, err := findJava()
	if err != nil {
		return inst, err
	}
	inst.java = java

	switch {
	case os.Getenv(EnvClasspath) != "":
		inst.classpath = os.Getenv(EnvClasspath)
		inst.source = "$" + EnvClasspath
		inst.logs = true // the caller chose; assume they chose a binding
		return inst, nil
	case os.Getenv(EnvHome) != "":
		home := os.Getenv(EnvHome)
		jars, _ := filepath.Glob(filepath.Join(home, "lib", "zookeeper-*.jar"))
		if len(jars) == 0 {
			return inst, fmt.Errorf("$%s=%s has no lib/zookeeper-*.jar (expected an upstream binary distribution)", EnvHome, home)
		}
		// Upstream bundles logback and configures it in conf/logback.xml.
		inst.classpath = filepath.Join(home, "conf") + string(os.PathListSeparator) + filepath.Join(home, "lib", "*")
		inst.source = "$" + EnvHome
		inst.logs = true
		return inst, nil
	}

	jars := debianJars()
	if len(jars) == 0 {
		return inst, fmt.Errorf("no %s (Debian package zookeeper) and neither $%s nor $%s set: %w",
			debianJar, EnvHome, EnvClasspath, errNotInstalled)
	}
	if exists(debianSlf4j) && exists(debianLog4j) {
		jars = append(jars, debianSlf4j, debianLog4j)
		inst.logs = true
	}
	inst.classpath = strings.Join(jars, string(os.PathListSeparator))
	inst.source = "Debian package"
	inst.debian = true
	return inst, nil
}

// debianJars returns the jar entries of the CLASSPATH that Debian's zkEnv.sh
// sets, so a future package that renames its jar keeps working, falling back
// to the jar it names today.
func debianJars() []string {
	var jars []string
	if f, err := os.Open(debianZkEnv); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			v, ok := strings.CutPrefix(line, "CLASSPATH=")
			if !ok {
				continue
			}
			jars = jars[:0]
			for _, e := range filepath.SplitList(strings.Trim(v, `"'`)) {
				if strings.HasSuffix(e, ".jar") && exists(e) {
					jars = append(jars, e)
				}
			}
		}
	}
	if len(jars) == 0 && exists(debianJar) {
		jars = []string{debianJar}
	}
	return jars
}

func findJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java := filepath.Join(home, "bin", "java")
		if !exists(java) {
			return "", fmt.Errorf("$JAVA_HOME=%s has no bin/java", home)
		}
		return java, nil
	}
	if java, err := exec.LookPath("java"); err == nil {
		return java, nil
	}
	if exists(debianJava) {
		return debianJava, nil
	}
	return "", fmt.Errorf("no java on $PATH or at %s: %w", debianJava, errNotInstalled)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// requireInstallation returns the installation or ends the test: it skips
// in -short mode and when ZooKeeper is absent (fails if EnvRequire is "1")
// and fails when an explicit setting is broken.
func requireInstallation(t testing.TB) installation {
	t.Helper()
	if short() {
		t.Skipf("zktest: real ZooKeeper is not started in -short mode")
		return installation{}
	}
	inst, err := findInstallation()
	switch {
	case err == nil:
		return inst
	case !errors.Is(err, errNotInstalled):
		t.Fatalf("zktest: cannot use ZooKeeper: %v", err)
	case os.Getenv(EnvRequire) == "1":
		t.Fatalf("zktest: ZooKeeper is required (%s=1) but missing: %v", EnvRequire, err)
	default:
		t.Skipf("zktest: SKIPPING %s: real ZooKeeper missing: %v. "+
			"Install it with `apt-get install -y zookeeper` (or set $%s / $%s); set %s=1 to fail instead.",
			t.Name(), err, EnvHome, EnvClasspath, EnvRequire)
	}
	return inst
}
