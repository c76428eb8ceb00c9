package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ckptfs/ckptfs/manifest"
)

// Exit codes of verify.
const (
	exitNewestIncomplete = 1 // some job's newest is incomplete, an older one is complete
	exitNoneComplete     = 2 // some job has no complete checkpoint
)

// pathFlags are the flags that say where Flink's paths are found locally.
type pathFlags struct {
	maps  []string
	roots []string
}

func (p *pathFlags) add(cmd *cobra.Command) {
	addSettings(cmd, func(f *pflag.FlagSet) {
		f.StringArrayVar(&p.maps, "map", nil, "`URI_PREFIX=LOCAL_DIR`: Flink paths starting with URI_PREFIX are under LOCAL_DIR (repeatable)")
		f.StringArrayVar(&p.roots, "root", nil, "extra local `DIR` that referenced files may lie in (repeatable)")
	})
}

// resolver builds the path resolver; extraRoots are roots implied by the
// command's arguments.
func (p *pathFlags) resolver(extraRoots ...string) (*manifest.Resolver, error) {
	return newResolver(p.maps, p.roots, extraRoots...)
}

// newResolver builds the path resolver of the settings map and root;
// extraRoots are roots implied otherwise. Problems name their setting.
func newResolver(maps, roots []string, extraRoots ...string) (*manifest.Resolver, error) {
	var mappings []manifest.Mapping
	var errs []error
	for _, s := range maps {
		m, err := manifest.ParseMapping(s)
		if err != nil {
			errs = append(errs, badSetting("map", "map: %w", err))
			continue
		}
		mappings = append(mappings, m)
	}
	var abs []string
	for i, r := range append(append([]string(nil), roots...), extraRoots...) {
		a, err := filepath.Abs(r)
		if err != nil {
			if i < len(roots) {
				err = badSetting("root", "root %q: %w", r, err)
			}
			errs = append(errs, err)
			continue
		}
		abs = append(abs, a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	res, err := manifest.NewResolver(mappings, abs)
	if err != nil {
		// The roots are absolute: a mapping is wrong.
		return nil, badSetting("map", "map: %w", err)
	}
	return res, nil
}

func newVerifyCmd(checks settingsChecks) *cobra.Command {
	var (
		out        outputFlag
		paths      pathFlags
		jobFilter  string
		checkpoint int64
		checksums  bool
	)
	cmd := &cobra.Command{
		Use:   "verify [-o json] [--map P=D]... [--job ID] [--checkpoint N] ROOT",
		Short: "Check which checkpoints this site holds completely",
		Long: `Verify checks checkpoints against the files on this site, from Flink's own
_metadata: every file it references must exist with exactly its recorded size.

ROOT is a checkpoints root (<job-id>/chk-N/), one job directory (chk-N/), or one
checkpoint directory (any directory holding _metadata); verify detects which.
Absolute paths that Flink stored are resolved through --map and must lie under
ROOT, a --map directory or a --root directory; anything else is reported as
outside_root and never opened.

--checksums also compares the contents of every file with the checksums
the primary sealed for the checkpoint (in .ckptfs/manifests under the
primary's backing directory, replicated with it: the nearest .ckptfs in
ROOT or above it). A checkpoint whose files all match is complete at
level L3; each file that differs is a checksum_mismatch with the sealed
(expected) and the found checksum, and makes it incomplete. A checkpoint
without a sealed manifest stays at L1: only its sizes were checked.

Exit status:
  0  the newest checkpoint of every job is complete
  1  some job's newest checkpoint is incomplete, but an older one is complete
  2  some job has no complete checkpoint
  3  usage or I/O error`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSettings(cmd, checks[cmd]); err != nil {
				return fail("%v", err)
			}
			root, err := filepath.Abs(args[0])
			if err != nil {
				return fail("%v", err)
			}
			shape, jobs, err := manifest.FindCheckpoints(root)
			if err != nil {
				return fail("%v", err)
			}
			res, err := paths.resolver(root)
			if err != nil {
				return fail("%v", err)
			}
			cfg := manifest.DefaultVerifierConfig()
			cfg.Resolver = res
			if checksums {
				if cfg.SealedRoot, err = sealedRoot(root); err != nil {
					return fail("%v", err)
				}
			}
			v, err := manifest.NewVerifier(cfg)
			if err != nil {
				return fail("%v", err)
			}
			jobs, err = filterJobs(jobs, jobFilter, checkpoint, cmd.Flags().Changed("checkpoint"))
			if err != nil {
				return fail("%v", err)
			}
			var reports []*manifest.JobReport
			for _, job := range jobs {
				reports = append(reports, v.VerifyJob(cmd.Context(), job))
			}
			if out == "json" {
				if err := writeVerifyJSON(cmd.OutOrStdout(), reports); err != nil {
					return fail("%v", err)
				}
			} else {
				writeVerifyText(cmd.OutOrStdout(), root, shape, reports, checksums)
			}
			if code := verifyExitCode(reports); code != exitOK {
				return exitWith(code)
			}
			return nil
		},
	}
	addOutputFlag(cmd, &out)
	paths.add(cmd)
	checks[cmd] = func() error {
		_, err := paths.resolver()
		return err
	}
	cmd.Flags().StringVar(&jobFilter, "job", "", "verify only the job with this `ID` (directory name)")
	cmd.Flags().Int64Var(&checkpoint, "checkpoint", 0, "verify only checkpoint `N` of each job")
	cmd.Flags().BoolVar(&checksums, "checksums", false, "also compare contents with the checksums the primary sealed (.ckptfs in ROOT or above it): level L3, each differing file a checksum_mismatch")
	return cmd
}

// sealedRoot is the nearest of dir and its ancestors that holds sealed
// manifests (.ckptfs/manifests): the primary's backing directory, or its
// replica.
func sealedRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, manifest.StateDir, "manifests")); err == nil && st.IsDir() {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("--checksums: no %s/manifests in %s or above it: the primary mount seals them under its backing directory (verify the NAS or its replica, not the mount, which hides them)", manifest.StateDir, dir)
		}
	}
}

