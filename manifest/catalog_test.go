package manifest

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/flinkha"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// realCheckpoint copies a real Flink checkpoint with state files into
// jobDir as chk-<its id> and returns the directory.
func realCheckpoint(t *testing.T, jobDir string) string {
	t.Helper()
	for _, src := range flinkdata.StateDirs(t) {
		if !strings.HasSuffix(src, "-checkpoint") {
			continue
		}
		m, err := metadata.DecodeFile(filepath.Join(src, MetadataFile), metadata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(jobDir, "chk-"+strconv.FormatInt(m.CheckpointID, 10))
		copyDir(t, src, dir)
		return dir
	}
	t.Fatal("no real checkpoint")
	return ""
}

func newCatalog(t *testing.T, backing string) *Catalog {
	t.Helper()
	cfg := DefaultCatalogConfig()
	cfg.Backing = backing
	cfg.Verifier = newVerifier(t, nil, backing)
	c, err := NewCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCatalogJudged: Judged is closed once the first pass told its
// changes, with the complete checkpoint visible by then; and once a first
// pass its context ended returned.
func TestCatalogJudged(t *testing.T) {
	backing := t.TempDir()
	job := filepath.Join(backing, "checkpoints", "0123456789abcdef0123456789abcdef")
	good := realCheckpoint(t, job)
	c := newCatalog(t, backing)
	told := false
	c.OnChange(func(ch Change) {
		select {
		case <-c.Judged():
			t.Errorf("judged before the first pass told %s", ch.Name)
		default:
			told = true
		}
	})
	select {
	case <-c.Judged():
		t.Fatal("judged before any pass")
	default:
	}
	c.Refresh(context.Background())
	select {
	case <-c.Judged():
	default:
		t.Fatal("not judged after the first pass")
	}
	if !told || c.Visible("checkpoints/0123456789abcdef0123456789abcdef", filepath.Base(good)) != nil {
		t.Fatalf("the first pass told a change: %v; the checkpoint is visible: %v", told, c.Visible("checkpoints/0123456789abcdef0123456789abcdef", filepath.Base(good)))
	}

	canceled := newCatalog(t, backing)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	canceled.Refresh(ctx)
	select {
	case <-canceled.Judged():
	default:
		t.Fatal("a first pass whose context ended left its catalog unjudged: the mount would wait forever")
	}
}

func TestCatalogVisibility(t *testing.T) {
	backing := t.TempDir()
	job := filepath.Join(backing, "checkpoints", "0123456789abcdef0123456789abcdef")
	good := realCheckpoint(t, job)
	goodName := filepath.Base(good)
	torn := filepath.Join(job, "chk-99")
	copyDir(t, good, torn) // names checkpoint != 99: incomplete
	for _, p := range []string{filepath.Join(backing, StateDir), filepath.Join(job, "shared")} {
		os.MkdirAll(p, 0o755)
	}
	jobRel := "checkpoints/0123456789abcdef0123456789abcdef"

	c := newCatalog(t, backing)
	var mu sync.Mutex
	var changes []Change
	c.OnChange(func(ch Change) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })

	if err := c.Visible(jobRel, goodName); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("before any pass: %v, want ErrIncomplete", err)
	}
	c.Refresh(context.Background())
	cases := []struct {
		dir, name string
		want      error
	}{
		{jobRel, goodName, nil},
		{jobRel, "chk-99", ErrIncomplete},
		{jobRel, "chk-12345", ErrIncomplete},
		{jobRel, "shared", nil},
		{"", StateDir, ErrHidden},
		{jobRel + "/" + goodName, "._metadata.inprogress.8b2c1d3e", ErrHidden},
		{jobRel + "/shared", ".0a1b2c3d-uuid.Xy12Ab", ErrHidden},
		{jobRel + "/shared", "0a1b2c3d-4e5f-6789-abcd-ef0123456789", nil},
		{"", "checkpoints", nil},
	}
	for _, tc := range cases {
		if err := c.Visible(tc.dir, tc.name); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("Visible(%q, %q) = %v, want %v", tc.dir, tc.name, err, tc.want)
		}
	}
	if len(changes) != 1 || changes[0] != (Change{Dir: jobRel, Name: goodName, Visible: true}) {
		t.Fatalf("changes %v", changes)
	}
	jobs := c.Jobs()
	if len(jobs) != 1 || jobs[0].Dir != jobRel || jobs[0].NewestComplete() == nil || jobs[0].NewestComplete().Dir != good {
		t.Fatalf("jobs %+v", jobs)
	}
	if st := c.Stats(); st.Passes != 1 || st.Complete != 1 || st.Incomplete != 1 || st.Unknown != 0 || st.LastPass.IsZero() || st.LastPassDuration <= 0 {
		t.Errorf("stats after one pass: %+v, want 1 pass, 1 complete, 1 incomplete", st)
	}

	// A file of the good checkpoint disappears: it is hidden on the next
	// pass.
	entries, _ := os.ReadDir(good)
	for _, e := range entries {
		if e.Name() != MetadataFile {
			os.Remove(filepath.Join(good, e.Name()))
			break
		}
	}
	changes = nil
	c.Refresh(context.Background())
	if err := c.Visible(jobRel, goodName); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("after a deletion: %v", err)
	}
	if len(changes) != 1 || changes[0].Visible {
		t.Fatalf("changes %v", changes)
	}
	if st := c.Stats(); st.Passes != 2 || st.Complete != 1 || st.Incomplete != 3 {
		t.Errorf("stats after two passes: %+v, want 2 passes, 1 complete, 3 incomplete", st)
	}
}

