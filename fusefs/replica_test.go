package fusefs_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/manifest"
)

// replicaTree is a job directory as a replica holds it: chk-1 complete,
// chk-2 torn, an in-progress _metadata, shared state, and ckptfs's own
// directory at the root.
func replicaTree(m *mounttest.Mount, vis *mounttest.Visibility) {
	m.WriteOrig("job/chk-1/_metadata", []byte("meta-1"))
	m.WriteOrig("job/chk-1/state", []byte("state-1"))
	m.WriteOrig("job/chk-1/._metadata.inprogress.0b8f", []byte("partial"))
	m.WriteOrig("job/chk-2/state", []byte("state-2"))
	m.WriteOrig("job/shared/abc", []byte("shared"))
	m.WriteOrig(".ckptfs/manifests/job-1", []byte("sealed"))
	m.WriteOrig("top", []byte("top"))
	vis.Set("job/chk-2", fmt.Errorf("chk-2 misses state: %w", manifest.ErrIncomplete))
	vis.Set("job/chk-1/._metadata.inprogress.0b8f", manifest.ErrHidden)
}

func TestIntegration_ReplicaHidesNames(t *testing.T) {
	vis := mounttest.NewVisibility()
	rec := &records{next: slog.DiscardHandler}
	m := mounttest.New(t, &mounttest.Options{
		Mode:       fusefs.ModeReplica,
		Visibility: vis,
		Configure:  func(c *fusefs.Config) { c.Logger = slog.New(rec) },
	})
	replicaTree(m, vis)

	for _, rel := range []string{"job/chk-2", "job/chk-2/state", "job/chk-1/._metadata.inprogress.0b8f", ".ckptfs", ".ckptfs/manifests/job-1"} {
		_, err := os.Stat(m.Path(rel))
		wantErrno(t, "stat "+rel, err, syscall.ENOENT)
		_, err = os.Lstat(m.Path(rel))
		wantErrno(t, "lstat "+rel, err, syscall.ENOENT)
		_, err = os.Open(m.Path(rel))
		wantErrno(t, "open "+rel, err, syscall.ENOENT)
	}
	if got, err := os.ReadFile(m.Path("job/chk-1/state")); err != nil || string(got) != "state-1" {
		t.Errorf("visible file: %q, %v", got, err)
	}

	want := map[string][]string{
		"":          {"job", "top"},
		"job":       {"chk-1", "shared"},
		"job/chk-1": {"_metadata", "state"},
	}
	for dir, names := range want {
		p := m.Path(dir)
		if got := readDir(t, p); !slices.Equal(got, names) {
			t.Errorf("os.ReadDir(%q) = %v, want %v", dir, got, names)
		}
		if got := ls(t, p, false); !slices.Equal(got, names) {
			t.Errorf("ls -a %q = %v, want %v", dir, got, names)
		}
		if got := ls(t, p, true); !slices.Equal(got, names) {
			t.Errorf("ls -la %q = %v, want %v", dir, got, names)
		}
	}

	before := m.Server.Stats().IncompleteLookups
	_, err := os.Stat(m.Path("job/chk-2"))
	wantErrno(t, "stat chk-2", err, syscall.ENOENT)
	if got := m.Server.Stats().IncompleteLookups; got <= before {
		t.Errorf("IncompleteLookups %d -> %d, want it counted", before, got)
	}
	logs := rec.find("Flink asked for incomplete chk-N")
	if len(logs) == 0 {
		t.Fatal("no log line for the incomplete checkpoint")
	}
	if logs[0]["job"] != "job" || logs[0]["checkpoint"] != "2" || logs[0]["dir"] != "job/chk-2" {
		t.Errorf("log attrs %v, want job=job checkpoint=2 dir=job/chk-2", logs[0])
	}
	if n := len(rec.find("Flink asked for incomplete chk-N")); n != 1 {
		t.Errorf("%d log lines for repeated lookups, want 1 (rate limited)", n)
	}

	// A chk-N with no directory at all (a catalog has no verdict on it
	// either) hides nothing: ENOENT, neither counted nor logged.
	vis.Set("job/chk-999", manifest.ErrIncomplete)
	before = m.Server.Stats().IncompleteLookups
	for range 100 {
		_, err := os.Stat(m.Path("job/chk-999"))
		wantErrno(t, "stat chk-999", err, syscall.ENOENT)
	}
	if got := m.Server.Stats().IncompleteLookups; got != before {
		t.Errorf("IncompleteLookups %d -> %d for a checkpoint that does not exist", before, got)
	}
	for _, l := range rec.find("Flink asked for incomplete chk-N") {
		if l["checkpoint"] == "999" {
			t.Errorf("logged %v for a checkpoint that does not exist", l)
		}
	}
}

