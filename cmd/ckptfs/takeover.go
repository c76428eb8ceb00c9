package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/internal/metrics"
	"github.com/ckptfs/ckptfs/zkbridge"
)

// Exit codes of takeover and restore-pruned.
const (
	exitRefused   = 4 // takeover: some job was refused: nothing changed for it
	exitNotActive = 4 // restore-pruned: this site is not the active one: nothing changed
	exitAlive     = 5 // a Flink JobManager stayed alive past the wait
)

func newTakeoverCmd(checks settingsChecks) *cobra.Command {
	var (
		out            outputFlag
		zf             zkFlags
		wait           time.Duration
		dryRun         bool
		activateAnyway bool
		acceptLoss     bool
		newCluster     bool
	)
	cmd := &cobra.Command{
		Use:   "takeover --zk HOST:PORT --site NAME --map P=D... [--wait D] [--dry-run] [-o json]",
		Short: "Make ZooKeeper point only at checkpoints this site holds, then activate it",
		Long: `Takeover is the gate before Flink starts on this site. It takes ckptfs's
takeover lock, waits (at most --wait, by default Flink's ZooKeeper session
timeout plus 15s) until no Flink JobManager of the cluster is alive, and
none has come back for Flink's session timeout (a JobManager that can still
reach a quorum is re-elected within it), and then, for every job:

  - keeps the newest checkpoint pointer this site holds completely at level
    L2 (its HA file and every file it needs), and every older pointer whose
    HA file is readable here;
  - retracts every newer pointer and every pointer whose HA file is not
    readable here (Flink would fail on it): each in one version-checked
    ZooKeeper transaction that also stores a backup under
    /ckptfs/<cluster>/pruned (restore-pruned puts them back);
  - changes nothing for a job it refuses, and prints the reason and the
    newest checkpoint this site holds at L1 with the command to start the
    job from it by hand. Reasons (docs/runbook.md says what to do for each):
      job_graph_incomplete   the job graph / execution plan HA file is
                             missing or torn here
      blobs_incomplete       a blob of the job (user jar, artifact) is
                             missing here or not its SHA-1
      job_result_incomplete  an entry of the job result store is torn here
      no_complete_pointer    no checkpoint pointer is complete here at L2
      checkpoints_lost       the job has no pointer Flink reads, but this
                             site's marker or a backup shows it had a
                             complete checkpoint (--accept-state-loss
                             starts it from empty state anyway)

Finally it sets /ckptfs/<cluster>/active-site to this site and bumps the
epoch, unless a job was refused (--activate-anyway overrides).

A cluster whose Flink namespace does not exist yet passes with nothing to
retract (Flink's first start), unless the path root holds other Flink
clusters: the cluster id may be misspelt. --new-cluster says it is a new
cluster beside them: the takeover creates its empty namespace (with its
missing parents, open as zkCli's create makes it) so that every later
takeover finds it. Markers of the cluster's jobs still refuse it. It never
touches state files, _metadata, HA files, job graphs, the checkpoint
counter, leader nodes or the job result store. Running it again after a
failure is safe: it converges to the same result.

Exit status:
  0  every job is ok (and the site is active)
  3  usage, ZooKeeper or I/O error (nothing is left half-done: run it again)
  4  some job was refused (see the reasons): nothing changed for it
  5  a Flink JobManager stayed alive past --wait, or another site's
     daemons still renew the lease (its mounts may write): nothing
     changed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd)
			defer cancel()
			b, err := zf.open(ctx, cmd, true)
			if err != nil {
				result := zkFail(err)
				if !dryRun {
					zf.record(cmd, takeoverActions(nil, err), nil, result)
				}
				return result
			}
			defer b.Close()
			opts := b.DefaultTakeoverOptions()
			if cmd.Flags().Changed("wait") {
				opts.Wait = wait
			}
			opts.DryRun, opts.ActivateAnyway, opts.AcceptStateLoss, opts.NewCluster = dryRun, activateAnyway, acceptLoss, newCluster
			rep, err := b.Takeover(ctx, opts)
			if rep != nil {
				if out == "json" {
					if werr := writeJSON(cmd.OutOrStdout(), rep); werr != nil {
						return werr
					}
				} else {
					writeTakeoverText(cmd.OutOrStdout(), rep)
				}
			}
			result := commandResult(err)
			if err == nil && rep.Refused() {
				result = exitWith(exitRefused)
			}
			if !dryRun {
				zf.record(cmd, takeoverActions(rep, err), takeoverRollbacks(rep), result)
			}
			return result
		},
	}
	addOutputFlag(cmd, &out)
	zf.add(cmd)
	zf.addTextfile(cmd)
	checks[cmd] = zf.check(true)
	addSettings(cmd, func(f *pflag.FlagSet) {
		f.DurationVar(&wait, "wait", 0, "how long to wait for Flink's JobManagers to vanish from ZooKeeper (default --flink-session-timeout + 15s; 0 does not wait)")
	})
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and write nothing")
	cmd.Flags().BoolVar(&activateAnyway, "activate-anyway", false, "make this site active even when a job was refused")
	cmd.Flags().BoolVar(&acceptLoss, "accept-state-loss", false, "let Flink start a job that has no checkpoint pointer left although it had a complete checkpoint (checkpoints_lost)")
	cmd.Flags().BoolVar(&newCluster, "new-cluster", false, "the cluster id is a new cluster's beside others under the path root: create its empty Flink namespace if absent, then take over")
	return cmd
}

func writeTakeoverText(w io.Writer, rep *zkbridge.TakeoverReport) {
	what := "takeover"
	if rep.DryRun {
		what = "dry run of a takeover (nothing written)"
	}
	fmt.Fprintf(w, "%s of cluster %s (%s, Flink layout %s) for site %s\n", what, displayCluster(rep.ClusterID), rep.Namespace, rep.Generation, rep.Site)
	if rep.NewNamespace != "" && rep.DryRun {
		fmt.Fprintf(w, "would create the empty namespace %s of a new cluster\n", rep.NewNamespace)
	} else if rep.NewNamespace != "" {
		fmt.Fprintf(w, "created the empty namespace %s of a new cluster\n", rep.NewNamespace)
	}
	if rep.JobManager != nil {
		fmt.Fprintf(w, "JobManager: %s (waited %s)\n", rep.JobManager, time.Duration(rep.Waited))
	}
	verb := "retracted"
	if rep.DryRun {
		verb = "would retract"
	}
	for _, j := range rep.Jobs {
		if j.Refusal != "" {
			fmt.Fprintf(w, "\njob %s: %s (%s)\n", j.JobID, strings.ToUpper(j.Status), j.Refusal)
		} else {
			fmt.Fprintf(w, "\njob %s: %s\n", j.JobID, strings.ToUpper(j.Status))
		}
		fmt.Fprintf(w, "  why: %s\n", j.Reason)
		fmt.Fprintf(w, "  kept: %s\n", ids(j.Kept))
		if len(j.Retracted) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", verb, ids(j.Retracted))
		}
		if len(j.BackedUp) > 0 {
			fmt.Fprintf(w, "  backed up (kept; restore-pruned brings them back if Flink deletes them): %s\n", ids(j.BackedUp))
		}
		if len(j.AlreadyPruned) > 0 {
			fmt.Fprintf(w, "  retracted earlier: %s\n", ids(j.AlreadyPruned))
		}
		if len(j.Ignored) > 0 {
			fmt.Fprintf(w, "  ignored (marked for deletion, Flink skips them): %s\n", ids(j.Ignored))
		}
		if r := j.Rollback; r != nil {
			fmt.Fprintf(w, "  rollback window: %s\n", rollbackText(r))
		}
		if h := j.RestoreHint; h != nil {
			fmt.Fprintf(w, "  restore by hand: %s\n", h.Message)
			if h.Path != "" {
				fmt.Fprintf(w, "    %s <job jar> ...\n    or in the configuration: %s\n", h.FlinkRun, h.Config)
			}
		}
	}
	if len(rep.Jobs) == 0 && rep.JobManager != nil && !rep.JobManager.Alive {
		fmt.Fprintln(w, "\nno jobs in ZooKeeper")
	}
	fmt.Fprintf(w, "\n%s\n", rep.Decision)
}

// rollbackText is a job's rollback window in words.
func rollbackText(r *zkbridge.Rollback) string {
	if r.Checkpoints == 0 {
		return fmt.Sprintf("0 checkpoints (restores %d, the newest Flink completed)", r.Restored)
	}
	s := fmt.Sprintf("%d checkpoint ids (restores %d, Flink completed %d", r.Checkpoints, r.Restored, r.Completed)
	if r.Seconds != nil {
		s += fmt.Sprintf(", %s later", time.Duration(*r.Seconds*float64(time.Second)).Round(time.Second))
	}
	s += ")"
	if r.ExactlyOnce != "" {
		s += ": " + r.ExactlyOnce
	}
	return s
}

func ids(v []int64) string {
	if len(v) == 0 {
		return "none"
	}
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

func newRestorePrunedCmd(checks settingsChecks) *cobra.Command {
	var (
		out        outputFlag
		zf         zkFlags
		jobs       []string
		unverified bool
		dryRun     bool
		recreate   bool
	)
	cmd := &cobra.Command{
		Use:   "restore-pruned --zk HOST:PORT --site NAME --map P=D... [--job ID]... [--dry-run] [-o json]",
		Short: "Put back checkpoint pointers a takeover retracted",
		Long: `Restore-pruned puts back the checkpoint pointers a takeover retracted, from
the backups under /ckptfs/<cluster>/pruned: the original bytes and, for
Flink 1.15+, the persistent locks child (with its original bytes) without
which Flink treats a pointer as deleted. A pointer is put back only where
it is absent, its id is below the job's checkpoint counter and, unless
--unverified, its checkpoint is now complete on this site at L2 (Flink
restores the newest pointer). Each is one version-checked transaction that also deletes the
backup, and checks that active-site has not changed. It refuses while a
Flink JobManager is alive, and on a site that active-site does not name
(dry run included): only the active site's Flink reads the pointers, and
only its replica vouches for them.

A takeover also backs up the pointers it keeps (marked kept): when Flink
deletes them afterwards (a job that reached FAILED loses its pointers,
its counter and its job graph), restore-pruned brings them back;
--recreate-job creates the job's pointer directory and checkpoint counter
again when Flink removed them. A kept pointer still in ZooKeeper keeps
its backup.

Exit status:
  0  done (skipped backups are listed with the reason)
  3  usage, ZooKeeper or I/O error
  4  this site is not the active one (active-site names another site, or
     none yet, or changed meanwhile): nothing changed
  5  a Flink JobManager is alive: nothing changed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd)
			defer cancel()
			b, err := zf.open(ctx, cmd, true)
			if err != nil {
				result := zkFail(err)
				if !dryRun {
					zf.record(cmd, restoreActions(nil, err), nil, result)
				}
				return result
			}
			defer b.Close()
			rep, err := b.RestorePruned(ctx, zkbridge.RestoreOptions{Jobs: jobs, Unverified: unverified, DryRun: dryRun, RecreateJob: recreate})
			if rep != nil && err == nil {
				if out == "json" {
					if werr := writeJSON(cmd.OutOrStdout(), rep); werr != nil {
						return werr
					}
				} else {
					writeRestoreText(cmd.OutOrStdout(), rep)
				}
			}
			result := commandResult(err)
			if !dryRun {
				zf.record(cmd, restoreActions(rep, err), nil, result)
			}
			return result
		},
	}
	addOutputFlag(cmd, &out)
	zf.add(cmd)
	zf.addTextfile(cmd)
	checks[cmd] = zf.check(true)
	cmd.Flags().StringArrayVar(&jobs, "job", nil, "restore only this job `ID` (repeatable)")
	cmd.Flags().BoolVar(&unverified, "unverified", false, "put pointers back even when their checkpoint is not complete here")
	cmd.Flags().BoolVar(&recreate, "recreate-job", false, "also for a job whose checkpoint store Flink removed (it reached FAILED): create its pointer directory and checkpoint counter again")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be put back and write nothing")
	return cmd
}

