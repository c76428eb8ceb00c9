package manifest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How long a Verifier trusts a file it found complete (design §3.6): until
// its directory loses its name (Observe), the audit finds it changed
// (Audit), or MaxAge passed without the audit reaching it. A checkpoint
// whose files all stay trusted keeps its verdict without a look at them.

// dirState is a directory holding files the verifier trusts.
type dirState struct {
	// watch: owned by the Observe that set busy.
	watch *dirWatch
	// GUARDED_BY(cache.pathsMu). gen is raised whenever a trusted file in
	// the directory stops being trusted, and when the state is dropped;
	// entries are those files (e.ds is this, entries[e.dsIndex] is e).
	gen     uint64
	entries []*pathEntry
	dropped bool
	busy    bool // an Observe stats or lists it
	// watched are names whose entry reusable verdicts depend on (a
	// sealed manifest, or the directory on the way to one): they keep
	// the state while it holds no trusted file.
	watched map[string]*nameWatch
}

// nameWatch is one name of a directory that reusable verdicts depend on.
// GUARDED_BY(cache.pathsMu).
type nameWatch struct {
	// ino is the inode of the entry name as last seen (0: absent);
	// changes is raised whenever a listing finds another; refs counts
	// the verdicts.
	name    string
	ino     uint64
	changes uint64
	refs    int
}

// trust records that a stat at now found e's file complete with
// version ver, and puts it in its directory's state and in the audit's
// round. It refuses a version other than one the audit found at or
// after now (the stat may be older than the audit's), and e stays as it
// was. The caller holds cache.pathsMu.
func (c *cache) trust(e *pathEntry, ver FileVersion, now int64) {
	if s, ok := c.auditSaw[e]; ok && s.at >= now && s.ver != ver {
		return
	}
	e.ver, e.seen = ver, now
	if e.ds == nil {
		ds := c.dirs[e.dir]
		if ds == nil {
			ds = &dirState{watch: newDirWatch(e.dir)}
			c.dirs[e.dir] = ds
		}
		e.ds, e.dsIndex = ds, int32(len(ds.entries))
		ds.entries = append(ds.entries, e)
	}
	if !e.inRound {
		e.inRound = true
		c.round = append(c.round, e)
	}
}

// auditSeen is a version of a file the audit found at a time: zero when
// its stat failed.
type auditSeen struct {
	ver FileVersion
	at  int64
}

// untrust makes e's file untrusted: the next verification that lists it
// stats it, and every verdict reused because it was trusted is judged
// again. The caller holds cache.pathsMu.
func (c *cache) untrust(e *pathEntry) {
	e.seen = 0
	ds := e.ds
	if ds == nil {
		return
	}
	last := ds.entries[len(ds.entries)-1]
	ds.entries[e.dsIndex], last.dsIndex = last, e.dsIndex
	ds.entries[len(ds.entries)-1] = nil
	ds.entries = ds.entries[:len(ds.entries)-1]
	e.ds = nil
	ds.gen++
}

// drop forgets the directory state ds and untrusts its files. The caller
// holds cache.pathsMu.
func (c *cache) drop(ds *dirState) {
	for len(ds.entries) > 0 {
		c.untrust(ds.entries[len(ds.entries)-1])
	}
	ds.gen++
	ds.dropped = true
	if c.dirs[ds.watch.path] == ds {
		delete(c.dirs, ds.watch.path)
	}
}

// Observe stats every directory holding a trusted file, lists those
// whose names may have changed, and untrusts the files whose names are
// gone (design §3.6). A directory that is gone, that fails, or that has
// not answered within limit (a hung NAS; 0: no limit) or when ctx ends
// untrusts all of its files, so that the verifications needing them
// stat them, and Observe returns. A pass of a mount calls it before its
// verifications. It returns how many directories did not answer.
func (v *Verifier) Observe(ctx context.Context, limit time.Duration) (hung int) {
	c := v.cache
	now := v.cfg.Now().UnixNano()
	c.pathsMu.Lock()
	states := make([]*dirState, 0, len(c.dirs))
	for _, ds := range c.dirs {
		switch {
		case ds.busy:
			c.drop(ds) // still not answered since an earlier call
		case len(ds.entries) == 0 && len(ds.watched) == 0:
			c.drop(ds)
			ds.watch.close()
		default:
			ds.busy = true
			states = append(states, ds)
		}
	}
	c.pathsMu.Unlock()

	if !v.parallel(ctx, len(states), v.workers(), limit, func(i int, _ *dirFds) { v.observe(states[i], now) }) {
		c.pathsMu.Lock()
		for _, ds := range states {
			if ds.busy {
				c.drop(ds)
				hung++
			}
		}
		c.pathsMu.Unlock()
	}
	return hung
}

