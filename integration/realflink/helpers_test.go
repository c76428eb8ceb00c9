//go:build linux

package realflink

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// freePorts returns n TCP ports free on addr right now.
func freePorts(tb testing.TB, addr string, n int) []int {
	tb.Helper()
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp4", addr+":0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// waitUntil polls ok until it holds, failing after timeout or as soon as
// one of procs ends (with its output's and its Flink log's tail).
func waitUntil(tb testing.TB, timeout time.Duration, what string, ok func() bool, procs ...*Process) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		for _, p := range procs {
			select {
			case <-p.Exited():
				tb.Fatalf("%s exited while waiting for %s: %v\n%s\n%s", p.Name, what, p.Err(), p.Tail(20), logTail(p.FlinkLog, 30))
			default:
			}
		}
		if time.Now().After(deadline) {
			var tails []string
			for _, p := range procs {
				tails = append(tails, fmt.Sprintf("%s:\n%s\n%s", p.Name, p.Tail(20), logTail(p.FlinkLog, 30)))
			}
			tb.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, strings.Join(tails, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail is the last n lines of the file at path ("" for no file).
func logTail(path string, n int) string {
	if path == "" {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(data), n)
}

// firstLine is the first non-blank line of s, trimmed.
func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}