// TestCatalogRunPicksUpNewCheckpoints: a checkpoint that becomes complete
// is visible within one poll interval.
func TestCatalogRunPicksUpNewCheckpoints(t *testing.T) {
	backing := t.TempDir()
	job := filepath.Join(backing, "job")
	os.MkdirAll(job, 0o755)
	cfg := DefaultCatalogConfig()
	cfg.Backing, cfg.Verifier, cfg.Poll = backing, newVerifier(t, nil, backing), 50*time.Millisecond
	c, err := NewCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	dir := realCheckpoint(t, job)
	deadline := time.Now().Add(10 * time.Second)
	for c.Visible("job", filepath.Base(dir)) != nil {
		if time.Now().After(deadline) {
			t.Fatal("a complete checkpoint did not become visible")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSealAndVerifyL3(t *testing.T) {
	backing := t.TempDir()
	job := filepath.Join(backing, "job")
	dir := realCheckpoint(t, job)
	chkRel, _ := filepath.Rel(backing, dir)
	res, _ := NewResolver(nil, []string{backing})

	var sealed []string
	rec, err := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, OnSealed: func(chk, p string, err error) {
		if err != nil {
			t.Errorf("seal %s: %v", chk, err)
		}
		sealed = append(sealed, p)
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Everything but one state file was written through the mount.
	entries, _ := os.ReadDir(dir)
	var unwritten string
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if unwritten == "" && e.Name() != MetadataFile {
			unwritten = e.Name()
			continue
		}
		rec.FileWritten(filepath.Join(chkRel, e.Name()), versionOf(t, filepath.Join(dir, e.Name())), crc32.Checksum(data, castagnoli), time.Now())
	}
	rec.MetadataCommitted(filepath.Join(chkRel, MetadataFile))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec.Run(ctx) // seals the queue, then returns: ctx is done
	if len(sealed) != 1 || sealed[0] != SealedPath(backing, chkRel) {
		t.Fatalf("sealed %v", sealed)
	}
	doc, _ := os.ReadFile(sealed[0])
	if !strings.Contains(string(doc), `"checksum": "crc32c:`) || !strings.Contains(string(doc), `"metadata_checksum": "crc32c:`) {
		t.Fatalf("sealed manifest lacks checksums:\n%s", doc)
	}

	cfg := DefaultVerifierConfig()
	cfg.Resolver, cfg.SealedRoot = res, backing
	v, _ := NewVerifier(cfg)
	if got := v.VerifyDir(context.Background(), dir); !got.Complete || got.Level != L3 {
		t.Fatalf("sealed copy: complete %v level %v %v", got.Complete, got.Level, got.Problems)
	}
	// A sealed manifest still being replicated in place (a prefix of it)
	// says nothing yet: L1, not incomplete. One of another checkpoint is
	// a mismatch.
	for _, n := range []int{0, 1, len(doc) / 2, len(doc) - 1} {
		os.WriteFile(sealed[0], doc[:n], 0o644)
		fresh, _ := NewVerifier(cfg)
		if got := fresh.VerifyDir(context.Background(), dir); !got.Complete || got.Level != L1 {
			t.Errorf("sealed manifest cut at %d of %d bytes: complete %v level %v %v", n, len(doc), got.Complete, got.Level, got.Problems)
		}
	}
	other := strings.Replace(string(doc), `"checkpoint_id": `, `"checkpoint_id": 9`, 1)
	os.WriteFile(sealed[0], []byte(other), 0o644)
	if got := func() *Verdict { fresh, _ := NewVerifier(cfg); return fresh.VerifyDir(context.Background(), dir) }(); got.Complete {
		t.Errorf("sealed manifest of another checkpoint: complete %v level %v", got.Complete, got.Level)
	}
	os.WriteFile(sealed[0], doc, 0o644)
	// Corrupt a sealed file without changing its size: incomplete at L3.
	var victim string
	for _, e := range entries {
		if e.Name() != MetadataFile && e.Name() != unwritten {
			victim = filepath.Join(dir, e.Name())
			break
		}
	}
	data, _ := os.ReadFile(victim)
	data[0] ^= 0xff
	os.WriteFile(victim, data, 0o644)
	got := v.VerifyDir(context.Background(), dir)
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemChecksumMismatch {
		t.Fatalf("corrupted copy: %v", got.Problems)
	}
	// The file this mount did not see written is sealed with its size
	// only, unless ReadUnwritten.
	if strings.Count(string(doc), `"checksum"`) != strings.Count(string(doc), `"path"`)-1 {
		t.Errorf("expected exactly one file without a checksum:\n%s", doc)
	}
	rec2, _ := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: true})
	p, err := rec2.Seal(chkRel)
	if err != nil {
		t.Fatal(err)
	}
	doc2, _ := os.ReadFile(p)
	if strings.Count(string(doc2), `"checksum"`) != strings.Count(string(doc2), `"path"`) {
		t.Errorf("ReadUnwritten left a file without a checksum:\n%s", doc2)
	}
}

func TestHiddenPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.tmp", "x.tmp", true}, {"*.tmp", "x.tmpl", false}, {"*.tmp", ".tmp", true},
		{"._metadata.inprogress.*", "._metadata.inprogress.1b2c", true}, {"._metadata.inprogress.*", "_metadata", false},
		{".~tmp~", ".~tmp~", true}, {".~tmp~", ".~tmp~x", false},
		{DefaultHiddenPatterns[1], ".0a1b2c3d-uuid.Xy12Ab", true}, {DefaultHiddenPatterns[1], "0a1b2c3d-uuid.Xy12Ab", false},
		{DefaultHiddenPatterns[1], ".0a1b2c3d-uuid.Xy12A", false}, {"a[bc]d", "acd", true}, {"a[bc]d", "aed", false},
		{`x\*y`, "x*y", true}, {`x\*y`, "xzy", false},
	} {
		h := compileHidden(tc.pattern)
		want, _ := path.Match(tc.pattern, tc.name)
		if got := h.match(tc.name); got != tc.want || got != want {
			t.Errorf("%q ~ %q: got %v, want %v (path.Match says %v)", tc.pattern, tc.name, got, tc.want, want)
		}
	}
}