// observe stats ds's directory, lists it if its names may have changed,
// and untrusts the files whose names are gone, or all of them when the
// directory is gone or fails. A directory seen first is listed a settle
// later, not now (design §3.6).
func (v *Verifier) observe(ds *dirState, now int64) {
	w := ds.watch
	first := w.fd < 0
	list, err := w.observe(v.cfg.Resolver, now)
	list = list && !first
	var names map[string]uint64
	if err == nil && list {
		var entries []dirent
		if entries, err = w.list(); err != nil {
			w.forget()
		}
		names = make(map[string]uint64, len(entries))
		for _, e := range entries {
			names[e.name] = e.ino
		}
	}
	c := v.cache
	c.pathsMu.Lock()
	defer c.pathsMu.Unlock()
	ds.busy = false
	switch {
	case ds.dropped:
		w.close()
	case err != nil:
		c.drop(ds)
		w.close()
	case names != nil:
		for name, nw := range ds.watched {
			if ino := names[name]; ino != nw.ino {
				nw.ino = ino
				nw.changes++
			}
		}
		for j := 0; j < len(ds.entries); {
			// Gone, or another file by that name (replaced by a
			// rename): judged again.
			if e := ds.entries[j]; names[e.base] != e.ver.ino {
				c.untrust(e) // moves the last entry to j
				continue
			}
			j++
		}
	}
}

// Audit stats again the share of the trusted files due in this call, in
// a fixed round, so that each is stat'ed at least once every MaxAge/2
// however many there are, and untrusts those whose version changed
// (truncated, rewritten, replaced), that are gone, or that have not
// answered within limit (0: no limit) or when ctx ends. It returns how
// many it stat'ed and untrusted. Without MaxAge it does nothing.
func (v *Verifier) Audit(ctx context.Context, limit time.Duration) (int, int) {
	period := v.cfg.MaxAge / 2
	if period <= 0 {
		return 0, 0
	}
	v.auditMu.Lock()
	defer v.auditMu.Unlock()
	c := v.cache
	now := v.cfg.Now().UnixNano()

	c.pathsMu.Lock()
	elapsed := min(now-c.lastAudit, period.Nanoseconds())
	if c.lastAudit == 0 {
		elapsed = 0
	}
	c.lastAudit = now
	for e, s := range c.auditSaw {
		if s.at < now-v.cfg.MaxAge.Nanoseconds() {
			delete(c.auditSaw, e)
		}
	}
	n := int((int64(len(c.round))*elapsed + period.Nanoseconds() - 1) / period.Nanoseconds())
	due := make([]*pathEntry, 0, n)
	for len(due) < n && len(c.round) > 0 {
		c.cursor %= len(c.round)
		e := c.round[c.cursor]
		if e.seen == 0 {
			// No longer trusted: out of the round, and the last entry
			// takes its place, to be audited now.
			e.inRound = false
			last := len(c.round) - 1
			c.round[c.cursor] = c.round[last]
			c.round[last] = nil
			c.round = c.round[:last]
			continue
		}
		due = append(due, e)
		c.cursor++
	}
	c.pathsMu.Unlock()

	// GUARDED_BY(c.pathsMu): a stat that never returns (a hung NAS)
	// answers after Audit did.
	answered := make([]bool, len(due))
	audited, untrusted := 0, 0
	check := func(i int, dirs *dirFds) {
		e := due[i]
		var ver FileVersion
		fd, err := dirs.open(e.dir)
		if err == nil {
			var st unix.Stat_t
			if err = unix.Fstatat(fd, e.base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				ver = VersionOf(&st)
			}
		}
		at := v.cfg.Now().UnixNano()
		c.pathsMu.Lock()
		defer c.pathsMu.Unlock()
		answered[i] = true
		audited++
		switch {
		case e.seen == 0: // untrusted meanwhile: a verification may trust an older stat
			c.auditSaw[e] = auditSeen{ver: ver, at: at}
		case err != nil || ver != e.ver:
			c.untrust(e)
			c.auditSaw[e] = auditSeen{ver: ver, at: at}
			untrusted++
		default:
			e.seen = now
		}
	}
	// Background work: a quarter of the workers, so that passes keep
	// the rest.
	done := v.parallel(ctx, len(due), max(1, v.workers()/4), limit, check)
	c.pathsMu.Lock()
	defer c.pathsMu.Unlock()
	if !done {
		for i, e := range due {
			if !answered[i] && e.seen != 0 {
				c.untrust(e)
				untrusted++
			}
		}
	}
	a, u := audited, untrusted
	return a, u
}

