package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
)

// backingPin holds the identity (device and inode) of the backing
// directory the mount serves by path. A primary's writes must reach the
// NAS: when the NAS is unmounted and a directory of another file system
// appears at its path, the mount would write there. So a primary is
// pinned to the directory it was mounted or promoted on, and once that
// changes it is fenced for good and health fails. A replica writes
// nothing and shows only what it verifies, whatever the path holds now:
// it follows a replacement (a remount of the NAS, or a snapshot
// replication that swaps the whole directory) and logs it.
type backingPin struct {
	path string

	mu sync.Mutex
	// id: GUARDED_BY(mu). What the pin holds.
	id dirID
	// lost: GUARDED_BY(mu). Why a primary's backing is no longer the
	// pinned one; empty while it is. Never cleared.
	lost string
	// pending: GUARDED_BY(mu). No stat has answered yet (a NAS hung
	// since the start); the first that does sets id.
	pending bool
	// timeout bounds repin's stat (the mode follower must not hang).
	timeout time.Duration
}

type dirID struct{ dev, ino uint64 }

func (d dirID) String() string { return fmt.Sprintf("device %d inode %d", d.dev, d.ino) }

func statDir(path string) (dirID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return dirID{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dirID{}, fmt.Errorf("%s: %w", path, errNotDir)
	}
	return dirID{dev: st.Dev, ino: st.Ino}, nil
}

// gone reports a stat error that means nothing is at the path any more.
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, errNotDir)
}

var errNotDir = errors.New("not a directory")

// statDirWithin is statDir, given up after d (timedOut): the stat is
// left behind on a NAS that hangs.
func statDirWithin(path string, d time.Duration) (id dirID, timedOut bool, err error) {
	type result struct {
		id  dirID
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := statDir(path)
		done <- result{id, err}
	}()
	select {
	case r := <-done:
		return r.id, false, r.err
	case <-time.After(d):
		return dirID{}, true, nil
	}
}

// pinBacking pins path, waiting at most timeout: a NAS that hangs at
// start leaves the pin pending, and the first check that gets an answer
// pins what the path holds then (issue 18: the daemon starts anyway).
func pinBacking(path string, timeout time.Duration, log *slog.Logger) (*backingPin, error) {
	id, timedOut, err := statDirWithin(path, timeout)
	if timedOut {
		log.Warn("the backing directory does not answer its stat: starting with its pin pending", "backing", path, "waited", timeout.String())
		return &backingPin{path: path, pending: true, timeout: timeout}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backing: %w", err)
	}
	return &backingPin{path: path, id: id, timeout: timeout}, nil
}

// replaced reports whether a primary's backing was replaced.
func (p *backingPin) replaced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost != ""
}

// problem is the health check: nil while the backing is the pinned one.
func (p *backingPin) problem() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lost == "" {
		return nil
	}
	return fmt.Errorf("the backing directory was replaced (%s); the mount is fenced: restart it once the NAS is back", p.lost)
}

// repin pins what the path holds now: a replica becoming primary. On a
// NAS that does not answer within the pin's timeout the pin is left
// pending, and the next check that gets an answer pins.
func (p *backingPin) repin() {
	id, timedOut, err := statDirWithin(p.path, p.timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.lost != "":
	case timedOut:
		p.pending = true
	case err == nil:
		p.id, p.pending = id, false
	}
}

// check compares the path with the pin once; mode is the mount's.
func (p *backingPin) check(mode fusefs.Mode, log *slog.Logger) {
	id, err := statDir(p.path)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending && err == nil {
		log.Info("the backing directory answers: pinned", "backing", p.path, "detected", id.String())
		p.id, p.pending = id, false
		return
	}
	if p.pending || p.lost != "" || (err == nil && id == p.id) || (err != nil && !gone(err)) {
		// A NAS that fails (EIO, a timeout) is not a replaced one: the
		// catalog's health reports it.
		return
	}
	now := "gone: " + fmt.Sprint(err)
	if err == nil {
		now = "now " + id.String()
	}
	what := fmt.Sprintf("%s was %s, %s", p.path, p.id, now)
	if mode == fusefs.ModeReplica {
		if err == nil {
			log.Warn("the backing directory was replaced; a replica follows it", "configured", p.id.String(), "detected", id.String())
			p.id = id
		}
		return
	}
	log.Error("the backing directory was replaced: fencing", "reason", what)
	p.lost = what
}

// run checks every interval until ctx ends. A hung NAS blocks the check,
// not the mode follower.
func (p *backingPin) run(ctx context.Context, interval time.Duration, srv *fusefs.Server, log *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			p.check(srv.Mode(), log)
		}
	}
}
