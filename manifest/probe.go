package manifest

import (
	"context"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// prober stats the files of one verification on up to Workers
// goroutines. The scan hands it each path it meets for the first time
// while it goes on parsing, so a new checkpoint's new files are stat'ed
// during the parse rather than after it; checkFiles then adds the paths
// the cache does not vouch for and waits for every observation.
//
// Paths are handed over in batches by one goroutine at a time (the scan,
// then checkFiles). Each worker opens a directory once, beneath its root,
// and stats the files in it relative to it.
type prober struct {
	ctx     context.Context
	res     *Resolver
	workers int

	// Owned by the goroutine handing paths over.
	queued  map[*pathEntry]struct{}
	batch   []*pathEntry
	started int
	work    chan []*pathEntry

	wg  sync.WaitGroup
	mu  sync.Mutex
	obs map[*pathEntry]observation // GUARDED_BY(mu)
}

// probeBatch is how many paths go to a worker at a time: enough that
// handing them over costs little next to the stats.
const probeBatch = 32

// maxOpenDirs bounds the directories one worker keeps open.
const maxOpenDirs = 16

func (v *Verifier) newProber(ctx context.Context) *prober {
	workers := min(v.cfg.Workers, runtime.GOMAXPROCS(0)*2)
	return &prober{
		ctx: ctx, res: v.cfg.Resolver, workers: workers,
		queued: make(map[*pathEntry]struct{}),
		work:   make(chan []*pathEntry, workers),
		obs:    make(map[*pathEntry]observation),
	}
}

// probe asks for a stat of e's file, once, unless e lies outside the
// roots (such a path is never opened). A nil prober ignores it.
func (p *prober) probe(e *pathEntry) {
	if p == nil || e.err != nil {
		return
	}
	if _, ok := p.queued[e]; ok {
		return
	}
	p.queued[e] = struct{}{}
	p.batch = append(p.batch, e)
	if len(p.batch) == probeBatch {
		p.send()
	}
}

func (p *prober) send() {
	if p.started < p.workers {
		p.started++
		p.wg.Add(1)
		go p.worker()
	}
	p.work <- p.batch
	p.batch = make([]*pathEntry, 0, probeBatch)
}

// wait returns what the stats of every probed path found. A few paths
// and no worker running: they are stat'ed here.
func (p *prober) wait() map[*pathEntry]observation {
	if p.started == 0 {
		p.record(p.statBatch(p.batch, newDirFds(p.res)))
	} else {
		if len(p.batch) > 0 {
			p.send()
		}
		close(p.work)
		p.wg.Wait()
	}
	p.batch = nil
	return p.obs
}

func (p *prober) worker() {
	defer p.wg.Done()
	dirs := newDirFds(p.res)
	defer dirs.close()
	for batch := range p.work {
		p.record(p.statBatch(batch, dirs))
	}
}

type probed struct {
	entry *pathEntry
	obs   observation
}

func (p *prober) statBatch(batch []*pathEntry, dirs *dirFds) []probed {
	out := make([]probed, len(batch))
	var st unix.Stat_t
	for i, e := range batch {
		out[i].entry = e
		o := &out[i].obs
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
		o.size, o.mode = st.Size, st.Mode
	}
	return out
}

func (p *prober) record(found []probed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range found {
		p.obs[f.entry] = f.obs
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
