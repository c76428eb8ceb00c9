package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// plan is the drill's walk-through: the commands an operator of the
// standby site runs, in order. Every line of shows is part of a line the
// command prints (the package's test holds them to it).
func (d *drill) plan() []step {
	c, self := shellQuote(d.opts.ckptfs), shellQuote(d.opts.self)
	cfg := "--config " + shellQuote(d.config)
	staging := "-staging " + shellQuote(d.opts.staging)
	ckpts := shellQuote(filepath.Join(d.replica, "checkpoints"))
	newest := d.pointers[len(d.pointers)-1]
	kept := d.pointers[:len(d.pointers)-1]
	complete := kept[len(kept)-1]
	missingRel, _ := filepath.Rel(d.primary, d.missing)
	missingFlink := flinkDir + "/" + filepath.ToSlash(missingRel)
	job := d.st.JobID
	return []step{
		{
			name: "verify", title: "Which checkpoints does DC2's replica hold completely?",
			cmd: c + " verify " + cfg + " " + ckpts, exit: 1,
			shows: []string{
				fmt.Sprintf("%d: missing: %s", newest, missingFlink),
				fmt.Sprintf("newest complete checkpoint: %d", complete),
			},
			note: fmt.Sprintf("Exit 1: the newest checkpoint, %d, lacks a shared/ file; %d is complete.", newest, complete),
		},
		{
			name: "verify-no-config", title: "The same without --config",
			cmd: c + " verify " + ckpts, exit: 2,
			shows: []string{
				"outside_root: " + flinkDir + "/checkpoints/" + job + "/shared/",
				"newest complete checkpoint: none",
			},
			note: "Flink stored absolute paths (" + flinkDir + "/...). Without the map of the configuration\n" +
				"they are not found here, and every checkpoint with shared/ files shows outside_root.",
		},
		{
			name: "status", title: "What does ZooKeeper point at, and how far is it ahead of DC2?",
			cmd: c + " status " + cfg, exit: 0,
			shows: []string{
				"this site: " + standbySite + "; active site: none yet; epoch 0",
				"JobManager: no JobManager alive",
				fmt.Sprintf("%d: missing: %s", newest, missingFlink),
				fmt.Sprintf("ZooKeeper is 1 checkpoint(s) / %.0f seconds ahead of this site (newest %d, newest complete here %d)", interval.Seconds(), newest, complete),
			},
			note: "DC1's JobManager is gone (its session ended). A failover now would lose one checkpoint.",
		},
		{
			name: "recover-before", title: "What would Flink started on DC2 restore now, without a takeover?",
			cmd: self + " -recover " + staging, exit: 1,
			shows: []string{
				fmt.Sprintf("Flink's recovery on %s fails: checkpoint %d (state)", standbySite, newest),
				"Flink retries the same checkpoint and never falls back to an older one",
			},
			note: "This is the loop ckptfs exists for (the drill emulates Flink's recovery; it reads only).",
		},
		{
			name: "dry-run", title: "What would a takeover do?",
			cmd: c + " takeover --dry-run " + cfg, exit: 0,
			shows: []string{
				"kept: " + joinIDs(kept),
				fmt.Sprintf("would retract: %d", newest),
				"dry run: would make site " + standbySite + " active with epoch 1",
			},
			note: "It writes nothing.",
		},
		{
			name: "takeover", title: "Take over",
			cmd: c + " takeover " + cfg, exit: 0,
			shows: []string{
				fmt.Sprintf("retracted: %d", newest),
				"site " + standbySite + " is active with epoch 1",
			},
			note: fmt.Sprintf("Pointer %d is gone from ZooKeeper, backed up under %s/pruned.", newest, d.ckptfsZ),
		},
		{
			name: "status-after", title: "Status after the takeover",
			cmd: c + " status " + cfg, exit: 0,
			shows: []string{
				"this site: " + standbySite + "; active site: " + standbySite + "; epoch 1",
				fmt.Sprintf("checkpoint %d, the newest in ZooKeeper, is complete on this site", complete),
				fmt.Sprintf("retracted by a takeover (restore-pruned puts them back): [%d]", newest),
			},
		},
		{
			name: "recover-after", title: "What would Flink on DC2 restore now?",
			cmd: self + " -recover " + staging, exit: 0,
			shows: []string{
				fmt.Sprintf("Flink's recovery on %s restores checkpoint %d of job %s", standbySite, complete, job),
			},
			note: "In a real failover Flink's JobManager starts here (the takeover unit let it).",
		},
		{
			name: "restore-refused", title: "Can the retracted pointer be put back yet?",
			cmd: c + " restore-pruned --dry-run " + cfg, exit: 0,
			shows: []string{
				fmt.Sprintf("job %s: would restore none", job),
				fmt.Sprintf("left %d: checkpoint not complete here at L2", newest),
			},
			note: "No: restore-pruned puts back only what is complete here.",
		},
		{
			name: "catch-up", title: "The replication catches up (the one file it had not copied)",
			cmd: "cp -p " + shellQuote(d.missing) + " " + shellQuote(filepath.Join(d.replica, missingRel)), exit: 0,
		},
		{
			name: "restore-dry-run", title: "What would restore-pruned put back now?",
			cmd: c + " restore-pruned --dry-run " + cfg, exit: 0,
			shows: []string{fmt.Sprintf("job %s: would restore %d", job, newest)},
		},
		{
			name: "restore", title: "Put it back (only while Flink has not started on DC2)",
			cmd: c + " restore-pruned " + cfg, exit: 0,
			shows: []string{fmt.Sprintf("job %s: restored %d", job, newest)},
		},
		{
			name: "status-restored", title: "Status after restore-pruned",
			cmd: c + " status " + cfg, exit: 0,
			shows: []string{fmt.Sprintf("checkpoint %d, the newest in ZooKeeper, is complete on this site", newest)},
		},
		{
			name: "recover-restored", title: "And Flink's recovery",
			cmd: self + " -recover " + staging, exit: 0,
			shows: []string{
				fmt.Sprintf("Flink's recovery on %s restores checkpoint %d of job %s", standbySite, newest, job),
			},
		},
	}
}

