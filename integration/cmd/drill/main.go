package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// options are the command line.
type options struct {
	zk        string
	staging   string
	pathRoot  string
	clusterID string
	flink     string
	ckptfs    string
	// self is the drill command the printed drill names.
	self    string
	replace bool
	clean   bool
	recover bool
}

const usage = `Usage:
  drill -zk HOST:PORT[,...] -staging DIR [-path-root /ckptfs-drill] [-cluster-id drill]
        [-flink RELEASE] [-ckptfs COMMAND] [-replace]
  drill -recover -staging DIR [-zk HOST:PORT[,...]]
  drill -clean -staging DIR [-zk HOST:PORT[,...]]

Lays out a ckptfs failover rehearsal on a staging ZooKeeper and directory
and prints the commands to run. -recover does what Flink's recovery on
the standby site would do now, reading only; -clean removes what the drill
laid.

Exit status: 0 done, 1 refused or failed (with -recover: Flink's
recovery fails), 2 usage.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, verbose, code := parse(args, stderr)
	if code >= 0 {
		return code
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch {
	case o.clean:
		err = clean(ctx, o, stdout, log)
	case o.recover:
		err = recoverJob(ctx, o, stdout, log)
		if errors.Is(err, errRecoveryFails) {
			return 1
		}
	default:
		var d *drill
		if d, err = lay(ctx, o, log); err == nil {
			d.print(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "drill:", err)
		return 1
	}
	return 0
}

// parse reads and checks the command line. code is the exit status when
// the command is done (usage, -h), -1 when it is to run.
func parse(args []string, stderr io.Writer) (o options, verbose bool, code int) {
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.zk, "zk", "", "the staging ZooKeeper, `HOST:PORT[,...]` (with -clean and -recover: default the one the drill used)")
	fs.StringVar(&o.staging, "staging", "", "`DIR` for the two sites' NAS directories and the configuration")
	fs.StringVar(&o.pathRoot, "path-root", "/ckptfs-drill", "Flink's high-availability.zookeeper.path.root for the drill's `PATH`")
	fs.StringVar(&o.clusterID, "cluster-id", "drill", "Flink's high-availability.cluster-id for the drill (`ID`: letters, digits, '.', '_', '-')")
	fs.StringVar(&o.flink, "flink", "1.20", "the Flink `RELEASE` whose ZooKeeper layout and _metadata are written (1.11 to 1.20, 2.x)")
	fs.StringVar(&o.ckptfs, "ckptfs", "ckptfs", "the ckptfs `COMMAND` the printed drill names")
	fs.StringVar(&o.self, "self", "", "the drill `COMMAND` the printed drill names (default: this program)")
	fs.BoolVar(&o.replace, "replace", false, "delete the namespace's znodes, and a previous drill under -staging, first")
	fs.BoolVar(&o.recover, "recover", false, "recover the drill's job as Flink on the standby site would now, reading only (exit 1: Flink would fail)")
	fs.BoolVar(&o.clean, "clean", false, "remove what the drill laid under -staging and in ZooKeeper")
	fs.BoolVar(&verbose, "v", false, "log each step on stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, false, 0
		}
		return o, false, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "drill: unexpected arguments %q\n", fs.Args())
		return o, false, 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "drill:", err)
		return o, false, 2
	}
	return o, verbose, -1
}

// clusterIDPattern keeps the cluster id one ZooKeeper name that ckptfs
// does not escape, so the drill knows ckptfs's znode of it.
var clusterIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// check validates the options and makes -staging absolute.
func (o *options) check() error {
	if o.staging == "" {
		return errors.New("-staging is required")
	}
	abs, err := filepath.Abs(o.staging)
	if err != nil {
		return err
	}
	o.staging = abs
	if o.staging == "/" {
		return errors.New("-staging must not be /")
	}
	if o.zk != "" {
		if _, err := zkbridge.ParseServers(o.zk); err != nil {
			return fmt.Errorf("-zk %q: %w", o.zk, err)
		}
	}
	if o.clean && o.recover {
		return errors.New("-clean and -recover exclude each other")
	}
	if o.clean || o.recover {
		return nil
	}
	if o.zk == "" {
		return errors.New("-zk is required")
	}
	if !clusterIDPattern.MatchString(o.clusterID) {
		return fmt.Errorf("-cluster-id %q: want letters, digits, '.', '_' and '-'", o.clusterID)
	}
	cfg := zkbridge.DefaultConfig()
	cfg.Servers, _ = zkbridge.ParseServers(o.zk)
	cfg.PathRoot, cfg.ClusterID, cfg.Site = o.pathRoot, o.clusterID, standbySite
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("-path-root %q, -cluster-id %q: %w", o.pathRoot, o.clusterID, err)
	}
	if _, err := layoutOf(o.flink); err != nil {
		return err
	}
	if o.ckptfs == "" {
		return errors.New("-ckptfs must name a command")
	}
	if o.self == "" {
		if o.self, err = os.Executable(); err != nil {
			return fmt.Errorf("-self: %w", err)
		}
	}
	return nil
}
