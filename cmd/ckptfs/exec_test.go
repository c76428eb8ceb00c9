package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// result is one run of the built binary.
type result struct {
	stdout, stderr string
	// code is the exit status; -1 when the run was stopped at its timeout.
	code int
	// maxRSS is the peak resident set of the process, in bytes.
	maxRSS int64
}

// runBinary runs the built binary with env added to the environment. At
// timeout it is sent SIGTERM (a mount daemon then unmounts cleanly), and
// killed 30 s later.
func runBinary(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.code = -1
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