// print writes the drill for the operator.
func (d *drill) print(w io.Writer) {
	fmt.Fprintf(w, "A ckptfs DR rehearsal is laid out:\n\n")
	fmt.Fprintf(w, "  ZooKeeper        %s: Flink's namespace %s, ckptfs's %s\n", d.opts.zk, d.ns, d.ckptfsZ)
	fmt.Fprintf(w, "  Flink job        %s (Flink %s layout, RocksDB-style incremental checkpoints)\n", d.st.JobID, d.layout)
	fmt.Fprintf(w, "  DC1's NAS        %s: checkpoints %s retained, their pointers in ZooKeeper\n", d.primary, joinIDs(d.pointers))
	fmt.Fprintf(w, "  DC2's replica    %s: checkpoint %d lacks %s (not replicated yet)\n",
		d.replica, d.pointers[len(d.pointers)-1], filepath.Base(d.missing))
	fmt.Fprintf(w, "  DC2's settings   %s\n", d.config)
	fmt.Fprintf(w, "\nDC1 is lost: its JobManager's ZooKeeper session has ended. Run these in order,\n")
	fmt.Fprintf(w, "as the operator of DC2 would (lines after | are part of what each prints):\n")
	for i, s := range d.steps {
		fmt.Fprintf(w, "\n%d. %s\n", i+1, s.title)
		fmt.Fprintf(w, "   $ %s\n", s.cmd)
		fmt.Fprintf(w, "   exit status %d\n", s.exit)
		for _, l := range s.shows {
			fmt.Fprintf(w, "   | %s\n", l)
		}
		if s.note != "" {
			fmt.Fprintf(w, "   %s\n", strings.ReplaceAll(s.note, "\n", "\n   "))
		}
	}
	fmt.Fprintf(w, "\nClean up (the znodes and directories above, nothing else):\n")
	fmt.Fprintf(w, "   $ %s -clean -staging %s\n", shellQuote(d.opts.self), shellQuote(d.opts.staging))
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:=+,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
