package zkbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// duty is the ephemeral znode of a site's duty (design §5.5.3).
func (p ckptfsPaths) dutyRoot() string        { return join(p.base, "duty") }
func (p ckptfsPaths) duty(site string) string { return join(p.base, "duty", site) }

// DutyLook is how often a daemon looks at its site's duty besides its
// watch and session changes (plus up to a tenth of jitter).
const DutyLook = time.Minute

// dutyHolder is the duty znode's data, for people and the log.
type dutyHolder struct {
	Site  string    `json:"site"`
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Since time.Time `json:"since"`
}

func (h dutyHolder) String() string {
	return fmt.Sprintf("%s pid %d since %s", h.Host, h.PID, h.Since.Format(time.RFC3339))
}

// Duty takes and keeps this site's duty (design §5.5.3): one daemon of a
// site at a time runs the site's work (markers, sweeper, lag). It holds
// the duty while the znode duty/<site> exists with this session as its
// ephemeral owner. It is level-triggered: every look reads the znode
// with a watch and creates it when absent (a create fails when it
// exists: the compare-and-set), at a watch, a session change and every
// DutyLook.
type Duty struct {
	b   *Bridge
	log *slog.Logger

	mu sync.Mutex
	// held and holder: GUARDED_BY(mu). What the last look found: this
	// session holds the duty; who holds it ("" unknown or none).
	held   bool
	holder string
	// owner: GUARDED_BY(mu). The session holder names.
	owner SessionID
	stats DutyStats // GUARDED_BY(mu)
}

// DutyStats counts what a Duty did.
type DutyStats struct {
	// Taken counts the times this daemon came to hold the duty; Lost
	// the times it stopped holding it.
	Taken, Lost uint64
	// Looks counts the looks; Failures those that failed.
	Looks, Failures uint64
	LastError       string
}

// NewDuty returns this site's duty. The bridge must have a site.
func (b *Bridge) NewDuty() (*Duty, error) {
	if err := b.requireSite("the site duty"); err != nil {
		return nil, err
	}
	return &Duty{b: b, log: b.cfg.Logger.With("component", "duty")}, nil
}

// Held reports whether this daemon held the duty at its last look.
func (d *Duty) Held() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held
}

// Holder names the holder seen at the last look ("" unknown or none).
func (d *Duty) Holder() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.holder
}

