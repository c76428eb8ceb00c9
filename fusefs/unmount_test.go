package fusefs_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// TestUnmountWhileAnotherNamespaceHoldsTheMount: a mount namespace made
// while the mount exists, with private propagation, keeps a copy of it,
// and with it the file system; the kernel then never tells the daemon's
// serving goroutines that the mount ended. Unmount must still return.
func TestUnmountWhileAnotherNamespaceHoldsTheMount(t *testing.T) {
	m := mounttest.New(t, nil)
	if err := os.WriteFile(m.Path("file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	killHolder := func() { holder.Process.Kill(); holder.Wait() }
	defer killHolder()
	// The copy exists once the holder runs sleep in its namespace.
	self, _ := os.Readlink("/proc/self/ns/mnt")
	deadline := time.Now().Add(10 * time.Second)
	for {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(holder.Process.Pid) + "/ns/mnt")
		exe, _ := os.Readlink("/proc/" + strconv.Itoa(holder.Process.Pid) + "/exe")
		if err == nil && ns != self && exe != "" && exe != "/usr/bin/unshare" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder did not enter its own mount namespace (%s, %v)", ns, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	done := make(chan error, 1)
	go func() { done <- m.Unmount() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("unmount: %v", err)
		}
	case <-time.After(20 * time.Second):
		killHolder() // so that Unmount can return at all
		<-done
		t.Fatal("Unmount waited for as long as another mount namespace held a copy of the mount")
	}
	// The copy lost its daemon.
	out, err := exec.Command("nsenter", "--mount=/proc/"+strconv.Itoa(holder.Process.Pid)+"/ns/mnt", "stat", "-f", m.Mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not connected") {
		t.Errorf("statfs of the copy in the other namespace: %v: %s; want ENOTCONN", err, out)
	}
}
