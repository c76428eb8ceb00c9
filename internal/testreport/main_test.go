package main

import (
	"bytes"
	"strings"
	"testing"
)

// stream is go test -json for: a package whose test passes and two skip
// for one reason, one for another; a package with a failing test and a
// goroutine leak found after the tests; a package that does not build.
const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestPass"}
{"Action":"output","Package":"ex/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"ex/a","Test":"TestPass","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"output","Package":"ex/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestPass"}
{"Action":"output","Package":"ex/a","Test":"TestZK","Output":"    a_test.go:12: zktest: not in -short mode\n"}
{"Action":"output","Package":"ex/a","Test":"TestZK","Output":"--- SKIP: TestZK (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestZK"}
{"Action":"output","Package":"ex/a","Test":"TestZK2","Output":"    a_test.go:20: zktest: not in -short mode\n"}
{"Action":"skip","Package":"ex/a","Test":"TestZK2"}
{"Action":"output","Package":"ex/a","Test":"TestJDK/sub","Output":"    jdk.go:3: jdktest: no JDK\n"}
{"Action":"output","Package":"ex/a","Test":"TestJDK/sub","Output":"        second line\n"}
{"Action":"skip","Package":"ex/a","Test":"TestJDK/sub"}
{"Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.01s\n"}
{"Action":"pass","Package":"ex/a"}
{"Action":"output","Package":"ex/b","Test":"TestBad","Output":"    b_test.go:5: got 1, want 2\n"}
{"Action":"output","Package":"ex/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"ex/b","Test":"TestBad"}
{"Action":"output","Package":"ex/b","Output":"goleak: Errors on successful test run: found unexpected goroutines\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t0.02s\n"}
{"Action":"fail","Package":"ex/b"}
{"ImportPath":"ex/c [ex/c.test]","Action":"build-output","Output":"c.go:1:1: syntax error\n"}
{"ImportPath":"ex/c [ex/c.test]","Action":"build-fail"}
{"Action":"output","Package":"ex/c","Output":"FAIL\tex/c [build failed]\n"}
{"Action":"fail","Package":"ex/c","FailedBuild":"ex/c [ex/c.test]"}
`

func TestReport(t *testing.T) {
	var out bytes.Buffer
	if code := report(strings.NewReader(stream), &out); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	got := out.String()
	for _, want := range []string{
		"ok  \tex/a\t0.01s\n",
		"b_test.go:5: got 1, want 2\n--- FAIL: TestBad",
		"goleak: Errors on successful test run: found unexpected goroutines\nFAIL\tex/b\t0.02s\n",
		"c.go:1:1: syntax error\n",
		"FAIL\tex/c [build failed]\n",
		"skipped (3):\n" +
			"  ex/a: zktest: not in -short mode\n      TestZK TestZK2\n" +
			"  ex/a: jdktest: no JDK\n      TestJDK/sub\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatter") || strings.Contains(got, "PASS") {
		t.Errorf("output shows a passing test:\n%s", got)
	}
}

func TestReportPasses(t *testing.T) {
	var out bytes.Buffer
	ok := `{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.01s\n"}
{"Action":"pass","Package":"ex/a"}
`
	if code := report(strings.NewReader(ok), &out); code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, out.String())
	}
	if code := report(strings.NewReader("no packages to test\n"), &out); code != 1 {
		t.Errorf("no package: exit code %d, want 1", code)
	}
}

func TestCollapse(t *testing.T) {
	got := strings.Join(collapse([]string{"TestA", "TestB/x", "TestC/p", "TestB/y", "TestC/q/r", "TestB/z", "TestD/only"}), " ")
	if want := "TestA TestB/{3 subtests} TestC/{2 subtests} TestD/only"; got != want {
		t.Errorf("collapse = %q, want %q", got, want)
	}
}