func filterJobs(jobs []manifest.JobDir, job string, checkpoint int64, byCheckpoint bool) ([]manifest.JobDir, error) {
	var out []manifest.JobDir
	for _, j := range jobs {
		if job != "" && j.ID != job {
			continue
		}
		if byCheckpoint {
			var keep []manifest.CheckpointDir
			for _, c := range j.Checkpoints {
				// A directory not named chk-N is identified by its metadata.
				if c.ID == checkpoint || c.ID < 0 {
					keep = append(keep, c)
				}
			}
			var skipped []manifest.Skipped
			for _, sk := range j.Skipped {
				if id, _ := manifest.CheckpointIDFromDirName(sk.Name); id == checkpoint {
					skipped = append(skipped, sk)
				}
			}
			if len(keep) == 0 && len(skipped) == 0 {
				continue
			}
			j.Checkpoints, j.Skipped = keep, skipped
		}
		out = append(out, j)
	}
	switch {
	case len(out) > 0:
		return out, nil
	case job != "" && byCheckpoint:
		return nil, fmt.Errorf("job %s has no checkpoint %d", job, checkpoint)
	case job != "":
		return nil, fmt.Errorf("no job %s", job)
	default:
		return nil, fmt.Errorf("no checkpoint %d", checkpoint)
	}
}

// verifyExitCode is the worst job's status.
func verifyExitCode(reports []*manifest.JobReport) int {
	code := exitOK
	for _, r := range reports {
		switch {
		case r.NewestComplete() == nil:
			code = max(code, exitNoneComplete)
		case !r.Newest().Complete:
			code = max(code, exitNewestIncomplete)
		}
	}
	return code
}

type verifyJSON struct {
	Jobs []verifyJobJSON `json:"jobs"`
}

type verifyJobJSON struct {
	JobID          string              `json:"job_id"`
	Newest         *int64              `json:"newest"`
	NewestComplete *int64              `json:"newest_complete"`
	Checkpoints    []*manifest.Verdict `json:"checkpoints"`
	// Skipped are the entries named chk-N that were not verified.
	Skipped []manifest.Skipped `json:"skipped,omitempty"`
}

func writeVerifyJSON(w io.Writer, reports []*manifest.JobReport) error {
	doc := verifyJSON{Jobs: []verifyJobJSON{}}
	for _, r := range reports {
		j := verifyJobJSON{JobID: r.JobID, Checkpoints: r.Checkpoints, Skipped: r.Skipped}
		if j.Checkpoints == nil {
			j.Checkpoints = []*manifest.Verdict{} // only skipped entries
		}
		if n := r.Newest(); n != nil {
			j.Newest = &n.CheckpointID
		}
		if n := r.NewestComplete(); n != nil {
			j.NewestComplete = &n.CheckpointID
		}
		doc.Jobs = append(doc.Jobs, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func writeVerifyText(w io.Writer, root string, shape manifest.Shape, reports []*manifest.JobReport, checksums bool) {
	fmt.Fprintf(w, "%s (%s)\n", root, shape)
	for _, r := range reports {
		fmt.Fprintf(w, "\njob %s\n", r.JobID)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  ID\tCOMPLETE\tLEVEL\tFILES\tBYTES\tPROBLEMS\t")
		for _, v := range r.Checkpoints {
			complete := "no"
			switch {
			case v.Complete:
				complete = "yes"
			case v.Unknown:
				complete = "unknown"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%d\t\n", v.CheckpointID, complete, v.Level, v.Files, v.Bytes, len(v.Problems))
		}
		tw.Flush()
		for _, v := range r.Checkpoints {
			const shown = 10
			for i, p := range v.Problems {
				if i == shown {
					fmt.Fprintf(w, "  %d: ... %d more problems (use -o json for all)\n", v.CheckpointID, len(v.Problems)-shown)
					break
				}
				fmt.Fprintf(w, "  %d: %s\n", v.CheckpointID, p)
			}
		}
		for _, s := range r.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", s.Name, s.Reason)
		}
		if checksums {
			for _, v := range r.Checkpoints {
				if v.Complete && v.Level < manifest.L3 {
					fmt.Fprintf(w, "  %d: no sealed manifest: sizes checked, contents not\n", v.CheckpointID)
				}
			}
		}
		if n := r.NewestComplete(); n != nil {
			fmt.Fprintf(w, "newest complete checkpoint: %d (%s)\n", n.CheckpointID, n.Dir)
		} else {
			fmt.Fprintln(w, "newest complete checkpoint: none")
		}
	}
}
