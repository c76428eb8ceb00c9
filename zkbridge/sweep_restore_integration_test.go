package zkbridge

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// putBackScenario: DC1's JobManager completes checkpoints 1 to 5 and
// loses its session (it lives on, a returning JobManager); DC2, whose
// replica lacks a state file of 5 and holds 3's HA file torn, takes
// over: it keeps 4 and retracts 5 and 3, with backups. With only, the
// operator then deletes 4 and its backup: what restore-pruned puts back
// will be the job's only pointers.
type putBackScenario struct {
	*lagScenario
	e     *env
	b     *Bridge
	logs  *recorded
	paths ckptfsPaths
}

func newPutBackScenario(t *testing.T, c *zktest.Cluster, layout flinkemu.Layout, only bool) *putBackScenario {
	t.Helper()
	e := newEnv(t, c)
	s, proxies := newLagScenario(t, e, layout, true)
	zktest.ExpireConnSession(t, s.jm.Conn(), proxies)
	logger, logs := newLogRecorder(t)
	b := e.bridge("dc2", func(c *Config) { c.Logger = logger })
	rep, err := b.Takeover(testContext(t, time.Minute), TakeoverOptions{Wait: 30 * time.Second})
	if err != nil || !rep.Activated || !slices.Equal(jobReport(t, rep, s.job).Retracted, []int64{5, 3}) {
		t.Fatalf("takeover: %+v, %v; want 5 and 3 retracted", rep, err)
	}
	ps := &putBackScenario{lagScenario: s, e: e, b: b, logs: logs, paths: newCkptfsPaths(e.ckptfs, "default")}
	if only {
		deleteTree(t, b.Conn(), s.cps[4].Znode)
		if err := b.Conn().Delete(ps.paths.pruned(s.job, 4), -1); err != nil {
			t.Fatal(err)
		}
	}
	return ps
}

// restore runs restore-pruned and wants exactly ids put back.
func (s *putBackScenario) restore(t *testing.T, opts RestoreOptions, ids ...int64) {
	t.Helper()
	rr, err := s.b.RestorePruned(testContext(t, time.Minute), opts)
	if err != nil || len(rr.Jobs) != 1 || !slices.Equal(rr.Jobs[0].Restored, ids) {
		t.Fatalf("restore-pruned %+v: %+v, %v; want %v put back", opts, rr, err, ids)
	}
}

// pass makes a sweep pass and wants exactly want retracted, in any order.
func (s *putBackScenario) pass(t *testing.T, sw *Sweeper, when string, want ...SweptPointer) {
	t.Helper()
	swept, err := sw.Pass(testContext(t, time.Minute))
	less := func(a, b SweptPointer) int { return int(a.ID - b.ID) }
	slices.SortFunc(swept, less)
	slices.SortFunc(want, less)
	if err != nil || !slices.Equal(swept, want) {
		t.Fatalf("%s: swept %+v, %v; want %+v", when, swept, err, want)
	}
}

// exist wants pointers ids present and gone absent.
func (s *putBackScenario) exist(t *testing.T, ids []int64, gone ...int64) {
	t.Helper()
	for _, id := range append(slices.Clone(ids), gone...) {
		want := slices.Contains(ids, id)
		ok, _, err := s.b.Conn().Exists(s.e.root + "/default/" + pointerPath(s.jm.Layout(), s.job, id))
		if err != nil || ok != want {
			t.Errorf("pointer %d exists=%v (%v), want %v", id, ok, err, want)
		}
	}
}

// strayWarnings returns the warnings of retracted strays logged since mark.
func (s *putBackScenario) strayWarnings(mark int) []loggedLine {
	lines, _ := s.logs.since(mark)
	return matching(lines, slog.LevelWarn, "stray pointer")
}

