// Command testreport reads `go test -json` on stdin and prints what make
// unit shows: each package's ok or FAIL line, the whole output of every
// failing test, package and build, and at the end the skipped tests,
// grouped by package and reason. It exits 1 when anything failed or no
// package reported.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output
	Test       string
	Output     string
}

type key struct{ pkg, test string }

// skip is the skipped tests of one package that gave one reason.
type skip struct {
	pkg, reason string
	tests       []string
}

func main() {
	os.Exit(report(os.Stdin, os.Stdout))
}

// logPrefix is what t.Log puts before a message: "    file_test.go:12: ".
var logPrefix = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

func report(in io.Reader, out io.Writer) int {
	var (
		outputs  = map[key][]string{}
		skips    []*skip
		failed   bool
		packages int
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text()) // not an event: go itself speaking
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			outputs[k] = append(outputs[k], e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				packages++
			}
			switch {
			case e.Action == "fail":
				failed = true
				fmt.Fprint(out, strings.Join(outputs[k], ""))
			case e.Test == "":
				for _, l := range outputs[k] {
					if isSummary(l) {
						fmt.Fprint(out, l)
					}
				}
			}
			if e.Action == "skip" && e.Test != "" {
				skips = addSkip(skips, e.Package, e.Test, reason(outputs[k]))
			}
			delete(outputs, k)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport:", err)
		return 1
	}
	if len(skips) > 0 {
		n := 0
		for _, s := range skips {
			n += len(s.tests)
		}
		fmt.Fprintf(out, "\nskipped (%d):\n", n)
		for _, s := range skips {
			fmt.Fprintf(out, "  %s: %s\n", s.pkg, s.reason)
			fmt.Fprintf(out, "      %s\n", strings.Join(collapse(s.tests), " "))
		}
	}
	if packages == 0 {
		fmt.Fprintln(out, "testreport: no package reported a result")
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

// isSummary reports a package's closing line ("ok  \tpkg\t1.2s", "FAIL\tpkg
// ...", "?   \tpkg\t[no test files]").
func isSummary(line string) bool {
	return strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "FAIL\t") || strings.HasPrefix(line, "?   \t")
}

// reason is the first line of the last message a skipped test logged
// (its t.Skip message), without the file:line prefix.
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if loc := logPrefix.FindStringIndex(lines[i]); loc != nil {
			return strings.TrimSpace(lines[i][loc[1]:])
		}
	}
	return "(no reason given)"
}

func addSkip(skips []*skip, pkg, test, reason string) []*skip {
	for _, s := range skips {
		if s.pkg == pkg && s.reason == reason {
			s.tests = append(s.tests, test)
			return skips
		}
	}
	return append(skips, &skip{pkg: pkg, reason: reason, tests: []string{test}})
}

// collapse names a test's skipped subtests once: TestX/a TestX/b
// TestX/c become "TestX/{3 subtests}"; a lone subtest keeps its name.
func collapse(tests []string) []string {
	var out []string
	subs := map[string][]string{}
	for _, t := range tests {
		parent, _, isSub := strings.Cut(t, "/")
		if !isSub {
			out = append(out, t)
			continue
		}
		if subs[parent] == nil {
			out = append(out, parent+"/") // a top-level name has no "/"
		}
		subs[parent] = append(subs[parent], t)
	}
	for i, t := range out {
		if parent, ok := strings.CutSuffix(t, "/"); ok {
			if s := subs[parent]; len(s) == 1 {
				out[i] = s[0]
			} else {
				out[i] = fmt.Sprintf("%s/{%d subtests}", parent, len(s))
			}
		}
	}
	return out
}
