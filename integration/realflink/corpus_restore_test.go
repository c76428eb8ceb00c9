//go:build linux

package realflink

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// restoreSettle is how long a restored job must keep running to count as
// restored.
const restoreSettle = 10 * time.Second

// CorpusRestoreEnv turns on TestCorpusRestore (make corpus-restore).
const CorpusRestoreEnv = "CKPTFS_CORPUS_RESTORE"

// TestCorpusRestore restores every corpus entry's (flinkdata.Corpus; of
// the releases CorpusVersionsEnv and the kinds CorpusKindsEnv name,
// default all) newest checkpoint and savepoints with real Flink (the seqjob in an embedded
// MiniCluster of the entry's release, with the entry's state settings)
// through a ckptfs replica mount at Flink's storage path, in a site of its
// own. Then, one referenced file removed from the replica: the mount hides
// the checkpoint, a restore through it fails, and real Flink restoring the
// same directory without ckptfs (the replica bind-mounted at the path)
// fails too, so the file was needed. The State Processor API's savepoint
// is only restored: Flink does not name its directory, so the mount does
// not hide it.
func TestCorpusRestore(t *testing.T) {
	if os.Getenv(CorpusRestoreEnv) == "" {
		t.Skipf("%s is not set: TestCorpusRestore runs real Flink for every corpus entry; run `make corpus-restore`", CorpusRestoreEnv)
	}
	RequireRoot(t)
	all, err := Releases()
	if err != nil {
		t.Fatal(err)
	}
	kinds := strings.Fields(os.Getenv(CorpusKindsEnv))
	versions := strings.Fields(os.Getenv(CorpusVersionsEnv))
	for _, e := range flinkdata.Corpus(t) {
		if len(kinds) > 0 && !slices.Contains(kinds, e.Kind) || len(versions) > 0 && !slices.Contains(versions, e.Release) {
			continue
		}
		i := slices.IndexFunc(all, func(r Release) bool { return r.Version == e.Release })
		if i < 0 {
			t.Fatalf("%s: release %s is not in flink/versions.tsv", e.Dir, e.Release)
		}
		d := FindDist(t, all[i])
		t.Run(e.Release+"/"+e.Kind, func(t *testing.T) { corpusRestore(t, d, e) })
	}
}