// TestIntegration_SweepLeavesRestoredPointers (issue 31): pointers that
// restore-pruned put back on the active site are the operator's, not
// strays: the sweeper leaves them, counts nothing and logs no
// retraction, beside a complete pointer (3 put back unverified, its HA
// file torn; 5 verified) and as the job's only pointers (3 and 5 put
// back unverified), where every pointer was created since the
// activation and none is complete here.
func TestIntegration_SweepLeavesRestoredPointers(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, only := range []bool{false, true} {
		name := "beside a complete pointer"
		if only {
			name = "the job's only pointers"
		}
		t.Run(name, func(t *testing.T) {
			s := newPutBackScenario(t, c, flinkemu.Flink1_20, only)
			want := []int64{3, 4, 5}
			if only {
				want = []int64{3, 5}
				s.restore(t, RestoreOptions{Unverified: true}, 3, 5)
				requireRecord(t, s.b, s.paths, s.job, 5, true)
			} else {
				s.undo[0]() // checkpoint 5 arrives
				s.restore(t, RestoreOptions{}, 5)
				s.restore(t, RestoreOptions{Unverified: true}, 3)
				requireRecord(t, s.b, s.paths, s.job, 5, false)
			}
			requireRecord(t, s.b, s.paths, s.job, 3, true)
			sw, err := s.b.NewSweeper(0)
			if err != nil {
				t.Fatal(err)
			}
			_, mark := s.logs.since(0)
			before := s.e.flinkTree(s.b.Conn())
			s.pass(t, sw, "a pass after restore-pruned")
			s.pass(t, sw, "the next pass")
			requireSameTree(t, "passes after restore-pruned", before, s.e.flinkTree(s.b.Conn()))
			s.exist(t, want)
			if st := sw.Stats(); st.Retracted != 0 || st.Failures != 0 || st.LeftNoComplete != 0 {
				t.Errorf("stats %+v, want nothing retracted or left", st)
			}
			if w := s.strayWarnings(mark); len(w) > 0 {
				t.Errorf("warned of stray pointers: %v", w)
			}
		})
	}
}

// TestIntegration_SweepAfterRestore: a pointer the returning JobManager
// writes after restore-pruned put pointers of the same job back is
// retracted all the same, with its warning and count: beside a complete
// pointer (above_newest_complete), and beside put-backs that are the
// job's only other pointers, none complete here
// (none_complete_since_activation), even though DC2's marker names a
// complete checkpoint of the job: a put-back stays, so the job does not
// start from empty state. Layouts with and without the locks child.
func TestIntegration_SweepAfterRestore(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	for _, layout := range []flinkemu.Layout{flinkemu.Flink1_13, flinkemu.Flink1_20} {
		for _, only := range []bool{false, true} {
			name := layout.String() + "/beside a complete pointer"
			if only {
				name = layout.String() + "/beside put-backs only"
			}
			t.Run(name, func(t *testing.T) {
				s := newPutBackScenario(t, c, layout, only)
				// The returning JobManager retains 3 checkpoints: its 6
				// subsumes 3, as Flink's does.
				left := []int64{4, 5}
				reason := ReasonAboveNewestComplete
				if only {
					left, reason = []int64{5}, ReasonNoneCompleteSinceActivation
					s.restore(t, RestoreOptions{Unverified: true}, 3, 5)
					m := Marker{JobID: s.job, CheckpointID: 4, Level: 2, Path: "file:/flink/checkpoints/" + s.job + "/chk-4", Site: "dc2"}
					data, _ := json.Marshal(m)
					if err := s.b.zk.ensure(testContext(t, time.Minute), s.paths.markers("dc2")); err != nil {
						t.Fatal(err)
					}
					if _, err := s.b.Conn().Create(s.paths.marker("dc2", s.job), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
						t.Fatal(err)
					}
				} else {
					s.undo[0]() // checkpoint 5 arrives
					s.restore(t, RestoreOptions{}, 5)
					s.restore(t, RestoreOptions{Unverified: true}, 3)
				}
				// DC1's JobManager, back: checkpoint 6 on DC1's NAS only.
				cp6, err := s.jm.CompleteCheckpoint(s.job, flinkemu.CheckpointSpec{})
				if err != nil || cp6.ID != 6 {
					t.Fatalf("checkpoint 6: %+v, %v", cp6, err)
				}
				hideFile(t, cp6.HAFile)
				sw, err := s.b.NewSweeper(0)
				if err != nil {
					t.Fatal(err)
				}
				_, mark := s.logs.since(0)
				s.pass(t, sw, "a pass after the stray", SweptPointer{JobID: s.job, ID: 6, Reason: reason})
				s.exist(t, left, 3, 6)
				if _, _, err := s.b.Conn().Get(s.paths.pruned(s.job, 6)); err != nil {
					t.Errorf("backup of 6: %v", err)
				}
				if st := sw.Stats(); st.Retracted != 1 || st.LeftNoComplete != 0 {
					t.Errorf("stats %+v, want 6 retracted, nothing left", st)
				}
				if w := s.strayWarnings(mark); len(w) != 1 || w[0].Attrs["checkpoint"] != "6" {
					t.Errorf("warnings %v, want one, of checkpoint 6", w)
				}
				s.pass(t, sw, "the next pass")
			})
		}
	}
}

