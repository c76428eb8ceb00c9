package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/ckptfs/ckptfs/manifest"
)

// watchBacking is the fast path of the catalog: local writes into job and
// checkpoint directories poke it. On NFS it sees nothing from other
// machines; polling stays the source of truth.
func watchBacking(ctx context.Context, backing string, catalog *manifest.Catalog, log *slog.Logger) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("no file system notifications; polling only", "err", err)
		return
	}
	defer w.Close()
	watched := map[string]bool{}
	resync := func() {
		want := map[string]bool{backing: true}
		for _, job := range catalog.Jobs() {
			jobDir := filepath.Join(backing, job.Dir)
			want[jobDir] = true
			for _, v := range job.Checkpoints {
				if !v.Complete {
					want[v.Dir] = true
				}
			}
		}
		for p := range watched {
			if !want[p] {
				w.Remove(p)
				delete(watched, p)
			}
		}
		for p := range want {
			if !watched[p] && w.Add(p) == nil {
				watched[p] = true
			}
		}
	}
	resync()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Events:
			catalog.Poke()
		case err := <-w.Errors:
			log.Debug("file system notifications", "err", err)
		case <-tick.C:
			resync()
		}
	}
}