// Stats returns the counters.
func (d *Duty) Stats() DutyStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Run looks at the duty until ctx ends or the bridge is closed. While
// this daemon holds it, work runs with a context that ends when a look
// finds the duty held by another session or by none; Run waits for work
// to return before it looks again. When ctx ends, Run stops work and
// gives the duty up (deletes its znode) so that another daemon takes it
// at once.
func (d *Duty) Run(ctx context.Context, work func(ctx context.Context)) {
	var (
		cancel context.CancelFunc
		done   chan struct{}
		mine   bool // held at the last look
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer func() {
		stop()
		if mine {
			d.release()
		}
	}()
	for {
		if ctx.Err() != nil {
			return
		}
		_, _, changed := d.b.zk.sessionState()
		stat, watch, err := d.look(ctx)
		if errors.Is(err, ErrClosed) {
			return
		}
		switch {
		case err != nil:
			// Unknown: keep what runs, as a daemon cut off keeps its
			// session until it expires; the next look decides.
		case stat != nil && cancel == nil:
			mine = true
			wctx, c := context.WithCancel(ctx)
			cancel, done = c, make(chan struct{})
			go func() { defer close(done); work(wctx) }()
		case stat == nil && cancel != nil:
			mine = false
			stop()
		}
		next := time.NewTimer(DutyLook + rand.N(DutyLook/10))
		if err != nil {
			next.Reset(5*time.Second + rand.N(time.Second))
		}
		select {
		case <-ctx.Done():
		case <-watch:
		case <-changed:
		case <-next.C:
		}
		next.Stop()
	}
}

// look reads the duty znode with a watch and takes it when absent. It
// returns the znode's stat when this session holds it, nil otherwise,
// and a channel that fires at the znode's next change (nil after an
// error).
func (d *Duty) look(ctx context.Context) (*zk.Stat, <-chan zk.Event, error) {
	stat, watch, err := d.lookOnce(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Looks++
	if err != nil && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
		d.stats.Failures++
		d.stats.LastError = err.Error()
		d.log.Warn("looking at the site duty", "err", err)
	}
	if err == nil && (stat != nil) != d.held {
		d.held = stat != nil
		if d.held {
			d.stats.Taken++
			d.log.Info("this daemon holds the site duty: it publishes the site's markers, sweeps stray pointers and computes the lag")
		} else {
			d.stats.Lost++
			d.log.Info("this daemon no longer holds the site duty", "holder", d.holder)
		}
	}
	return stat, watch, err
}

func (d *Duty) lookOnce(ctx context.Context) (*zk.Stat, <-chan zk.Event, error) {
	paths, err := d.b.clusterPaths(ctx)
	if err != nil {
		return nil, nil, err
	}
	path := paths.duty(d.b.cfg.Site)
	for range 3 {
		session, _, _ := d.b.zk.sessionState()
		stat, watch, err := d.b.zk.existsW(ctx, path)
		switch {
		case err != nil:
			return nil, nil, err
		case stat == nil:
			if err := d.take(ctx, paths, path); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, nil, err
			}
			continue // look again: the create's outcome is what the znode says
		case stat.EphemeralOwner == 0:
			// Persistent: no session's, and nobody could take the duty.
			d.log.Warn("the site duty's znode is not ephemeral (another client made it): deleting it", "znode", path)
			if err := d.b.zk.remove(ctx, path, stat.Version); err != nil && !errors.Is(err, zk.ErrBadVersion) {
				return nil, nil, err
			}
			continue
		case session != 0 && stat.EphemeralOwner == session:
			d.setHolder(SessionID(session), "this daemon")
			return stat, watch, nil
		}
		// Another session's: name it when it changed.
		if owner := SessionID(stat.EphemeralOwner); !d.named(owner) {
			who := "session " + owner.String()
			if data, _, err := d.b.zk.get(ctx, path); err == nil {
				var h dutyHolder
				if json.Unmarshal(data, &h) == nil {
					who += " (" + h.String() + ")"
				}
			}
			d.setHolder(owner, who)
			d.log.Info("the site duty is held by another daemon", "holder", who)
		}
		return nil, watch, nil
	}
	return nil, nil, errors.New("zkbridge: the site duty's znode keeps changing")
}

// named reports whether the holder recorded is owner's.
func (d *Duty) named(owner SessionID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owner == owner && d.holder != ""
}

func (d *Duty) setHolder(owner SessionID, who string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owner, d.holder = owner, who
}

// take creates the duty's ephemeral znode once. A transient error leaves
// the outcome unknown: the next read says.
func (d *Duty) take(ctx context.Context, paths ckptfsPaths, path string) error {
	if err := d.b.zk.ensure(ctx, paths.dutyRoot()); err != nil {
		return err
	}
	host, _ := os.Hostname()
	data, err := json.Marshal(dutyHolder{Site: d.b.cfg.Site, Host: host, PID: os.Getpid(), Since: time.Now().UTC()})
	if err != nil {
		return err
	}
	c := d.b.zk
	_, err = await(ctx, func() (string, error) {
		return c.conn.Create(path, data, zk.FlagEphemeral, c.acls.forPath(path))
	})
	return c.explain("create "+path, err)
}

// release deletes the duty's znode while this session owns it. Failing
// to is harmless: it vanishes with the session.
func (d *Duty) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	paths, err := d.b.clusterPaths(ctx)
	if err != nil {
		return
	}
	path := paths.duty(d.b.cfg.Site)
	session, _, _ := d.b.zk.sessionState()
	stat, err := d.b.zk.exists(ctx, path)
	if err == nil && stat != nil && session != 0 && stat.EphemeralOwner == session {
		err = d.b.zk.remove(ctx, path, stat.Version)
	}
	if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, zk.ErrBadVersion) {
		d.log.Warn("could not give the site duty up; it goes with the session", "znode", path, "err", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held {
		d.held = false
		d.stats.Lost++
		d.holder = ""
	}
}