// parallel runs fn(0..n-1) on up to workers goroutines, each with its
// own open directories, and reports whether all returned before ctx
// ended and none took longer than limit (0: no limit). It does not wait
// for those that did not: a stat of a hung NAS never returns.
func (v *Verifier) parallel(ctx context.Context, n, workers int, limit time.Duration, fn func(i int, dirs *dirFds)) bool {
	if n == 0 {
		return true
	}
	workers = min(workers, n)
	started := make([]atomic.Int64, workers) // unix ns of the call in flight, 0: none
	next := make(chan int)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dirs := newDirFds(v.cfg.Resolver)
			defer dirs.close()
			for i := range next {
				started[w].Store(time.Now().UnixNano())
				fn(i, dirs)
				started[w].Store(0)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	var tick <-chan time.Time
	if limit > 0 {
		t := time.NewTicker(min(limit/4, time.Second))
		defer t.Stop()
		tick = t.C
	}
	stuck := func() bool {
		oldest := time.Now().Add(-limit).UnixNano()
		for w := range started {
			if s := started[w].Load(); s != 0 && s < oldest {
				return true
			}
		}
		return false
	}
	ok := true
feed:
	for i := 0; i < n; {
		select {
		case next <- i:
			i++
		case <-ctx.Done():
			ok = false
			break feed
		case <-tick:
			if stuck() {
				ok = false
				break feed
			}
		}
	}
	close(next)
	for {
		select {
		case <-done:
			return ok
		case <-ctx.Done():
			return false
		case <-tick:
			if stuck() {
				return false
			}
		}
	}
}

// workers is how many stats a Verifier has in flight at most.
func (v *Verifier) workers() int { return max(1, v.cfg.Workers) }

// reusable is a complete verdict that stands while every file it needs
// stays trusted: the generation of each directory holding one (its
// _metadata's too) is as it was, and no file's trust expired.
type reusable struct {
	verdict *Verdict
	meta    *pathEntry // the _metadata, trusted in its directory
	deps    []dep
	// sealed: the directory where the checkpoint's sealed manifest is, or
	// the nearest one above it that exists, with the name in it on the
	// way to the manifest and its changes then (nil: no SealedRoot). That
	// name made, replaced or removed judges the checkpoint again.
	sealed        *dirState
	sealedName    *nameWatch
	sealedChanges uint64
	expires       int64 // unix ns: the oldest trust among its files ends
}

type dep struct {
	ds  *dirState
	gen uint64
}

// reused returns the verdict of the checkpoint directory dir if it still
// stands at now, or nil.
func (c *cache) reused(dir string, now int64) *Verdict {
	c.pathsMu.Lock()
	defer c.pathsMu.Unlock()
	r := c.reuse[dir]
	if r == nil {
		return nil
	}
	stands := now < r.expires
	for _, d := range r.deps {
		stands = stands && !d.ds.dropped && d.ds.gen == d.gen
	}
	if r.sealed != nil {
		stands = stands && !r.sealed.dropped && r.sealedName.changes == r.sealedChanges
	}
	if stands {
		return r.verdict
	}
	c.forget(dir, r)
	return nil
}

// remember keeps the complete verdict of dir, whose _metadata was parsed
// as parsed at the judge's time, for reuse when every file it needs is
// trusted: a file not stat'ed yet (a directory) leaves it to be judged
// again. sealed is where its sealed manifest is or would be.
func (c *cache) remember(dir string, verdict *Verdict, parsed manifestEntry, j judge, sealed sealedWatch) {
	c.pathsMu.Lock()
	defer c.pathsMu.Unlock()
	if old := c.reuse[dir]; old != nil {
		c.forget(dir, old)
	}
	meta := &pathEntry{path: dir + "/" + MetadataFile, dir: dir, base: MetadataFile}
	c.trust(meta, parsed.stamp, j.now)
	if meta.ds == nil {
		return // refused (a new entry never is)
	}
	r := &reusable{verdict: verdict, meta: meta, expires: j.now + j.maxAge}
	add := func(ds *dirState) {
		for _, d := range r.deps {
			if d.ds == ds {
				return
			}
		}
		r.deps = append(r.deps, dep{ds: ds, gen: ds.gen})
	}
	add(meta.ds)
	for i, e := range parsed.entries {
		if parsed.man.Files[i].IsDir() || e.seen == 0 || e.ds == nil {
			c.untrust(meta)
			return
		}
		r.expires = min(r.expires, e.seen+j.maxAge)
		add(e.ds)
	}
	if sealed.dir != "" {
		ds := c.dirs[sealed.dir]
		if ds == nil {
			ds = &dirState{watch: newDirWatch(sealed.dir)}
			c.dirs[sealed.dir] = ds
		}
		if ds.watched == nil {
			ds.watched = make(map[string]*nameWatch)
		}
		nw := ds.watched[sealed.name]
		if nw == nil {
			nw = &nameWatch{name: sealed.name, ino: sealed.ino}
			ds.watched[sealed.name] = nw
		}
		nw.refs++
		r.sealed, r.sealedName, r.sealedChanges = ds, nw, nw.changes
	}
	c.reuse[dir] = r
}

// forget drops dir's reusable verdict r. The caller holds pathsMu.
func (c *cache) forget(dir string, r *reusable) {
	c.untrust(r.meta)
	if r.sealed != nil {
		if r.sealedName.refs--; r.sealedName.refs == 0 && r.sealed.watched[r.sealedName.name] == r.sealedName {
			delete(r.sealed.watched, r.sealedName.name)
		}
	}
	delete(c.reuse, dir)
}
