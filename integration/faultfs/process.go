package faultfs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/rpc"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// The file system runs in a child process (the test binary re-executed
// through Main): a process that memory-maps a file of a FUSE file system
// it serves itself can deadlock (go-fuse's package fs, "Deadlocks"), and
// ckptfs maps every _metadata it verifies. The test talks to the child
// over a Unix socket (net/rpc).

// serveEnv carries a serveSpec to the child.
const serveEnv = "CKPTFS_FAULTFS_SERVE"

const readyLine = "faultfs-ready"

type serveSpec struct {
	Lower, MountPoint, Socket string
	Options
}

// Options change how a faultfs serves.
type Options struct {
	// LookupAttrs lets a stat use the attributes its LOOKUP returned, as
	// an NFS client does (they stay valid 1 ms, a jiffy to the kernel),
	// rather than ask for them again: a stat of a name not cached costs
	// one round trip, not two. Fault tests leave it off, so that every
	// stat reaches the rules.
	LookupAttrs bool
}

// Main is the TestMain of packages that use Mount: in the child it serves
// a faultfs until SIGTERM instead of running tests. Otherwise it runs the
// tests and fails the run when a goroutine outlives them.
func Main(m *testing.M, opts ...goleak.Option) {
	if spec := os.Getenv(serveEnv); spec != "" {
		os.Exit(serve(spec))
	}
	goleak.VerifyTestMain(m, opts...)
}

func serve(specJSON string) int {
	var spec serveSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "faultfs: bad spec:", err)
		return 2
	}
	f := newServer()
	srv, err := f.mount(spec.Lower, spec.MountPoint, spec.Options)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultfs: mount:", err)
		return 1
	}
	ln, err := net.Listen("unix", spec.Socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultfs: listen:", err)
		srv.Unmount()
		return 1
	}
	rs := rpc.NewServer()
	if err := rs.RegisterName("Faultfs", &Control{f: f}); err != nil {
		fmt.Fprintln(os.Stderr, "faultfs:", err)
		return 1
	}
	go rs.Accept(ln)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// Not Pdeathsig: it fires when the thread that started the child
	// ends, and Go ends threads (one a goroutine locked and left).
	go func(parent int) {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				stop <- syscall.SIGTERM
				return
			}
		}
	}(os.Getppid())
	fmt.Println(readyLine)
	var st unix.Stat_t
	unix.Stat(spec.MountPoint, &st)
	<-stop
	f.clear()
	unmounted := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 20; i++ {
			if err = srv.Unmount(); err == nil {
				break
			}
			f.clear()
			time.Sleep(50 * time.Millisecond)
		}
		unmounted <- err
	}()
	select {
	case err := <-unmounted:
		if err == nil {
			return 0
		}
		// Still busy: a mount above it that was detached lazily (a
		// ckptfs daemon that stopped with requests stuck on this NAS)
		// holds files of it until its own connection ends.
	case <-time.After(3 * time.Second):
		// Unmounted here, but a copy of the mount in another mount
		// namespace (made by any process on the machine meanwhile) keeps
		// the connection alive, so the serving loops never end.
	}
	unix.Unmount(spec.MountPoint, unix.MNT_DETACH)
	if err := abort(unix.Minor(st.Dev)); err != nil {
		fmt.Fprintln(os.Stderr, "faultfs:", err)
	}
	// Exiting closes /dev/fuse, which ends the connection for good.
	return 0
}