// TestIntegration_SweepRestoreRaces: the races of design §5.5.2.
//
//   - A pointer created again where a put-back was (Flink deleted the
//     put-back, then the returning JobManager's Curator retried its
//     create, same path, same bytes): the record left behind matches
//     nothing (another czxid), so the pointer is retracted; put back
//     again, its record is rewritten in that multi and the sweeper
//     leaves it.
//   - restore-pruned while a sweep holds the takeover lock between its
//     judgement and its retraction, at the same path: the put-back waits
//     for the lock, the sweep retracts nothing it did not judge, and the
//     put-back, once made, is left.
//   - An activation after the put-back (the site adopts a deleted lease,
//     judging nothing): the record's epoch is gone, and the sweeper
//     judges the put-backs like any pointer; the next restore-pruned
//     drops the records of the pointers it retracted.
func TestIntegration_SweepRestoreRaces(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	t.Run("a pointer created again where a put-back was", func(t *testing.T) {
		s := newPutBackScenario(t, c, flinkemu.Flink1_20, false)
		s.restore(t, RestoreOptions{Unverified: true}, 3, 5)
		old := requireRecord(t, s.b, s.paths, s.job, 3, true)
		sw, err := s.b.NewSweeper(0)
		if err != nil {
			t.Fatal(err)
		}
		s.pass(t, sw, "after the put-back")
		deleteTree(t, s.b.Conn(), s.cps[3].Znode)
		writer := zktest.Connect(t, c.Servers())
		if _, err := writer.Multi(
			&zk.CreateRequest{Path: s.cps[3].Znode, Data: s.cps[3].Data, Acl: zk.WorldACL(zk.PermAll)},
			&zk.CreateRequest{Path: s.cps[3].Znode + "/locks", Acl: zk.WorldACL(zk.PermAll)},
		); err != nil {
			t.Fatal(err)
		}
		_, mark := s.logs.since(0)
		s.pass(t, sw, "a pass after 3 was created again", SweptPointer{JobID: s.job, ID: 3, Reason: ReasonHAFileUnreadable})
		if w := s.strayWarnings(mark); len(w) != 1 {
			t.Errorf("warnings %v, want one", w)
		}
		s.exist(t, []int64{4, 5}, 3)
		s.restore(t, RestoreOptions{Unverified: true}, 3)
		if rec := requireRecord(t, s.b, s.paths, s.job, 3, true); !rec.RestoredAt.After(old.RestoredAt) {
			t.Errorf("record of 3 not rewritten: %+v", rec)
		}
		s.pass(t, sw, "after 3 was put back again")
		s.exist(t, []int64{3, 4, 5})
	})

	t.Run("restore-pruned while a sweep holds the lock", func(t *testing.T) {
		s := newPutBackScenario(t, c, flinkemu.Flink1_20, false)
		// Curator's retry: 5 again, same bytes; its state file is not here.
		writer := zktest.Connect(t, c.Servers())
		if _, err := writer.Multi(
			&zk.CreateRequest{Path: s.cps[5].Znode, Data: s.cps[5].Data, Acl: zk.WorldACL(zk.PermAll)},
			&zk.CreateRequest{Path: s.cps[5].Znode + "/locks", Acl: zk.WorldACL(zk.PermAll)},
		); err != nil {
			t.Fatal(err)
		}
		sw, err := s.b.NewSweeper(0)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			rr  *RestoreReport
			err error
		}
		done := make(chan result, 1)
		var ended atomic.Bool
		sw.beforeRetract = func(due []SweptPointer) {
			if !slices.Equal(due, []SweptPointer{{JobID: s.job, ID: 5, Reason: ReasonAboveNewestComplete}}) {
				t.Errorf("judged under the lock: %+v, want 5", due)
			}
			// Flink deletes 5; restore-pruned starts and waits for the lock.
			deleteTree(t, s.b.Conn(), s.cps[5].Znode)
			go func() {
				rr, err := s.b.RestorePruned(testContext(t, time.Minute), RestoreOptions{Unverified: true})
				ended.Store(true)
				done <- result{rr, err}
			}()
			waitFor(t, 10*time.Second, "restore-pruned to queue for the lock", func() (bool, error) {
				kids, _, err := s.b.Conn().Children(s.paths.takeover())
				return len(kids) == 2 || ended.Load(), err
			})
			time.Sleep(200 * time.Millisecond)
			if ended.Load() {
				t.Errorf("restore-pruned ended while the sweep held the lock")
			}
		}
		s.pass(t, sw, "the pass whose stray went meanwhile")
		sw.beforeRetract = nil
		r := <-done
		if r.err != nil || !slices.Equal(r.rr.Jobs[0].Restored, []int64{3, 5}) {
			t.Fatalf("restore-pruned: %+v, %v; want 3 and 5 put back", r.rr, r.err)
		}
		for _, id := range []int64{3, 5} {
			requireRecord(t, s.b, s.paths, s.job, id, true)
		}
		s.pass(t, sw, "after the put-back")
		s.exist(t, []int64{3, 4, 5})
		if st := sw.Stats(); st.Retracted != 0 {
			t.Errorf("stats %+v, want nothing retracted", st)
		}
	})

	t.Run("an activation after the put-back", func(t *testing.T) {
		s := newPutBackScenario(t, c, flinkemu.Flink1_20, false)
		s.restore(t, RestoreOptions{Unverified: true}, 3, 5)
		sw, err := s.b.NewSweeper(0)
		if err != nil {
			t.Fatal(err)
		}
		s.pass(t, sw, "within the activation of the put-back")
		if err := s.b.Conn().Delete(s.paths.lease(), -1); err != nil {
			t.Fatal(err)
		}
		ep, err := s.b.ActivateSelf(testContext(t, time.Minute), Adopt, 30*time.Second)
		if err != nil {
			t.Fatalf("adopt: %v", err)
		}
		if rec := requireRecordOnly(t, s.b, s.paths, s.job, 3); rec.Epoch+1 != ep {
			t.Fatalf("record of epoch %d, adopted at %d", rec.Epoch, ep)
		}
		s.pass(t, sw, "after the adopt",
			SweptPointer{JobID: s.job, ID: 3, Reason: ReasonHAFileUnreadable},
			SweptPointer{JobID: s.job, ID: 5, Reason: ReasonAboveNewestComplete})
		s.exist(t, []int64{4}, 3, 5)
		// Their records match nothing now: restore-pruned drops them
		// (and puts nothing back, neither is complete here).
		s.restore(t, RestoreOptions{})
		for _, id := range []int64{3, 5} {
			if ok, _, err := s.b.Conn().Exists(s.paths.restored(s.job, id)); err != nil || ok {
				t.Errorf("record of %d exists=%v (%v), want it dropped", id, ok, err)
			}
		}
	})
}

// requireRecordOnly reads the record of a put-back, whatever the epoch
// is now.
func requireRecordOnly(t *testing.T, b *Bridge, paths ckptfsPaths, job string, id int64) *Restored {
	t.Helper()
	data, _, err := b.Conn().Get(paths.restored(job, id))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeRestored(data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
