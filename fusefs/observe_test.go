package fusefs_test

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

func latencyOf(s *fusefs.Server, op string) (fusefs.OpLatency, bool) {
	for _, l := range s.Latencies() {
		if l.Op == op {
			return l, true
		}
	}
	return fusefs.OpLatency{}, false
}

// TestIntegration_LatencyByOperation: requests the kernel really sent
// show up under their operation, in consistent histograms.
func TestIntegration_LatencyByOperation(t *testing.T) {
	m := mounttest.New(t, nil)
	m.WriteOrig("d/f", []byte("data"))
	before, _ := latencyOf(m.Server, "write")
	// Read-write: served by the daemon (write-only opens may go through
	// passthrough, which the daemon never sees).
	f, err := os.OpenFile(m.Path("d/g"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("written through the mount")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(m.Path("d/f")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(m.Path("d")); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"lookup", "create", "write", "flush", "open", "opendir", "readdir"} {
		l, ok := latencyOf(m.Server, op)
		if !ok || l.Count == 0 {
			t.Errorf("%s: no requests recorded (%+v)", op, m.Server.Latencies())
		}
	}
	after, _ := latencyOf(m.Server, "write")
	if after.Count <= before.Count {
		t.Errorf("write count %d did not grow from %d", after.Count, before.Count)
	}
	buckets := fusefs.LatencyBuckets()
	for _, l := range m.Server.Latencies() {
		if len(l.Cumulative) != len(buckets) {
			t.Fatalf("%s: %d buckets, want %d", l.Op, len(l.Cumulative), len(buckets))
		}
		for i := 1; i < len(l.Cumulative); i++ {
			if l.Cumulative[i] < l.Cumulative[i-1] {
				t.Errorf("%s: cumulative counts fall at %v: %v", l.Op, buckets[i], l.Cumulative)
			}
		}
		if last := l.Cumulative[len(l.Cumulative)-1]; last > l.Count {
			t.Errorf("%s: %d in buckets, %d in total", l.Op, last, l.Count)
		}
		if l.Sum <= 0 || l.Sum > time.Duration(l.Count)*time.Minute {
			t.Errorf("%s: sum %v for %d requests", l.Op, l.Sum, l.Count)
		}
	}
	if b := fusefs.LatencyBuckets(); &b[0] == &buckets[0] {
		t.Error("LatencyBuckets shares its array with callers")
	}
}

// TestIntegration_IncompleteLookupsByJob: Flink's attempts to open a
// checkpoint that is not complete here are counted by job directory;
// other refused names are not.
func TestIntegration_IncompleteLookupsByJob(t *testing.T) {
	vis := mounttest.NewVisibility()
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModeReplica, Visibility: vis})
	m.WriteOrig("ck/job-a/chk-3/_metadata", []byte("m"))
	m.WriteOrig("ck/job-b/chk-7/_metadata", []byte("m"))
	m.WriteOrig("ck/job-b/x.tmp", []byte("m"))
	vis.Set("ck/job-a/chk-3", fmt.Errorf("torn: %w", manifest.ErrIncomplete))
	vis.Set("ck/job-b/chk-7", fmt.Errorf("torn: %w", manifest.ErrIncomplete))
	vis.Set("ck/job-b/x.tmp", manifest.ErrHidden)
	for range 3 {
		if _, err := os.Stat(m.Path("ck/job-a/chk-3/_metadata")); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("stat of an incomplete checkpoint: %v", err)
		}
	}
	os.Stat(m.Path("ck/job-b/chk-7"))
	os.Stat(m.Path("ck/job-b/x.tmp"))
	got := m.Server.IncompleteLookups()
	if got["ck/job-a"] != 3 || got["ck/job-b"] != 1 || len(got) != 2 {
		t.Errorf("incomplete lookups by job = %v, want job-a 3, job-b 1", got)
	}
	if s := m.Server.Stats(); s.IncompleteLookups != 4 {
		t.Errorf("Stats().IncompleteLookups = %d, want 4", s.IncompleteLookups)
	}
}
