package fusefs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Fencing a mount whose writers bypass the daemon.
//
// A write-only open on a primary gets FUSE passthrough: the kernel writes
// the backing file itself, so the mode gate never sees those writes. The
// kernel cannot take a backing file back from an open file (closing the
// backing id only stops later opens from using it). It can mark an inode
// bad, though: when the daemon answers a GETATTR with attributes it
// cannot accept (here an impossible size), it fails every later read,
// write, fsync, truncate, fallocate and flush on that inode with EIO, and
// lets a lookup of the name find a fresh inode once the last descriptor
// is closed. Fencing uses that on every inode with a passthrough writer,
// then waits for those writers to be released: the RELEASE of the last
// descriptor also means no write through it is still in progress.
//
// What the bad inode does not stop, on the kernels we know (6.18
// included), is splice(2) or sendfile(2) into a descriptor that is still
// open: the kernel hands those to the backing file without looking at
// the inode. Such a descriptor keeps SetMode waiting (so a nil return
// still means that nothing can write). If it is still open when SetMode
// gives up, the mount records what the file is then, compares when the
// descriptor is finally closed, and counts and logs a change
// (Stats.WritesAfterFence). Writes before SetMode returns, a write in
// flight when the kernel cut the writers off among them, land before
// the fence is complete and are not counted.

// ErrFenceIncomplete: SetMode gave up waiting for writers opened before
// fencing to close. Until they do, splice(2) and sendfile(2) through them
// can still change the files named in the error.
var ErrFenceIncomplete = errors.New("writers opened before fencing are still open")

// revokedSize is a size the kernel refuses in attributes (above
// 2^63-1), so answering it marks the inode bad.
const revokedSize = 1 << 63

// revokeTimeout bounds the attempts to get one inode marked bad: right
// after a CREATE the kernel may not know the inode yet.
const revokeTimeout = 2 * time.Second

func (fsys *fileSystem) addPassthroughWriter(h *handle) {
	fsys.pwMu.Lock()
	defer fsys.pwMu.Unlock()
	if fsys.pwriters == nil {
		fsys.pwriters = make(map[*handle]struct{})
	}
	fsys.pwriters[h] = struct{}{}
}

func (fsys *fileSystem) dropPassthroughWriter(h *handle) {
	fsys.pwMu.Lock()
	defer fsys.pwMu.Unlock()
	delete(fsys.pwriters, h)
}

// passthroughWriters groups the open passthrough write handles by inode.
func (fsys *fileSystem) passthroughWriters() map[*node][]*handle {
	fsys.pwMu.Lock()
	defer fsys.pwMu.Unlock()
	out := make(map[*node][]*handle)
	for h := range fsys.pwriters {
		out[h.node] = append(out[h.node], h)
	}
	return out
}

// revokeWriters cuts off every passthrough writer open now and waits, at
// most fenceTimeout, until the kernel released them all. The mode must
// already refuse writes, so no new passthrough writer appears. The
// files are revoked at once, each on its own goroutine: on a hung NAS
// one file's wait does not hold up the others, and SetMode returns
// within fenceTimeout however many hang.
func (s *Server) revokeWriters() error {
	fsys := s.fsys
	writers := fsys.passthroughWriters()
	if len(writers) == 0 {
		return nil
	}
	deadline := time.NewTimer(fsys.fenceTimeout)
	defer deadline.Stop()
	results := make(chan error, len(writers))
	for n, hs := range writers {
		go func() { results <- s.revoke(n, hs) }()
	}
	var errs []error
	expired := false
	for range writers {
		select {
		case err := <-results:
			if err != nil {
				errs = append(errs, err)
			}
			continue
		case <-deadline.C:
			expired = true
		}
		break
	}
	var open []string
	var still []*handle
	for n, hs := range writers {
		for _, h := range hs {
			if !expired {
				select {
				case <-h.released:
					continue
				case <-deadline.C:
					expired = true
				}
			}
			select {
			case <-h.released:
			default:
				rel, _ := n.rel()
				open = append(open, rel)
				still = append(still, h)
			}
		}
	}
	// The fence ends here: what changes these files from now on came
	// through splice(2) or sendfile(2) (checkAfterFence). A write in
	// flight when the kernel cut the writers off lands before, and is
	// not one.
	stamp(fsys, still)
	if len(open) > 0 {
		fsys.log.Error("fenced, but files opened for writing before stay open", "files", open, "waited", fsys.fenceTimeout)
		errs = append(errs, fmt.Errorf("%w after %v: %s", ErrFenceIncomplete, fsys.fenceTimeout, strings.Join(open, ", ")))
	}
	return errors.Join(errs...)
}