// abort ends FUSE connection conn through fusectl, mounting it if
// nobody did.
func abort(conn uint32) error {
	const fusectl = "/sys/fs/fuse/connections"
	dir := filepath.Join(fusectl, strconv.FormatUint(uint64(conn), 10))
	if _, err := os.Stat(dir); err != nil {
		if err := unix.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil && err != unix.EBUSY {
			return fmt.Errorf("mount fusectl: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(dir, "abort"), []byte("1"), 0)
}

// Control is the child's RPC service; only net/rpc calls it.
type Control struct{ f *server }

// Stats is what the child reports.
type Stats struct {
	Hung int64
	Hits uint64
	Ops  Counts
}

func (c *Control) Add(r Rule, id *int) error             { *id = c.f.add(r); return nil }
func (c *Control) Remove(id int, _ *struct{}) error      { c.f.remove(id); return nil }
func (c *Control) Release(_ struct{}, _ *struct{}) error { c.f.releaseAll(); return nil }
func (c *Control) Clear(_ struct{}, _ *struct{}) error   { c.f.clear(); return nil }
func (c *Control) Stats(_ struct{}, out *Stats) error {
	*out = Stats{Hung: c.f.hung.Load(), Hits: c.f.hits.Load(), Ops: c.f.counts()}
	return nil
}

// FS is a faultfs served by a child process.
type FS struct {
	// Lower is the directory served, MountPoint where.
	Lower, MountPoint string

	t      testing.TB
	cmd    *exec.Cmd
	client *rpc.Client
}

// Mount serves lower at mountPoint from a child process until the test
// ends. The package's TestMain must call Main. It needs root and
// /dev/fuse; the caller checks (mounttest.RequireFUSE).
func Mount(t testing.TB, lower, mountPoint string) *FS {
	t.Helper()
	return MountWith(t, lower, mountPoint, Options{})
}

// MountWith is Mount with options.
func MountWith(t testing.TB, lower, mountPoint string, o Options) *FS {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "faultfs.sock")
	spec, _ := json.Marshal(serveSpec{Lower: lower, MountPoint: mountPoint, Socket: sock, Options: o})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("faultfs: %v", err)
	}
	f := &FS{Lower: lower, MountPoint: mountPoint, t: t, cmd: cmd}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != readyLine+"\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("faultfs did not start: %q %v", line, err)
	}
	if f.client, err = rpc.Dial("unix", sock); err != nil {
		f.Unmount()
		t.Fatalf("faultfs: %v", err)
	}
	t.Cleanup(f.Unmount)
	return f
}

func (f *FS) call(method string, in, out any) {
	if err := f.client.Call("Faultfs."+method, in, out); err != nil {
		f.t.Errorf("faultfs %s: %v", method, err)
	}
}

// Add installs r (rules apply in the order added; the first that matches
// acts) and returns a function that removes it.
func (f *FS) Add(r Rule) (remove func()) {
	var id int
	f.call("Add", r, &id)
	return func() { f.call("Remove", id, &struct{}{}) }
}

// Release ends every hang now; rules stay (a hang rule hangs the next
// matching request again).
func (f *FS) Release() { f.call("Release", struct{}{}, &struct{}{}) }

// Clear removes every rule and ends every hang: the NAS is well again.
func (f *FS) Clear() { f.call("Clear", struct{}{}, &struct{}{}) }

func (f *FS) stats() Stats {
	var st Stats
	f.call("Stats", struct{}{}, &st)
	return st
}

// Hung is how many requests wait on a hang now.
func (f *FS) Hung() int64 { return f.stats().Hung }

// Hits is how many requests a rule acted on so far.
func (f *FS) Hits() uint64 { return f.stats().Hits }

// Ops is how many requests of each operation the file system served so
// far, whether a rule acted on them or not: what a daemon over it costs
// the NAS. Requests of every process count, so a test that measures one
// process keeps the others off the mount (writing the lower directory
// instead) or measures while they are idle.
func (f *FS) Ops() Counts { return f.stats().Ops }

// Unmount clears the rules, unmounts and ends the child.
func (f *FS) Unmount() {
	if f.cmd == nil {
		return
	}
	if f.client != nil {
		f.client.Call("Faultfs.Clear", struct{}{}, &struct{}{})
		f.client.Close()
	}
	f.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { f.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		f.t.Errorf("faultfs at %s did not stop; its goroutines follow", f.MountPoint)
		f.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			f.cmd.Process.Kill()
			<-done
		}
	}
	syscall.Unmount(f.MountPoint, syscall.MNT_DETACH)
	f.cmd = nil
}
