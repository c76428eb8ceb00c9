package manifest

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"
)

// prober stats the files of one verification on up to Workers
// goroutines. The manifestBuilder hands it each path it meets for the
// first time while the parse goes on, so a new checkpoint's new files
// are stat'ed during the parse rather than after it; checkFiles takes
// what was found and has the paths the cache does not vouch for stat'ed
// too.
//
// Paths are handed over in batches, by one goroutine at a time (the
// builder, then checkFiles), which stats the last, partial batch itself
// while the workers finish. Each worker opens a directory once, beneath
// its root, and stats the files in it relative to it.
type prober struct {
	ctx     context.Context
	cancel  context.CancelFunc
	res     *Resolver
	workers int

	// Owned by the goroutine handing paths over.
	batch   *probeBatch
	sent    []*probeBatch
	started int
	work    chan *probeBatch
	late    []*probeBatch // sent while the workers were behind
	wg      sync.WaitGroup
}

// probeBatch is a run of paths, the position of each one's file in the
// verification's list and, once a worker is done, what their stats found.
type probeBatch struct {
	entries []*pathEntry
	index   []int
	obs     []observation
}

// probeBatch paths go to a worker at a time: enough that handing them
// over costs little next to their stats, few enough that a new
// checkpoint's new files, spread over its _metadata, are stat'ed soon
// after the builder meets them.
const probeBatchSize = 8

// maxOpenDirs bounds the directories one worker keeps open.
const maxOpenDirs = 16

// newProber returns a prober for one verification; stop releases it.
func (v *Verifier) newProber(ctx context.Context) *prober {
	p := &prober{res: v.cfg.Resolver, workers: v.workers()}
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.reset()
	return p
}

// stop abandons what is still being stat'ed and returns once every
// worker is gone.
func (p *prober) stop() {
	p.cancel()
	close(p.work)
	p.wg.Wait()
}

func (p *prober) reset() {
	p.batch = &probeBatch{}
	p.sent = nil
	p.late = nil
	p.started = 0
	p.work = make(chan *probeBatch, p.workers)
}

// probe asks for a stat of e's file, files[index] of the verification. e
// must lie inside the roots: a path outside is never opened.
func (p *prober) probe(e *pathEntry, index int) {
	p.batch.entries = append(p.batch.entries, e)
	p.batch.index = append(p.batch.index, index)
	if len(p.batch.entries) == probeBatchSize {
		p.send()
	}
}

func (p *prober) send() {
	p.sent = append(p.sent, p.batch)
	p.queue(p.batch, false)
	p.batch = &probeBatch{}
}

// queue hands b to the workers, starting one if needed. Unless block, a
// batch the workers have no room for waits in late, for wait: a parse
// hands batches over holding the verifier's lock, so it must never wait
// for a stat here (a slow or hung NAS would hold up every verification).
func (p *prober) queue(b *probeBatch, block bool) {
	// Another worker starts only when those started have a batch queued:
	// the new files of a re-verification, a few per subtask, keep one or
	// two busy, and starting a goroutine costs as much as a few stats.
	if p.started < p.workers && (p.started == 0 || len(p.work) > 0) {
		p.started++
		p.wg.Add(1)
		go p.worker()
	}
	if block {
		p.work <- b
		return
	}
	select {
	case p.work <- b:
	default:
		p.late = append(p.late, b)
	}
}

// wait returns the batches probed since the last wait, in the order the
// paths were probed, with what their stats found.
// It is never called holding the verifier's lock.
func (p *prober) wait() []*probeBatch {
	for _, b := range p.late {
		p.queue(b, true)
	}
	close(p.work)
	if len(p.batch.entries) > 0 {
		p.sent = append(p.sent, p.batch)
		dirs := newDirFds(p.res)
		p.stat(p.batch, dirs)
		dirs.close()
	}
	p.wg.Wait()
	sent := p.sent
	p.reset()
	return sent
}

func (p *prober) worker() {
	defer p.wg.Done()
	dirs := newDirFds(p.res)
	defer dirs.close()
	for b := range p.work {
		p.stat(b, dirs)
	}
}

func (p *prober) stat(b *probeBatch, dirs *dirFds) {
	b.obs = make([]observation, len(b.entries))
	var st unix.Stat_t
	for i, e := range b.entries {
		o := &b.obs[i]
		if err := p.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		fd, err := dirs.open(e.dir)
		if err != nil {
			o.err = err
			continue
		}
		if err := unix.Fstatat(fd, e.base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			o.err = err
			continue
		}
		o.size, o.mode, o.ver = st.Size, st.Mode, VersionOf(&st)
	}
}

// dirFds are the directories one worker opened, or why it could not.
type dirFds struct {
	res *Resolver
	fds map[string]dirFd
}

type dirFd struct {
	fd  int
	err error
}

func newDirFds(res *Resolver) *dirFds {
	return &dirFds{res: res, fds: make(map[string]dirFd)}
}

// open returns a descriptor of dir, opened beneath its root.
func (d *dirFds) open(dir string) (int, error) {
	if h, ok := d.fds[dir]; ok {
		return h.fd, h.err
	}
	if len(d.fds) == maxOpenDirs {
		d.close()
	}
	fd, err := openBeneathFd(d.res, dir)
	d.fds[dir] = dirFd{fd: fd, err: err}
	return fd, err
}

func (d *dirFds) close() {
	for dir, h := range d.fds {
		if h.err == nil {
			unix.Close(h.fd)
		}
		delete(d.fds, dir)
	}
}
