//go:build linux

package realflink

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// The moments of DC1's loss within Flink's checkpoint cycle, drawn by a
// run's seed once DC2 holds a complete checkpoint:
//
//   - between: just after ZooKeeper got a new pointer (the checkpoint
//     completed), before the next one writes much;
//   - checkpoint: while a checkpoint is written, shortly after its chk-N
//     directory appears on DC1's NAS;
//   - ha-file: the instant the JobManager creates a checkpoint's HA file
//     (completedCheckpoint...), before its pointer is in ZooKeeper.
//
// The delay after the event is drawn too (lossDelay, below maxDelay).
var moments = []struct {
	name     string
	maxDelay time.Duration
}{
	{"between", interval / 4},
	{"checkpoint", 60 * time.Millisecond},
	{"ha-file", 0},
}

// awaitMoment returns at the run's moment of loss: after its event and
// delay.
func (w *world) awaitMoment(ctx context.Context, t *testing.T, conn *zk.Conn) {
	t.Helper()
	var event string
	switch w.r.moment {
	case "between":
		ids, err := w.pointerIDs(conn)
		if err != nil || len(ids) == 0 {
			t.Fatalf("no pointer in ZooKeeper: %v", err)
		}
		newest := ids[len(ids)-1]
		waitUntil(t, stepTimeout, fmt.Sprintf("a pointer after %d", newest), func() bool {
			ids, err := w.pointerIDs(conn)
			return err == nil && len(ids) > 0 && ids[len(ids)-1] > newest
		})
		event = "a new pointer"
	case "checkpoint":
		event = awaitCreate(ctx, t, filepath.Join(w.backing["dc1"], "checkpoints", w.job), func(name string) bool {
			_, ok := strings.CutPrefix(name, "chk-")
			return ok
		})
	case "ha-file":
		event = awaitCreate(ctx, t, w.haDir("dc1"), func(name string) bool {
			return strings.HasPrefix(name, "completedCheckpoint")
		})
	default:
		t.Fatalf("unknown moment %q", w.r.moment)
	}
	time.Sleep(w.r.lossDelay)
	t.Logf("moment of loss: %v after %s", w.r.lossDelay.Round(time.Millisecond), event)
}

// awaitCreate waits until an entry whose name match accepts is created
// in dir, and names it. It watches with inotify: the backing directory
// of DC1's mount sees the daemon's own creat(2) as it happens.
func awaitCreate(ctx context.Context, t *testing.T, dir string, match func(string) bool) string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatalf("inotify %s: %v", dir, err)
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(stepTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			t.Fatalf("poll inotify: %v", err)
		}
		n, err = unix.Read(fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("read inotify: %v", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if match(name) {
				return name + " created"
			}
		}
	}
	t.Fatalf("nothing matching was created in %s within %v", dir, stepTimeout)
	return ""
}

// hit says what the loss caught on DC1's NAS: a checkpoint directory
// being written (without _metadata; for Flink 1.4, which writes none,
// referenced by no HA file), and HA files no pointer names (written, or
// being written, before their pointer).
func (w *world) hit(conn *zk.Conn) string {
	var parts []string
	described := w.describedChks()
	for _, d := range chkDirs(filepath.Join(w.backing["dc1"], "checkpoints", w.job)) {
		switch _, err := os.Stat(filepath.Join(w.backing["dc1"], "checkpoints", w.job, d, "_metadata")); {
		case w.r.dist.Legacy() && !described[d]:
			parts = append(parts, d+" without an HA file")
		case !w.r.dist.Legacy() && os.IsNotExist(err):
			parts = append(parts, d+" without _metadata")
		}
	}
	named := map[string]bool{}
	ids, _ := w.pointerIDs(conn)
	for _, id := range ids {
		data, _, err := conn.Get(fmt.Sprintf("%s/%019d", w.pointerDir(), id))
		if err != nil {
			continue
		}
		if h, err := flinkha.DecodeStateHandle(data); err == nil {
			if p, err := h.Path(); err == nil {
				named[filepath.Base(p)] = true
			}
		}
	}
	entries, _ := os.ReadDir(w.haDir("dc1"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "completedCheckpoint") && !named[e.Name()] {
			parts = append(parts, "HA file without pointer")
			break
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// describedChks are the chk-N directories that an HA file on DC1's NAS
// references a file of (Flink 1.4 describes a checkpoint only there).
func (w *world) describedChks() map[string]bool {
	out := map[string]bool{}
	if !w.r.dist.Legacy() {
		return out
	}
	entries, _ := os.ReadDir(w.haDir("dc1"))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "completedCheckpoint") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(w.haDir("dc1"), e.Name()))
		if err != nil {
			continue
		}
		cc, err := flinkha.DecodeCompletedCheckpoint(data)
		if err != nil {
			continue // being written
		}
		for _, f := range cc.Files {
			out[filepath.Base(path.Dir(f.Path))] = true
		}
	}
	return out
}