func corpusRestore(t *testing.T, d Dist, e flinkdata.Entry) {
	root := e.StorageRoot()
	if _, err := os.Stat(root); err == nil {
		t.Fatalf("%s exists on this machine: not mounting over it", root)
	}
	// The storage path, created for the mount points and removed after.
	top := root
	for filepath.Dir(top) != "/tmp" && filepath.Dir(top) != "/" {
		top = filepath.Dir(top)
	}
	if _, err := os.Stat(top); err == nil {
		t.Fatalf("%s exists on this machine: not using it", top)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	tmp := t.TempDir()
	backing := filepath.Join(tmp, "replica")
	if err := os.CopyFS(backing, os.DirFS(e.Storage())); err != nil {
		t.Fatal(err)
	}
	site := NewSite(t, "dc2", filepath.Join(tmp, "log"))
	mount, err := site.StartMount("ckptfs", binary, "replica", backing, root, "--map", e.StorageRootURI+"="+backing, "--poll", "200ms")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	if n := len(e.Checkpoints); n > 0 {
		dirs = append(dirs, e.Checkpoints[n-1].Dir)
	}
	for _, s := range e.Savepoints {
		dirs = append(dirs, s.Dir)
	}
	visible := func(dir string) bool {
		_, err := os.Stat(site.Path(filepath.Join(root, dir)))
		return err == nil
	}
	for _, dir := range dirs {
		waitUntil(t, 30*time.Second, dir+" shown by the replica mount", func() bool { return visible(dir) }, mount)
		if err := restoreOnce(t, site, d, e, dir, "through the mount", false); err != nil {
			t.Errorf("%s: restore through the replica mount: %v", dir, err)
		} else {
			t.Logf("%s: restored through the replica mount", dir)
		}
	}
	if len(e.Checkpoints) == 0 {
		return // the State Processor API's savepoint: no name the mount knows
	}
	// One referenced file missing: hidden, and needed.
	dir := dirs[0]
	victim := corpusVictim(t, e, dir)
	data, err := os.ReadFile(filepath.Join(backing, victim))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(backing, victim)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, dir+" hidden without "+victim, func() bool { return !visible(dir) }, mount)
	if err := restoreOnce(t, site, d, e, dir, "through the mount, a file missing", false); err == nil {
		t.Errorf("%s: restored through the mount although ckptfs hides it", dir)
	}
	// A Snappy-compressed changelog file one byte short: its length says
	// nothing (it is not its handle's size), its chunks do.
	cut := len(data) > 1 && data[0] == 1 && strings.Contains(victim, "/dstl/")
	if cut {
		if err := os.WriteFile(filepath.Join(backing, victim), data, 0o644); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, dir+" shown again", func() bool { return visible(dir) }, mount)
		if err := os.Truncate(filepath.Join(backing, victim), int64(len(data)-1)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, dir+" hidden with "+victim+" cut short", func() bool { return !visible(dir) }, mount)
		if err := os.Remove(filepath.Join(backing, victim)); err != nil {
			t.Fatal(err)
		}
	}
	mount.Stop()
	if err := site.Bind(backing, root); err != nil {
		t.Fatal(err)
	}
	if err := restoreOnce(t, site, d, e, dir, "without ckptfs, a file missing", true); err == nil {
		t.Errorf("%s: Flink restored without %s: ckptfs asks for a file Flink does not need", dir, victim)
	} else {
		t.Logf("%s: without ckptfs and without %s, Flink fails: %v", dir, victim, err)
	}
	if cut {
		if err := os.WriteFile(filepath.Join(backing, victim), data[:len(data)-1], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := restoreOnce(t, site, d, e, dir, "without ckptfs, a compressed changelog file cut short", true); err == nil {
			t.Errorf("%s: Flink restored with %s one byte short: ckptfs asks for a byte Flink does not need", dir, victim)
		} else {
			t.Logf("%s: without ckptfs and with %s one byte short, Flink fails: %v", dir, victim, err)
		}
	}
	if err := os.WriteFile(filepath.Join(backing, victim), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// corpusVictim picks the referenced file to remove: the kind the entry
// is about first (a changelog file, a file-merging segment, a shared
// file, a task-owned one), else the first state file beside _metadata.
func corpusVictim(t *testing.T, e flinkdata.Entry, dir string) string {
	m, err := metadata.DecodeFile(filepath.Join(e.Storage(), filepath.FromSlash(dir), "_metadata"), metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rank := map[metadata.Kind]int{metadata.KindChangelog: 1, metadata.KindSegment: 2, metadata.KindShared: 3, metadata.KindTaskOwned: 4, metadata.KindOther: 5, metadata.KindExclusive: 6}
	best, bestRank := "", 99
	for _, r := range m.References(e.StorageRootURI + "/" + dir) {
		p := strings.TrimPrefix(strings.TrimPrefix(r.Resolved, "file:"), "//")
		rel, err := filepath.Rel(e.StorageRoot(), p)
		if err != nil || strings.HasPrefix(rel, "..") || r.Kind == metadata.KindDirectory {
			continue
		}
		if n, ok := rank[r.Kind]; ok && n < bestRank {
			best, bestRank = rel, n
		}
	}
	if best == "" {
		t.Fatalf("%s references no file", dir)
	}
	return best
}

// restoreOnce runs the seqjob in an embedded MiniCluster in the site,
// restoring dir (below the storage root, as the site sees it) with the
// entry's state settings. It returns nil once the job's report says both
// keyed subtasks restored and, with settle, the job still runs
// restoreSettle later (a missing file of another operator fails the job
// after the keyed state restored); an error when the job ends first.
// Through a replica mount there is no settling: the mount is read-only
// until its site takes over, and a restored job soon writes (the
// changelog backend creates its task-owned directory at once).
func restoreOnce(t *testing.T, site *Site, d Dist, e flinkdata.Entry, dir, what string, settle bool) error {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.txt")
	var conf []string
	for k, v := range e.Settings {
		if strings.HasPrefix(k, "state.") || strings.HasPrefix(k, "dstl.") || strings.Contains(k, "file-merging") || k == harvestInlineKey(d) {
			conf = append(conf, k+"="+strings.ReplaceAll(v, "{root}", e.StorageRoot()))
		}
	}
	if d.AtLeast(1, 17) {
		conf = append(conf, "restart-strategy.type=none")
	} else {
		conf = append(conf, "restart-strategy=none")
	}
	slices.Sort(conf)
	args := []string{"--keys", "16", "--parallelism", "2"}
	if e.Kind != "spa" {
		args = nil
		for i := 0; i < len(e.JobArgs); i++ {
			if e.JobArgs[i] == "--report" {
				i++
				continue
			}
			args = append(args, e.JobArgs[i])
		}
	}
	cp, err := d.Classpath()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{d.Java}, jvmModuleFlags...)
	argv = append(argv, "-Xmx600m", "-cp", JobJar(t, d)+":"+cp, "ckptfs.seqjob.SeqJob")
	argv = append(argv, args...)
	argv = append(argv, "--report", report, "--restore-from", "file://"+filepath.Join(e.StorageRoot(), dir), "--local-conf", strings.Join(conf, ","))
	p, err := site.Start(fmt.Sprintf("restore-%d", time.Now().UnixNano()), site.Command(argv...), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	deadline := time.After(3 * time.Minute)
	for {
		r, err := ReadReport(report)
		if err == nil && len(r.Restores) >= 2 {
			if !settle {
				return nil
			}
			select {
			case <-p.Exited():
				return fmt.Errorf("%s: the job ended after restoring (%v):\n%s", what, p.Err(), p.Tail(8))
			case <-time.After(restoreSettle):
				return nil
			}
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s: the job ended without restoring (%v):\n%s", what, p.Err(), p.Tail(8))
		case <-deadline:
			return fmt.Errorf("%s: no restore in 3 minutes:\n%s", what, p.Tail(8))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