func writeRestoreText(w io.Writer, rep *zkbridge.RestoreReport) {
	verb := "restored"
	if rep.DryRun {
		verb = "would restore"
	}
	if len(rep.Jobs) == 0 {
		fmt.Fprintln(w, "no backups")
	}
	for _, j := range rep.Jobs {
		fmt.Fprintf(w, "job %s: %s %s\n", j.JobID, verb, ids(j.Restored))
		for _, s := range j.Skipped {
			fmt.Fprintf(w, "  left %d: %s\n", s.ID, s.Reason)
		}
	}
}

// commandResult is the exit of takeover or restore-pruned for the error
// of their run: 5 when a JobManager stayed alive or another site's
// daemons kept renewing the lease, 4 when restore-pruned ran on a site
// that is not the active one, 3 for any other error.
func commandResult(err error) error {
	switch {
	case errors.Is(err, zkbridge.ErrJobManagerAlive), errors.Is(err, zkbridge.ErrLeaseHeld):
		return &exitError{code: exitAlive, err: err}
	case errors.Is(err, zkbridge.ErrNotActiveSite):
		return &exitError{code: exitNotActive, err: err}
	case err != nil:
		return zkFail(err)
	}
	return nil
}

// runActions counts one run of a command and how it failed.
func runActions(err error) map[string]uint64 {
	a := map[string]uint64{metrics.ActionRun: 1}
	switch {
	case errors.Is(err, zkbridge.ErrJobManagerAlive), errors.Is(err, zkbridge.ErrLeaseHeld):
		a[metrics.ActionRefuseAlive]++
	case errors.Is(err, zkbridge.ErrNotActiveSite):
		// restore-pruned on a standby site: a refusal, not an error; the
		// last exit code (4) shows it.
	case err != nil:
		a[metrics.ActionError]++
	}
	return a
}

