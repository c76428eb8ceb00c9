package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/manifest"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// zkFlags are the flags of the commands that read Flink's pointers in
// ZooKeeper: status, takeover and restore-pruned.
type zkFlags struct {
	zk zkSettings
	// backingTimeout bounds each verification's wait for the NAS.
	backingTimeout time.Duration
	verbose        bool
	logFormat      string
	textfile       string
	paths          pathFlags
}

func (f *zkFlags) add(cmd *cobra.Command) {
	f.zk = defaultZKSettings()
	addSettings(cmd, func(fl *pflag.FlagSet) {
		fl.StringVar(&f.zk.ZK, "zk", "", "ZooKeeper `HOST:PORT[,...]` (Flink's high-availability.zookeeper.quorum)")
		fl.StringVar(&f.zk.Site, "site", "", "`NAME` of this site (dc1, dc2, ...)")
		fl.StringVar(&f.zk.ClusterID, "cluster-id", "", "Flink's high-availability.cluster-id: `ID` of the Flink cluster (default: the only one under --path-root)")
		fl.StringVar(&f.zk.PathRoot, "path-root", f.zk.PathRoot, "`PATH` of Flink's high-availability.zookeeper.path.root")
		fl.StringVar(&f.zk.FlinkVersion, "flink-version", "", "Flink `VERSION` (for example 1.14 or 1.17) when ZooKeeper does not tell")
		fl.StringArrayVar(&f.zk.CheckpointsDirs, "checkpoints-dir", nil, "Flink's state.checkpoints.dir as a `URI` Flink writes, to find checkpoints no pointer names (repeatable)")
		fl.StringVar(&f.zk.JobResultStore, "job-result-store", "", "Flink's job-result-store.storage-path as a `URI` Flink writes (default: Flink's, <high-availability.storageDir>/job-result-store/<cluster-id>)")
		fl.DurationVar(&f.zk.FlinkSessionTimeout, "flink-session-timeout", f.zk.FlinkSessionTimeout, "Flink's high-availability.zookeeper.client.session-timeout: how long a dead JobManager's nodes may stay")
		addConnectionSettings(fl, &f.zk)
		addLeaseSetting(fl, &f.zk)
		fl.DurationVar(&f.backingTimeout, "backing-timeout", manifest.DefaultCatalogConfig().BackingTimeout, "how long a verification waits for the backing file system before its checkpoint counts as unknown (a hung NAS)")
		fl.StringVar(&f.logFormat, "log-format", "text", "format of the log on stderr: text or json")
	})
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log what is done on stderr")
	f.paths.add(cmd)
}

// addTextfile adds --metrics-textfile, for the commands that change
// ZooKeeper.
func (f *zkFlags) addTextfile(cmd *cobra.Command) {
	addSettings(cmd, func(fl *pflag.FlagSet) {
		fl.StringVar(&f.textfile, "metrics-textfile", "", "add what this run did to the counters in `FILE` (*.prom in node_exporter's --collector.textfile.directory)")
	})
}

// record adds a run's actions to --metrics-textfile, with the rollback
// windows of a takeover that activated (nil: none). A failure to write
// it is reported but does not change the exit status: the run's effect
// on ZooKeeper is what the status reports.
func (f *zkFlags) record(cmd *cobra.Command, actions map[string]uint64, rollbacks map[string]int64, result error) {
	if f.textfile == "" {
		return
	}
	code := exitOK
	var ee *exitError
	if errors.As(result, &ee) {
		code = ee.code
	}
	if err := metrics.RecordTakeover(f.textfile, f.zk.Site, actions, rollbacks, code, time.Now()); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "ckptfs: metrics textfile:", err)
	}
}

// config validates the settings and maps them: zkbridge's configuration,
// logging to w, and the verifier. Verification trusts nothing from
// earlier runs (MaxAge zero): takeover acts on it. needSite: the command
// writes in ZooKeeper.
func (f *zkFlags) config(w io.Writer, needSite bool) (zkbridge.Config, *manifest.Verifier, error) {
	var errs []error
	if needSite {
		errs = append(errs, requireSite(f.zk.Site))
	}
	errs = append(errs, checkLogFormat(f.logFormat))
	if f.backingTimeout < minBackingTimeout {
		errs = append(errs, badSetting("backing-timeout", "backing-timeout %v is too short", f.backingTimeout))
	}
	res, err := f.paths.resolver()
	errs = append(errs, err)
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if f.logFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	cfg, err := f.zk.bridgeConfig(slog.New(h))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return cfg, nil, err
	}
	mcfg := manifest.DefaultVerifierConfig()
	mcfg.Resolver = res
	v, err := manifest.NewVerifier(mcfg)
	return cfg, v, err
}

