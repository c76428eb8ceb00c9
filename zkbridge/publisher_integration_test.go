package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// fakeSource is a MarkerSource whose truth tests change: per job, the
// level of each checkpoint on this site.
type fakeSource struct {
	mu sync.RWMutex
	// levels: GUARDED_BY(mu). Job -> checkpoint -> level here.
	levels map[string]map[int64]manifest.Level
	// propose: GUARDED_BY(mu). When set, Markers returns this instead of
	// the truth: a stale or wrong view the invariant check must catch.
	propose map[string]Marker
}

func newFakeSource() *fakeSource {
	return &fakeSource{levels: map[string]map[int64]manifest.Level{}}
}

func (f *fakeSource) set(job string, id int64, l manifest.Level) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.levels[job] == nil {
		f.levels[job] = map[int64]manifest.Level{}
	}
	f.levels[job][id] = l
}

// truthLocked is the newest complete checkpoint of every job.
func (f *fakeSource) truthLocked() map[string]Marker {
	out := map[string]Marker{}
	for job, ids := range f.levels {
		m := NoMarker(job)
		for id, l := range ids {
			if l > manifest.LevelNone && id > m.CheckpointID {
				m = Marker{JobID: job, CheckpointID: id, Level: l, Path: "file:/flink/checkpoints/" + job + "/chk-" + strconv.FormatInt(id, 10), Files: 3, Bytes: 300}
			}
		}
		out[job] = m
	}
	return out
}

func (f *fakeSource) Markers(context.Context) ([]Marker, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	view := f.truthLocked()
	if f.propose != nil {
		view = f.propose
	}
	var out []Marker
	for _, m := range view {
		out = append(out, m)
	}
	return out, nil
}

func (f *fakeSource) Level(_ context.Context, job string, id int64) (manifest.Level, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.levels[job][id], nil
}

// readMarker reads a marker znode; ok false when absent.
func readMarker(t testing.TB, conn *zk.Conn, path string) (Marker, bool) {
	t.Helper()
	data, _, err := conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return Marker{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeMarker(data)
	if err != nil {
		t.Fatalf("marker %s: %v", path, err)
	}
	return m, true
}

// runPublisher runs p until the test ends.
func runPublisher(t testing.TB, p *Publisher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Publisher.Run: %v", err)
		}
	})
}