// TestCatalogSavepoints: a replica mount hides a savepoint directory
// until it is complete, as it hides chk-N; savepoints are no job's
// checkpoints, and names that only look like savepoints' are not judged.
func TestCatalogSavepoints(t *testing.T) {
	backing := t.TempDir()
	var src string
	for _, d := range flinkdata.StateDirs(t) {
		if strings.HasSuffix(d, "-savepoint") {
			src = d
			break
		}
	}
	if src == "" {
		t.Fatal("no real savepoint with state files")
	}
	const holder = "savepoints"
	good, torn := "savepoint-012345-0123456789ab", "savepoint-012345-ba9876543210"
	copyDir(t, src, filepath.Join(backing, holder, good))
	copyDir(t, src, filepath.Join(backing, holder, torn))
	entries, _ := os.ReadDir(filepath.Join(backing, holder, torn))
	removed := false
	for _, e := range entries {
		if e.Name() != MetadataFile && !removed {
			removed = os.Remove(filepath.Join(backing, holder, torn, e.Name())) == nil
		}
	}
	if !removed {
		t.Fatal("no state file to remove")
	}
	os.MkdirAll(filepath.Join(backing, holder, "savepoint-xyz"), 0o755)

	c := newCatalog(t, backing)
	var changes []Change
	c.OnChange(func(ch Change) { changes = append(changes, ch) })
	if err := c.Visible(holder, good); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("before any pass: %v, want ErrIncomplete", err)
	}
	c.Refresh(context.Background())
	for _, tc := range []struct {
		name string
		want error
	}{{good, nil}, {torn, ErrIncomplete}, {"savepoint-012345-000000000000", ErrIncomplete}, {"savepoint-xyz", nil}} {
		if err := c.Visible(holder, tc.name); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("Visible(%q, %q) = %v, want %v", holder, tc.name, err, tc.want)
		}
	}
	if len(changes) != 1 || changes[0] != (Change{Dir: holder, Name: good, Visible: true}) {
		t.Errorf("changes %v", changes)
	}
	if jobs := c.Jobs(); len(jobs) != 0 {
		t.Errorf("savepoints listed as jobs: %+v", jobs)
	}
	os.RemoveAll(filepath.Join(backing, holder, good))
	changes = nil
	c.Refresh(context.Background())
	if err := c.Visible(holder, good); !errors.Is(err, ErrIncomplete) || len(changes) != 1 || changes[0].Visible {
		t.Errorf("after removal: %v, changes %v", err, changes)
	}
}

