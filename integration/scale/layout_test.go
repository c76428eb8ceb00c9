package scale

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// flinkURI is the checkpoint directory as Flink wrote it into every
// _metadata (state.checkpoints.dir); the daemon maps it to its backing
// directory with --map. It names no directory of the machine.
const flinkURI = "file:/flink/checkpoints"

const (
	// retained checkpoints per job (state.checkpoints.num-retained).
	retained = 3
	// churn: one SST in churn is replaced by each new checkpoint (RocksDB
	// incremental keeps about 95% of the previous checkpoint's files).
	churn = 20
	// layoutVersion changes when the generated layout does.
	layoutVersion = 1
)

// template is a real RocksDB-incremental _metadata of the corpus.
type template struct {
	data []byte
	// source names the corpus file, for the log.
	source string
	// privates is how many private files (RocksDB's MANIFEST, CURRENT,
	// OPTIONS) each keyed subtask has, keyed how many subtasks have
	// incremental keyed state, exclusive how many handles are files in
	// chk-N.
	privates, keyed, exclusive int
}

// loadTemplate finds the newest release's rocksdb-incremental entry of
// the corpus and takes its newest checkpoint's _metadata.
func loadTemplate(t testing.TB) *template {
	t.Helper()
	var entry *flinkdata.Entry
	for _, e := range flinkdata.Corpus(t) {
		if e.Kind == "rocksdb-incremental" && len(e.Checkpoints) > 0 {
			entry = &e
		}
	}
	if entry == nil {
		t.Fatal("no rocksdb-incremental entry in the corpus")
	}
	c := entry.Checkpoints[len(entry.Checkpoints)-1]
	path := filepath.Join(entry.Storage(), c.Dir, "_metadata")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tp := &template{data: data, source: fmt.Sprintf("corpus %s/%s %s", entry.Release, entry.Kind, c.Dir)}
	m := tp.decode(t)
	for _, op := range m.Operators {
		for _, s := range op.Subtasks {
			if k := s.ManagedKeyed; k != nil && (k.Tag == metadata.TagIncrementalKeyGroupsV2 || k.Tag == metadata.TagIncrementalKeyGroups) {
				tp.keyed++
				tp.privates = len(k.Private)
				if k.Meta != nil && k.Meta.Tag == metadata.TagRelativeStream {
					tp.exclusive++
				}
			}
			if o := s.ManagedOperator; o != nil && o.Delegate != nil && o.Delegate.Tag == metadata.TagRelativeStream {
				tp.exclusive++
			}
		}
	}
	if tp.keyed == 0 {
		t.Fatalf("%s: no incremental keyed state", tp.source)
	}
	return tp
}

func (tp *template) decode(t testing.TB) *metadata.Metadata {
	m, err := metadata.Decode(bytes.NewReader(tp.data), int64(len(tp.data)), metadata.Options{KeepInline: true})
	if err != nil {
		t.Fatalf("%s: %v", tp.source, err)
	}
	return m
}

// job is the writer's state of one job: what its retained checkpoints
// reference. Only one goroutine at a time works on a job.
type job struct {
	Index int
	ID    string
	// Next is the id of its next checkpoint, NextFile the number of its
	// next shared file.
	Next     int64
	NextFile int
	// SSTs are the SST files of its newest checkpoint.
	SSTs []int
	// Retained are its checkpoints, oldest first.
	Retained []checkpoint
}

// checkpoint is one retained checkpoint: its id and the shared files it
// references (SSTs and private files).
type checkpoint struct {
	ID    int64
	Files []int
}

func newJob(i, files int) *job {
	j := &job{Index: i, ID: fmt.Sprintf("%016x%016x", mix(uint64(i)), mix(uint64(i)<<32|0xf11c)), Next: 1}
	for n := 0; n < files; n++ {
		j.SSTs = append(j.SSTs, n)
	}
	j.NextFile = files
	return j
}

// mix is splitmix64's finalizer: names and sizes derived from numbers.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// sharedName is the name of shared file n of the job (a UUID, as Flink
// names them).
func (j *job) sharedName(n int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(mix(uint64(j.Index))), n>>24&0xffff, n>>12&0xfff, n&0xfff, mix(uint64(j.Index)<<32|uint64(n))&(1<<48-1))
}

// sharedSize is its size: 1 to 64 MiB, sparse.
func (j *job) sharedSize(n int) int64 {
	return 1<<20 + int64(mix(uint64(j.Index)<<40^uint64(n))%(63<<20))
}

func (j *job) exclusiveName(id int64, k int) string {
	return fmt.Sprintf("%08x-%04x-4000-9000-%012x", uint32(mix(uint64(j.Index))), k, id)
}

