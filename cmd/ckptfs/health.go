package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/internal/tlsconf"
)

// exitUnhealthy is health's answer when a check failed.
const exitUnhealthy = 1

// maxHealthBody bounds what health reads from the daemon.
const maxHealthBody = 1 << 20

func newHealthCmd(checks settingsChecks) *cobra.Command {
	var (
		mountPoint string
		metricsURL string
		timeout    time.Duration
		maxLag     int64
		maxLagTime time.Duration
		writable   bool
		wait       time.Duration
		tlsFiles   [3]string // CA, client certificate, client key
	)
	cmd := &cobra.Command{
		Use:   "health [--mountpoint P] [--metrics-url URL] [--timeout D] [--max-lag N] [--max-lag-time D] [--writable] [--retry-for D]",
		Short: "Check that a mount daemon serves, holds its ZooKeeper session and keeps up",
		Long: `Health checks one ckptfs mount daemon and prints one line per failed check:

  - the mount point is a ckptfs mount and answers (statfs, which always
    reaches the daemon) within --timeout: a daemon that died leaves a
    mount that answers ENOTCONN; a hung one never answers, and health
    gives up after --timeout;
  - with --metrics-url (the daemon's --metrics-addr; https:// when the
    daemon serves TLS, verified with --metrics-tls-ca, and with a client
    certificate when it asks for one): the daemon answers /healthz, its
    verification passes keep finishing, its ZooKeeper session is up (with
    --zk; how long it has been down otherwise), and the lag behind Flink's
    newest pointer is at most --max-lag checkpoints and --max-lag-time;
  - with --writable (needs --metrics-url): the mount serves read-write
    (mode primary), as it does on the active site once its daemon holds
    the lease. ckptfs-takeover.service runs it after the takeover, so
    that Flink never starts on a mount that still refuses its writes.

--retry-for D repeats the checks until they pass, for at most D.

Lines starting "note:" say what is over, such as the last ZooKeeper
outage: how long it lasted and when it ended.

Without --mountpoint, the mount point the daemon reports is checked.
Settings come from flags, then CKPTFS_<FLAG>, then the YAML file of
--config (keys as the long flags: mountpoint is mount's), then defaults.

Exit status:
  0  every check passed
  1  some check failed (one line each on stdout)
  3  usage or settings error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSettings(cmd, checks[cmd]); err != nil {
				return fail("%v", err)
			}
			th := metrics.NoThresholds
			if cmd.Flags().Changed("max-lag") {
				th.MaxLag = maxLag
			}
			if cmd.Flags().Changed("max-lag-time") {
				th.MaxLagSeconds = maxLagTime.Seconds()
			}
			deadline := time.Now().Add(wait)
			for {
				problems, passed, notes := checkHealth(cmd.Context(), mountPoint, metricsURL, tlsFiles, th, timeout, writable)
				if len(problems) > 0 && time.Now().Before(deadline) {
					select {
					case <-cmd.Context().Done():
					case <-time.After(healthRetry):
						continue
					}
				}
				w := cmd.OutOrStdout()
				for _, p := range problems {
					fmt.Fprintln(w, p)
				}
				if len(problems) == 0 {
					fmt.Fprintln(w, "ok:", strings.Join(passed, "; "))
				}
				for _, n := range notes {
					fmt.Fprintln(w, "note:", n)
				}
				if len(problems) > 0 {
					return exitWith(exitUnhealthy)
				}
				return nil
			}
		},
	}
	// Not settings: a configuration file's keys are never these.
	cmd.Flags().BoolVar(&writable, "writable", false, "also require the mount to serve read-write (mode primary; needs --metrics-url)")
	cmd.Flags().DurationVar(&wait, "retry-for", 0, "repeat the checks until they pass, for at most `TIME`")
	addSettings(cmd, func(f *pflag.FlagSet) {
		f.StringVar(&mountPoint, "mountpoint", "", "the mount `PATH` to stat (default: the one the daemon reports)")
		f.StringVar(&metricsURL, "metrics-url", "", "the daemon's metrics endpoint, `URL` http://HOST:PORT (https:// with TLS) of its --metrics-addr")
		f.DurationVar(&timeout, "timeout", 5*time.Second, "how long the mount and the daemon may take to answer")
		f.Int64Var(&maxLag, "max-lag", 0, "most checkpoints ZooKeeper's newest pointer may be ahead of this site (default: not checked)")
		f.DurationVar(&maxLagTime, "max-lag-time", 0, "most `TIME` the newest checkpoint complete here may be behind ZooKeeper's newest (default: not checked)")
		f.StringVar(&tlsFiles[0], "metrics-tls-ca", "", "verify an https metrics-url against the CA certificates in `FILE` (PEM; default: the system's)")
		f.StringVar(&tlsFiles[1], "metrics-tls-client-cert", "", "client certificate `FILE` (PEM) for a daemon with metrics-tls-client-ca")
		f.StringVar(&tlsFiles[2], "metrics-tls-client-key", "", "the key `FILE` (PEM) of metrics-tls-client-cert")
	})
	checks[cmd] = func() error {
		var errs []error
		if mountPoint == "" && metricsURL == "" {
			errs = append(errs, missingSetting("mountpoint", "give --mountpoint, --metrics-url or both"))
		}
		if timeout <= 0 {
			errs = append(errs, badSetting("timeout", "timeout %v must be positive", timeout))
		}
		lag := cmd.Flags().Changed("max-lag") || cmd.Flags().Changed("max-lag-time")
		if maxLag < 0 {
			errs = append(errs, badSetting("max-lag", "max-lag %d must not be negative", maxLag))
		}
		if maxLagTime < 0 {
			errs = append(errs, badSetting("max-lag-time", "max-lag-time %v must not be negative", maxLagTime))
		}
		if metricsURL != "" {
			if _, err := healthURL(metricsURL); err != nil {
				errs = append(errs, badSetting("metrics-url", "%w", err))
			}
		} else if lag {
			errs = append(errs, missingSetting("metrics-url", "max-lag and max-lag-time need metrics-url: the daemon knows the lag"))
		} else if writable {
			errs = append(errs, missingSetting("metrics-url", "--writable needs metrics-url: the daemon knows its mode"))
		}
		if wait < 0 {
			errs = append(errs, fmt.Errorf("--retry-for %v must not be negative", wait))
		}
		if _, err := healthClient(tlsFiles); err != nil {
			errs = append(errs, badSetting("metrics-tls-ca", "metrics-tls-ca, metrics-tls-client-cert, metrics-tls-client-key: %w", err))
		}
		return errors.Join(errs...)
	}
	return cmd
}

// healthRetry is how often health --retry-for checks again.
const healthRetry = 250 * time.Millisecond

// checkHealth runs health's checks once: the problems found, the checks
// passed and the daemon's notes.
func checkHealth(ctx context.Context, mountPoint, metricsURL string, tlsFiles [3]string, th metrics.Thresholds, timeout time.Duration, writable bool) (problems, passed, notes []string) {
	if metricsURL != "" {
		h, err := func() (*metrics.Health, error) {
			client, err := healthClient(tlsFiles)
			if err != nil {
				return nil, err
			}
			return fetchHealth(ctx, client, metricsURL, th, timeout)
		}()
		switch {
		case err != nil:
			problems = append(problems, "daemon: "+err.Error())
		default:
			problems = append(problems, h.Problems...)
			notes = h.Notes
			if len(h.Problems) == 0 {
				passed = append(passed, "daemon healthy")
			}
			if mountPoint == "" {
				mountPoint = h.MountPoint
			}
			if writable {
				if h.Mode != fusefs.ModePrimary.String() {
					problems = append(problems, fmt.Sprintf("mount %s is %s, not read-write (primary)", h.MountPoint, h.Mode))
				} else {
					passed = append(passed, "mount "+h.MountPoint+" writes")
				}
			}
		}
	}
	if mountPoint != "" {
		if err := fusefs.Probe(mountPoint, timeout); err != nil {
			problems = append(problems, err.Error())
		} else {
			passed = append(passed, "mount "+mountPoint+" answers")
		}
	}
	return problems, passed, notes
}

// healthClient is the HTTP client of health: the default, or one that
// verifies the daemon with the CA of files[0] and presents the client
// certificate of files[1] and files[2].
func healthClient(files [3]string) (*http.Client, error) {
	if files == [3]string{} {
		return http.DefaultClient, nil
	}
	tc, err := tlsconf.Client(files[0], files[1], files[2])
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// healthURL is the /healthz of the daemon whose metrics endpoint is base.
func healthURL(base string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/healthz")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("metrics-url %q: want http://HOST:PORT", base)
	}
	return u, nil
}

// fetchHealth asks the daemon's /healthz. A 503 carries the daemon's
// problems and is no error.
func fetchHealth(ctx context.Context, client *http.Client, base string, th metrics.Thresholds, timeout time.Duration) (*metrics.Health, error) {
	u, err := healthURL(base)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if th.MaxLag >= 0 {
		q.Set("max_lag", strconv.FormatInt(th.MaxLag, 10))
	}
	if th.MaxLagSeconds >= 0 {
		q.Set("max_lag_seconds", strconv.FormatFloat(th.MaxLagSeconds, 'f', -1, 64))
	}
	u.RawQuery = q.Encode()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s did not answer within %v", u.Redacted(), timeout)
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("%s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(body)))
	}
	var h metrics.Health
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("%s: not a ckptfs health answer: %w", u.Redacted(), err)
	}
	if !h.OK && len(h.Problems) == 0 {
		h.Problems = []string{"the daemon reports a problem without saying which"}
	}
	return &h, nil
}
