package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// stuckRoot is a file system whose daemon reads every statfs and answers
// only when released: a daemon that deadlocked after reading a request.
type stuckRoot struct {
	fs.Inode
	asked   chan struct{}
	release chan struct{}
	once    sync.Once
}

func (r *stuckRoot) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	r.once.Do(func() { close(r.asked) })
	<-r.release
	return 0
}

// TestHealthGivesUpOnADaemonThatReadTheRequest: ckptfs health must exit
// after --timeout even when the daemon read its statfs and never answers
// (the kernel's wait for that answer survives SIGKILL, so the statfs
// cannot run in a thread of health itself).
func TestHealthGivesUpOnADaemonThatReadTheRequest(t *testing.T) {
	mounttest.RequireFUSE(t)
	mnt := t.TempDir()
	root := &stuckRoot{asked: make(chan struct{}), release: make(chan struct{})}
	srv, err := fs.Mount(mnt, root, &fs.Options{MountOptions: fuse.MountOptions{
		Name: "ckptfs", FsName: "stuck", DirectMount: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(root.release)
		}
	}
	defer func() {
		release()
		srv.Unmount()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "health", "--mountpoint", mnt, "--timeout", "1s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-root.asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon never read the statfs")
	}
	select {
	case err := <-exited:
		took := time.Since(start)
		var ee *exec.ExitError
		if !(err != nil && errors.As(err, &ee) && ee.ExitCode() == exitUnhealthy) || !strings.Contains(out.String(), "statfs did not answer within 1s") {
			t.Errorf("health of a daemon that read the request and hangs: %v after %v\n%s", err, took, out.String())
		}
		if took > 15*time.Second {
			t.Errorf("health took %v with --timeout 1s", took)
		}
	case <-time.After(15 * time.Second):
		// Release the daemon so that health can end at all, then fail.
		release()
		<-exited
		t.Fatalf("health did not exit within 15 s of a 1 s timeout: a thread of it waits for the daemon's answer\n%s", out.String())
	}
}