// stampTimeout bounds how long fencing waits for the stamps of the files
// still open when it gives up (markRevoked).
const stampTimeout = 200 * time.Millisecond

// revoke gets the kernel to mark n's inode bad, which cuts off hs, its
// passthrough writers. It asks for the inode's attributes through the
// mount after dropping the cached ones; Getattr answers that one request
// with revokedSize, without asking the NAS.
func (s *Server) revoke(n *node, hs []*handle) error {
	fsys := s.fsys
	for _, h := range hs {
		// Whatever it leaves was not closed cleanly (handle.report).
		h.mu.Lock()
		h.cut = true
		h.mu.Unlock()
	}
	live := 0
	for _, h := range hs {
		select {
		case <-h.released:
		default:
			live++
		}
	}
	if live == 0 {
		return nil
	}
	deadline := time.Now().Add(revokeTimeout)
	for {
		rel, ok := n.rel()
		if !ok {
			return fmt.Errorf("revoking writers of an unlinked file: no name to reach it by")
		}
		n.revoking.Store(true)
		n.EmbeddedInode().NotifyContent(-1, 0) // drops the cached attributes
		var st unix.Stat_t
		asked := time.Now()
		err := unix.Lstat(filepath.Join(s.mountPoint, rel), &st)
		if time.Since(asked) > revokeTimeout/4 {
			// The stat waited on the NAS (looking the path up): the
			// kernel had no chance to ask yet, so the time counts from now.
			deadline = time.Now().Add(revokeTimeout)
		}
		if !n.revoking.Load() {
			fsys.stats.revokedWriters.Add(uint64(live))
			fsys.log.Info("revoked writers opened before fencing", "file", rel, "writers", live)
			return nil
		}
		if allReleased(hs) {
			n.revoking.Store(false)
			return nil
		}
		if time.Now().After(deadline) {
			n.revoking.Store(false)
			return fmt.Errorf("revoking writers of %s: the kernel did not ask for its attributes (stat: %v)", rel, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// stamp records what each handle's file is now (markRevoked), waiting
// at most stampTimeout for them all: on a hung NAS fencing returns
// without the stamps, and a later change of those files goes unseen.
func stamp(fsys *fileSystem, hs []*handle) {
	if len(hs) == 0 {
		return
	}
	stamped := make(chan struct{})
	go func() {
		for _, h := range hs {
			h.markRevoked()
		}
		close(stamped)
	}()
	select {
	case <-stamped:
	case <-time.After(stampTimeout):
		var files []string
		for _, h := range hs {
			rel, _ := h.node.rel()
			files = append(files, rel)
		}
		fsys.log.Warn("fenced without stamping the files still open: the backing file system does not answer their stat", "files", files)
	}
}

func allReleased(hs []*handle) bool {
	for _, h := range hs {
		select {
		case <-h.released:
		default:
			return false
		}
	}
	return true
}

// markRevoked records what the file is now, for checkAfterFence.
func (h *handle) markRevoked() {
	var out fuse.AttrOut
	if h.lf.Getattr(context.Background(), &out) != 0 {
		return // released meanwhile: the descriptor is closed
	}
	st := stampOfAttr(&out.Attr)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.revoked == nil {
		h.revoked = &st
	}
}

func stampOfAttr(a *fuse.Attr) fileStamp {
	return fileStamp{ino: a.Ino, size: int64(a.Size), mtime: unix.Timespec{Sec: int64(a.Mtime), Nsec: int64(a.Mtimensec)}}
}

// checkAfterFence runs when a revoked handle is released: if the file
// changed since it was revoked, a write got past the fence (see above).
func (h *handle) checkAfterFence() {
	h.mu.Lock()
	revoked := h.revoked
	h.mu.Unlock()
	if revoked == nil {
		return
	}
	var out fuse.AttrOut
	if h.lf.Getattr(context.Background(), &out) != 0 || stampOfAttr(&out.Attr) == *revoked {
		return
	}
	fsys := h.node.fsys
	fsys.stats.writesAfterFence.Add(1)
	rel, _ := h.node.rel()
	fsys.log.Error("a write reached a file after fencing, through a descriptor opened before (splice or sendfile)",
		"file", rel, "size_at_fence", revoked.size, "size", out.Size)
}