func TestIntegration_PublisherResyncAfterExpiry(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	proxies, addrs := e.proxies()
	b := e.bridge("dc2", func(cfg *Config) {
		cfg.Servers = addrs
		cfg.ClusterID = "default" // no Flink namespace needed
		cfg.MarkerInterval = time.Hour
		cfg.MarkerJitter = 0
		cfg.MarkerRetryInterval = 200 * time.Millisecond
	})
	src := newFakeSource()
	job := "0123456789abcdef0123456789abcdef"
	src.set(job, 4, manifest.L2)
	pub, err := b.NewPublisher(src)
	if err != nil {
		t.Fatal(err)
	}
	runPublisher(t, pub)
	observer := zktest.Connect(t, e.servers)
	path := e.ckptfs + "/default/sites/dc2/jobs/" + job
	waitFor(t, 10*time.Second, "the first marker", func() (bool, error) {
		m, ok := readMarker(t, observer.Conn, path)
		return ok && m.CheckpointID == 4 && m.Level == manifest.L2 && m.Site == "dc2", nil
	})

	// While the publisher is cut off: the truth moves on without a
	// trigger, and someone deletes the marker.
	src.set(job, 5, manifest.L2)
	if err := observer.Delete(path, -1); err != nil {
		t.Fatal(err)
	}
	full := pub.Stats().FullPasses
	if s := b.Session(); s.State != SessionConnected || s.ID == 0 || s.Expirations != 0 {
		t.Errorf("session before the expiry: %+v", s)
	}
	zktest.ExpireConnSession(t, b.Conn(), proxies)
	waitFor(t, 15*time.Second, "a new session", func() (bool, error) {
		s := b.Session()
		return s.State == SessionConnected && s.Expirations == 1, nil
	})
	// The new session makes a full resync: the marker is back, with the
	// new truth, long before the hourly full pass.
	waitFor(t, 15*time.Second, "the marker after the session expired", func() (bool, error) {
		m, ok := readMarker(t, observer.Conn, path)
		return ok && m.CheckpointID == 5, nil
	})
	if got := pub.Stats().FullPasses; got <= full {
		t.Errorf("full passes %d -> %d: want a resync", full, got)
	}

	// A trigger makes a fast pass; a lowered verdict lowers the marker.
	src.set(job, 5, manifest.LevelNone)
	pub.Trigger()
	waitFor(t, 5*time.Second, "the lowered marker", func() (bool, error) {
		m, ok := readMarker(t, observer.Conn, path)
		return ok && m.CheckpointID == 4, nil
	})
	// A job that disappears from the source is lowered to none on the
	// next full pass.
	src.mu.Lock()
	delete(src.levels, job)
	src.mu.Unlock()
	if err := pub.Sync(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if m, ok := readMarker(t, observer.Conn, path); !ok || m.CheckpointID != -1 || m.Level != manifest.LevelNone {
		t.Errorf("marker of a vanished job: %+v %v", m, ok)
	}
}

// TestIntegration_TwoPublishers runs two publishers of one site while the
// source flips verdicts and sometimes proposes markers ahead of the
// truth: no write ever names a checkpoint the source does not report
// complete at that level, and both converge.
func TestIntegration_TwoPublishers(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	src := newFakeSource()
	job := "fedcba9876543210fedcba9876543210"
	src.set(job, 3, manifest.L2)
	src.set(job, 4, manifest.L2)
	// flips happen under the write side; writes of both publishers hold
	// the read side from their check to their write.
	var flip sync.RWMutex
	var badWrites []string
	var writes int
	var wmu sync.Mutex
	var pubs []*Publisher
	for range 2 {
		b := e.bridge("dc2", func(cfg *Config) {
			cfg.ClusterID = "default"
			cfg.MarkerInterval = 300 * time.Millisecond
			cfg.MarkerJitter = 100 * time.Millisecond
			cfg.MarkerRetryInterval = 50 * time.Millisecond
		})
		p, err := b.NewPublisher(src)
		if err != nil {
			t.Fatal(err)
		}
		p.testGuard = flip.RLocker()
		p.testWrote = func(m Marker) {
			have, _ := src.Level(context.Background(), m.JobID, m.CheckpointID)
			wmu.Lock()
			defer wmu.Unlock()
			writes++
			if m.CheckpointID >= 0 && have < m.Level {
				j, _ := json.Marshal(m)
				badWrites = append(badWrites, string(j)+" while the source says "+have.String())
			}
		}
		pubs = append(pubs, p)
		runPublisher(t, p)
	}

	// Watch every value the marker takes.
	observer := zktest.Connect(t, e.servers)
	path := e.ckptfs + "/default/sites/dc2/jobs/" + job
	seen := map[int64]bool{}
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			ok, _, ch, err := observer.ExistsW(path)
			if err == nil && ok {
				if data, _, err := observer.Get(path); err == nil {
					if m, err := decodeMarker(data); err == nil {
						seen[m.CheckpointID] = true
					}
				}
			}
			select {
			case <-ch:
			case <-stopWatch:
				return
			}
		}
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	levels := []manifest.Level{manifest.LevelNone, manifest.L1, manifest.L2}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		flip.Lock()
		src.set(job, 5, levels[rng.IntN(3)])
		src.set(job, 6, levels[rng.IntN(3)])
		src.mu.Lock()
		switch rng.IntN(3) {
		case 0: // a view ahead of the truth
			src.propose = map[string]Marker{job: {JobID: job, CheckpointID: 7, Level: manifest.L2}}
		case 1: // a stale view
			stale := src.truthLocked()
			stale[job] = Marker{JobID: job, CheckpointID: 6, Level: manifest.L2}
			src.propose = stale
		default:
			src.propose = nil
		}
		src.mu.Unlock()
		flip.Unlock()
		for _, p := range pubs {
			p.Trigger()
		}
		time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond) // let passes interleave with flips
	}
	// Settle: 6 complete at L1 only, 5 not at all.
	flip.Lock()
	src.set(job, 5, manifest.LevelNone)
	src.set(job, 6, manifest.L1)
	src.mu.Lock()
	src.propose = nil
	src.mu.Unlock()
	flip.Unlock()
	for _, p := range pubs {
		p.Trigger()
	}
	waitFor(t, 10*time.Second, "both publishers to converge", func() (bool, error) {
		m, ok := readMarker(t, observer.Conn, path)
		return ok && m.CheckpointID == 6 && m.Level == manifest.L1, nil
	})
	close(stopWatch)
	observer.Close()
	<-watchDone

	wmu.Lock()
	defer wmu.Unlock()
	if len(badWrites) > 0 {
		t.Errorf("%d of %d writes named a checkpoint not complete at their level:\n%v", len(badWrites), writes, badWrites)
	}
	if seen[7] {
		t.Error("a marker named checkpoint 7, which was never complete")
	}
	if writes < 5 {
		t.Errorf("only %d writes: the flips did not exercise the publishers", writes)
	}
	refused := pubs[0].Stats().Refused + pubs[1].Stats().Refused
	if refused == 0 {
		t.Error("no marker was refused: the views ahead of the truth were never caught")
	}
	t.Logf("%d writes, %d refused, conflicts %d+%d, values seen %v", writes, refused, pubs[0].Stats().Conflicts, pubs[1].Stats().Conflicts, seen)
}

// blockingSource is a MarkerSource whose Markers waits for release (a
// source that reads a hung NAS, or a pass held up by ZooKeeper).
type blockingSource struct {
	entered chan struct{}
	release chan struct{}
}

func (s blockingSource) Markers(ctx context.Context) ([]Marker, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, nil
}

func (blockingSource) Level(context.Context, string, int64) (manifest.Level, error) {
	return manifest.LevelNone, nil
}

// A pass that waits for another pass of the same Publisher (passes are
// serialized; each does ZooKeeper I/O) gives up when its own context
// ends.
func TestIntegration_PublisherPassWaitsWithinItsContext(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	b := e.bridge("dc2", func(cfg *Config) { cfg.ClusterID = "default" })
	src := blockingSource{entered: make(chan struct{}, 1), release: make(chan struct{})}
	pub, err := b.NewPublisher(src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, time.Minute)
	first := make(chan error, 1)
	go func() { first <- pub.Sync(ctx) }()
	select {
	case <-src.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first pass did not reach its source")
	}
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	start := time.Now()
	err = pub.Sync(sctx)
	d := time.Since(start)
	cancel()
	close(src.release)
	if !errors.Is(err, context.DeadlineExceeded) || d > 3*time.Second {
		t.Errorf("a pass behind a held-up one: %v after %v, want its context's end after 500ms", err, d.Round(time.Millisecond))
	}
	if err := <-first; err != nil {
		t.Errorf("the first pass: %v", err)
	}
}
