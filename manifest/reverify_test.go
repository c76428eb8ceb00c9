package manifest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// testJob is a job directory whose checkpoints share files in shared/,
// as RocksDB incremental checkpoints do.
type testJob struct {
	root string // the only root
	dir  string // root/job
}

func newTestJob(t *testing.T, sharedFiles int) *testJob {
	t.Helper()
	j := &testJob{root: t.TempDir()}
	j.dir = filepath.Join(j.root, "job")
	for i := range sharedFiles {
		j.write(t, j.shared(i), i%5+1)
	}
	j.write(t, "shared/op/phys", 40)
	j.write(t, "dstl/f1", 301) // a changelog handle of 300 bytes and the flag byte
	if err := os.MkdirAll(filepath.Join(j.dir, "taskowned"), 0o755); err != nil {
		t.Fatal(err)
	}
	return j
}

func (j *testJob) shared(i int) string { return fmt.Sprintf("shared/%04d-sst", i) }

func (j *testJob) write(t *testing.T, rel string, size int) {
	t.Helper()
	p := filepath.Join(j.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (j *testJob) uri(rel string) string { return "file:" + filepath.Join(j.dir, rel) }

// checkpoint writes chk-<id> referencing the shared files in the order
// given, the first of them twice, two relative files of its own, two
// segments of one file-merging physical file (ends 10, then 30), the
// file-merging directories and a changelog file. It returns the files the
// checkpoint needs, _metadata aside.
func (j *testJob) checkpoint(t *testing.T, id int64, shared []int) int {
	t.Helper()
	chk := fmt.Sprintf("chk-%d", id)
	j.write(t, chk+"/private", 7)
	j.write(t, chk+"/meta", 9)
	var named []metadata.NamedHandle
	for _, i := range append(slices.Clone(shared), shared[0]) {
		named = append(named, metadata.NamedHandle{LocalName: fmt.Sprintf("%d.sst", i),
			Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: j.uri(j.shared(i)), Size: int64(i%5 + 1)}})
	}
	merging := func(offset, size int64) *metadata.OperatorHandle {
		return &metadata.OperatorHandle{Tag: metadata.TagFileMergingOperator,
			States:       []metadata.OperatorStateMeta{{Name: "s", Offsets: []int64{0}}},
			TaskOwnedDir: j.uri("taskowned"), SharedDir: j.uri("shared/op"),
			Delegate: &metadata.StreamHandle{Tag: metadata.TagSegmentFile, Path: j.uri("shared/op/phys"), Offset: offset, Size: size, LogicalFileID: "l"}}
	}
	m := &metadata.Metadata{Version: 3, CheckpointID: id, ChannelLayout: metadata.ChannelLayout112}
	m.Operators = []metadata.Operator{{IDLower: 1, IDUpper: 2, Parallelism: 4, MaxParallelism: 128, Subtasks: []metadata.Subtask{
		{Index: 0, ManagedKeyed: &metadata.KeyedHandle{Tag: metadata.TagIncrementalKeyGroupsV2, CheckpointID: id, BackendID: "b",
			KeyGroupCount: 1, StateHandleID: "x", Shared: named,
			Meta:    &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: "meta", Size: 9},
			Private: []metadata.NamedHandle{{LocalName: "MANIFEST", Handle: &metadata.StreamHandle{Tag: metadata.TagRelativeStream, Path: "private", Size: 7}}}}},
		{Index: 1, ManagedOperatorFlag: 1, ManagedOperator: merging(0, 10)},
		{Index: 2, ManagedOperatorFlag: 1, ManagedOperator: merging(20, 10)},
		{Index: 3, ManagedKeyed: &metadata.KeyedHandle{Tag: metadata.TagChangelogV2, KeyGroupCount: 1, StateHandleID: "c", CheckpointID: id,
			NonMaterialized: []*metadata.KeyedHandle{{Tag: metadata.TagChangelogFileIncrement, KeyGroupCount: 1, StateHandleID: "f",
				Parts: []metadata.OffsetHandle{{Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: j.uri("dstl/f1"), Size: 300}}}}}}},
	}}}
	j.writeMetadata(t, chk, m)
	// shared files, 2 relative, the physical file, 2 directories, dstl/f1
	return len(shared) + 6
}