func (j *job) chk(id int64) string { return fmt.Sprintf("chk-%d", id) }

// Newest is the id of its newest checkpoint.
func (j *job) Newest() int64 { return j.Retained[len(j.Retained)-1].ID }

// writeFile creates path with size bytes and no content (sparse).
func writeFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// addCheckpoint writes the job's next checkpoint into nas as Flink 1.15+
// writes one, and retires the oldest beyond the retained three. It
// returns the new checkpoint's id and when its _metadata was renamed in
// place (its last byte).
func (j *job) addCheckpoint(nas string, tp *template, files int, m *metadata.Metadata) (int64, time.Time, error) {
	id := j.Next
	j.Next++
	dir := filepath.Join(nas, j.ID)
	rng := rand.New(rand.NewPCG(uint64(j.Index), uint64(id)))
	var fresh []int
	if len(j.Retained) > 0 {
		ssts := append([]int(nil), j.SSTs...)
		for _, i := range rng.Perm(len(ssts))[:max(1, len(ssts)/churn)] {
			ssts[i] = j.NextFile
			fresh = append(fresh, j.NextFile)
			j.NextFile++
		}
		j.SSTs = ssts
	} else {
		fresh = append(fresh, j.SSTs...)
		for _, sub := range []string{"shared", "taskowned"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return 0, time.Time{}, err
			}
		}
	}
	refs := append([]int(nil), j.SSTs...)
	var privates []int
	for k := 0; k < tp.privates*tp.keyed; k++ {
		privates = append(privates, j.NextFile)
		fresh = append(fresh, j.NextFile)
		refs = append(refs, j.NextFile)
		j.NextFile++
	}
	// The shared files first, as the TaskManagers upload them.
	for _, n := range fresh {
		if err := writeFile(filepath.Join(dir, "shared", j.sharedName(n)), j.sharedSize(n)); err != nil {
			return 0, time.Time{}, err
		}
	}
	chk := filepath.Join(dir, j.chk(id))
	if err := os.Mkdir(chk, 0o755); err != nil {
		return 0, time.Time{}, err
	}
	// Rewrite the template's handles.
	m.CheckpointID = id
	keyed, excl := 0, 0
	sharedURI := flinkURI + "/" + j.ID + "/shared/"
	rel := func(h *metadata.StreamHandle) error {
		h.Path = j.exclusiveName(id, excl)
		excl++
		return writeFile(filepath.Join(chk, h.Path), h.Size)
	}
	for oi := range m.Operators {
		for si := range m.Operators[oi].Subtasks {
			s := &m.Operators[oi].Subtasks[si]
			if o := s.ManagedOperator; o != nil && o.Delegate != nil && o.Delegate.Tag == metadata.TagRelativeStream {
				if err := rel(o.Delegate); err != nil {
					return 0, time.Time{}, err
				}
			}
			k := s.ManagedKeyed
			if k == nil || (k.Tag != metadata.TagIncrementalKeyGroupsV2 && k.Tag != metadata.TagIncrementalKeyGroups) {
				continue
			}
			k.CheckpointID = id
			if k.Meta != nil && k.Meta.Tag == metadata.TagRelativeStream {
				if err := rel(k.Meta); err != nil {
					return 0, time.Time{}, err
				}
			}
			lo, hi := keyed*len(j.SSTs)/tp.keyed, (keyed+1)*len(j.SSTs)/tp.keyed
			k.Shared = k.Shared[:0]
			for _, n := range j.SSTs[lo:hi] {
				k.Shared = append(k.Shared, metadata.NamedHandle{LocalName: fmt.Sprintf("%06d.sst", n),
					Handle: &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: sharedURI + j.sharedName(n), Size: j.sharedSize(n)}})
			}
			for p := range k.Private {
				n := privates[keyed*tp.privates+p]
				k.Private[p].Handle = &metadata.StreamHandle{Tag: metadata.TagFileStream, Path: sharedURI + j.sharedName(n), Size: j.sharedSize(n)}
			}
			keyed++
		}
	}
	// _metadata last: Flink 1.15+ writes ._metadata.inprogress.<uuid>
	// and renames it.
	tmp := filepath.Join(chk, fmt.Sprintf("._metadata.inprogress.%08x-0000-4000-a000-%012x", uint32(mix(uint64(j.Index))), id))
	f, err := os.Create(tmp)
	if err != nil {
		return 0, time.Time{}, err
	}
	err = metadata.Encode(f, m)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(chk, "_metadata"))
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	done := time.Now()
	j.Retained = append(j.Retained, checkpoint{ID: id, Files: refs})
	if len(j.Retained) > retained {
		if err := j.retireOldest(nas); err != nil {
			return 0, time.Time{}, err
		}
	}
	return id, done, nil
}

