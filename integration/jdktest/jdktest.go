package jdktest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireEnv is the environment variable that turns a missing JDK from a
// skip into a failure when set to "1".
const RequireEnv = "CKPTFS_REQUIRE_JDK"

// timeout bounds each javac or java run.
const timeout = 5 * time.Minute

var (
	warnOnce sync.Once
	warnOut  io.Writer = os.Stderr     // tests replace it
	short              = testing.Short // tests replace it
)

// Java returns the path of the java launcher on PATH.
func Java(t testing.TB) string {
	t.Helper()
	return tool(t, "java")
}

// Javac returns the path of the javac compiler on PATH.
func Javac(t testing.TB) string {
	t.Helper()
	return tool(t, "javac")
}

func tool(t testing.TB, name string) string {
	t.Helper()
	if short() {
		t.Skip("jdktest: the JDK is not run in -short mode")
		return ""
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("jdktest: %s not found on PATH and %s=1: %v", name, RequireEnv, err)
	}
	msg := fmt.Sprintf("jdktest: %s not found on PATH; SKIPPING tests against the real JDK (set %s=1 to make this fatal)", name, RequireEnv)
	warnOnce.Do(func() { fmt.Fprintln(warnOut, "WARNING: "+msg) })
	t.Skip(msg)
	return ""
}

// Options are the inputs of one program run.
type Options struct {
	Args  []string
	Stdin []byte
}

// Classes is a directory of compiled classes.
type Classes struct {
	Dir  string
	java string
}

// Compile writes sources (relative file name → Java text, e.g.
// "org/example/Foo.java") into a new temporary directory and compiles
// them with javac. Compilation errors fail the test.
func Compile(t testing.TB, sources map[string]string) *Classes {
	t.Helper()
	javac := Javac(t)
	java := Java(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	out := filepath.Join(dir, "classes")
	var files []string
	for name, text := range sources {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	sort.Strings(files)
	args := append([]string{"-encoding", "UTF-8", "-d", out}, files...)
	run(t, javac, args, nil)
	return &Classes{Dir: out, java: java}
}

// Run runs the class mainClass and returns its stdout. A non-zero exit
// fails the test and shows stderr.
func (c *Classes) Run(t testing.TB, mainClass string, opts Options) []byte {
	t.Helper()
	args := append([]string{"-cp", c.Dir, mainClass}, opts.Args...)
	return run(t, c.java, args, opts.Stdin)
}

// RunSource runs a single-file program (java Main.java) and returns its
// stdout. A compile error or non-zero exit fails the test.
func RunSource(t testing.TB, source string, opts Options) []byte {
	t.Helper()
	java := Java(t)
	p := filepath.Join(t.TempDir(), "Main.java")
	if err := os.WriteFile(p, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{p}, opts.Args...)
	return run(t, java, args, opts.Stdin)
}

func run(t testing.TB, prog string, args []string, stdin []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("jdktest: %s %s: %v\nstderr:\n%s", filepath.Base(prog), strings.Join(args, " "), err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("jdktest: %s wrote to stderr:\n%s", filepath.Base(prog), stderr.String())
	}
	return stdout.Bytes()
}
