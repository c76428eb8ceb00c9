package metrics

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// Health is the daemon's answer at /healthz. The HTTP status is 200 when
// OK, 503 otherwise; Problems has one line per failed check.
type Health struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	Site     string   `json:"site,omitempty"`
	// MountPoint lets `ckptfs health` stat the mount without being told
	// where it is.
	MountPoint string `json:"mountpoint,omitempty"`
	Mode       string `json:"mode,omitempty"`
	// LastPass is when the verification catalog last finished a pass.
	LastPass *time.Time `json:"last_pass,omitempty"`
	// ZooKeeper is nil when the daemon runs without ZooKeeper.
	ZooKeeper *ZooKeeperHealth `json:"zookeeper,omitempty"`
	// Notes say what happened that is over (a ZooKeeper outage): they
	// are not problems.
	Notes []string `json:"notes,omitempty"`
}

// ZooKeeperHealth is the ZooKeeper part of Health.
type ZooKeeperHealth struct {
	Session     zkbridge.SessionState `json:"session"`
	Expirations uint64                `json:"expirations"`
	// Losses counts the sessions lost (zkbridge.Session.Losses); Since
	// is when the session was established, or lost; LastOutage is the
	// last outage that ended.
	Losses     uint64     `json:"losses"`
	Since      *time.Time `json:"since,omitempty"`
	LastOutage *Outage    `json:"last_outage,omitempty"`
	// Identity is ckptfs's ZooKeeper identity by scheme and user
	// (zkbridge.Session.Identity): /healthz is unauthenticated.
	Identity string `json:"identity,omitempty"`
	// ActiveSite is what active-site said when last read, and when.
	ActiveSite *ActiveSite `json:"active_site,omitempty"`
	// Duty is this daemon's part in its site's duty (design §5.5.3).
	Duty     *DutyHealth  `json:"duty,omitempty"`
	Lag      *LagSnapshot `json:"lag,omitempty"`
	Failover *Failover    `json:"failover,omitempty"`
}

// DutyHealth says whether this daemon holds its site's duty, and who
// does ("" unknown or none).
type DutyHealth struct {
	Held   bool   `json:"held"`
	Holder string `json:"holder,omitempty"`
}

// Outage is a time without a ZooKeeper session.
type Outage struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Seconds float64   `json:"seconds"`
}

// Thresholds are the limits a health check applies; negative values do
// not check.
type Thresholds struct {
	// MaxLag is the most checkpoints ZooKeeper's newest pointer may be
	// ahead of the newest one complete here.
	MaxLag int64
	// MaxLagSeconds bounds the lag in seconds the same way.
	MaxLagSeconds float64
}

// NoThresholds checks no lag.
var NoThresholds = Thresholds{MaxLag: -1, MaxLagSeconds: -1}

// A verification counts as stalled (a pass that never ends; a hung NAS
// does not do that, a pass waits BackingTimeout per directory at most)
// when no pass has finished for stallFactor poll intervals, or
// stallFactor times the last pass's duration (a large replica takes
// long), and at least minStall.
const (
	stallFactor = 5
	minStall    = time.Minute
)

