// Command ckptfs makes Flink fail over between data centers without ever
// restoring a checkpoint the standby site does not fully hold.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ckptfs/ckptfs/fusefs"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitUsage = 3 // usage or I/O error
)

// exitError carries an exit code; a nil err means the command already
// printed what it had to say.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitWith returns an error that makes the process exit with code without
// printing anything more.
func exitWith(code int) error { return &exitError{code: code} }

// fail returns an error printed on stderr with exit code 3.
func fail(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

func main() {
	fusefs.ServeProbe()
	if filepath.Base(os.Args[0]) == helperName {
		os.Exit(runMountHelper(os.Args[1:], os.Stderr))
	}
	os.Exit(run(newRootCmd(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit code.
func run(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "ckptfs:", ee.err)
		}
		return ee.code
	}
	// Flag and argument errors from cobra.
	fmt.Fprintln(stderr, "ckptfs:", err)
	return exitUsage
}

func newRootCmd() *cobra.Command { return newRoot(serveMount) }

// newRoot builds the command tree; serve runs the mount daemon (tests
// replace it to check settings without mounting).
func newRoot(serve mountServer) *cobra.Command {
	root := &cobra.Command{
		Use:   "ckptfs",
		Short: "Show Flink only the checkpoints this site fully holds",
		Long: `ckptfs makes Apache Flink fail over between data centers without ever
restoring a checkpoint that the standby site does not fully hold.

It verifies checkpoints from Flink's own _metadata, serves the checkpoint
directory through a FUSE mount that shows only complete checkpoints, and
keeps ZooKeeper from pointing ahead of what the new active site holds.

Settings of mount, verify, status, takeover, restore-pruned and health
come from flags, then the environment (CKPTFS_<FLAG>, e.g. CKPTFS_ZK,
CKPTFS_CLUSTER_ID), then the YAML file given by --config or
$CKPTFS_CONFIG (keys named like the long flags), then defaults.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applySettings(cmd); err != nil {
				return fail("%v", err)
			}
			return nil
		},
	}
	// A retired setting on the command line says what replaced it.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
			if why, ok := retiredKeys[name]; ok {
				return errors.New(why)
			}
		}
		return err
	})
	checks := settingsChecks{}
	root.AddCommand(newInspectCmd(), newVerifyCmd(checks), newMountCmd(serve, checks), newVersionCmd())
	root.AddCommand(newStatusCmd(checks), newTakeoverCmd(checks), newRestorePrunedCmd(checks), newConfigCmd(checks), newHealthCmd(checks))
	return root
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "devel"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "ckptfs", version)
			return nil
		},
	}
}

// outputFlag is the -o flag: "text" or "json".
type outputFlag string

func (o *outputFlag) String() string { return string(*o) }
func (o *outputFlag) Type() string   { return "format" }
func (o *outputFlag) Set(s string) error {
	switch s {
	case "text", "json":
		*o = outputFlag(s)
		return nil
	}
	return fmt.Errorf("output format %q: want text or json", s)
}

func addOutputFlag(cmd *cobra.Command, o *outputFlag) {
	*o = "text"
	cmd.Flags().VarP(o, "output", "o", "output format: text or json")
}