func TestIntegration_ReservedDirHiddenInEveryMode(t *testing.T) {
	for _, mode := range []fusefs.Mode{fusefs.ModePrimary, fusefs.ModeReplica, fusefs.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			m := mounttest.New(t, &mounttest.Options{Mode: mode})
			m.WriteOrig(".ckptfs/manifests/m", []byte("x"))
			m.WriteOrig("job/.ckptfs", []byte("only the root one is reserved"))
			_, err := os.Stat(m.Path(".ckptfs"))
			wantErrno(t, "stat .ckptfs", err, syscall.ENOENT)
			_, err = os.ReadFile(m.Path(".ckptfs/manifests/m"))
			wantErrno(t, "read below .ckptfs", err, syscall.ENOENT)
			if got := readDir(t, m.Mnt); !slices.Equal(got, []string{"job"}) {
				t.Errorf("root lists %v", got)
			}
			if got := ls(t, m.Mnt, true); !slices.Equal(got, []string{"job"}) {
				t.Errorf("ls -la root lists %v", got)
			}
			if _, err := os.Stat(m.Path("job/.ckptfs")); err != nil {
				t.Errorf("job/.ckptfs: %v", err)
			}
			if mode == fusefs.ModePrimary {
				wantErrno(t, "mkdir .ckptfs", os.Mkdir(m.Path(".ckptfs"), 0o755), syscall.EPERM)
				wantErrno(t, "rename onto .ckptfs", os.Rename(m.Path("job"), m.Path(".ckptfs")), syscall.EPERM)
				if _, err := os.Stat(m.OrigPath(".ckptfs/manifests/m")); err != nil {
					t.Errorf("manifests damaged: %v", err)
				}
			}
		})
	}
}

// TestIntegration_BecomesVisible: with the default NegativeTimeout 0 a
// checkpoint shows up as soon as its verdict changes; with kernel caching
// on, Invalidate drops both negative and positive entries.
func TestIntegration_BecomesVisible(t *testing.T) {
	t.Run("NegativeTimeout0", func(t *testing.T) {
		vis := mounttest.NewVisibility()
		m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModeReplica, Visibility: vis})
		m.WriteOrig("job/chk-3/_metadata", []byte("m"))
		vis.Set("job/chk-3", manifest.ErrIncomplete)
		for range 3 {
			_, err := os.Stat(m.Path("job/chk-3"))
			wantErrno(t, "stat while incomplete", err, syscall.ENOENT)
		}
		vis.Set("job/chk-3", nil)
		if _, err := os.Stat(m.Path("job/chk-3/_metadata")); err != nil {
			t.Errorf("complete checkpoint still hidden without Invalidate: %v", err)
		}
		if got := readDir(t, m.Path("job")); !slices.Equal(got, []string{"chk-3"}) {
			t.Errorf("listing %v", got)
		}
	})
	t.Run("Invalidate", func(t *testing.T) {
		vis := mounttest.NewVisibility()
		m := mounttest.New(t, &mounttest.Options{
			Mode:       fusefs.ModeReplica,
			Visibility: vis,
			Configure: func(c *fusefs.Config) {
				c.EntryTimeout, c.AttrTimeout, c.NegativeTimeout = time.Hour, time.Hour, time.Hour
			},
		})
		m.WriteOrig("job/chk-4/_metadata", []byte("m"))
		m.WriteOrig("job/chk-5/_metadata", []byte("m"))
		vis.Set("job/chk-4", manifest.ErrIncomplete)

		_, err := os.Stat(m.Path("job/chk-4"))
		wantErrno(t, "stat incomplete chk-4", err, syscall.ENOENT)
		if _, err := os.Stat(m.Path("job/chk-5")); err != nil {
			t.Fatalf("chk-5: %v", err)
		}
		vis.Set("job/chk-4", nil)
		vis.Set("job/chk-5", manifest.ErrIncomplete)
		// The kernel answers from its caches: this is what Invalidate is for.
		_, err = os.Stat(m.Path("job/chk-4"))
		wantErrno(t, "stat chk-4 with a cached negative entry", err, syscall.ENOENT)
		if _, err := os.Stat(m.Path("job/chk-5")); err != nil {
			t.Fatalf("chk-5 with a cached positive entry: %v", err)
		}

		for _, name := range []string{"chk-4", "chk-5"} {
			if err := m.Server.Invalidate("job", name); err != nil {
				t.Fatalf("Invalidate %s: %v", name, err)
			}
		}
		if _, err := os.Stat(m.Path("job/chk-4/_metadata")); err != nil {
			t.Errorf("chk-4 after Invalidate: %v", err)
		}
		_, err = os.Stat(m.Path("job/chk-5"))
		wantErrno(t, "chk-5 after Invalidate", err, syscall.ENOENT)
		if err := m.Server.Invalidate("no/such/dir", "chk-1"); err != nil {
			t.Errorf("Invalidate below an unknown directory: %v", err)
		}
	})
}