// CheckHealth evaluates src now.
func CheckHealth(src Sources, th Thresholds, now time.Time) Health {
	h := Health{Site: src.Site, Problems: []string{}}
	if src.Mount != nil {
		h.MountPoint = src.Mount.MountPoint()
		h.Mode = src.Mount.Mode().String()
	}
	if cat := src.Catalog; cat != nil {
		st := cat.Stats()
		if st.Passes > 0 {
			h.LastPass = &st.LastPass
		}
		if limit := max(stallFactor*src.Poll, stallFactor*st.LastPassDuration, minStall); st.Passes > 0 && now.Sub(st.LastPass) > limit {
			h.Problems = append(h.Problems, fmt.Sprintf("verification stalled: the last pass ended %s ago", now.Sub(st.LastPass).Round(time.Second)))
		}
		for _, w := range st.Hung {
			what := "verifying job directory " + w.Dir
			if w.Walk {
				what = "listing " + cmp.Or(w.Dir, ".")
			}
			h.Problems = append(h.Problems, fmt.Sprintf("backing file system not answering: %s has waited %s (since %s); the checkpoints there are unknown, so hidden",
				what, now.Sub(w.Since).Round(time.Second), w.Since.UTC().Format(time.RFC3339)))
		}
	}
	for _, check := range []func() error{src.Backing, src.Probe} {
		if check != nil {
			if err := check(); err != nil {
				h.Problems = append(h.Problems, err.Error())
			}
		}
	}
	if z := src.ZooKeeper; z != nil {
		s := z.Session()
		h.ZooKeeper = &ZooKeeperHealth{Session: s.State, Expirations: s.Expirations, Losses: s.Losses, Identity: s.Identity}
		if !s.Since.IsZero() {
			h.ZooKeeper.Since = &s.Since
		}
		if a, ok := z.ActiveSite(); ok {
			h.ZooKeeper.ActiveSite = &a
		}
		switch {
		case s.State != zkbridge.SessionConnected && !s.Since.IsZero():
			h.Problems = append(h.Problems, fmt.Sprintf("ZooKeeper session %s since %s (%s)", s.State, s.Since.UTC().Format(time.RFC3339), now.Sub(s.Since).Round(time.Second)))
		case s.State != zkbridge.SessionConnected:
			h.Problems = append(h.Problems, fmt.Sprintf("ZooKeeper session %s", s.State))
		}
		if !s.LastRegained.IsZero() {
			o := &Outage{Start: s.LastLost, End: s.LastRegained, Seconds: s.LastRegained.Sub(s.LastLost).Seconds()}
			h.ZooKeeper.LastOutage = o
			h.Notes = append(h.Notes, fmt.Sprintf("ZooKeeper: the last outage lasted %s and ended %s ago (%d session loss(es), %d expired, since the daemon started)",
				o.End.Sub(o.Start).Round(time.Second), now.Sub(o.End).Round(time.Second), s.Losses, s.Expirations))
		}
		if z.Failover != nil {
			f := z.Failover()
			h.ZooKeeper.Failover = &f
			h.Problems = append(h.Problems, failoverProblems(f)...)
		}
		if held, holder, ok := z.Duty(); ok {
			h.ZooKeeper.Duty = &DutyHealth{Held: held, Holder: holder}
		}
		if z.Lag != nil {
			lag := z.Lag.Snapshot()
			if lag.Idle {
				h.Notes = append(h.Notes, "lag: computed by the daemon that holds this site's duty ("+cmp.Or(h.ZooKeeper.dutyHolder(), "none now")+"), not by this one")
			}
			h.ZooKeeper.Lag = &lag
			h.Problems = append(h.Problems, lagProblems(lag, z.Lag.Interval(), th, now)...)
		}
	} else if th.MaxLag >= 0 || th.MaxLagSeconds >= 0 {
		h.Problems = append(h.Problems, "lag unknown: the daemon runs without ZooKeeper (--zk)")
	}
	h.OK = len(h.Problems) == 0
	return h
}

// lagProblems checks the lag of every job against th.
func lagProblems(lag LagSnapshot, interval time.Duration, th Thresholds, now time.Time) []string {
	if th.MaxLag < 0 && th.MaxLagSeconds < 0 || lag.Idle {
		return nil
	}
	if lag.Updated.IsZero() || now.Sub(lag.Updated) > 3*interval+10*time.Second {
		why := "never computed"
		if !lag.Updated.IsZero() {
			why = "last computed " + now.Sub(lag.Updated).Round(time.Second).String() + " ago"
		}
		if lag.LastError != "" {
			why += ": " + lag.LastError
		}
		return []string{"lag unknown: " + why}
	}
	var out []string
	for _, j := range lag.Jobs {
		switch {
		case j.Pointer == nil:
			// No pointer: Flink has nothing to restore, nothing to lag.
		case j.LagCheckpoints == nil:
			out = append(out, fmt.Sprintf("job %s: ZooKeeper points at checkpoint %d and none of its pointers is complete on this site", j.JobID, *j.Pointer))
		default:
			if th.MaxLag >= 0 && *j.LagCheckpoints > th.MaxLag {
				out = append(out, fmt.Sprintf("job %s: ZooKeeper is %d checkpoints ahead of this site (max %d)", j.JobID, *j.LagCheckpoints, th.MaxLag))
			}
			if th.MaxLagSeconds >= 0 && j.LagSeconds != nil && *j.LagSeconds > th.MaxLagSeconds {
				out = append(out, fmt.Sprintf("job %s: ZooKeeper is %.0f seconds ahead of this site (max %.0f)", j.JobID, *j.LagSeconds, th.MaxLagSeconds))
			}
		}
	}
	return out
}

// Handler serves /metrics from reg and /healthz from src. /healthz takes
// the thresholds as query parameters max_lag (checkpoints) and
// max_lag_seconds.
func Handler(reg *prometheus.Registry, src Sources) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		th, err := parseThresholds(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := CheckHealth(src, th, time.Now())
		w.Header().Set("Content-Type", "application/json")
		if !h.OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(h)
	})
	return mux
}

func parseThresholds(r *http.Request) (Thresholds, error) {
	th := NoThresholds
	q := r.URL.Query()
	if s := q.Get("max_lag"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return th, fmt.Errorf("max_lag %q: want a number of checkpoints", s)
		}
		th.MaxLag = v
	}
	if s := q.Get("max_lag_seconds"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v != v {
			return th, fmt.Errorf("max_lag_seconds %q: want a number of seconds", s)
		}
		th.MaxLagSeconds = v
	}
	return th, nil
}

func (z *ZooKeeperHealth) dutyHolder() string {
	if z.Duty == nil {
		return ""
	}
	return z.Duty.Holder
}
