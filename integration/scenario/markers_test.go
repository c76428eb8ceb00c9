package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// markerWatch follows the site markers the mounts publish and checks
// docs/design.md §6.4 on each one as soon as it appears: the checkpoint it
// names is complete, at the marker's level, on that site. A checkpoint
// that Flink has subsumed meanwhile may have lost files: that is no
// violation.
type markerWatch struct {
	w    *world
	stop func()
	done chan struct{}

	mu         sync.Mutex
	lost       map[string]bool
	last       map[string]int64
	changes    int
	violations []string
}

func watchMarkers(ctx context.Context, t *testing.T, c *zktest.Cluster, w *world) *markerWatch {
	t.Helper()
	conn := zktest.Connect(t, c.Servers()).Conn
	verifiers := map[string]*manifest.Verifier{
		"dc1": newVerifier(t, w.dc1.backing, true),
		"dc2": newVerifier(t, w.dc2.backing, true),
	}
	backing := map[string]string{"dc1": w.dc1.backing, "dc2": w.dc2.backing}
	ctx, cancel := context.WithCancel(ctx)
	m := &markerWatch{w: w, stop: cancel, done: make(chan struct{}), lost: map[string]bool{}, last: map[string]int64{"dc1": -1, "dc2": -1}}
	t.Cleanup(func() { cancel(); <-m.done })
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			for _, site := range []string{"dc1", "dc2"} {
				m.mu.Lock()
				skip := m.lost[site]
				m.mu.Unlock()
				if skip {
					continue
				}
				data, _, err := conn.Get(fmt.Sprintf("/ckptfs/%s/sites/%s/jobs/%s", w.clusterID, site, w.job))
				if err != nil {
					continue
				}
				var mk struct {
					CheckpointID int64          `json:"checkpoint_id"`
					Level        manifest.Level `json:"level"`
				}
				if err := json.Unmarshal(data, &mk); err != nil {
					m.violate("%s marker does not parse: %v", site, err)
					continue
				}
				m.mu.Lock()
				fresh := mk.CheckpointID != m.last[site]
				m.last[site] = mk.CheckpointID
				if fresh {
					m.changes++
				}
				m.mu.Unlock()
				if !fresh || mk.CheckpointID < 0 {
					continue
				}
				dir := filepath.Join(backing[site], "checkpoints", w.job, "chk-"+strconv.FormatInt(mk.CheckpointID, 10))
				v := verifiers[site].VerifyDir(ctx, dir)
				switch {
				case ctx.Err() != nil:
				case !v.Complete && !w.subsumed(mk.CheckpointID):
					m.violate("invariant 4: %s's marker names checkpoint %d, which is not complete there: %v", site, mk.CheckpointID, v)
				case v.Complete && v.Level < mk.Level:
					m.violate("invariant 4: %s's marker says checkpoint %d is complete at %v, it is at %v", site, mk.CheckpointID, mk.Level, v.Level)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return m
}

func (m *markerWatch) violate(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, fmt.Sprintf(format, args...))
}

// siteLost stops checking a site's marker: its NAS is gone with it.
func (m *markerWatch) siteLost(site string) {
	m.mu.Lock()
	m.lost[site] = true
	m.mu.Unlock()
}

// waitFor waits until a site's marker names checkpoint id.
func (m *markerWatch) waitFor(t *testing.T, site string, id int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s's marker to name checkpoint %d", site, id), func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.last[site] == id
	})
}

// check stops the watch and reports what it found.
func (m *markerWatch) check(t *testing.T) {
	t.Helper()
	m.stop()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.violations {
		t.Error(v)
	}
	t.Logf("markers: %d changes checked, %d violations", m.changes, len(m.violations))
}
