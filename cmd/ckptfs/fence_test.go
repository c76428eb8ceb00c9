package main

import (
	binenc "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/freezer"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// writerEnv makes the test binary a writer (TestMain): it appends
// 16-byte records, a sequence number and the time the write started,
// to the file the variable names, every 2 ms, until it is killed.
const writerEnv = "CKPTFS_TEST_WRITER"

// runWriter is the writer's main.
func runWriter(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	var rec [16]byte
	for seq := uint64(0); ; {
		binenc.BigEndian.PutUint64(rec[:8], seq)
		binenc.BigEndian.PutUint64(rec[8:], uint64(time.Now().UnixNano()))
		if _, err := f.Write(rec[:]); err == nil {
			seq++
		} else {
			fmt.Println("write:", err)
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// startWriter starts a writer process appending to path.
func startWriter(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	out, err := os.Create(filepath.Join(t.TempDir(), "writer.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
		if t.Failed() {
			data, _ := os.ReadFile(out.Name())
			t.Logf("writer: %s", tail(string(data), 10))
		}
	})
	return cmd
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// nasSize is the size of the writer's file on the NAS.
func nasSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestIntegration_FenceWithoutDaemon (issue 29, item 2; design §5.14): the
// fence holds when the daemon does not run. The real binary is DC1's
// primary with ZooKeeper, a writer process writes through it
// continuously, and DC1's daemon is
//
//   - stopped (SIGSTOP) longer than the lease: the kernel's watchdog kills
//     it before DC2's takeover activates;
//   - killed (SIGKILL): the writer's next writes fail at once (before
//     issue 29, its passthrough writer went on writing the NAS);
//   - frozen with the writer (the cgroup freezer: a paused VM) and
//     thawed after DC2's activation: the daemon is dead by then, the
//     writer writes nothing more, and the restarted daemon reports that
//     its predecessor's watchdog fired.
//
// In every case DC1's NAS does not grow after DC2's activation.
func TestIntegration_FenceWithoutDaemon(t *testing.T) {
	mounttest.RequireFUSE(t)
	cluster := zktest.StartCluster(t, 1)
	const lease = 2 * time.Second
	for _, tc := range []string{"stopped", "killed", "frozen"} {
		t.Run(tc, func(t *testing.T) {
			var group *freezer.Group
			if tc == "frozen" {
				group = freezer.New(t, "site-dc1", "")
			}
			top := t.TempDir()
			backing, mnt := filepath.Join(top, "nas"), filepath.Join(top, "flink")
			os.MkdirAll(filepath.Join(backing, "ha"), 0o755)
			os.MkdirAll(mnt, 0o755)
			cid := "fence-" + tc
			common := []string{"--zk", cluster.ConnectString(), "--cluster-id", cid, "--lease-duration", lease.String()}
			mount := append(append([]string{"--log-format", "json", "--mode", "primary", "--site", "dc1"}, common...),
				"--poll", "200ms", "--metrics-addr", "127.0.0.1:0", backing, mnt)
			d := startMount(t, mount...)
			file := filepath.Join("ha", "stream")
			w := startWriter(t, filepath.Join(mnt, file))
			if group != nil {
				for _, pid := range []int{d.cmd.Process.Pid, w.Process.Pid} {
					if err := group.Add(pid); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(lease / 2)
			if nasSize(t, filepath.Join(backing, file)) == 0 {
				t.Fatal("the writer wrote nothing through DC1's primary")
			}

			switch tc {
			case "stopped":
				d.cmd.Process.Signal(syscall.SIGSTOP)
			case "killed":
				d.cmd.Process.Signal(syscall.SIGKILL)
				size := nasSize(t, filepath.Join(backing, file))
				time.Sleep(lease / 2)
				if got := nasSize(t, filepath.Join(backing, file)); got != size {
					t.Errorf("DC1's NAS grew from %d to %d bytes after its daemon was killed", size, got)
				}
			case "frozen":
				if err := group.Freeze(); err != nil {
					t.Fatal(err)
				}
			}
			// DC2 takes over: it activates once the lease stayed unchanged
			// for D.
			takeover := append([]string{"takeover", "--site", "dc2", "--wait", "0"}, common...)
			out, stderr, code := ckptfs(t, takeover...)
			if code != exitOK {
				t.Fatalf("DC2's takeover: exit %d\n%s\n%s", code, out, stderr)
			}
			activated := time.Now()
			sizeAt := nasSize(t, filepath.Join(backing, file))

			switch tc {
			case "stopped":
				// The watchdog killed it at 3D/4, before the activation.
				state := waitExit(t, d.cmd, 5*time.Second)
				if state == nil || !state.Sys().(syscall.WaitStatus).Signaled() || state.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("DC1's stopped daemon: %v, want killed by SIGKILL (its watchdog)", state)
				}
			case "frozen":
				if err := group.Thaw(); err != nil {
					t.Fatal(err)
				}
				state := waitExit(t, d.cmd, 5*time.Second)
				if state == nil || !state.Sys().(syscall.WaitStatus).Signaled() || state.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("DC1's frozen daemon after the thaw: %v, want killed by SIGKILL (its watchdog, %s)", state, group.Kind)
				}
			}
			time.Sleep(lease)
			if got := nasSize(t, filepath.Join(backing, file)); got != sizeAt {
				t.Fatalf("DC1's NAS grew from %d to %d bytes after DC2's activation", sizeAt, got)
			}
			// Every record on DC1's NAS started before the activation, by
			// more than the part of a lease the watchdog leaves.
			data, err := os.ReadFile(filepath.Join(backing, file))
			if err != nil || len(data)%16 != 0 {
				t.Fatalf("DC1's NAS file: %d bytes, %v", len(data), err)
			}
			last := time.Unix(0, int64(binenc.BigEndian.Uint64(data[len(data)-8:])))
			t.Logf("%s: %d records on DC1's NAS, the last started %v before DC2's activation", tc, len(data)/16, activated.Sub(last).Round(time.Millisecond))
			if activated.Sub(last) < lease/4 {
				t.Errorf("the last record on DC1's NAS started %v before DC2's activation: want at least D/4", activated.Sub(last))
			}

			if tc == "killed" {
				return
			}
			// Restarted, DC1's daemon says that its predecessor's watchdog
			// fired, and stays read-only: DC2 holds the lease.
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			d2 := startMount(t, append(append([]string{"--log-format", "json", "--mode", "replica", "--site", "dc1"}, common...),
				"--poll", "200ms", "--metrics-addr", "127.0.0.1:0", backing, mnt)...)
			addr := d2.metricsAddr(t)
			if n, ok := seriesValue(scrapeDaemon(t, addr), "ckptfs_watchdog_fired_previous", "", ""); !ok || n != 1 {
				t.Errorf("ckptfs_watchdog_fired_previous %v (exported %v) after the watchdog fired, want 1", n, ok)
			}
			if out, code, _ := health(t, "--metrics-url", "http://"+addr); code == exitOK || !strings.Contains(out, "ended with its watchdog armed") {
				t.Errorf("health after the watchdog fired: exit %d\n%s", code, out)
			}
		})
	}
}

// waitExit waits for cmd to end, at most within; nil if it did not.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) *os.ProcessState {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState
	case <-time.After(within):
		return nil
	}
}