func (j *testJob) writeMetadata(t *testing.T, chk string, m *metadata.Metadata) {
	t.Helper()
	f, err := os.Create(filepath.Join(j.dir, chk, MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := metadata.Encode(f, m); err != nil {
		t.Fatal(err)
	}
}

func (j *testJob) chk(id int) string { return filepath.Join(j.dir, fmt.Sprintf("chk-%d", id)) }

func span(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// testClock is a clock that tests move.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func trustingVerifier(t *testing.T, root string, clock *testClock) *Verifier {
	t.Helper()
	res, err := NewResolver(nil, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: time.Minute, Workers: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decodedManifest(t *testing.T, dir string) *Manifest {
	t.Helper()
	path := filepath.Join(dir, MetadataFile)
	m, err := metadata.DecodeFile(path, metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return FromMetadata(m, fi.Size())
}

// TestVerifiedManifestIsFromMetadata: the manifest a verification builds
// while parsing is the one FromMetadata builds from the decoded file,
// for real checkpoints and for successive checkpoints that share files in
// the same order, in another order, or not at all.
func TestVerifiedManifestIsFromMetadata(t *testing.T) {
	for _, dir := range flinkdata.StateDirs(t) {
		got := newVerifier(t, nil, dir).VerifyDir(context.Background(), dir)
		want := decodedManifest(t, dir)
		if got.Manifest == nil || !reflect.DeepEqual(got.Manifest, want) {
			t.Fatalf("%s: manifest differs from FromMetadata:\n%+v", dir, got.Manifest)
		}
		if got.Bytes != want.Bytes()+want.MetadataSize {
			t.Fatalf("%s: %d bytes, want %d", dir, got.Bytes, want.Bytes()+want.MetadataSize)
		}
	}
	j := newTestJob(t, 60)
	shuffled := span(5, 40)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
	lists := [][]int{span(0, 30), span(5, 35), shuffled, span(40, 60), span(0, 60)}
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	for i, list := range lists {
		id := i + 1
		files := j.checkpoint(t, int64(id), list)
		got := v.VerifyDir(context.Background(), j.chk(id))
		if !got.Complete || got.Files != files+1 {
			t.Fatalf("chk-%d: %d files, want %d: %v", id, got.Files, files+1, got.Problems)
		}
		want := decodedManifest(t, j.chk(id))
		if !reflect.DeepEqual(got.Manifest, want) {
			t.Fatalf("chk-%d: manifest differs from FromMetadata:\n got %+v\nwant %+v", id, got.Manifest, want)
		}
		if got.Bytes != want.Bytes()+want.MetadataSize {
			t.Fatalf("chk-%d: %d bytes, want %d", id, got.Bytes, want.Bytes()+want.MetadataSize)
		}
		i := slices.IndexFunc(want.Files, func(f File) bool { return f.Kind == metadata.KindSegment })
		if i < 0 || want.Files[i].MinLength != 30 {
			t.Fatalf("segments not merged into one file of at least 30 bytes: %+v", want.Files)
		}
	}
}

// TestReverifyFindsFaults: with the files of chk-1 found complete and
// trusted, a new chk-2 is still parsed and every file it adds is still
// checked; a shared file is trusted only for MaxAge.
func TestReverifyFindsFaults(t *testing.T) {
	j := newTestJob(t, 40)
	j.checkpoint(t, 1, span(0, 30))
	j.checkpoint(t, 2, span(5, 40))
	warm := func(t *testing.T) (*Verifier, *testClock) {
		clock := &testClock{now: time.Unix(1000, 0)}
		v := trustingVerifier(t, j.root, clock)
		if got := v.VerifyDir(context.Background(), j.chk(1)); !got.Complete {
			t.Fatalf("chk-1: %v", got.Problems)
		}
		clock.add(time.Second)
		return v, clock
	}
	if v, _ := warm(t); !v.VerifyDir(context.Background(), j.chk(2)).Complete {
		t.Fatal("chk-2 incomplete")
	}

	t.Run("files new in chk-2", func(t *testing.T) {
		for _, rel := range []string{j.shared(30), j.shared(39), "chk-2/private", "chk-2/meta"} {
			path := filepath.Join(j.dir, rel)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []struct {
				name string
				do   func() error
				kind ProblemKind
			}{
				{"delete", func() error { return os.Remove(path) }, ProblemMissing},
				{"truncate", func() error { return os.Truncate(path, int64(len(orig))-1) }, ProblemSizeMismatch},
				{"extend", func() error { return os.WriteFile(path, append(slices.Clone(orig), 0), 0o644) }, ProblemSizeMismatch},
			} {
				if err := m.do(); err != nil {
					t.Fatal(err)
				}
				v, _ := warm(t)
				got := v.VerifyDir(context.Background(), j.chk(2))
				if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != m.kind {
					t.Fatalf("%s %s: %v", m.name, rel, got.Problems)
				}
				if err := os.WriteFile(path, orig, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	// chk-1 needs phys up to byte 30, and the size found for it (40) is
	// trusted. A checkpoint with a segment of phys ending at 50 is not
	// satisfied by it, whether that segment comes first or after one the
	// trusted size satisfies (then the file is judged again).
	for _, c := range []struct {
		name   string
		id     int64
		extend func(m *metadata.Metadata)
	}{
		{"physical file shorter than a new segment", 3, func(m *metadata.Metadata) {
			m.Operators[0].Subtasks[1].ManagedOperator.Delegate.Offset = 40 // size 10: end 50
		}},
		{"later segment beyond a trusted physical file", 4, func(m *metadata.Metadata) {
			m.Operators[0].Subtasks[2].ManagedOperator.Delegate.Size = 30 // offset 20: end 50
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, _ := warm(t)
			j.checkpoint(t, c.id, span(0, 30))
			chk := fmt.Sprintf("chk-%d", c.id)
			m, err := metadata.DecodeFile(filepath.Join(j.dir, chk, MetadataFile), metadata.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c.extend(m)
			j.writeMetadata(t, chk, m)
			got := v.VerifyDir(context.Background(), j.chk(int(c.id)))
			if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemSizeMismatch || got.Problems[0].Expected != 50 {
				t.Fatalf("got %v", got.Problems)
			}
		})
	}

	t.Run("shared file deleted", func(t *testing.T) {
		v, clock := warm(t)
		path := filepath.Join(j.dir, j.shared(10))
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		defer j.write(t, j.shared(10), 10%5+1)
		if got := v.VerifyDir(context.Background(), j.chk(2)); !got.Complete {
			t.Fatalf("within MaxAge the file found complete for chk-1 is trusted: %v", got.Problems)
		}
		clock.add(time.Minute)
		got := v.VerifyDir(context.Background(), j.chk(2))
		if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemMissing || got.Problems[0].Path != j.uri(j.shared(10)) {
			t.Fatalf("after MaxAge: %v", got.Problems)
		}
	})

	t.Run("truncated _metadata", func(t *testing.T) {
		v, _ := warm(t)
		path := filepath.Join(j.chk(2), MetadataFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(path, data, 0o644)
		// Every offset of the header and the first handles, then a
		// stride (the parser's own tests cut at every offset).
		for n := 0; n < len(data); n += max(1, min(n-256, 13)) {
			if err := os.WriteFile(path, data[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			got := v.VerifyDir(context.Background(), j.chk(2))
			if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemParseError {
				t.Fatalf("cut at %d: %v", n, got.Problems)
			}
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := v.VerifyDir(context.Background(), j.chk(2)); !got.Complete {
			t.Fatalf("whole again: %v", got.Problems)
		}
	})

	t.Run("wrong checkpoint id", func(t *testing.T) {
		v, _ := warm(t)
		j.checkpoint(t, 4, span(5, 40))
		if err := os.Rename(filepath.Join(j.chk(4), MetadataFile), filepath.Join(j.chk(2), MetadataFile)); err != nil {
			t.Fatal(err)
		}
		defer j.checkpoint(t, 2, span(5, 40))
		got := v.VerifyDir(context.Background(), j.chk(2))
		if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemWrongCheckpointID {
			t.Fatalf("got %v", got.Problems)
		}
	})

	t.Run("outside the root", func(t *testing.T) {
		// Both checkpoints name a file outside the root: the second
		// verification says so again, from the cache.
		outside := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(outside, []byte("12345"), 0o644); err != nil {
			t.Fatal(err)
		}
		v, _ := warm(t)
		for _, id := range []int64{5, 6} {
			writeMetadata(t, j.chk(int(id)), id,
				&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: j.uri(j.shared(1)), Size: 2},
				&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "file:" + outside, Size: 5},
				&metadata.StreamHandle{Tag: metadata.TagFileStream, Path: j.uri("../../x"), Size: 5})
			got := v.VerifyDir(context.Background(), j.chk(int(id)))
			if got.Complete || len(problemPaths(got, ProblemOutsideRoot)) != 2 || len(got.Problems) != 2 {
				t.Fatalf("chk-%d: %v", id, got.Problems)
			}
		}
	})

	t.Run("absolute handle spelled like a relative one", func(t *testing.T) {
		// chk-1, parsed last, has a relative file "meta" (chk-1/meta);
		// a file stream handle naming "meta" is not that file.
		v, _ := warm(t)
		writeMetadata(t, j.chk(8), 8, &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: "meta", Size: 9})
		got := v.VerifyDir(context.Background(), j.chk(8))
		if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemOutsideRoot {
			t.Fatalf("got %v", got.Problems)
		}
	})
}

// TestSweepWaitsForBuilder: a sweep cannot remove the entries a manifest
// build holds; it waits for the build, and a path the build met twice is
// one file.
func TestSweepWaitsForBuilder(t *testing.T) {
	j := newTestJob(t, 3)
	clock := &testClock{now: time.Unix(1000, 0)}
	v := trustingVerifier(t, j.root, clock)
	j.checkpoint(t, 1, span(0, 3))
	if got := v.VerifyDir(context.Background(), j.chk(1)); !got.Complete {
		t.Fatal(got.Problems)
	}
	ref := func(s *manifestBuilder, i int) {
		s.Reference(&metadata.RawReference{Tag: metadata.TagFileStream, Path: []byte(j.uri(j.shared(i))), Size: int64(i%5 + 1)})
	}
	v.cache.pathsMu.Lock()
	s := v.newManifestBuilder(j.chk(2), 0, nil, v.judgeAt(context.Background(), clock.Now().UnixNano()))
	ref(s, 0)
	ref(s, 1)
	clock.add(3 * time.Minute) // every path is now past twice MaxAge (Sweep)
	swept := make(chan struct{})
	go func() {
		v.Sweep(nil)
		close(swept)
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-swept:
		t.Fatal("a sweep ran while a build held the entries")
	default:
	}
	ref(s, 0)
	ref(s, 2)
	ref(s, 1)
	files, entries := finished(s)
	for i, e := range entries {
		if v.cache.paths[files[i].Path] != e {
			t.Fatalf("%s: the manifest's entry is not the cache's", files[i].Path)
		}
	}
	v.cache.pathsMu.Unlock()
	<-swept
	if len(files) != 3 {
		t.Fatalf("%d files, want 3: %+v", len(files), files)
	}
	if len(v.cache.paths) != 0 {
		t.Fatalf("the sweep after the build kept %d paths", len(v.cache.paths))
	}
}

// TestBuilderExpectsTheNextPath: a build expects the absolute path that
// followed, in the previous checkpoint, the last path it met that the
// previous checkpoint listed; once two known paths came out of order it
// expects only every 16th, and a path that comes as expected makes it
// expect the next one again. A path new to it changes nothing, and a
// relative path of the previous checkpoint is never expected: an
// absolute path spelt the same is another file.
func TestBuilderExpectsTheNextPath(t *testing.T) {
	j := newTestJob(t, 40)
	v := trustingVerifier(t, j.root, &testClock{now: time.Unix(1000, 0)})
	j.checkpoint(t, 1, span(0, 40))
	if got := v.VerifyDir(context.Background(), j.chk(1)); !got.Complete {
		t.Fatal(got.Problems)
	}
	v.cache.pathsMu.Lock()
	defer v.cache.pathsMu.Unlock()
	s := v.newManifestBuilder(j.chk(2), 0, nil, v.judgeAt(context.Background(), 0))
	// ref reports shared file i as DecodeReferences does and returns the
	// path the build expects next.
	ref := func(i int) string {
		s.Reference(&metadata.RawReference{Tag: metadata.TagFileStream, Path: []byte(j.uri(j.shared(i))), Size: int64(i%5 + 1)})
		if e := s.expected(); e != nil {
			return e.path
		}
		return ""
	}
	shared := func(i int) string { return j.uri(j.shared(i)) }
	for _, step := range []struct{ file, expect int }{
		{5, 6}, {6, 7}, // in order
		{20, 21},                                                             // out of order once
		{10, -1}, {30, -1}, {12, -1}, {32, -1}, {14, -1}, {34, -1}, {16, -1}, // twice: no more
		{36, -1}, {18, -1}, {38, -1}, {1, -1}, {3, -1}, {25, -1}, {27, -1}, // 15 out of order
		{8, 9},   // the 16th
		{9, 10},  // in order again
		{45, 10}, // new
		{39, -1}, // the last one: a relative path came next
	} {
		want := ""
		if step.expect >= 0 {
			want = shared(step.expect)
		}
		if got := ref(step.file); got != want {
			t.Fatalf("after %s, expected %q, want %q", shared(step.file), got, want)
		}
	}
	if next := s.prev[s.next]; !next.relative || next.path != "private" {
		t.Fatalf("chk-1 listed %+v after its last shared file, want the relative path private", next)
	}
	s.Reference(&metadata.RawReference{Tag: metadata.TagFileStream, Path: []byte("private"), Size: 7})
	if e := s.entries[len(s.entries)-1]; e.relative || e == s.prev[s.next] {
		t.Fatalf("the absolute path private got chk-1's relative entry %+v", e)
	}
}

// TestBuilderRestart: after a restart (metadata.DecodeReferences trying
// another channel layout) the paths come again and are listed once each,
// in their new order; the probe of a path first met after the restart
// names its position in the new list.
func TestBuilderRestart(t *testing.T) {
	j := newTestJob(t, 4)
	v := trustingVerifier(t, j.root, &testClock{now: time.Unix(1000, 0)})
	ref := func(s *manifestBuilder, i int) {
		s.Reference(&metadata.RawReference{Tag: metadata.TagFileStream, Path: []byte(j.uri(j.shared(i))), Size: int64(i%5 + 1)})
	}
	probes := v.newProber(context.Background())
	defer probes.stop()
	v.cache.pathsMu.Lock()
	defer v.cache.pathsMu.Unlock()
	s := v.newManifestBuilder(j.chk(1), 0, probes, v.judgeAt(context.Background(), 0))
	ref(s, 0)
	ref(s, 1)
	s.Restart()
	for _, i := range []int{2, 1, 0, 1} {
		ref(s, i)
	}
	files, entries := finished(s)
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	if want := []string{j.uri(j.shared(2)), j.uri(j.shared(1)), j.uri(j.shared(0))}; !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}
	for _, b := range probes.wait() {
		for k, e := range b.entries {
			if e == entries[0] && b.index[k] != 0 {
				t.Fatalf("%s was probed at %d, not at its position 0", e.path, b.index[k])
			}
		}
	}
}

// TestConcurrentVerifications: verifications of checkpoints that share
// files, running at once while the cache is swept, all find every file.
func TestConcurrentVerifications(t *testing.T) {
	j := newTestJob(t, 50)
	want := map[int]int{}
	for id, list := range map[int][]int{1: span(0, 30), 2: span(10, 40), 3: span(20, 50)} {
		want[id] = j.checkpoint(t, int64(id), list) + 1
	}
	res, err := NewResolver(nil, []string{j.root})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Resolver: res, MaxAge: time.Millisecond, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var sweeper sync.WaitGroup
	sweeper.Go(func() {
		for keep := false; ; keep = !keep {
			select {
			case <-stop:
				return
			default:
			}
			v.Sweep(func(string) bool { return keep })
			time.Sleep(100 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				id := (g+i)%3 + 1
				got := v.VerifyDir(context.Background(), j.chk(id))
				if !got.Complete || got.Files != want[id] || len(got.Manifest.Files) != want[id]-1 {
					errs <- fmt.Errorf("chk-%d: complete %v, %d files, want %d: %v", id, got.Complete, got.Files, want[id], got.Problems)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	sweeper.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestProbedNewFiles: a new checkpoint's new files, stat'ed by workers
// while its _metadata is parsed, are judged as any stat'ed file is.
func TestProbedNewFiles(t *testing.T) {
	j := newTestJob(t, 400)
	j.checkpoint(t, 1, span(0, 100))
	j.checkpoint(t, 2, span(50, 400)) // 300 new files: several batches
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			clock := &testClock{now: time.Unix(1000, 0)}
			v := trustingVerifier(t, j.root, clock)
			v.cfg.Workers = workers
			if got := v.VerifyDir(context.Background(), j.chk(1)); !got.Complete {
				t.Fatal(got.Problems)
			}
			missing, short, dir := j.shared(120), j.shared(250), j.shared(399)
			for _, rel := range []string{missing, short, dir} {
				orig := filepath.Join(j.dir, rel)
				saved, err := os.ReadFile(orig)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					os.RemoveAll(orig)
					os.WriteFile(orig, saved, 0o644)
				})
			}
			if err := os.Remove(filepath.Join(j.dir, missing)); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filepath.Join(j.dir, short), 0); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(j.dir, dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(j.dir, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			got := v.VerifyDir(context.Background(), j.chk(2))
			want := map[string]ProblemKind{j.uri(missing): ProblemMissing, j.uri(short): ProblemSizeMismatch, j.uri(dir): ProblemMissing}
			found := map[string]ProblemKind{}
			for _, p := range got.Problems {
				found[p.Path] = p.Kind
			}
			if got.Complete || !reflect.DeepEqual(found, want) {
				t.Fatalf("problems %v, want %v", got.Problems, want)
			}
		})
	}
	t.Run("canceled", func(t *testing.T) {
		v := trustingVerifier(t, j.root, &testClock{now: time.Unix(1000, 0)})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got := v.VerifyDir(ctx, j.chk(2))
		if got.Complete || !got.Unknown {
			t.Fatalf("a canceled verification: complete %v, unknown %v", got.Complete, got.Unknown)
		}
	})
}

// TestProberStopsOnParseError: a _metadata that fails to parse after
// many new paths leaves no stat worker behind.
func TestProberStopsOnParseError(t *testing.T) {
	j := newTestJob(t, 400)
	j.checkpoint(t, 1, span(0, 400))
	meta := filepath.Join(j.chk(1), MetadataFile)
	fi, err := os.Stat(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(meta, fi.Size()*9/10); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	v := trustingVerifier(t, j.root, &testClock{now: time.Unix(1000, 0)})
	v.cfg.Workers = 4
	got := v.VerifyDir(context.Background(), j.chk(1))
	if got.Complete || len(got.Problems) != 1 || got.Problems[0].Kind != ProblemParseError {
		t.Fatalf("problems %v, want one parse error", got.Problems)
	}
	// A worker that returned may take a moment to be gone.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(time.Millisecond)
	}
}

// finished finishes a build made by a test and returns its files and
// their entries.
func finished(s *manifestBuilder) ([]File, []*pathEntry) {
	parsed := manifestEntry{man: &Manifest{}}
	s.finish(&parsed)
	return parsed.man.Files, parsed.entries
}

// TestMatchProbedAcrossRestart: stats are matched to their files by
// position, also when a restarted parse probed lower positions again; a
// stat whose position now holds another path is not used.
func TestMatchProbedAcrossRestart(t *testing.T) {
	entries := make([]*pathEntry, 6)
	for i := range entries {
		entries[i] = &pathEntry{path: fmt.Sprint(i)}
	}
	stale := &pathEntry{path: "before the restart"}
	obs := func(size int64) observation { return observation{size: size} }
	probed := []*probeBatch{
		// the first pass, then the restarted one
		{entries: []*pathEntry{stale, entries[4]}, index: []int{2, 4}, obs: []observation{obs(100), obs(4)}},
		{entries: []*pathEntry{entries[1], entries[3], entries[5]}, index: []int{1, 3, 5}, obs: []observation{obs(1), obs(3), obs(5)}},
	}
	var targets []target
	for _, i := range []int{1, 2, 3, 4, 5} {
		targets = append(targets, target{index: i, entry: entries[i]})
	}
	(&Verifier{}).matchProbed(targets, entries, probed)
	for _, tg := range targets {
		switch {
		case tg.index == 2 && tg.probed:
			t.Fatal("position 2 took the stat of the path it held before the restart")
		case tg.index != 2 && (!tg.probed || tg.obs.size != int64(tg.index)):
			t.Fatalf("position %d: probed %v, size %d", tg.index, tg.probed, tg.obs.size)
		}
	}
}