// check is the command's settingsCheck.
func (f *zkFlags) check(needSite bool) settingsCheck {
	return func() error {
		_, _, err := f.config(io.Discard, needSite)
		return err
	}
}

// open validates the settings (their errors name where a bad value came
// from) and connects.
func (f *zkFlags) open(ctx context.Context, cmd *cobra.Command, needSite bool) (*zkbridge.Bridge, error) {
	cfg, v, err := f.config(cmd.ErrOrStderr(), needSite)
	if err != nil {
		return nil, located(cmd, err)
	}
	f.zk.warnAtStart(cfg.Logger)
	return zkbridge.New(ctx, cfg, zkbridge.NewSiteVerifier(v, f.backingTimeout))
}

// commandContext ends on SIGINT or SIGTERM; ending it stops whatever
// the command was doing.
func commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func newStatusCmd(checks settingsChecks) *cobra.Command {
	var (
		out outputFlag
		zf  zkFlags
	)
	cmd := &cobra.Command{
		Use:   "status --zk HOST:PORT [--site NAME] [--map P=D]... [-o json]",
		Short: "Compare Flink's ZooKeeper pointers with what this site holds",
		Long: `Status reads Flink's ZooKeeper HA data and ckptfs's own znodes and says,
for every job: Flink's checkpoint pointers with their verdict on this site
(the HA file and every file it needs, level L2), the newest pointer complete
here, how far ZooKeeper is ahead of this site (in checkpoints and seconds),
every site's marker and the pointers a takeover retracted; and whether a
Flink JobManager is alive (and where), the active site and the epoch.
It writes nothing.

Flink stores absolute paths of the site that wrote them: --map says where
they are here (as for verify).

Before Flink's first start (no Flink namespace in ZooKeeper yet) it says
so, and what else would explain it, with exit status 0.

Exit status:
  0  status printed
  3  usage, ZooKeeper or I/O error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd)
			defer cancel()
			b, err := zf.open(ctx, cmd, false)
			if err != nil {
				return zkFail(err)
			}
			defer b.Close()
			rep, err := b.Status(ctx)
			if err != nil {
				return zkFail(err)
			}
			if out == "json" {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			writeStatusText(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	addOutputFlag(cmd, &out)
	zf.add(cmd)
	checks[cmd] = zf.check(false)
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail("%v", err)
	}
	return nil
}

func writeStatusText(w io.Writer, rep *zkbridge.StatusReport) {
	l := rep.Layout
	if rep.NoNamespace != "" {
		fmt.Fprintf(w, "cluster %s (%s): %s\n", displayCluster(rep.ClusterID), l.Namespace, rep.NoNamespace)
	} else {
		fmt.Fprintf(w, "cluster %s (%s), Flink layout %s\n", displayCluster(rep.ClusterID), l.Namespace, layoutName(l))
	}
	active := rep.ActiveSite
	if active == "" {
		active = "none yet"
	}
	site := rep.Site
	if site == "" {
		site = "(no --site)"
	}
	fmt.Fprintf(w, "this site: %s; active site: %s; epoch %d\n", site, active, rep.Epoch)
	fmt.Fprintf(w, "JobManager: %s\n", rep.JobManager)
	if rep.Lease != nil {
		fmt.Fprintf(w, "lease: %s\n", rep.Lease)
	} else {
		fmt.Fprintln(w, "lease: none (no site was activated since ckptfs kept it)")
	}
	writeAutoTakeover(w, rep.AutoTakeover)
	for _, j := range rep.Jobs {
		fmt.Fprintf(w, "\njob %s\n", j.JobID)
		if len(j.Pointers) > 0 {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  ID\tVISIBLE\tLOCKED\tCOMPLETE\tLEVEL\tHA FILE\tPROBLEMS")
			for _, p := range j.Pointers {
				ha := "readable"
				if !p.HAFileReadable {
					ha = "unreadable"
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%d\n", p.ID, yesNo(p.Visible), yesNo(p.Locked), yesNo(p.Complete), p.Level, ha, len(p.Problems))
			}
			tw.Flush()
			for _, p := range j.Pointers {
				for i, pr := range p.Problems {
					if i == 5 {
						fmt.Fprintf(w, "  %d: ... %d more problems (use -o json for all)\n", p.ID, len(p.Problems)-5)
						break
					}
					fmt.Fprintf(w, "  %d: %s\n", p.ID, pr)
				}
			}
		}
		fmt.Fprintf(w, "  %s\n", j.Summary)
		if len(j.Markers) > 0 {
			sites := make([]string, 0, len(j.Markers))
			for s := range j.Markers {
				sites = append(sites, s)
			}
			sort.Strings(sites)
			var ms []string
			for _, s := range sites {
				m := j.Markers[s]
				if m.CheckpointID < 0 {
					ms = append(ms, s+": none complete")
				} else {
					ms = append(ms, fmt.Sprintf("%s: %d at %s (verified %s)", s, m.CheckpointID, m.Level, m.VerifiedAt.Format(time.RFC3339)))
				}
			}
			fmt.Fprintf(w, "  markers: %s\n", strings.Join(ms, "; "))
		}
		if len(j.Pruned) > 0 {
			fmt.Fprintf(w, "  retracted by a takeover (restore-pruned puts them back): %v\n", j.Pruned)
		}
		if len(j.KeptBackups) > 0 {
			fmt.Fprintf(w, "  kept by a takeover and backed up (restore-pruned brings back those Flink deleted): %v\n", j.KeptBackups)
		}
		if j.Takeover.Refused {
			fmt.Fprintf(w, "  a takeover here would refuse the job (%s): %s\n", j.Takeover.Reason, j.Takeover.Detail)
		}
		for _, n := range j.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if len(rep.Jobs) == 0 && rep.NoNamespace == "" {
		fmt.Fprintln(w, "\nno jobs in ZooKeeper")
	}
}

func displayCluster(id string) string {
	if id == "" {
		return "(empty cluster id)"
	}
	return id
}

func layoutName(l *zkbridge.Layout) string {
	if l.Generation != zkbridge.GenUnknown {
		return l.Generation.String()
	}
	var cs []string
	for _, c := range l.Candidates {
		cs = append(cs, c.String())
	}
	if len(cs) == 0 {
		return "unknown (conflicting evidence)"
	}
	return "one of " + strings.Join(cs, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeAutoTakeover prints the journal of the latest automatic takeover.
func writeAutoTakeover(w io.Writer, a *zkbridge.AutoTakeover) {
	if a == nil {
		return
	}
	who := a.Site
	if a.Host != "" {
		who += fmt.Sprintf(", %s pid %d", a.Host, a.PID)
	}
	fmt.Fprintf(w, "automatic takeover by site %s (daemon %s), started %s: %s\n", a.Site, who, a.Started.Format(time.RFC3339Nano), a.State)
	if a.WaitingFor != "" {
		fmt.Fprintf(w, "  waiting for: %s\n", a.WaitingFor)
	}
	for _, s := range a.Steps {
		fmt.Fprintf(w, "  %s +%v  %-9s %s\n", s.At.Format("15:04:05.000"), s.At.Sub(a.Started).Round(time.Millisecond), s.Outcome, s.What)
	}
	for _, r := range a.Refused {
		fmt.Fprintf(w, "  refused job %s (%s): %s\n", r.JobID, r.Reason, r.Detail)
	}
	if a.RolledBack > 0 {
		fmt.Fprintf(w, "  %d jobs restore a checkpoint older than the newest Flink completed (their exactly-once sinks produce that output again):\n", a.RolledBack)
	}
	for i, r := range a.Rollbacks {
		if i == maxStatusRollbacks {
			fmt.Fprintf(w, "  ... %d more in -o json\n", len(a.Rollbacks)-i)
			break
		}
		fmt.Fprintf(w, "  rollback window of job %s: %s\n", r.JobID, rollbackText(&r.Rollback))
	}
}

// maxStatusRollbacks bounds the rollback windows status prints in text.
const maxStatusRollbacks = 20