func TestIsSavepointDirName(t *testing.T) {
	for name, want := range map[string]bool{
		"savepoint-012345-0123456789ab":  true,
		"savepoint-abcdef-ffffffffffff":  true,
		"savepoint-012345-0123456789a":   false,
		"savepoint-012345-0123456789abc": false,
		"savepoint-01234g-0123456789ab":  false,
		"savepoint-012345_0123456789ab":  false,
		"savepoint-ABCDEF-0123456789ab":  false,
		"chk-1":                          false,
		"savepoint":                      false,
	} {
		if got := IsSavepointDirName(name); got != want {
			t.Errorf("IsSavepointDirName(%q) = %v, want %v", name, got, want)
		}
	}
}

// legacySite lays out a Flink 1.4 job directory: chk-N directories of
// state files and no _metadata, and in ha/ the HA file of checkpoint 7,
// which references two files of chk-7 and an sst file that checkpoint 5
// uploaded into chk-5 (1.4's incremental RocksDB has no shared/).
func legacySite(t *testing.T, fs flinkha.FieldSet) (backing, job string, m *metadata.Metadata) {
	t.Helper()
	backing = t.TempDir()
	job = filepath.Join(backing, "checkpoints", haJob)
	for rel, size := range map[string]int{"chk-7/k0": 100, "chk-7/op": 50, "chk-5/sst": 300, "chk-8/k0": 10} {
		p := filepath.Join(job, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := func(rel string, size int64) *metadata.StreamHandle {
		return &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + filepath.Join(job, rel), Size: size}
	}
	keyed := func(rel string, size int64) *metadata.KeyedHandle {
		return &metadata.KeyedHandle{Tag: metadata.TagKeyGroupsV2, KeyGroupCount: 1, Offsets: []int64{0}, Delegate: file(rel, size)}
	}
	m = &metadata.Metadata{Version: 2, CheckpointID: 7, Operators: []metadata.Operator{{
		IDLower: 1, IDUpper: 2, Parallelism: 2, MaxParallelism: 128,
		Subtasks: []metadata.Subtask{
			{Index: 0, ManagedKeyed: keyed("chk-7/k0", 100), ManagedOperatorFlag: 1, ManagedOperator: &metadata.OperatorHandle{
				Tag: metadata.TagPartitionableOperator, States: []metadata.OperatorStateMeta{{Name: "s", Offsets: []int64{0}}}, Delegate: file("chk-7/op", 50),
			}},
			{Index: 1, ManagedKeyed: keyed("chk-5/sst", 300)},
		},
	}}}
	spec := flinkha.CheckpointSpec{FieldSet: fs, JobID: haJob, CheckpointID: 7, Timestamp: 1000, CompletionTimestamp: 2000, Metadata: m}
	if fs != flinkha.FieldSet14 {
		spec.ExternalPointer = "file:" + filepath.Join(job, "chk-7")
	}
	ha, err := flinkha.EncodeCompletedCheckpoint(spec)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(backing, "ha"), 0o755)
	if err := os.WriteFile(filepath.Join(backing, "ha", "completedCheckpoint0a1b2c3d4e5f"), ha, 0o644); err != nil {
		t.Fatal(err)
	}
	return backing, job, m
}

