package scale

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// The short form's layout (make test): 20 jobs × 300 files a checkpoint,
// about 7,200 files on disk in 100 directories, with 60 _metadata files.
const (
	shortJobs  = 20
	shortFiles = 300
	shortDelay = 50 * time.Microsecond
)

// shortEnv switches TestScaleShort on (make test sets it).
const shortEnv = "CKPTFS_SCALE_SHORT"

// incrementalBound is the most NAS operations a pass that finds nothing
// new may make over a layout of files files on disk, dirs directories and
// metadatas _metadata files: a stat of every directory (is anything new
// in it?) and of every _metadata, at most 4 operations each (a path
// walk's lookups and a getattr: nothing is cached on the NAS's mount),
// a twentieth of the files' worth for what a directory changed by the
// last writes costs (listed again, and once more when it settled), plus
// the daemon's audit: 2 operations (a lookup and a getattr) for each
// file it says it stat'ed again, at the rate --audit-period sets. A pass
// that stats every file makes about 3 operations a file.
func incrementalBound(files, dirs, metadatas int, audited float64) float64 {
	return float64(4*(dirs+metadatas)) + float64(files)/20 + 2*audited
}

// TestScaleShort is the short form of the scale harness (make test): 20
// jobs over a NAS with 50 µs a operation, a checkpoint per job every
// 4 s. It fails when a pass that finds nothing new costs more NAS
// operations than incrementalBound (a pass over the whole tree), when a
// deleted or truncated shared file does not hide its checkpoint within
// 60 s, or when a new checkpoint is not seen within 30 s.
//
// Before issue 32's incremental catalog every pass stats every file:
// this test fails there, on the operations of a pass.
func TestScaleShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the scale harness mounts FUSE file systems (-short)")
	}
	if os.Getenv(shortEnv) != "1" {
		t.Skipf("SKIPPED: the scale harness's short form runs with %s=1 (make test sets it once the incremental catalog of issue 32 is merged; before, every pass costs the whole tree and it fails)", shortEnv)
	}
	r := runScale(t, params{Jobs: shortJobs, Files: shortFiles, Delay: shortDelay,
		Duration: 8 * time.Second, Interval: 4 * time.Second, Disappear: 2, WarmPasses: 1, IdlePasses: 2, Patience: 60 * time.Second, Audit: 45 * time.Second})
	t.Log("\n" + r.table())
	if bound := incrementalBound(r.files, r.dirs, shortJobs*retained, r.idleAudited); r.idleOps > bound {
		t.Errorf("a pass with nothing new made %.0f NAS operations (%.0f%% of the %d files on disk; over the passes measured: %s), more than an incremental pass needs (%.0f): every pass costs the whole tree",
			r.idleOps, 100*r.idleOps/float64(r.files), r.files, r.idleCounts, bound)
	}
	if r.unseen > 0 || r.subsumed > 0 {
		t.Errorf("of %d new checkpoints, %d were subsumed (8 s after they were written) before they were visible, and %d were not visible within 60s", r.written, r.subsumed, r.unseen)
	}
	if r.written == 0 || len(r.vis) == 0 {
		t.Errorf("no checkpoint written (%d) or seen (%d) in the steady window", r.written, len(r.vis))
	}
	if lat := quantile(r.vis, 1); lat > 30*time.Second {
		t.Errorf("a new checkpoint became visible %v after its _metadata, want within 30s", lat)
	}
	for _, c := range []struct {
		what string
		ds   []time.Duration
	}{{"deleted", r.deleted}, {"truncated", r.truncated}} {
		if len(c.ds) == 0 {
			t.Errorf("no checkpoint hidden by a %s file", c.what)
		}
		if lat := quantile(c.ds, 1); lat > 60*time.Second {
			t.Errorf("a %s shared file hid its checkpoint after %v, want within 60s", c.what, lat)
		}
	}
}

// BenchmarkScale is make bench-scale: the parameters come from the
// environment (CKPTFS_SCALE_JOBS, _FILES, _DELAY, _DURATION, _INTERVAL),
// one run whatever b.N is. CKPTFS_SCALE_DELAY=local runs the daemon on
// the layout's directory directly, without faultfs.
func BenchmarkScale(b *testing.B) {
	local := os.Getenv("CKPTFS_SCALE_DELAY") == "local"
	if local {
		os.Setenv("CKPTFS_SCALE_DELAY", "0")
	}
	p := params{
		Local:     local,
		Jobs:      envInt(b, "CKPTFS_SCALE_JOBS", 50),
		Files:     envInt(b, "CKPTFS_SCALE_FILES", 2000),
		Delay:     envDuration(b, "CKPTFS_SCALE_DELAY", 0),
		Duration:  envDuration(b, "CKPTFS_SCALE_DURATION", time.Minute),
		Interval:  envDuration(b, "CKPTFS_SCALE_INTERVAL", 10*time.Second),
		Disappear: 5,
		// Past the passes that end the start: the one that takes the
		// directories' stamps and the one that lists them a settle
		// later (design §3.6).
		WarmPasses: 3,
		IdlePasses: 2,
		Patience:   envDuration(b, "CKPTFS_SCALE_PATIENCE", 20*time.Minute),
		Audit:      envDuration(b, "CKPTFS_SCALE_AUDIT", 0),
		NoTruncate: os.Getenv("CKPTFS_SCALE_TRUNCATE") == "0",
	}
	if !local {
		p.Delay = envDuration(b, "CKPTFS_SCALE_DELAY", 0)
	}
	b.StopTimer()
	r := runScale(b, p)
	b.Log("\n" + r.table())
	b.ReportMetric(r.mounted.Seconds(), "mounted-s")
	b.ReportMetric(r.allVisible.Seconds(), "all-visible-s")
	b.ReportMetric(r.cpu, "cpu-cores")
	b.ReportMetric(r.quietCPU, "quiet-cpu-cores")
	b.ReportMetric(float64(r.rssSteady)/1e6, "rss-MB")
	b.ReportMetric(float64(r.peak)/1e6, "rss-peak-MB")
	b.ReportMetric(quantile(r.passes, 0.5).Seconds(), "pass-s")
	b.ReportMetric(quantile(r.vis, 0.5).Seconds(), "vis-p50-s")
	b.ReportMetric(quantile(r.vis, 0.99).Seconds(), "vis-p99-s")
	b.ReportMetric(quantile(r.vis, 1).Seconds(), "vis-max-s")
	b.ReportMetric(float64(r.unseen), "unseen")
	b.ReportMetric(float64(r.subsumed), "subsumed-unseen")
	b.ReportMetric(quantile(r.deleted, 1).Seconds(), "deleted-max-s")
	b.ReportMetric(quantile(r.truncated, 1).Seconds(), "truncated-max-s")
	if !p.Local {
		b.ReportMetric(r.idleOps, "ops/idle-pass")
		b.ReportMetric(r.steadyOps, "ops/pass")
	}
	if _, _, sr, ir := r.floors(); r.floorRate > 0 {
		b.ReportMetric(r.floorRate, "floor-ops/s")
		b.ReportMetric(sr, "pass/floor")
		b.ReportMetric(ir, "idle-pass/floor")
	}
	b.ReportMetric(0, "ns/op")
}

func envInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", key, v)
	}
	return n
}

func envDuration(b *testing.B, key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration", key, v)
	}
	return d
}