// retireOldest deletes the oldest checkpoint as Flink's subsumption does:
// its chk-N directory, and the shared files no retained checkpoint
// references any more.
func (j *job) retireOldest(nas string) error {
	old := j.Retained[0]
	j.Retained = j.Retained[1:]
	dir := filepath.Join(nas, j.ID)
	if err := os.RemoveAll(filepath.Join(dir, j.chk(old.ID))); err != nil {
		return err
	}
	live := make(map[int]bool)
	for _, c := range j.Retained {
		for _, n := range c.Files {
			live[n] = true
		}
	}
	for _, n := range old.Files {
		if !live[n] {
			if err := os.Remove(filepath.Join(dir, "shared", j.sharedName(n))); err != nil {
				return err
			}
		}
	}
	return nil
}

// layout is a NAS directory of jobs, cached.
type layout struct {
	Jobs, Files int
	// Dir holds nas/ (the NAS's directory), state.json (the jobs) and,
	// while nobody changes it, the file clean.
	Dir  string
	jobs []*job
	tp   *template
	lock *os.File
}

func (l *layout) nas() string { return filepath.Join(l.Dir, "nas") }

// FilesOnDisk counts the files the retained checkpoints hold (shared,
// exclusive and _metadata).
func (l *layout) FilesOnDisk() int {
	n := 0
	for _, j := range l.jobs {
		shared := make(map[int]bool)
		for _, c := range j.Retained {
			for _, f := range c.Files {
				shared[f] = true
			}
		}
		n += len(shared) + len(j.Retained)*(l.tp.exclusive+1)
	}
	return n
}

// Dirs counts the directories below the NAS's top: jobs, their chk-N,
// shared and taskowned.
func (l *layout) Dirs() int { return len(l.jobs) * (retained + 2) }

// openLayout returns the layout of jobs × files, generated or taken from
// $CKPTFS_CACHE/scale (a temporary directory without CKPTFS_CACHE). It
// holds the layout's lock until the test ends, and marks it unclean
// until close saves the jobs' state: a run that dies midway leaves a
// layout that is made again.
func openLayout(t testing.TB, jobs, files int) *layout {
	t.Helper()
	tp := loadTemplate(t)
	cache := os.Getenv("CKPTFS_CACHE")
	var dir string
	if cache == "" {
		dir = t.TempDir()
		t.Logf("CKPTFS_CACHE is not set: the layout is made in a temporary directory and not kept")
	} else {
		dir = filepath.Join(cache, "scale", fmt.Sprintf("v%d-j%d-f%d", layoutVersion, jobs, files))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &layout{Jobs: jobs, Files: files, Dir: dir, tp: tp}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	l.lock = lock
	t.Cleanup(func() { lock.Close() })
	clean := filepath.Join(dir, "clean")
	if _, err := os.Stat(clean); err == nil {
		if data, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil && json.Unmarshal(data, &l.jobs) == nil && len(l.jobs) == jobs {
			if err := os.Remove(clean); err != nil {
				t.Fatal(err)
			}
			t.Logf("layout %s: cached (%d files on disk)", dir, l.FilesOnDisk())
			return l
		}
	}
	start := time.Now()
	if err := os.RemoveAll(l.nas()); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "state.json"))
	if err := os.Mkdir(l.nas(), 0o755); err != nil {
		t.Fatal(err)
	}
	l.jobs = make([]*job, jobs)
	for i := range l.jobs {
		l.jobs[i] = newJob(i, files)
	}
	// Jobs in parallel: creating files is system calls, not CPU.
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan *job)
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := tp.decode(t)
			for j := range next {
				for c := 0; c < retained; c++ {
					if _, _, err := j.addCheckpoint(l.nas(), tp, files, m); err != nil {
						mu.Lock()
						firstErr = errors.Join(firstErr, err)
						mu.Unlock()
						break
					}
				}
			}
		}()
	}
	for _, j := range l.jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("layout %s: made in %v (%d jobs × %d files a checkpoint, %d files on disk)", dir, time.Since(start).Round(time.Millisecond), jobs, files, l.FilesOnDisk())
	return l
}

// close saves the jobs' state and marks the layout clean.
func (l *layout) close(t testing.TB) {
	t.Helper()
	sort.Slice(l.jobs, func(a, b int) bool { return l.jobs[a].Index < l.jobs[b].Index })
	data, err := json.Marshal(l.jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "state.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, "clean"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