// takeoverActions counts what a takeover did, for the textfile.
func takeoverActions(rep *zkbridge.TakeoverReport, err error) map[string]uint64 {
	a := runActions(err)
	if rep == nil {
		return a
	}
	for _, j := range rep.Jobs {
		a[metrics.ActionRetract] += uint64(len(j.Retracted))
		if j.Status == zkbridge.StatusRefused {
			a[metrics.ActionRefuseJob]++
		}
	}
	if rep.Activated {
		a[metrics.ActionActivate]++
	}
	return a
}

// takeoverRollbacks are the rollback windows of a takeover that made
// the site active, by job, for the textfile; nil otherwise.
func takeoverRollbacks(rep *zkbridge.TakeoverReport) map[string]int64 {
	if rep == nil || !rep.Activated {
		return nil
	}
	out := map[string]int64{}
	for _, j := range rep.Jobs {
		if j.Rollback != nil {
			out[j.JobID] = j.Rollback.Checkpoints
		}
	}
	return out
}

// restoreActions counts what restore-pruned did, for the textfile.
func restoreActions(rep *zkbridge.RestoreReport, err error) map[string]uint64 {
	a := runActions(err)
	if rep != nil && err == nil {
		for _, j := range rep.Jobs {
			a[metrics.ActionRestore] += uint64(len(j.Restored))
		}
	}
	return a
}
