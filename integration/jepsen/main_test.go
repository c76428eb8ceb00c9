package jepsen

import (
	"context"
	binenc "encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// binary is the ckptfs command, built once by TestMain when runs are
// asked for (nothing is built for the checker's own tests).
var binary string

const (
	runsEnv   = "CKPTFS_JEPSEN_RUNS"
	seedEnv   = "CKPTFS_JEPSEN_SEED"
	writerEnv = "CKPTFS_JEPSEN_WRITER" // the test binary is a writer
	jmEnv     = "CKPTFS_JEPSEN_JM"     // the test binary is a JobManager
)

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		runWriter(path)
	}
	if cfg := os.Getenv(jmEnv); cfg != "" {
		runJobManager(cfg)
		os.Exit(0)
	}
	flag.Parse()
	if testing.Short() || os.Getenv(runsEnv) == "" {
		os.Exit(m.Run())
	}
	restoreCrashedStep()
	var err error
	if binary, err = mounttest.BuildCkptfs("ckptfs-jepsen-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir := filepath.Dir(binary)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fuseMagic is FUSE_SUPER_MAGIC: statfs's f_type of a FUSE mount.
const fuseMagic = 0x65735546

// onFUSE reports whether fd is on a FUSE mount: a writer never writes
// into the bare mount point of a daemon that died (the harness keeps a
// read-only tmpfs there anyway).
func onFUSE(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == fuseMagic
}

// runWriter is a writer process: it appends 16-byte records, a sequence
// number and CLOCK_BOOTTIME when the write started, to path every
// 10 ms, reopening the file after an error (the mount's daemon may be
// restarted). On standard output it reports, with the instant, every
// change between writing and failing, and every 500 ms while failing:
// "E <boottime ns> <errno>" and "OK <boottime ns>".
func runWriter(path string) {
	var f *os.File
	var rec [16]byte
	last, lastAt := "OK", mono(0)
	report := func(state string) {
		t := now()
		if state != last || state != "OK" && t.sub(lastAt) >= 500*time.Millisecond {
			fmt.Printf("%s %d\n", statePrefix(state), t)
			last, lastAt = state, t
		}
	}
	for seq := uint64(0); ; time.Sleep(10 * time.Millisecond) {
		if f == nil {
			g, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				report(errnoName(err))
				continue
			}
			if !onFUSE(int(g.Fd())) {
				g.Close()
				report("ENOTFUSE")
				continue
			}
			f = g
		}
		binenc.BigEndian.PutUint64(rec[:8], seq)
		binenc.BigEndian.PutUint64(rec[8:], uint64(now()))
		if _, err := f.Write(rec[:]); err != nil {
			report(errnoName(err))
			f.Close()
			f = nil
			continue
		}
		seq++
		report("OK")
	}
}

// statePrefix turns a writer state into its report: "OK" or "E <errno>"
// (the instant goes between).
func statePrefix(state string) string {
	if state == "OK" {
		return "OK"
	}
	return "E " + state
}

func errnoName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return fmt.Sprintf("errno%d", int(errno))
	}
	return "other"
}

// jmConfig is what a JobManager process is told.
type jmConfig struct {
	Servers   []string
	PathRoot  string
	ClusterID string
	Storage   string // DC1's mount
	Layout    flinkemu.Layout
	Job       string
	Interval  time.Duration
	Session   time.Duration // Flink's session timeout
}

// runJobManager is an emulated Flink JobManager process of DC1
// (flinkemu): it is elected, submits one job and completes a checkpoint
// every interval through DC1's mount, until SIGTERM (it closes its
// session) or SIGKILL. Each step first checks that the storage is a
// FUSE mount, so that nothing lands in the bare mount point. Its session
// may expire (the harness blocks its proxies): go-zookeeper opens a new
// one, and it goes on writing pointers without leading, as a returning
// JobManager does. It reports what it does on standard output.
func runJobManager(data string) {
	var c jmConfig
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		fmt.Println("config:", err)
		os.Exit(2)
	}
	cfg := flinkemu.DefaultConfig()
	cfg.Servers, cfg.PathRoot, cfg.ClusterID, cfg.Storage, cfg.Layout = c.Servers, c.PathRoot, c.ClusterID, c.Storage, c.Layout
	cfg.Host, cfg.SessionTimeout = jmHost, c.Session
	cfg.MetadataInProgress = true
	cfg.BeforeStep = func(flinkemu.Step) error {
		var st unix.Statfs_t
		if err := unix.Statfs(c.Storage, &st); err != nil || st.Type != fuseMagic {
			return errors.New("the storage is not a FUSE mount")
		}
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var jm *flinkemu.JobManager
	for jm == nil {
		var err error
		if jm, err = flinkemu.Start(ctx, cfg); err != nil {
			fmt.Println("start:", err)
			if ctx.Err() != nil {
				os.Exit(0)
			}
			time.Sleep(time.Second)
		}
	}
	defer jm.Close()
	for {
		if err := jm.SubmitJob(c.Job); err != nil {
			fmt.Println("submit:", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		fmt.Println("submitted", c.Job)
		break
	}
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			fmt.Println("stopping")
			return
		case <-time.After(c.Interval):
		}
		spec := flinkemu.CheckpointSpec{StateSizes: []int{700, 1500}}
		if n%2 == 0 {
			spec.SharedSizes, spec.KeepShared = []int{900}, 1
		}
		cp, err := jm.CompleteCheckpoint(c.Job, spec)
		if err != nil {
			fmt.Printf("checkpoint failed at %d: %v\n", now(), err)
			continue
		}
		fmt.Printf("checkpoint %d at %d\n", cp.ID, now())
	}
}

// jmHost is DC1's JobManager as Flink publishes it, and DC1's
// site-jobmanagers (DC2 runs none).
const jmHost = "jm-dc1:6123"