// A Flink 1.4 chk-N is shown on a replica when the HA file describing it
// is complete, with the chk-M holding files it needs; nothing else is,
// and a 1.5 HA file shows no directory without _metadata (design
// §4.2.1).
func TestCatalogShowsFlink14Checkpoints(t *testing.T) {
	ctx := context.Background()
	backing, job, m := legacySite(t, flinkha.FieldSet14)
	c := newCatalog(t, backing)
	rel := "checkpoints/" + haJob
	visible := func(name string) bool { return c.Visible(rel, name) == nil }
	c.Refresh(ctx)
	if !visible("chk-7") || !visible("chk-5") || visible("chk-8") {
		t.Fatalf("visible: chk-7 %v, chk-5 %v, chk-8 %v; want true, true, false", visible("chk-7"), visible("chk-5"), visible("chk-8"))
	}
	js := c.Jobs()
	if len(js) != 1 {
		t.Fatalf("jobs %+v", js)
	}
	newest := js[0].NewestComplete()
	if newest == nil || newest.CheckpointID != 7 || newest.Level != L2 || newest.Files != 4 {
		t.Fatalf("newest complete %v", newest)
	}
	for _, v := range js[0].Checkpoints {
		if v.CheckpointID == 5 && (v.Complete || v.HoldsFilesOf != 7) {
			t.Errorf("chk-5: %v, holds files of %d; want incomplete, holding 7's", v, v.HoldsFilesOf)
		}
	}
	if err := c.ProtectsDeletion(rel + "/chk-5/sst"); err == nil {
		t.Error("the deletion guard lets the newest checkpoint's sst file go")
	}

	// A file it needs still arriving: neither directory is shown.
	if err := os.Truncate(filepath.Join(job, "chk-5", "sst"), 299); err != nil {
		t.Fatal(err)
	}
	c.Refresh(ctx)
	if visible("chk-7") || visible("chk-5") {
		t.Fatalf("with chk-5/sst short: chk-7 %v, chk-5 %v; want both hidden", visible("chk-7"), visible("chk-5"))
	}

	// Without its HA file (a job cancelled with its checkpoint retained),
	// the checkpoint's externalized metadata file describes it, at L1.
	os.Truncate(filepath.Join(job, "chk-5", "sst"), 300)
	os.Remove(filepath.Join(backing, "ha", "completedCheckpoint0a1b2c3d4e5f"))
	c.Refresh(ctx)
	if visible("chk-7") {
		t.Fatal("chk-7 shown with no description")
	}
	var buf bytes.Buffer
	if err := metadata.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(backing, "ext"), 0o755)
	if err := os.WriteFile(filepath.Join(backing, "ext", "checkpoint_metadata-0a1b2c3d4e5f"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Refresh(ctx)
	if newest := c.Jobs()[0].NewestComplete(); !visible("chk-7") || !visible("chk-5") || newest == nil || newest.CheckpointID != 7 || newest.Level != L1 {
		t.Fatalf("externalized: chk-7 %v, chk-5 %v, newest %v; want shown, shown, 7 at L1", visible("chk-7"), visible("chk-5"), newest)
	}

	// From 1.5 on the directory must hold _metadata (design §3.2 step 5).
	backing, _, _ = legacySite(t, flinkha.FieldSet15)
	c = newCatalog(t, backing)
	c.Refresh(ctx)
	if visible("chk-7") || visible("chk-5") {
		t.Fatalf("1.5 HA file: chk-7 %v, chk-5 %v; want both hidden", visible("chk-7"), visible("chk-5"))
	}
}

// TestCatalogSaysWhichFileAChecksumMismatchHides: a checkpoint hidden
// because a file's contents differ from the sealed checksum is reported
// once (a Change naming the file, the sealed and the found checksum), not
// on every pass; again when another file differs too; and a checkpoint
// that was visible says why it no longer is. (Before, it stayed hidden
// with no reason given to the listeners.)
func TestCatalogSaysWhichFileAChecksumMismatchHides(t *testing.T) {
	backing := t.TempDir()
	job := filepath.Join(backing, "job")
	dir := realCheckpoint(t, job)
	name := filepath.Base(dir)
	res, _ := NewResolver(nil, []string{backing})
	rec, _ := NewRecorder(RecorderConfig{Backing: backing, Resolver: res, ReadUnwritten: true})
	if _, err := rec.Seal(filepath.Join("job", name)); err != nil {
		t.Fatal(err)
	}
	var states []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != MetadataFile {
			states = append(states, e.Name())
		}
	}
	if len(states) < 2 {
		t.Fatalf("want two state files in %s, have %v", dir, states)
	}
	corrupt := func(file string) (sealed, found string) {
		p := filepath.Join(dir, file)
		data, _ := os.ReadFile(p)
		sealed = FormatChecksum(crc32.Checksum(data, castagnoli))
		data[0] ^= 0xff
		os.WriteFile(p, data, 0o644)
		return sealed, FormatChecksum(crc32.Checksum(data, castagnoli))
	}
	cfg := DefaultCatalogConfig()
	vcfg := DefaultVerifierConfig()
	vcfg.Resolver, vcfg.SealedRoot = res, backing
	cfg.Backing, cfg.Verifier = backing, func() *Verifier { v, _ := NewVerifier(vcfg); return v }()
	c, err := NewCatalog(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var changes []Change
	c.OnChange(func(ch Change) { changes = append(changes, ch) })
	pass := func() []Change {
		changes = nil
		c.Refresh(context.Background())
		return changes
	}
	if ch := pass(); len(ch) != 1 || !ch[0].Visible || ch[0].Mismatch != nil {
		t.Fatalf("intact: changes %+v, want it visible", ch)
	}

	// Visible, then a file differs: hidden, saying which.
	sealed, found := corrupt(states[0])
	ch := pass()
	if len(ch) != 1 || ch[0].Visible || ch[0].Mismatches != 1 || ch[0].Mismatch == nil ||
		ch[0].Mismatch.Path != states[0] || ch[0].Mismatch.ExpectedChecksum != sealed || ch[0].Mismatch.FoundChecksum != found {
		t.Fatalf("one file differs: changes %+v, want %s hidden naming %s (sealed %s, found %s)", ch, name, states[0], sealed, found)
	}
	// Once, not every pass.
	for range 3 {
		if ch := pass(); len(ch) != 0 {
			t.Fatalf("the same mismatch again: changes %+v, want none", ch)
		}
	}
	// Another file differs too: said again.
	corrupt(states[1])
	if ch := pass(); len(ch) != 1 || ch[0].Visible || ch[0].Mismatches != 2 {
		t.Fatalf("a second file differs: changes %+v", ch)
	}
	// Hidden from the start (a fresh catalog): said on the first pass.
	c2, _ := NewCatalog(cfg)
	var first []Change
	c2.OnChange(func(ch Change) { first = append(first, ch) })
	c2.Refresh(context.Background())
	if len(first) != 1 || first[0].Visible || first[0].Mismatches != 2 {
		t.Fatalf("never visible: changes %+v", first)
	}
}
