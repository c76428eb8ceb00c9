// Package zkbridge is ckptfs's side of Flink's ZooKeeper high
// availability: it reads where Flink's checkpoint pointers are and whether
// a JobManager is alive, publishes what each site holds, and, when the
// standby site takes over, removes from ZooKeeper the pointers that site
// cannot restore.
//
// # Why
//
// ZooKeeper, stretched over both sites, is written synchronously; the NAS
// replica of the standby site is written asynchronously. When the active
// site dies, ZooKeeper points at checkpoint N while the replica holds only
// N-1, or a torn N. Flink on the standby site restores the newest pointer,
// fails, restarts and picks the same pointer again, forever: it
// deliberately never falls back (FLINK-22502), and since 1.12.5/1.13.1 one
// unreadable HA file of any retained pointer fails the whole recovery.
// Deleting the newer pointers by hand makes Flink recover from the older
// one. Takeover does that, safely: only once no JobManager can be using
// the pointers, never the last one the site holds completely, each
// removal with a backup that RestorePruned puts back.
//
// # What it reads
//
// Discover finds Flink's namespace <path.root>/<cluster-id> (joined the
// way either Flink generation joins them; the cluster id is discovered
// when one child of the root looks like a Flink namespace) and, by
// listing rather than assuming a version, the layout: pointers
// checkpoints/<job>/<%019d> (1.4-1.13) or jobs/<job>/checkpoints/<%019d>
// (1.14+), locked by ephemeral children directly (up to 1.14) or inside a
// persistent locks child (1.15+, where a pointer without locks is marked
// for deletion and Flink skips it). A childless pointer under jobs/ means
// "live" in 1.14 and "deleted" in 1.15+, so when nothing else in the tree
// (lock children, the leader election layout, execution-plans) tells the
// two apart, a takeover refuses until Config.FlinkVersion says which.
//
// Liveness: a JobManager is alive while an ephemeral node Flink can have
// written exists under the leader latch, the leader information nodes or
// the locks of pointers and job graphs (a latch's name, leader
// information by name and data, a lock's UUID name, in any layout
// family); they vanish at most Flink's session timeout after the process
// died. Other clients' nodes there are reported, not counted. Leader
// nodes name the leader's address.
//
// A pointer's bytes name its HA file; the Verifier judges it at level L2
// (HA file and the chk-N it names, every file present with its size).
// The job graph znode's bytes name the job graph HA file; the Verifier
// judges it with the job's blobs and job result entries (VerifyJobHA),
// and DecideJob refuses a job Flink could not recover here, with a
// RefusalReason, before any pointer is planned.
//
// # What it writes
//
// Everything under <CkptfsRoot>/<cluster>:
//
//	epoch                         decimal activation counter
//	active-site                   the site allowed to write
//	takeover/_c_<guid>-lock-<seq> the takeover lock (ephemeral, sequential, protected)
//	pruned/<job>/<%019d>          backup of a retracted or kept pointer (JSON, Backup)
//	sites/<site>/jobs/<job>       marker: newest complete checkpoint (JSON)
//
// In Flink's namespace it only ever deletes pointers (and their locks
// child), each in one multi that also checks the epoch version, checks
// that the takeover lock is still held (so nothing is written after our
// session expired) and creates the backup; and RestorePruned creates them
// again, with their bytes. A takeover does it once; on the active site the
// Sweeper does it for pointers another site's JobManager adds afterwards
// (deleting their locks too). It never touches state files, _metadata, HA
// files, job graphs, blobs, the checkpoint id counter, leader or latch
// nodes, or the job result store (it reads some of them).
//
// # ZooKeeper discipline
//
// After connecting, the client waits for a session. Reads are retried
// while the client reconnects. A write whose reply is lost has an unknown
// outcome: it is never repeated blindly but decided by reading (a
// retraction applied means pointer gone and backup holding its bytes).
// Every write is a compare-and-set or a multi with version checks. The
// multis of retract, activate and restore share one helper, fencedMulti,
// which refuses to send a multi without both guards (the epoch and the
// takeover lock) and names the operation a refusal came from, so callers
// branch on names and errors, never on positions. A session expiry loses
// the takeover lock (the next write fails on the lock check) and makes
// the Publisher resync everything. go-zookeeper calls take no context:
// a call whose context ends is abandoned, and the connection stays; it
// lives until Close, and go-zookeeper reconnects it after any outage.
//
// # Identity and ACLs
//
// With Config.Auth, every connection authenticates before its first
// request: digest credentials through go-zookeeper's AddAuth (which
// re-sends them on every reconnect), SASL DIGEST-MD5 by the dialer
// itself, on the connection, right after the connect response
// (internal/zksasl). With Config.TLS, connections are TLS and the servers are
// verified. A refusal by ZooKeeper (NoAuth, or a session closed because
// the ensemble enforces authentication) is an *AuthError naming the
// operation and ckptfs's identity. ckptfs's znodes get the configured
// ACL, by default only ckptfs's identity, with world read added to
// active-site, the epoch and the markers (aclPolicy); a backup records
// the ACLs of what it removes, and RestorePruned puts them back. Znodes
// of ckptfs's that existed before (another client's, or an anonymous
// ckptfs's) are judged before a connection first uses them: while one
// lets another identity than ckptfs's (its session's, zk-acl's) change
// it, every call on them fails with a *ForeignACLError naming it, its
// ACL and the setAcl that mends it (aclGuard).
//
// The Publisher is a level-triggered reconciler (consul's anti-entropy
// shape): every pass recomputes each marker from the MarkerSource's full
// state and writes only what differs, by compare-and-set, after checking
// that the source reports the named checkpoint complete at the marker's
// level. A missed trigger or watch costs latency, never correctness.
package zkbridge