func TestIntegration_ModeSwitchChangesVisibility(t *testing.T) {
	vis := mounttest.NewVisibility()
	m := mounttest.New(t, &mounttest.Options{
		Mode:       fusefs.ModeReplica,
		Visibility: vis,
		Configure:  func(c *fusefs.Config) { c.EntryTimeout = time.Hour },
	})
	replicaTree(m, vis)
	_, err := os.Stat(m.Path("job/chk-2"))
	wantErrno(t, "replica stat chk-2", err, syscall.ENOENT)

	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Path("job/chk-2/state")); err != nil {
		t.Errorf("primary hides chk-2: %v", err)
	}
	if got := readDir(t, m.Path("job")); !slices.Equal(got, []string{"chk-1", "chk-2", "shared"}) {
		t.Errorf("primary lists %v", got)
	}

	if err := m.Server.SetMode(fusefs.ModeReplica); err != nil {
		t.Fatal(err)
	}
	// chk-2 is in the kernel's cache for an hour; the switch must drop it.
	_, err = os.Stat(m.Path("job/chk-2"))
	wantErrno(t, "stat chk-2 after switching back to replica", err, syscall.ENOENT)
	if got := ls(t, m.Path("job"), true); !slices.Equal(got, []string{"chk-1", "shared"}) {
		t.Errorf("replica lists %v", got)
	}
	if err := m.Server.SetMode(fusefs.Mode(42)); err == nil {
		t.Error("SetMode accepted an invalid mode")
	}
}

// TestIntegration_MountOptions checks what df and other users see:
// fuse.ckptfs, allow_other and default_permissions.
func TestIntegration_MountOptions(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModeReplica})
	m.WriteOrig("public", []byte("readable"))
	m.WriteOrig("private", []byte("secret"))
	if err := os.Chmod(m.OrigPath("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	// t.TempDir directories are 0700; let user nobody walk to the mount.
	for _, p := range []string{filepath.Dir(m.Mnt), filepath.Dir(filepath.Dir(m.Mnt))} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	out, err := run("df", "-T", m.Mnt)
	if err != nil {
		t.Fatalf("df: %v\n%s", err, out)
	}
	if !containsField(out, "fuse.ckptfs") || !containsField(out, m.Orig) {
		t.Errorf("df -T does not show fuse.ckptfs over the backing directory:\n%s", out)
	}

	opts := mountOptions(t, m.Mnt)
	for _, want := range []string{"allow_other", "default_permissions", "max_read=1048576"} {
		if !slices.Contains(opts, want) {
			t.Errorf("mount options %v lack %s", opts, want)
		}
	}

	// As user nobody: allow_other lets it in, default_permissions keeps
	// the permission bits.
	out, err = runAs(65534, "cat", m.Path("public"))
	if err != nil || out != "readable" {
		t.Errorf("nobody reading a 0644 file: %q, %v", out, err)
	}
	out, err = runAs(65534, "cat", m.Path("private"))
	if err == nil {
		t.Errorf("nobody read a 0600 root file: %q", out)
	}
}

// mountOptions returns the super block options of the mount at dir, from
// /proc/self/mountinfo.
func mountOptions(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f, p := strings.Fields(pre), strings.Fields(post); ok && len(f) > 4 && f[4] == dir && len(p) > 2 {
			return strings.Split(p[2], ",")
		}
	}
	t.Fatalf("%s is not mounted", dir)
	return nil
}

// TestIntegration_FencedFiltersAsReplica: a primary's listing shows every
// checkpoint; fenced, the mount hides what Visibility hides, as a replica
// does, including names the kernel had cached while it was primary; back
// to primary, it shows them again.
func TestIntegration_FencedFiltersAsReplica(t *testing.T) {
	vis := mounttest.NewVisibility()
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary, Visibility: vis})
	m.WriteOrig("job/chk-1/_metadata", []byte("m"))
	m.WriteOrig("job/chk-2/_metadata", []byte("m"))
	vis.Set("job/chk-2", manifest.ErrIncomplete)
	if got := readDir(t, m.Path("job")); !slices.Equal(got, []string{"chk-1", "chk-2"}) {
		t.Fatalf("primary lists %v", got)
	}
	if _, err := os.Stat(m.Path("job/chk-2/_metadata")); err != nil {
		t.Fatalf("primary: %v", err)
	}
	if err := m.Server.SetMode(fusefs.ModeFenced); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, m.Path("job")); !slices.Equal(got, []string{"chk-1"}) {
		t.Errorf("fenced lists %v, want only the complete chk-1", got)
	}
	_, err := os.Stat(m.Path("job/chk-2/_metadata"))
	wantErrno(t, "fenced: stat of the incomplete checkpoint", err, syscall.ENOENT)
	if err := m.Server.SetMode(fusefs.ModePrimary); err != nil {
		t.Fatal(err)
	}
	if got := readDir(t, m.Path("job")); !slices.Equal(got, []string{"chk-1", "chk-2"}) {
		t.Errorf("primary again lists %v", got)
	}
}
