package jdktest

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Fatal and Skip end only the goroutine
// running the code under test, so a test can check that they happened.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Logf(string, ...any) {}

// capture runs f with a recorder and returns it once f has returned or
// called Fatal or Skip.
func capture(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestRunSourceStdinAndArgs(t *testing.T) {
	const src = `
public class Echo {
    public static void main(String[] args) throws Exception {
        byte[] in = System.in.readAllBytes();
        System.out.print(String.join(",", args) + "|" + new String(in, "UTF-8"));
    }
}`
	got := RunSource(t, src, Options{Args: []string{"a", "b c"}, Stdin: []byte("from stdin")})
	if want := "a,b c|from stdin"; string(got) != want {
		t.Fatalf("stdout = %q, want %q", got, want)
	}
}

func TestCompileAndRunPackages(t *testing.T) {
	classes := Compile(t, map[string]string{
		"org/example/Greeting.java": `package org.example;
public class Greeting { public static String text() { return "hello"; } }`,
		"Main.java": `public class Main {
    public static void main(String[] args) { System.out.print(org.example.Greeting.text() + " " + args[0]); }
}`,
	})
	if got := classes.Run(t, "Main", Options{Args: []string{"world"}}); string(got) != "hello world" {
		t.Fatalf("stdout = %q, want %q", got, "hello world")
	}
}

func TestCompileErrorFailsWithDiagnostics(t *testing.T) {
	Javac(t)
	r := capture(t, func(tb testing.TB) {
		Compile(tb, map[string]string{"Broken.java": "public class Broken { int x = ; }"})
	})
	if !r.failed || !strings.Contains(r.msg, "Broken.java") || !strings.Contains(r.msg, "error") {
		t.Fatalf("failed=%v msg=%q, want a failure naming Broken.java and the javac error", r.failed, r.msg)
	}
}

func TestNonZeroExitFailsWithStderr(t *testing.T) {
	Java(t)
	r := capture(t, func(tb testing.TB) {
		RunSource(tb, `public class Fail {
    public static void main(String[] a) { System.err.println("boom from java"); System.exit(3); }
}`, Options{})
	})
	if !r.failed || !strings.Contains(r.msg, "boom from java") || !strings.Contains(r.msg, "exit status 3") {
		t.Fatalf("failed=%v msg=%q, want a failure with stderr and exit status", r.failed, r.msg)
	}
}

func TestMissingJava(t *testing.T) {
	old := warnOut
	warnOut = io.Discard
	t.Cleanup(func() { warnOut, short = old, testing.Short })
	short = func() bool { return false }
	t.Setenv("PATH", t.TempDir())

	t.Setenv(RequireEnv, "")
	r := capture(t, func(tb testing.TB) { Java(tb) })
	if !r.skipped || r.failed || !strings.Contains(r.msg, RequireEnv) {
		t.Errorf("without %s: skipped=%v failed=%v msg=%q, want a skip naming the variable", RequireEnv, r.skipped, r.failed, r.msg)
	}

	t.Setenv(RequireEnv, "1")
	r = capture(t, func(tb testing.TB) { Javac(tb) })
	if !r.failed || r.skipped {
		t.Errorf("with %s=1: skipped=%v failed=%v msg=%q, want a failure", RequireEnv, r.skipped, r.failed, r.msg)
	}

	short = func() bool { return true }
	r = capture(t, func(tb testing.TB) { Java(tb) })
	if !r.skipped || r.failed || !strings.Contains(r.msg, "-short") {
		t.Errorf("-short with %s=1: skipped=%v failed=%v msg=%q, want a skip naming -short", RequireEnv, r.skipped, r.failed, r.msg)
	}
}
