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

// zkFlags are the flags of the commands that talk to ZooKeeper.
type zkFlags struct {
	servers         string
	site            string
	clusterID       string
	pathRoot        string
	flinkVersion    string
	checkpointsDirs []string
	flinkSession    time.Duration
	verbose         bool
	logFormat       string
	textfile        string
	paths           pathFlags
}

func (f *zkFlags) add(cmd *cobra.Command) {
	addSettings(cmd, func(fl *pflag.FlagSet) {
		fl.StringVar(&f.servers, "zk", "", "ZooKeeper `HOST:PORT[,...]` (Flink's high-availability.zookeeper.quorum)")
		fl.StringVar(&f.site, "site", "", "`NAME` of this site (dc1, dc2, ...)")
		fl.StringVar(&f.clusterID, "cluster-id", "", "Flink's high-availability.cluster-id: `ID` of the Flink cluster (default: the only one under --path-root)")
		fl.StringVar(&f.pathRoot, "path-root", "/flink", "`PATH` of Flink's high-availability.zookeeper.path.root")
		fl.StringVar(&f.flinkVersion, "flink-version", "", "Flink `VERSION` (for example 1.14 or 1.17) when ZooKeeper does not tell")
		fl.StringArrayVar(&f.checkpointsDirs, "checkpoints-dir", nil, "Flink's state.checkpoints.dir as a `URI` Flink writes, to find checkpoints no pointer names (repeatable)")
		fl.DurationVar(&f.flinkSession, "flink-session-timeout", 60*time.Second, "Flink's high-availability.zookeeper.client.session-timeout: how long a dead JobManager's nodes may stay")
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

// record adds a run's actions to --metrics-textfile. A failure to write
// it is reported but does not change the exit status: the run's effect
// on ZooKeeper is what the status reports.
func (f *zkFlags) record(cmd *cobra.Command, actions map[string]uint64, result error) {
	if f.textfile == "" {
		return
	}
	code := exitOK
	var ee *exitError
	if errors.As(result, &ee) {
		code = ee.code
	}
	if err := metrics.RecordTakeover(f.textfile, f.site, actions, code, time.Now()); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "ckptfs: metrics textfile:", err)
	}
}

// open validates the flags and connects. Verification trusts nothing from
// earlier runs (MaxAge zero): takeover acts on it.
func (f *zkFlags) open(ctx context.Context, cmd *cobra.Command, needSite bool) (*zkbridge.Bridge, error) {
	if f.servers == "" {
		return nil, errors.New("zk is required: --zk, CKPTFS_ZK or zk in the configuration file")
	}
	if needSite && f.site == "" {
		return nil, errors.New("site is required: --site, CKPTFS_SITE or site in the configuration file")
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return nil, fmt.Errorf("--log-format %q: want text or json", f.logFormat)
	}
	gen, err := zkbridge.ParseGeneration(f.flinkVersion)
	if err != nil {
		return nil, err
	}
	res, err := f.paths.resolver()
	if err != nil {
		return nil, err
	}
	mcfg := manifest.DefaultConfig()
	mcfg.Resolver = res
	v, err := manifest.NewVerifier(mcfg)
	if err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	cfg := zkbridge.DefaultConfig()
	for _, s := range strings.Split(f.servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	cfg.Site = f.site
	cfg.ClusterID = f.clusterID
	cfg.PathRoot = f.pathRoot
	cfg.FlinkVersion = gen
	cfg.CheckpointsDirs = f.checkpointsDirs
	cfg.FlinkSessionTimeout = f.flinkSession
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), opts)
	if f.logFormat == "json" {
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), opts)
	}
	cfg.Logger = slog.New(h)
	return zkbridge.New(ctx, cfg, zkbridge.NewSiteVerifier(v))
}

// commandContext ends on SIGINT or SIGTERM; ending it closes the
// ZooKeeper connection, which stops whatever the command was doing.
func commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

func newStatusCmd() *cobra.Command {
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

Exit status:
  0  status printed
  3  usage, ZooKeeper or I/O error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd)
			defer cancel()
			b, err := zf.open(ctx, cmd, false)
			if err != nil {
				return fail("%v", err)
			}
			defer b.Close()
			rep, err := b.Status(ctx)
			if err != nil {
				return fail("%v", err)
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
	fmt.Fprintf(w, "cluster %s (%s), Flink layout %s\n", displayCluster(rep.ClusterID), l.Namespace, layoutName(l))
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
		for _, n := range j.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if len(rep.Jobs) == 0 {
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
