package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// TestIntegration_PrimaryHoldsWriterNode: a mount primary by
// configuration, with no site ever active, claims its writer node, and
// another site's takeover refuses while it holds it (design §5.13); once
// the daemon stopped (fencing its mount before the node goes), the
// takeover activates, and a daemon of the old site started again stays
// fenced and claims nothing.
func TestIntegration_PrimaryHoldsWriterNode(t *testing.T) {
	mounttest.RequireFUSE(t)
	c := zktest.StartCluster(t, 1)
	top := t.TempDir()
	nas1 := filepath.Join(top, "dc1")
	if err := os.MkdirAll(filepath.Join(nas1, "ha"), 0o755); err != nil {
		t.Fatal(err)
	}
	zcfg := zkbridge.DefaultConfig()
	zcfg.Servers, zcfg.ClusterID, zcfg.Site = c.Servers(), "auto", "dc2"
	zcfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	b, err := zkbridge.New(context.Background(), zcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	writers := func() []string {
		kids, _, err := b.Conn().Children("/ckptfs/auto/writers")
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		return kids
	}

	dc1 := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, nil)
	deadline := time.Now().Add(20 * time.Second)
	for len(writers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("dc1's primary mount claimed no writer node")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w := writers(); len(w) != 1 || !strings.HasPrefix(w[0], "dc1.") {
		t.Fatalf("writer nodes %v, want one of dc1", w)
	}
	rep, err := b.Takeover(context.Background(), zkbridge.TakeoverOptions{Wait: time.Second})
	if !errors.Is(err, zkbridge.ErrWriterAlive) || rep.Activated {
		t.Fatalf("takeover beside dc1's primary: %v, %+v", err, rep)
	}
	if err := os.WriteFile(filepath.Join(dc1.mnt, "ha", "g"), []byte("y"), 0o644); err != nil {
		t.Fatalf("dc1's primary after the refused takeover: %v", err)
	}

	// A stopping daemon fences its mount before its writer node goes.
	_, _, gone, err := b.Conn().ExistsW("/ckptfs/auto/writers/" + writers()[0])
	if err != nil {
		t.Fatal(err)
	}
	afterGone := make(chan error, 1)
	go func() {
		<-gone
		afterGone <- os.WriteFile(filepath.Join(dc1.mnt, "ha", "late"), []byte("x"), 0o644)
	}()
	dc1.end(t)
	select {
	case err := <-afterGone:
		if err == nil {
			t.Error("dc1's mount took a write after its writer node was gone")
		}
	case <-time.After(10 * time.Second):
		t.Error("dc1's writer node did not go when its daemon stopped")
	}
	if _, err := os.Stat(filepath.Join(nas1, "ha", "late")); err == nil {
		t.Error("a write after the writer node was gone reached dc1's NAS")
	}
	if rep, err := b.Takeover(context.Background(), zkbridge.TakeoverOptions{Wait: 10 * time.Second}); err != nil || !rep.Activated {
		t.Fatalf("takeover after dc1's daemon ended: %v, %+v", err, rep)
	}
	again := startSiteDaemon(t, c, "dc1", nas1, fusefs.ModePrimary, nil)
	time.Sleep(time.Second)
	if w := writers(); len(w) != 0 {
		t.Fatalf("writer nodes %v with dc2 active", w)
	}
	if err := os.WriteFile(filepath.Join(again.mnt, "ha", "h"), []byte("z"), 0o644); err == nil {
		t.Fatal("dc1's mount is writable with dc2 active")
	}
}
