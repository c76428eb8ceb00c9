package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// trustJob is a job directory with files in shared/ and a chk-1 that
// references them all, as a RocksDB incremental checkpoint does.
type trustJob struct {
	root, dir string
	files     []string
}

func newTrustJob(t *testing.T, n int) *trustJob {
	t.Helper()
	j := &trustJob{root: t.TempDir()}
	j.dir = filepath.Join(j.root, "job")
	if err := os.MkdirAll(filepath.Join(j.dir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	k := &metadata.KeyedHandle{Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: 1, BackendID: "b", KeyGroupCount: 1, StateHandleID: "x"}
	for i := range n {
		p := filepath.Join(j.dir, "shared", fmt.Sprintf("%04d.sst", i))
		if err := os.WriteFile(p, make([]byte, 10+i), 0o644); err != nil {
			t.Fatal(err)
		}
		j.files = append(j.files, p)
		k.Shared = append(k.Shared, metadata.NamedHandle{LocalName: filepath.Base(p),
			Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + p, Size: int64(10 + i)}})
	}
	m := &metadata.Metadata{Version: 3, CheckpointID: 1, ChannelLayout: metadata.ChannelLayout112,
		Operators: []metadata.Operator{{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 128,
			Subtasks: []metadata.Subtask{{Index: 0, ManagedKeyed: k}}}}}
	if err := os.MkdirAll(j.chk(), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(j.chk(), MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := metadata.Encode(f, m); err != nil {
		t.Fatal(err)
	}
	return j
}

func (j *trustJob) chk() string { return filepath.Join(j.dir, "chk-1") }

// verifyTrusted verifies chk-1 and wants it complete.
func (j *trustJob) verifyTrusted(t *testing.T, v *Verifier) *Verdict {
	t.Helper()
	got := v.VerifyDir(context.Background(), j.chk())
	if !got.Complete {
		t.Fatalf("chk-1 not complete: %v", got.Problems)
	}
	return got
}

// TestTrustReusesVerdict: with nothing changed, a verification after the
// directories were observed is the verdict of the one before, not a new
// one: none of the checkpoint's files was stat'ed or even judged.
// Removing a file (Observe sees its directory change), or letting the
// trust expire, makes it judged again.
func TestTrustReusesVerdict(t *testing.T) {
	j := newTrustJob(t, 50)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	first := j.verifyTrusted(t, v)
	v.Observe(context.Background(), 0)
	clock.add(time.Second)
	if got := j.verifyTrusted(t, v); got != first {
		t.Fatal("an unchanged checkpoint was judged again")
	}

	clock.add(time.Minute) // past MaxAge
	if got := j.verifyTrusted(t, v); got == first {
		t.Fatal("a verdict was reused past MaxAge")
	}
	again := j.verifyTrusted(t, v)

	if err := os.Remove(j.files[7]); err != nil {
		t.Fatal(err)
	}
	if got := v.VerifyDir(context.Background(), j.chk()); got != again {
		t.Fatal("before an observation, the reused verdict stands (this test's premise)")
	}
	v.Observe(context.Background(), 0)
	got := v.VerifyDir(context.Background(), j.chk())
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemMissing || got.Problems[0].Path != "file:"+j.files[7] {
		t.Fatalf("after the removal was observed: complete %v, %v", got.Complete, got.Problems)
	}
}

// TestTrustFirstObservation: a directory's first observation takes its
// stamp and does not list it; the observation a settle later lists it,
// and finds a file removed before the first.
func TestTrustFirstObservation(t *testing.T) {
	j := newTrustJob(t, 20)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	first := j.verifyTrusted(t, v)
	if err := os.Remove(j.files[3]); err != nil {
		t.Fatal(err)
	}
	v.Observe(context.Background(), 0)
	if got := v.VerifyDir(context.Background(), j.chk()); got != first {
		t.Fatalf("the first observation listed the directory: complete %v, %v", got.Complete, got.Problems)
	}
	clock.add(settle)
	v.Observe(context.Background(), 0)
	got := v.VerifyDir(context.Background(), j.chk())
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemMissing {
		t.Fatalf("a settle after the first observation: complete %v, %v", got.Complete, got.Problems)
	}
}

// TestTrustReplacedFile: a file replaced by a rename (another inode by
// the same name, shorter) is judged again once its directory is
// observed, although its name never went away.
func TestTrustReplacedFile(t *testing.T) {
	j := newTrustJob(t, 20)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	j.verifyTrusted(t, v)
	v.Observe(context.Background(), 0)
	tmp := j.files[3] + ".tmp"
	if err := os.WriteFile(tmp, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, j.files[3]); err != nil {
		t.Fatal(err)
	}
	v.Observe(context.Background(), 0)
	got := v.VerifyDir(context.Background(), j.chk())
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemSizeMismatch {
		t.Fatalf("after the replacement was observed: complete %v, %v", got.Complete, got.Problems)
	}
}

// TestTrustSealedName: a reusable verdict watches only the name on the
// way to its sealed manifest. Listings of that directory that leave the
// name as it was (the first, one for another job's new directory) keep
// the verdict; the manifest made, then replaced by a rename, judges the
// checkpoint again.
func TestTrustSealedName(t *testing.T) {
	j := newTrustJob(t, 10)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	v.cfg.SealedRoot = j.root
	observe := func() {
		v.Observe(context.Background(), 0)
		clock.add(time.Second) // past the settle: the next lists again
		v.Observe(context.Background(), 0)
	}
	first := j.verifyTrusted(t, v)
	observe()
	if got := j.verifyTrusted(t, v); got != first {
		t.Fatal("judged again after the first listings of the backing root")
	}
	if err := os.Mkdir(filepath.Join(j.root, "other-job"), 0o755); err != nil {
		t.Fatal(err)
	}
	observe()
	if got := j.verifyTrusted(t, v); got != first {
		t.Fatal("judged again after another job's directory appeared")
	}

	sealed := SealedPath(j.root, "job/chk-1")
	if err := os.MkdirAll(filepath.Dir(sealed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sealed, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	observe()
	second := j.verifyTrusted(t, v)
	if second == first {
		t.Fatal("not judged again after its sealed manifest's directory appeared")
	}
	observe()
	if got := j.verifyTrusted(t, v); got != second {
		t.Fatal("judged again with its sealed manifest unchanged")
	}
	if err := os.WriteFile(sealed+".tmp", []byte("[ still replicating"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sealed+".tmp", sealed); err != nil {
		t.Fatal(err)
	}
	observe()
	if got := j.verifyTrusted(t, v); got == second {
		t.Fatal("not judged again after its sealed manifest was replaced")
	}
}

// TestSealedWatchStartsFromTheVerification: the name a verdict watches
// starts from what its verification found at the manifest's path, not
// from what is there when the verdict is kept, so that a manifest made
// in between is a change for the next listing.
func TestSealedWatchStartsFromTheVerification(t *testing.T) {
	j := newTrustJob(t, 1)
	v := trustingVerifier(t, j.root, &testClock{now: time.Unix(1000, 0)})
	v.cfg.SealedRoot = j.root
	sealed := SealedPath(j.root, "job/chk-1")
	if err := os.MkdirAll(filepath.Dir(sealed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sealed, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(sealed)
	if err != nil {
		t.Fatal(err)
	}
	want := sealedWatch{dir: filepath.Dir(sealed), name: filepath.Base(sealed)}
	if got := v.sealedWatch(j.chk(), 0, true); got != want {
		t.Errorf("after a verification that found nothing: %+v, want %+v", got, want)
	}
	want.ino = st.Sys().(*syscall.Stat_t).Ino
	if got := v.sealedWatch(j.chk(), 0, false); got != want {
		t.Errorf("after one that could not tell: %+v, want %+v", got, want)
	}
}

// TestTrustAuditFindsTruncation: a file truncated in place changes no
// directory, so observations keep trusting it; the audit stats every
// trusted file again within MaxAge/2 and finds it.
func TestTrustAuditFindsTruncation(t *testing.T) {
	j := newTrustJob(t, 40)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	first := j.verifyTrusted(t, v)
	if a, _ := v.Audit(context.Background(), 0); a != 0 {
		t.Fatalf("the first audit stat'ed %d files: it starts the round", a)
	}
	if err := os.Truncate(j.files[11], 3); err != nil {
		t.Fatal(err)
	}
	v.Observe(context.Background(), 0)
	if got := v.VerifyDir(context.Background(), j.chk()); got != first {
		t.Fatal("an in-place truncation was noticed without the audit (this test's premise)")
	}
	audited, untrusted := 0, 0
	for range 6 { // six calls 5 s apart: the 30 s round (MaxAge/2)
		clock.add(5 * time.Second)
		a, u := v.Audit(context.Background(), 0)
		audited, untrusted = audited+a, untrusted+u
	}
	// The 40 files and _metadata, each at least once (a call's share
	// is rounded up).
	if audited < 41 || audited > 41+6 || untrusted != 1 {
		t.Fatalf("a round of the audit stat'ed %d files and untrusted %d; want 41 to 47, and 1", audited, untrusted)
	}
	got := v.VerifyDir(context.Background(), j.chk())
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemSizeMismatch {
		t.Fatalf("after the audit: complete %v, %v", got.Complete, got.Problems)
	}
}

// TestTrustAuditNotUndone: the audit runs beside the verifications, and
// a verification records its stats after they return. A verification
// that began before the audit found a file truncated cannot trust the
// version its older stat found: the file stays untrusted, so the next
// verification stats it. One that began after can.
func TestTrustAuditNotUndone(t *testing.T) {
	j := newTrustJob(t, 10)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	j.verifyTrusted(t, v)
	c := v.cache
	e := c.paths["file:"+j.files[4]]
	if e == nil {
		t.Fatal("no entry for the file")
	}
	old := e.ver
	begun := clock.now.UnixNano() // a verification begins, stats the file
	v.Audit(context.Background(), 0)
	if err := os.Truncate(j.files[4], 2); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute / 2) // a whole round: the audit reaches the file
	if _, u := v.Audit(context.Background(), 0); u != 1 {
		t.Fatalf("the audit untrusted %d files, want 1", u)
	}
	c.pathsMu.Lock()
	c.trust(e, old, begun) // the verification records its older stat
	undone := e.seen != 0
	c.pathsMu.Unlock()
	if undone {
		t.Fatal("a verification begun before the audit trusted the version the audit found changed")
	}
	if got := v.VerifyDir(context.Background(), j.chk()); got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemSizeMismatch {
		t.Fatalf("the next verification: complete %v, %v", got.Complete, got.Problems)
	}
	clock.add(time.Second)
	c.pathsMu.Lock()
	c.trust(e, old, clock.now.UnixNano()) // begun after the audit's stat
	trusted := e.seen != 0
	c.pathsMu.Unlock()
	if !trusted {
		t.Fatal("a verification begun after the audit could not trust what it found")
	}
}

// TestTrustGoneDirectory: a directory that is gone untrusts its files,
// and a checkpoint directory that is gone its _metadata.
func TestTrustGoneDirectory(t *testing.T) {
	j := newTrustJob(t, 10)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	j.verifyTrusted(t, v)
	v.Observe(context.Background(), 0)
	if err := os.Rename(filepath.Join(j.dir, "shared"), filepath.Join(j.dir, "moved")); err != nil {
		t.Fatal(err)
	}
	v.Observe(context.Background(), 0)
	got := v.VerifyDir(context.Background(), j.chk())
	if got.Complete || len(got.Problems) != 10 {
		t.Fatalf("after shared/ moved away: complete %v, %d problems", got.Complete, len(got.Problems))
	}
	v.cache.pathsMu.Lock()
	defer v.cache.pathsMu.Unlock()
	if ds := v.cache.dirs[filepath.Join(j.dir, "shared")]; ds != nil {
		t.Fatalf("the state of the moved directory is kept, with %d files", len(ds.entries))
	}
}

// TestTrustHungDirectory: a directory that does not answer before the
// observation's context ends untrusts its files.
func TestTrustHungDirectory(t *testing.T) {
	j := newTrustJob(t, 10)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	first := j.verifyTrusted(t, v)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v.Observe(ctx, 0)
	if got := v.VerifyDir(context.Background(), j.chk()); got == first {
		t.Fatal("a verdict was reused although its directories were not observed")
	}
}

// TestProtectionFollowsNewestCheckpoints: the deletion guard's files
// change with each job's newest complete checkpoint, pass by pass; a
// file two jobs' newest checkpoints reference stays protected while one
// of them does, and nothing is left once the jobs are gone.
func TestProtectionFollowsNewestCheckpoints(t *testing.T) {
	a := newTrustJob(t, 5)
	root := a.root
	// A second job in the same backing directory whose checkpoint
	// references a's shared files and one of its own.
	own := filepath.Join(root, "job2", "shared", "own.sst")
	if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, make([]byte, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &metadata.KeyedHandle{Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: 1, BackendID: "b", KeyGroupCount: 1, StateHandleID: "x"}
	for _, p := range append([]string{own}, a.files...) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		k.Shared = append(k.Shared, metadata.NamedHandle{LocalName: filepath.Base(p), Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + p, Size: st.Size()}})
	}
	chk2 := filepath.Join(root, "job2", "chk-1")
	if err := os.MkdirAll(chk2, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(chk2, MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := metadata.Encode(f, &metadata.Metadata{Version: 3, CheckpointID: 1, ChannelLayout: metadata.ChannelLayout112,
		Operators: []metadata.Operator{{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 128, Subtasks: []metadata.Subtask{{Index: 0, ManagedKeyed: k}}}}}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	res, err := NewResolver(nil, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: time.Minute, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultCatalogConfig()
	cfg.Backing, cfg.Verifier = root, v
	c, err := NewCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	protected := func(rel string) bool { return c.ProtectsDeletion(rel) != nil }
	shared0 := "job/shared/0000.sst"
	c.Refresh(context.Background())
	if !protected(shared0) || !protected("job2/shared/own.sst") {
		t.Fatal("the files of both jobs' newest checkpoints are not protected")
	}
	// job2's checkpoint goes: a's file stays protected by job, job2's
	// own file is not, though the verifier forgot the paths meanwhile
	// (as its sweep does): they are resolved again, to the same files.
	v.cache.pathsMu.Lock()
	clear(v.cache.paths)
	v.cache.pathsMu.Unlock()
	if err := os.RemoveAll(filepath.Join(root, "job2", "chk-1")); err != nil {
		t.Fatal(err)
	}
	c.Refresh(context.Background())
	if !protected(shared0) || protected("job2/shared/own.sst") {
		t.Fatalf("after job2's checkpoint went: shared0 protected %v (want true), job2's own %v (want false)", protected(shared0), protected("job2/shared/own.sst"))
	}
	if err := os.RemoveAll(a.chk()); err != nil {
		t.Fatal(err)
	}
	c.Refresh(context.Background())
	if protected(shared0) {
		t.Fatal("a file of no job's newest checkpoint is protected")
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.protected.files) != 0 || len(c.jobProtections) != 0 {
		t.Fatalf("left: %d files, %d jobs", len(c.protected.files), len(c.jobProtections))
	}
}

// TestWithoutTrust: a verification whose context says WithoutTrust
// stats every file, on a verifier that trusts them: it neither reuses a
// verdict nor trusts a file it did not stat.
func TestWithoutTrust(t *testing.T) {
	j := newTrustJob(t, 10)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	first := j.verifyTrusted(t, v)
	v.Observe(context.Background(), 0)
	// Truncated in place: its directory shows nothing, the trust stands.
	if err := os.Truncate(j.files[4], 1); err != nil {
		t.Fatal(err)
	}
	if got := v.VerifyDir(context.Background(), j.chk()); got != first {
		t.Fatal("the trusting verification did not reuse the verdict (this test's premise)")
	}
	got := v.VerifyDir(WithoutTrust(context.Background()), j.chk())
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemSizeMismatch {
		t.Fatalf("without trust: complete %v, %v", got.Complete, got.Problems)
	}
}
