package zkbridge

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
)

// A site's writer node holds off every other site's activation until it
// is deleted, and a site that is not active cannot create one.
func TestIntegration_WriterNodeHoldsOffTakeover(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	e := newEnv(t, c)
	ctx := testContext(t, time.Minute)
	jm, _ := e.startJM(flinkemu.Flink1_20, false)
	jm.Close()
	dc1, dc2 := e.bridge("dc1"), e.bridge("dc2")
	w, err := dc1.NewWriterClaim()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Claim(ctx); err != nil {
		t.Fatalf("claim with no site active: %v", err)
	}
	if !w.Held() {
		t.Fatal("claim made, but not held")
	}
	if err := w.Claim(ctx); err != nil {
		t.Fatalf("claiming again in the same session: %v", err)
	}

	rep, err := dc2.Takeover(ctx, TakeoverOptions{Wait: 300 * time.Millisecond})
	if !errors.Is(err, ErrWriterAlive) {
		t.Fatalf("takeover beside dc1's writer node: %v, want ErrWriterAlive", err)
	}
	if rep == nil || len(rep.Writers) != 1 || rep.Writers[0].Site != "dc1" || rep.Activated {
		t.Fatalf("report: %+v", rep)
	}
	if active, _, err := dc2.ActiveSite(ctx); err != nil || active != "" {
		t.Fatalf("active-site after the refusal: %q, %v", active, err)
	}

	// A takeover waiting for the node activates once it is deleted.
	var wg sync.WaitGroup
	wg.Add(1)
	var trep *TakeoverReport
	var terr error
	go func() {
		defer wg.Done()
		trep, terr = dc2.Takeover(ctx, TakeoverOptions{Wait: 30 * time.Second})
	}()
	waitFor(t, 20*time.Second, "dc2's takeover waits for dc1's writer node", func() (bool, error) {
		kids, _, err := dc1.Conn().Children(e.ckptfs + "/default/takeover")
		return len(kids) > 0, err
	})
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if terr != nil || !trep.Activated {
		t.Fatalf("takeover after the release: %v, %+v", terr, trep)
	}
	if err := w.Claim(ctx); !errors.Is(err, ErrNotActive) {
		t.Fatalf("dc1's claim with dc2 active: %v, want ErrNotActive", err)
	}
	if w.Held() {
		t.Fatal("a refused claim is held")
	}
	kids, _, err := dc1.Conn().Children(e.ckptfs + "/default/writers")
	if err != nil || len(kids) != 0 {
		t.Fatalf("writer nodes: %v, %v", kids, err)
	}
}

// A claim and an activation that race are ordered by ZooKeeper: the one
// that comes second is refused, both ways.
func TestIntegration_WriterClaimRacesActivation(t *testing.T) {
	c := zktest.StartCluster(t, 1)
	ctx := testContext(t, time.Minute)

	t.Run("claim between the activation's read and its multi", func(t *testing.T) {
		e := newEnv(t, c)
		jm, _ := e.startJM(flinkemu.Flink1_20, false)
		jm.Close()
		dc1, dc2 := e.bridge("dc1"), e.bridge("dc2")
		w, _ := dc1.NewWriterClaim()
		var once sync.Once
		_, err := dc2.Takeover(ctx, TakeoverOptions{beforeActivation: func() {
			once.Do(func() {
				if err := w.Claim(ctx); err != nil {
					t.Errorf("dc1's claim: %v", err)
				}
			})
		}})
		if !errors.Is(err, ErrWriterAlive) {
			t.Fatalf("activation after dc1 claimed: %v, want ErrWriterAlive", err)
		}
		if active, _, err := dc2.ActiveSite(ctx); err != nil || active != "" {
			t.Fatalf("active-site: %q, %v", active, err)
		}
		if !w.Held() {
			t.Fatal("dc1's claim is not held")
		}
	})

	t.Run("activation between the claim's reads and its multi", func(t *testing.T) {
		e := newEnv(t, c)
		jm, _ := e.startJM(flinkemu.Flink1_20, false)
		jm.Close()
		dc1, dc2 := e.bridge("dc1"), e.bridge("dc2")
		w, _ := dc1.NewWriterClaim()
		w.beforeMulti = func() {
			if rep, err := dc2.Takeover(ctx, TakeoverOptions{}); err != nil || !rep.Activated {
				t.Errorf("dc2's takeover: %v, %+v", err, rep)
			}
		}
		if err := w.Claim(ctx); !errors.Is(err, ErrNotActive) {
			t.Fatalf("claim after dc2 activated: %v, want ErrNotActive", err)
		}
		if w.Held() {
			t.Fatal("a refused claim is held")
		}
		kids, _, err := dc1.Conn().Children(e.ckptfs + "/default/writers")
		if err != nil || len(kids) != 0 {
			t.Fatalf("writer nodes: %v, %v", kids, err)
		}
	})
}

func TestWriterName(t *testing.T) {
	for _, site := range []string{"dc1", "dc-2", "a.b", "x"} {
		n := writerName(site, 0x1234abcd)
		if got := writerSite(n); got != site {
			t.Errorf("writerSite(%q) = %q, want %q", n, got, site)
		}
	}
	for _, n := range []string{"", "dc1", "dc1-0000000001", ".0000000000000001x"} {
		if got := writerSite(n); got != "" {
			t.Errorf("writerSite(%q) = %q, want none", n, got)
		}
	}
}
