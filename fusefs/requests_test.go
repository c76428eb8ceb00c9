package fusefs_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

// opCounter is a slog handler that counts the FUSE requests go-fuse's
// debug log shows ("rx <unique>: <OPCODE> ...").
type opCounter struct {
	mu sync.Mutex
	n  map[string]int // GUARDED_BY(mu)
}

func (c *opCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *opCounter) Handle(_ context.Context, r slog.Record) error {
	if f := strings.Fields(r.Message); len(f) >= 3 && f[0] == "rx" {
		c.mu.Lock()
		c.n[f[2]]++
		c.mu.Unlock()
	}
	return nil
}
func (c *opCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *opCounter) WithGroup(string) slog.Handler      { return c }

// take returns the counts so far and starts again.
func (c *opCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// perOp formats counts divided by ops, and returns their total per op.
func perOp(counts map[string]int, ops int) (string, float64) {
	var names []string
	total := 0
	for name, n := range counts {
		names = append(names, name)
		total += n
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "%s %.2f, ", name, float64(counts[name])/float64(ops))
	}
	return b.String() + fmt.Sprintf("total %.2f", float64(total)/float64(ops)), float64(total) / float64(ops)
}

func countingMount(t *testing.T, c *opCounter, opts mounttest.Options) *mounttest.Mount {
	t.Helper()
	opts.Configure = func(cfg *fusefs.Config) {
		cfg.Debug = true
		cfg.Logger = slog.New(c)
		cfg.EntryTimeout, cfg.AttrTimeout = time.Minute, time.Minute
	}
	return mounttest.New(t, &opts)
}

// TestIntegration_RequestsPerOperation counts the FUSE requests of Flink's
// small-file pattern and of listings: each one is a round trip through
// the daemon, so their number bounds what a mount can cost.
func TestIntegration_RequestsPerOperation(t *testing.T) {
	c := &opCounter{n: map[string]int{}}
	m := countingMount(t, c, mounttest.Options{Mode: fusefs.ModePrimary, Sealer: &mounttest.Sealer{}})
	passthrough := m.Server.Passthrough()
	m.MkdirOrig("job/chk-1")
	data := randomBytes(4096)
	const files = 200

	c.take()
	for i := range files {
		writeChunks(t, m.Path("job/chk-1/"+strconv.Itoa(i)), data, len(data))
	}
	waitReleased(t, m)
	counts := c.take()
	desc, total := perOp(counts, files)
	t.Logf("create, write 4 KiB and close (write-only), per file: %s", desc)
	// GETATTR (the parent, whose attributes every create invalidates),
	// LOOKUP (the new name), CREATE, GETXATTR (security.capability, once
	// per new inode), WRITE (every write goes through the daemon, design
	// §5.14), FLUSH (reports the file) and RELEASE.
	if total > 7.05 {
		t.Errorf("%.2f requests per created file, want at most 7", total)
	}
	if counts["WRITE"] != files {
		t.Errorf("%d WRITE requests for %d files of one 4 KiB write each: every write goes through the daemon", counts["WRITE"], files)
	}
	if counts["FLUSH"] != files {
		t.Errorf("%d FLUSH requests for %d closed writers", counts["FLUSH"], files)
	}

	for i := range files {
		if got, err := os.ReadFile(m.Path("job/chk-1/" + strconv.Itoa(i))); err != nil || len(got) != len(data) {
			t.Fatalf("read back %d bytes, %v", len(got), err)
		}
	}
	waitReleased(t, m)
	counts = c.take()
	desc, _ = perOp(counts, files)
	t.Logf("open, read and close, per file: %s", desc)
	if counts["FLUSH"] != 0 {
		t.Errorf("%d FLUSH requests for read-only opens", counts["FLUSH"])
	}
	if passthrough && counts["READ"] != 0 {
		t.Errorf("%d READ requests with passthrough", counts["READ"])
	}

	const entries = 2000
	// Entries stay cached long enough for the second listing below to
	// come within the entry timeout, however loaded the machine.
	r := countingMount(t, c, mounttest.Options{Mode: fusefs.ModeReplica, Visibility: mounttest.NewVisibility()})
	r.MkdirOrig("shared")
	for i := range entries {
		r.WriteOrig("shared/"+strconv.Itoa(i), nil)
	}
	list := func(lstat bool) {
		names, err := os.ReadDir(r.Path("shared"))
		if err != nil || len(names) != entries {
			t.Fatalf("listed %d entries, %v", len(names), err)
		}
		if lstat {
			for _, e := range names {
				if _, err := os.Lstat(filepath.Join(r.Path("shared"), e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	os.Stat(r.Path("shared"))
	c.take()
	list(false)
	counts = c.take()
	desc, _ = perOp(counts, entries)
	t.Logf("readdir, per entry: %s", desc)
	if counts["LOOKUP"] != 0 || counts["READDIR"]+counts["READDIRPLUS"] > entries/50 {
		t.Errorf("a plain listing of %d entries took %v", entries, counts)
	}
	list(true)
	counts = c.take()
	desc, _ = perOp(counts, entries)
	t.Logf("readdir+lstat, cold (no entry known), per entry: %s", desc)
	list(true)
	counts = c.take()
	desc, total = perOp(counts, entries)
	t.Logf("readdir+lstat, warm (looked up within the entry timeout), per entry: %s", desc)
	if total > 0.1 {
		t.Errorf("%.2f requests per entry listed and stat'ed again within the entry timeout, want none", total)
	}
}
