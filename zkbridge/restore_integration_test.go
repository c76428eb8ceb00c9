package zkbridge

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// TestIntegration_RestorePrunedOnlyOnTheActiveSite: restore-pruned puts
// pointers back only on the site active-site names. On the standby site
// it refuses (ErrNotActiveSite), dry run included, and writes nothing:
// the active site's Flink would read what the standby's replica holds.
// A takeover between its check and a restore's multi (active-site
// changes) fails that multi on its active-site guard; run again once the
// site is active, it restores.
func TestIntegration_RestorePrunedOnlyOnTheActiveSite(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	s, _ := newLagScenario(t, e, flinkemu.Flink1_20, false)
	s.jm.Close()
	b2, b1 := e.bridge("dc2"), e.bridge("dc1")
	ctx := testContext(t, time.Minute)
	if rep, err := b2.Takeover(ctx, TakeoverOptions{}); err != nil || !rep.Activated {
		t.Fatalf("takeover: %+v, %v", rep, err)
	}
	for _, undo := range s.undo {
		undo()
	}
	paths := newCkptfsPaths(e.ckptfs, "default")

	before := e.dump(b1.Conn())
	for _, dry := range []bool{true, false} {
		rr, err := b1.RestorePruned(ctx, RestoreOptions{DryRun: dry})
		var ne *NotActiveError
		if !errors.Is(err, ErrNotActiveSite) || !errors.As(err, &ne) || ne.Active != "dc2" || ne.Site != "dc1" {
			t.Fatalf("restore-pruned (dry run %v) on the standby site: %+v, %v; want ErrNotActiveSite naming dc2", dry, rr, err)
		}
	}
	requireSameTree(t, "restore-pruned on the standby site", before, e.dump(b1.Conn()))

	// A takeover by dc1 lands between the check and the first multi.
	calls := 0
	rr, err := b2.RestorePruned(ctx, RestoreOptions{beforeRestore: func(string, int64) {
		calls++
		if calls == 1 {
			if _, err := b1.Conn().Set(paths.activeSite(), []byte("dc1"), -1); err != nil {
				t.Error(err)
			}
		}
	}})
	if !errors.Is(err, ErrNotActiveSite) || refusedBy(err) != "active-site" {
		t.Fatalf("restore whose site stopped being active before its multi: %+v, %v; want refused by the active-site guard", rr, err)
	}
	for _, id := range []int64{3, 5} {
		if ok, _, _ := b2.Conn().Exists(s.cps[id].Znode); ok {
			t.Errorf("pointer %d restored after active-site changed", id)
		}
		if ok, _, _ := b2.Conn().Exists(paths.pruned(s.job, id)); !ok {
			t.Errorf("backup %d gone", id)
		}
	}

	if _, err := b2.Conn().Set(paths.activeSite(), []byte("dc2"), -1); err != nil {
		t.Fatal(err)
	}
	rr, err = b2.RestorePruned(ctx, RestoreOptions{})
	if err != nil || rr.ActiveSite != "dc2" || !slices.Equal(rr.Jobs[0].Restored, []int64{3, 5}) {
		t.Fatalf("restore-pruned on the active site: %+v, %v", rr, err)
	}
	for _, id := range []int64{3, 5} {
		requireRecord(t, b2, paths, s.job, id, false)
	}
}

// requireRecord checks restore-pruned's record of pointer id of job: it
// was written in the multi that created the pointer (its mzxid is the
// pointer's czxid) and names the pointer, the site and the epoch's last
// write.
func requireRecord(t *testing.T, b *Bridge, paths ckptfsPaths, job string, id int64, unverified bool) *Restored {
	t.Helper()
	data, stat, err := b.Conn().Get(paths.restored(job, id))
	if err != nil {
		t.Fatalf("record of %d: %v", id, err)
	}
	rec, err := decodeRestored(data)
	if err != nil {
		t.Fatalf("record of %d: %v", id, err)
	}
	_, pstat, err := b.Conn().Get(rec.Znode)
	if err != nil {
		t.Fatalf("pointer %s of record %d: %v", rec.Znode, id, err)
	}
	epoch, estat, err := b.Conn().Get(paths.epoch())
	if err != nil {
		t.Fatal(err)
	}
	if stat.Mzxid != pstat.Czxid || rec.JobID != job || rec.CheckpointID != id || rec.Site != b.cfg.Site ||
		rec.EpochZxid != estat.Mzxid || strconv.FormatInt(rec.Epoch, 10) != string(epoch) || rec.Unverified != unverified || rec.RestoredAt.IsZero() {
		t.Errorf("record of %d: %+v at mzxid %#x; pointer created at %#x, epoch %s written at %#x", id, rec, stat.Mzxid, pstat.Czxid, epoch, estat.Mzxid)
	}
	return rec
}
