package fusefs

import (
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest"
)

// blockingSealer counts calls; the first FileWritten blocks until
// release is closed.
type blockingSealer struct {
	entered chan struct{} // closed when the first FileWritten blocks
	release chan struct{}
	once    sync.Once

	mu               sync.Mutex
	written, noSum   int
	removed, commits int
	renamed          int
	order            []string
}

func newBlockingSealer() *blockingSealer {
	return &blockingSealer{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *blockingSealer) FileWritten(rel string, v manifest.FileVersion, crc uint32, at time.Time) {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written++
	s.order = append(s.order, "written "+rel)
}

func (s *blockingSealer) FileWrittenWithoutChecksum(rel string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noSum++
	s.order = append(s.order, "nochecksum "+rel)
}

func (s *blockingSealer) FileRemoved(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removed++
	s.order = append(s.order, "removed "+rel)
}

func (s *blockingSealer) Renamed(oldRel, newRel string, exchange bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renamed++
	s.order = append(s.order, "renamed "+oldRel+" "+newRel)
}

func (s *blockingSealer) MetadataCommitted(rel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	s.order = append(s.order, "committed "+rel)
}

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func tempFile(t *testing.T, dir string, i int) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestReporterBoundsReadbacks: while the Sealer is stuck, at most
// maxQueuedReadbacks descriptors wait; further written files are
// reported without checksum, and no descriptor is left open.
func TestReporterBoundsReadbacks(t *testing.T) {
	dir := t.TempDir()
	before := openFDs(t)
	s := newBlockingSealer()
	r := newReporter(s, slog.New(slog.DiscardHandler), &counters{})
	first := tempFile(t, dir, 0)
	if _, err := r.written("0", int(first.Fd()), time.Now()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	<-s.entered
	const extra = 44
	for i := 1; i <= maxQueuedReadbacks+extra; i++ {
		f := tempFile(t, dir, i)
		if _, err := r.written(fmt.Sprint(i), int(f.Fd()), time.Now()); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	close(s.release)
	r.sync()
	s.mu.Lock()
	written, noSum := s.written, s.noSum
	s.mu.Unlock()
	if written != 1+maxQueuedReadbacks || noSum != extra {
		t.Errorf("%d with checksum, %d without; want %d and %d", written, noSum, 1+maxQueuedReadbacks, extra)
	}
	r.close()
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

// TestReporterBoundsEvents: while the Sealer is stuck, a full queue makes
// the next report wait instead of growing.
func TestReporterBoundsEvents(t *testing.T) {
	s := newBlockingSealer()
	r := newReporter(s, slog.New(slog.DiscardHandler), &counters{})
	f := tempFile(t, t.TempDir(), 0)
	defer f.Close()
	r.written("0", int(f.Fd()), time.Now())
	<-s.entered
	for i := range maxQueuedEvents {
		r.add(sealEvent{op: opRemoved, rel: fmt.Sprint(i)})
	}
	added := make(chan struct{})
	go func() {
		r.add(sealEvent{op: opRemoved, rel: "one too many"})
		close(added)
	}()
	select {
	case <-added:
		t.Fatal("a full queue took one more event")
	case <-time.After(100 * time.Millisecond):
	}
	close(s.release)
	<-added
	r.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removed != maxQueuedEvents+1 || s.order[len(s.order)-1] != "removed one too many" {
		t.Errorf("%d removals delivered, last %q", s.removed, s.order[len(s.order)-1])
	}
}

// TestReporterOrder: events reach the Sealer in the order they were
// queued, read-backs included.
func TestReporterOrder(t *testing.T) {
	s := newBlockingSealer()
	s.once.Do(func() {}) // never block
	r := newReporter(s, slog.New(slog.DiscardHandler), &counters{})
	f := tempFile(t, t.TempDir(), 0)
	defer f.Close()
	r.written("a/tmp", int(f.Fd()), time.Now())
	r.add(sealEvent{op: opRenamed, rel: "a/tmp", newRel: "a/_metadata"})
	r.add(sealEvent{op: opCommitted, rel: "a/_metadata"})
	r.add(sealEvent{op: opRemoved, rel: "a/x"})
	r.close()
	want := []string{"written a/tmp", "renamed a/tmp a/_metadata", "committed a/_metadata", "removed a/x"}
	if fmt.Sprint(s.order) != fmt.Sprint(want) {
		t.Errorf("order %q, want %q", s.order, want)
	}
	// After close nothing is queued, and nothing leaks.
	g := tempFile(t, t.TempDir(), 1)
	defer g.Close()
	before := openFDs(t)
	r.written("late", int(g.Fd()), time.Now())
	r.sync()
	if after := openFDs(t); after != before {
		t.Errorf("a report after close left a descriptor open")
	}
}

// TestReadBack: a file is checksummed only while it is the version its
// writer closed: growing or shrinking it after the stamp, even by one
// byte, means no checksum.
func TestReadBack(t *testing.T) {
	data := []byte("0123456789abcdef")
	for _, tc := range []struct {
		name   string
		change func(f *os.File) error
		want   error
	}{
		{"unchanged", func(*os.File) error { return nil }, nil},
		{"grown", func(f *os.File) error { _, err := f.WriteAt([]byte("x"), int64(len(data))); return err }, errChanged},
		{"shrunk", func(f *os.File) error { return f.Truncate(int64(len(data)) - 1) }, errChanged},
		{"emptied", func(f *os.File) error { return f.Truncate(0) }, errChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(t.TempDir(), "f"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			stamp, err := fstamp(int(f.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			rfd, err := reopen(int(f.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(rfd)
			if err := tc.change(f); err != nil {
				t.Fatal(err)
			}
			r := &reporter{stats: &counters{}}
			ver, crc, err := r.readBack(rfd, stamp)
			if !errors.Is(err, tc.want) {
				t.Fatalf("readBack: %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				return
			}
			var st unix.Stat_t
			if err := unix.Fstat(rfd, &st); err != nil {
				t.Fatal(err)
			}
			if ver != manifest.VersionOf(&st) || crc != crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) {
				t.Errorf("version %+v crc %08x, want %+v %08x", ver, crc, manifest.VersionOf(&st), crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
			}
		})
	}
}

// TestReporterPriority: the reporter reads back at idle priority, and
// drains what is left at normal priority once closed (someone waits).
func TestReporterPriority(t *testing.T) {
	dir := t.TempDir()
	s := newBlockingSealer()
	r := newReporter(s, slog.New(slog.DiscardHandler), &counters{})
	f := tempFile(t, dir, 0)
	if _, err := r.written("0", int(f.Fd()), time.Now()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-s.entered
	policy := func() uint32 {
		r.mu.Lock()
		th := r.thread
		r.mu.Unlock()
		a, err := unix.SchedGetAttr(th.TID(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return a.Policy
	}
	if p := policy(); p != unix.SCHED_IDLE {
		t.Errorf("reading back with policy %d, want SCHED_IDLE", p)
	}
	closed := make(chan struct{})
	go func() { r.close(); close(closed) }()
	deadline := time.Now().Add(10 * time.Second)
	for policy() != unix.SCHED_NORMAL {
		if time.Now().After(deadline) {
			t.Fatal("closing did not bring the reporter back to normal priority")
		}
		time.Sleep(time.Millisecond)
	}
	close(s.release)
	<-closed
}
