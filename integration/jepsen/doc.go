// Package jepsen is `make jepsen` (issue 29, item 5; design §6.13):
// randomized histories of ckptfs's own faults over real parts, each held
// to the model of design §5.14 by a checker. The package has only tests:
// TestJepsen runs when CKPTFS_JEPSEN_RUNS is set (make jepsen RUNS=N
// SEED=S; run i has seed S+i, and RUNS=1 SEED=<seed> replays one run
// alone; KEEP=<dir> keeps each run's history and every process's
// output). The checker's own tests (synthetic histories) run everywhere,
// in -short mode too.
//
// # One run
//
// A run is drawn whole from its seed (drawRun): ZooKeeper with 3 or 5
// servers (zktest; one ensemble per size for the series, each run with
// its own cluster id and Flink path root), one daemon per site or, in a
// third of the runs, several ("many daemons per site"), takeover manual
// or auto, an emulated JobManager or none, the replication kind, the
// lease's D (2, 3 or 4 s) and Flink's session timeout (4 or 6 s: the
// JobManager's, the takeover's quiet period and the sweeper's grace,
// longer than D in part of the runs as in production), 25 to 40 s of
// faults and the faults themselves. What the processes do between the
// faults is up to the machine, so a replay draws the same history of
// faults, not the same interleaving. What came later (real Flink, R,
// P inside a multi, the replication's lag) is drawn from a stream of
// its own (drawMore): a seed keeps every fault it drew before, and gets
// those too.
//
//   - Two sites, DC1 and DC2, each a NAS (a directory) and daemons: the
//     REAL binary, built once by TestMain, `ckptfs mount` per machine of
//     the site (DC1's configured primary, DC2's replica), each with its
//     own mount point over a read-only tmpfs (a write through a dead,
//     detached mount fails instead of landing in the bare directory),
//     its own RUNTIME_DIRECTORY (its watchdog's record) and its own
//     zktest proxies to every server. The kernel watchdog is the real
//     one. A daemon that ends is restarted after a second (the harness's
//     kill says when), once its site is not frozen, as systemd would.
//   - A writer process per daemon appends 16-byte records through its
//     mount: a sequence number and CLOCK_BOOTTIME when the write started.
//     It reopens the file after an error and reports its errors (EROFS,
//     ENOTCONN, ...) with their instant.
//   - DC1's JobManager (flinkemu, in a process of its own, through its
//     own proxies) is elected, submits a job and completes a checkpoint
//     every 400 ms through DC1's first mount, in Flink's order: files,
//     _metadata, HA file, then the pointer with its lock. When its
//     session expires it goes on with a new one, not leading: a
//     returning JobManager.
//   - Or, in about a third of the runs (four in nine of those with a
//     JobManager), real Flink (a release that make test runs,
//     integration/realflink): DC1's JobManager and TaskManager, in a
//     mount namespace of DC1 where Flink's storage path is DC1's first
//     mount, ZooKeeper HA through their own proxies, the test job under
//     the run's job id, a checkpoint a second. Both are in DC1's freezer
//     group and are started again a second after they end (M kills the
//     JobManager, J cuts it off), as a supervisor would.
//   - The replication copies DC1's NAS to DC2's (snapshot, file-level or
//     per-object: integration/replication) until DC2's first activation
//     stops it, as the runbook's failover does.
//   - Each site's processes are in one freezer group
//     (integration/freezer).
//
// DC1's daemons activate DC1 themselves (bootstrap); then the faults
// run. Every activation seen while they run (JobManager runs only) gets
// checks of its own, in rounds while it stays current: a round lists the
// pointers with their czxids, and once Flink's session timeout (the
// sweeper's grace) and 4 s more have passed, `ckptfs status -o json` on
// the activated site judges them (midcheck_test.go); the next round
// lists at the end of this one, so a returning JobManager's pointers
// made after the activation are judged too. At the end the run heals
// (clock, connections, stopped and frozen processes, squatters), stops
// the JobManager, waits until one site has held the lease for the
// sweeper's grace and more with every daemon serving and no lock held,
// asks `ckptfs status -o json` on that site for Flink's pointers, runs
// `ckptfs restore-pruned` there (after a late delivery when it is DC2,
// with its P; again without a fault when that one was faulted or
// failed, as the runbook says) and judges the pointers again when it put
// any back; with real Flink, starts Flink on that site, which recovers
// the job from ZooKeeper and must restore the newest pointer and run
// with exactly that checkpoint's state (the job's report, against what
// DC1's job had processed at that snapshot); then stops everything and
// reads both NASes.
//
// # Faults
//
// The table's letters:
//
//	L  DC1 lost: DC1 frozen for 12-24 s, and `ckptfs takeover` on DC2;
//	   in part of the runs the replication stops carrying 1 to 2.5
//	   checkpoint intervals before the freeze (until the thaw or DC2's
//	   activation), so that DC2's takeover retracts DC1's newest pointers
//	T  a manual takeover on DC1, DC2 or the site not active
//	P  at the next takeover lock, backup (the takeover's retractions,
//	   just before its activation), activation or loss of the lease:
//	   the lock holder (a takeover command or a daemon's takeover,
//	   adopt, bootstrap or sweep) cut off from ZooKeeper briefly or
//	   until its session expires, or killed; or stray pointers. Or
//	   INSIDE a multi (zktest.Proxy.TrapRequest: the proxy passes the
//	   request's header and holds its body): the next lock holder's
//	   multi after it sent 0-2 (a takeover's backups, retractions and
//	   activation, a sweep's retraction, an adopt's or bootstrap's
//	   activation, restore-pruned's put-back), cut off, expired or
//	   killed there, or a returning JobManager's pointer created while
//	   it is held; or a daemon's next multi (a renewal mostly, or its
//	   claim) cut off, expired or killed
//	S  a daemon stopped (SIGSTOP), shorter than D/3 or longer than D
//	K  a daemon killed (SIGKILL), restarted 0.3-4 s later
//	F  a site frozen and thawed
//	C  CLOCK_REALTIME stepped 1 to 10 minutes forward or back for 1-4 s
//	X  a daemon's connections blocked: shorter than its session (the
//	   connection is lost), or longer (the session expires)
//	D  a daemon's connections dropped (it reconnects, same session)
//	J  the JobManager's connections blocked until its session expired
//	M  the JobManager killed
//	O  an operator deletes active-site or the epoch, rolls the epoch
//	   back, names the other site in active-site (each put back after
//	   1-10 s, or not), deletes the lease, or, after a returning
//	   JobManager's pointer, deletes the lease within the grace
//	Q  an anonymous squatter: an ephemeral node under Flink's leader/,
//	   a lock node under ckptfs's takeover/ that sorts first, garbage
//	   among the backups
//	Y  stray pointers: a returning JobManager's, shaped as Flink's (the
//	   persistent locks child, sometimes an ephemeral lock of its own
//	   session), their ids from the job's checkpoint counter, their HA
//	   file on no NAS; or an earlier one created again with the same
//	   bytes (Curator retrying a create after a retraction)
//	R  `ckptfs restore-pruned --job` on the active site or, one in four,
//	   the other; on DC2 half the time after a late delivery (every file
//	   of the retracted pointers' checkpoints that DC1's NAS holds
//	   copied to DC2's, one file of the newest short in a third of
//	   them: the runbook's case, the replica caught up); with P at its
//	   lock or inside its put-back multi (cut off, expired, killed) in
//	   two runs in three. JobManager runs only: 0-2 while the faults
//	   run, and one at the end (above)
//
// Clock steps move the whole machine's clock: they are short, and the
// clock is put back from the offset of CLOCK_REALTIME against
// CLOCK_MONOTONIC saved before the step, when the step ends, when the
// run ends (failed or not), and from a file under /run when a test
// binary killed during a step is followed by another. Steps of 10
// minutes broke nothing outside ckptfs here: ZooKeeper counts sessions
// on System.nanoTime, the test timeout is monotonic, and zktest's
// certificates are valid from an hour back.
//
// # History
//
// Everything is stamped with CLOCK_BOOTTIME, the clock of the records
// and of the watchdog's deadline, which clock steps do not move. The
// harness watches the epoch, active-site and the lease with ZooKeeper
// watches (and reads them at least every 100 ms), from a connection of
// its own. An activation is a new (site, epoch, judged zxid) in the
// lease, which only an activation writes; it applied after the start of
// the last read that did not show it (lo) and before the return of the
// first that did, or of the takeover command that reported it (hi). The
// harness also records every fault as it applies and undoes it, the
// daemons' log lines "fencing the mount", their exits (status, and the
// watchdog's record in RUNTIME_DIRECTORY), what the next daemon of the
// same mount reports as ckptfs_watchdog_fired_previous, the writers'
// errors, both NASes walked every 250 ms (size and mtime of every entry
// but .ckptfs, the manifests the daemon seals itself), and at the end
// every writer record on both NASes.
//
// # The checker
//
//  1. No write after activation (§5.14, §6.7). A site's writes are
//     allowed from the lower bound of one of its activations until D/4
//     before the upper bound of the next activation of another site: by
//     the proof of §5.10 every renewal that counted for the old owner
//     started at least D before that activation applied, so its mounts
//     stopped admitting D/2 before it. Every record, on either NAS (DC2's
//     copies of DC1's records too), must have started in an allowed
//     interval of its site; and a site's NAS must not change between
//     another site's activation and its own next one (DC2's while the
//     replication still ran excepted). A site frozen across an
//     activation and thawed is held to the same: what it writes after
//     the thaw reaches neither NAS, and its JobManager's pointers are
//     invariant 2's.
//
//  2. Pointers complete (§6.1, §6.12). At the end, once the grace
//     passed, every job's newest pointer that Flink reads is complete
//     (L2) on the active site, and every pointer it reads has a readable
//     HA file there: what a takeover keeps, judged by `ckptfs status`
//     on that site. Not checked when no site holds the lease at the end
//     (an edit not put back) or without a JobManager. As soon as a site
//     holds the lease at the end with no takeover running, the harness
//     adds a stray pointer of its own (its HA file nowhere, no lock of a
//     leading session): no takeover comes after it, so the sweeper alone
//     must have retracted it by then. The same again after the end's
//     restore-pruned put pointers back: the sweeper leaves what
//     restore-pruned put back during the activation (§5.5.2, issue 31),
//     never a pointer of the same job written after it. With real Flink,
//     Flink started on that site must restore the newest pointer, run,
//     and find exactly that checkpoint's state (the flink column: ok,
//     BAD, or - when it could not be tried).
//     After each activation (the mid column, rounds judged/made): the
//     pointers that existed at a round's start, judged once the grace
//     passed, held to the same rule. A pointer made since, gone or made
//     again right after the status, or written by a leading session (the
//     sweeper leaves those, §5.5.2) is not judged; it only decides which
//     pointer is the newest. The sweeper leaves put-backs of the
//     activation too, yet they stay judged: restore-pruned runs without
//     --unverified here and puts back only what is complete (invariant
//     5), so they are held to the rule as every other pointer is. A
//     round is judged only when the sweeper had the whole window: no
//     other activation, no operator's edit or squatter on the lock, the
//     lock held by nothing but a sweep's pass
//     once the grace ran out, the site holding the lease at every observation,
//     and a daemon of the site that ran through it unhindered (not
//     stopped, frozen or cut off, no failed sweep pass in the 32 s
//     before: a failed pass backs the sweeper off); a run's log says why
//     each other check was not judged.
//
//  3. No healthy primary fences itself (§6.13). A daemon that logs
//     "fencing the mount", or whose writer gets EROFS, at t must not
//     have been healthy for the 1.5 D before t: running since before,
//     not stopped, its site not frozen, its connections neither blocked
//     nor dropped, no operator edit in effect, and its site holding the
//     lease at every observation. Clock steps and squatters do not make
//     a daemon unhealthy: the lease compares monotonic durations only,
//     and no renewal reads what a squatter holds.
//
//  4. The watchdog kills only a daemon that does not run (§5.14). A
//     daemon that died of a SIGKILL the harness did not send must have
//     had its watchdog armed, must have been stopped or frozen when it
//     died (or its site thawing: the v1 freezer kills as it thaws), not
//     sooner than D/4 before its record's deadline (3D/4 after its last
//     renewal; Arm writes the record before it sets the timer, so the
//     timer may still hold the renewal before's), and the next daemon of
//     its mount must report ckptfs_watchdog_fired_previous 1; after a
//     daemon whose watchdog was disarmed, 0.
//
//  5. restore-pruned puts back only what the active site holds (§5.6).
//     What a run put back is found by its report and by the backups it
//     removed whose pointer exists with the backup's bytes; `ckptfs
//     status` on its site judges each right after. Each must be complete
//     there, created (its czxid) while active-site named its site, when
//     the history knows which write of active-site that zxid followed;
//     a run that refused for a live JobManager (exit 5) put back
//     nothing; and a run never ends well on a site that active-site did
//     not name, one and the same write of it, throughout the run.
//
// # Broken on purpose
//
// Each invariant was checked against a binary with one piece disabled by
// a local edit (not committed), replaying one seed:
//
//   - The takeover's observation of the lease (LeaseObserver.See
//     concluding at once) and the guard in the activation's multi (the
//     lease granted at any version): seeds 5189 and 5253, invariant 1:
//     "80 record(s) of dc1/0's writer on dc1's NAS started where dc1 may
//     not write: the first (seq 644) at 7.747s, 743ms before the return
//     of dc2's activation at epoch 2 ...; the last (seq 723) at 8.638s",
//     and "dc1's NAS changed after dc2's activation at epoch 2 ...".
//   - The watchdog's Arm alone: not caught, as designed, since the
//     mount's own deadline refuses what a thawed daemon was asked while
//     it did not run (no daemon was killed: the table's wdk column
//     fell to 0). Arm and the deadline check in fusefs's admit
//     together: seeds 4200 and 4201, invariant 1: "2 record(s) of
//     dc1/0's writer on dc1's NAS started where dc1 may not write: the
//     first (seq 210) at 25.321s, after dc2's activation at epoch 2
//     (applied in [12.595s, 12.604s])": the frozen site, thawed, wrote.
//   - The sweeper's judgedSince back to issue 29's bound (active-site's
//     mzxid, the activation): seed 6070, invariant 2: "the newest
//     pointer Flink reads, 20, is not complete on dc2, the active site
//     (created at zxid 0x1000000ee; the lease says pointers up to zxid
//     0x1000000e1 were judged ...)": a stray created between the
//     takeover's reads and its activation, judged by neither.
//   - The write deadline on the wall clock (LeaseHolder.Deadline
//     without its monotonic reading): seed 4202, invariant 3: "dc2/0's
//     writer got EROFS at 36.265s although its daemon was healthy",
//     9 ms after CLOCK_REALTIME was stepped 3 minutes forward.
//   - The watchdog's Disarm leaving the timer armed: seed 4207,
//     invariant 4: "dc1/0 (pid ...) died by SIGKILL at 15.456s, which
//     the harness did not send, with no watchdog armed" (both daemons of
//     DC1, running, after an operator rolled the epoch back).
//   - restore-pruned's L2 check skipped, as with --unverified
//     (zkbridge restoreJob): seed 7008 (real Flink 2.3.0), invariant 5:
//     "restore-pruned on dc2 (45.676s-45.740s, exit 0) put back pointer
//     8 of job ..., which dc2 does not hold completely: ...
//     size_mismatch, expected 67623 bytes, found 33811" (the late
//     delivery's short file); invariant 2 after it: "the newest pointer
//     Flink reads, 8, is not complete on dc2, the active site, after
//     restore-pruned"; and real Flink at the end: "real Flink on dc2,
//     the active site, did not restore the job and run: the job
//     restored checkpoint 8 but did not process every key". Seed 7074
//     (the emulator): invariant 5 for put-backs during the run too,
//     "restore-pruned on dc2 (17.701s-17.749s, exit 0) put back pointer
//     7 ..., which dc2 does not hold completely".
//   - The takeover retracting nothing (zkbridge takeoverJob's plan
//     without its retractions): seed 7011 (real Flink 2.3.0, DC1's
//     newest checkpoint not replicated when DC1 was lost), invariant 2
//     after the activation: "the newest pointer Flink reads, 4, is not
//     complete on dc2, 8.004s after its activation at epoch 2 (by dc2's
//     takeover ...; grace 4s) (there since 22.624s at least, created at
//     zxid 0x1000000a6; that activation judged pointers up to zxid
//     0x1000000b6)", the same at the end, and real Flink at the end:
//     "its JobManager exited (exit status 239)".
//   - The sweeper alone disabled (Sweeper.Pass retracting nothing):
//     seeds 7030, 7035 and 7037 were not caught at first, since no
//     round after an activation was judged (a queued takeover's lock
//     node, the operator's edits) and the strays were the next
//     takeover's to retract. With the end's own stray, seeds 7030 and
//     7035, invariant 2: "the newest pointer Flink reads, 17, is not
//     complete on dc2, the active site (created at zxid 0x10000013a;
//     the lease says pointers up to zxid 0x1000000e1 were judged, by
//     dc2's takeover ...)".
//
// # What it found
//
// Seeds 9459, 1597 and 5615 (invariant 2): a self-activation that adopts
// a deleted lease (zkbridge ActivateSelf) writes its own takeover lock's
// zxid as the lease's judged_after_zxid, although it judges no pointer.
// A stray pointer created before that lock, which the sweeper saw but had
// not retracted yet (its grace had not passed), is then below the bound
// and never judged again: "pointer 20, which Flink reads, has no readable
// HA file on dc1, the active site (created at zxid 0x100000147; the lease
// says pointers up to zxid 0x100000157 were judged, by dc1's adopt ...)".
// Any stray created up to grace - D before the lease's loss stays, with
// the defaults (60 s, 20 s) 40 s of them. In 5615 the lease's loss also
// lets the sweeper fall back to active-site's mzxid, which an operator's
// put-back of active-site had moved past another stray while queued
// takeovers kept the sweeper from the lock.
//
// Seed 9103 (invariant 2, the end's own stray): a job with no pointer
// when DC2 took over (DC1's JobManager cut off before a checkpoint
// reached DC2) kept a stray for good: "the newest pointer Flink reads,
// 9, is not complete on dc2, the active site (created at zxid
// 0x1000001e5; the lease says pointers up to zxid 0x10000019d were
// judged ...)". The sweeper applied PlanJob, which refuses a job with no
// complete pointer; it now retracts every pointer of such a job when all
// were created since the activation (design §5.5.2).
//
// # Limits
//
// No ZooKeeper server is stopped, no link between the sites is cut
// (make chaos-net does, with real Flink) and no NAS hangs
// (integration/nasfault). Nothing stalls a daemon's loop while its FUSE
// server runs, so the mount's own deadline check is only seen together
// with the watchdog. CLOCK_MONOTONIC and CLOCK_BOOTTIME are not
// stepped, and no VM pause hides time from the guest (§5.14 contains
// that case, it does not prevent it). The activation's instant is known
// to the harness within its observations (milliseconds with the
// watches): a record admitted just past an activation and started
// within that gap is not told apart. Records lost from an evidence file
// (the file-level replication deletes DC2's files while it runs) are
// only missed, never misread.
//
// A run takes 40-70 s on a two-core machine, one with real Flink about
// the same (Flink's start, about 8 s, comes before the faults; its
// restore at the end takes about 5 s), and a build of the binary and
// ZooKeeper's start come first: make test runs the checker's tests, not
// a run.
package jepsen
