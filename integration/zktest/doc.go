// Package zktest runs real Apache ZooKeeper servers for tests: a standalone
// server or an ensemble of up to five, plus clients, network partitions and
// session expiry.
//
// It exists because what we rely on ZooKeeper for (session expiry,
// ephemeral nodes vanishing with their session, one-shot watches, leader
// election, a client moving to another server) is exactly what an in-memory
// fake gets wrong. go-zookeeper tests against real servers too, but its
// harness lives in _test.go files and cannot be imported.
//
// # Starting servers
//
//	c := zktest.StartCluster(t, 3, func(cfg *zktest.Config) {
//		cfg.MaxSessionTimeout = 10 * time.Second
//	})
//	cl := zktest.Connect(t, c.Servers())
//	leader, err := c.Leader()
//	err = c.Stop(leader)             // SIGTERM; Kill sends SIGKILL
//	leader, err = c.WaitLeader(30 * time.Second)
//	err = c.Start(old)               // same ports and data directory
//
// StartCluster writes a zoo.cfg (from Config), a myid and a
// log4j.properties per server under t.TempDir(), picks unused loopback
// ports, and runs "java ... org.apache.zookeeper.server.quorum.QuorumPeerMain
// zoo.cfg" for every server at once, as Debian's zkServer.sh
// start-foreground does, but without the script, JMX or log files. It then
// polls the srvr four-letter word until every server serves and exactly one
// leads, or fails the test with the last output lines of each server.
// Defaults suit tests: 250 ms ticks, sessions of 0.5 to 5 s, a 96 MiB heap,
// no fsync, no admin server. A cleanup on t stops everything and fails the
// test if a server could not be stopped or had died by itself.
//
// Server index i (0-based) has myid i+1. Server output goes to t.Log with a
// "zk<i>| " prefix, so it shows only for failed tests or with -v, and stops
// when the test ends. Control methods (Stop, Kill, Start, Mode, Leader)
// return errors instead of failing the test, so they work in goroutines
// and retry loops; StartCluster, Connect and the Expire functions must be
// called from the test goroutine.
//
// # Finding ZooKeeper
//
// In order: $CKPTFS_ZK_CLASSPATH (a complete classpath, used as is);
// $ZOOKEEPER_HOME (an upstream binary distribution: conf/ and lib/*);
// otherwise the jars of Debian's zookeeper package, taken from the CLASSPATH
// in /usr/share/zookeeper/bin/zkEnv.sh, plus Debian's slf4j-log4j12 and
// log4j 1.2 jars, without which the server logs nothing. Java is
// $JAVA_HOME/bin/java or the java on $PATH. If ZooKeeper or Java is missing
// the test is skipped with a loud message; with CKPTFS_REQUIRE_ZK=1, as CI
// sets, it fails instead. A broken explicit setting always fails. In -short
// mode StartCluster skips.
//
// # Partitions and session expiry
//
// Connect(t, servers, ThroughProxies()) puts a Proxy in front of every
// server. Proxy.Block black-holes traffic: nothing passes, not even a close,
// and sockets stay open; Unblock delivers what was held. NewProxy serves
// code under test that opens its own connections.
//
// ExpireSession(t, client) makes the servers expire a session for real: it
// blocks the client's proxies until the servers have closed the session
// (seen as an ephemeral marker node vanishing), then unblocks them, and the
// client's reconnection is answered "session expired" (zk.StateExpired).
// Against the real server, verified by this package's tests:
//   - Blocking for longer than the session timeout expires the session.
//   - Blocking for less than the client's receive timeout (2/3 of the
//     session timeout) is invisible: held requests complete afterwards.
//   - Dropping the client's connections (Proxy.DropConns), even again and
//     again for longer than the session timeout, does not expire it: the
//     client reconnects and keeps its session.
//   - Stopping the server a client is connected to does not expire it
//     either: the client moves to another server of the ensemble.
//
// A client needs to be unable to reach every server, so every address it
// was given must go through a blocked proxy.
//
// # Servers on other hosts
//
// Config.Place puts each server on a host of the test's own making, such
// as a network namespace with an address of its own (a host or a
// realflink site on an integration/wan WAN): the server binds that
// address and runs
// behind the host's argv prefix (nsenter). Partitions are then the
// network's, and the harness reaches the servers through it as any
// client does.
//
// # Secured ensembles
//
// Config.Security secures the servers as production ensembles are:
//
//	c := zktest.StartCluster(t, 3, func(cfg *zktest.Config) {
//		cfg.Security = &zktest.Security{
//			SuperPassword: "pw",                             // super:pw may do anything
//			EnforceAuth:   []string{"digest", "sasl"},       // others are closed (-124)
//			SASLUsers:     map[string]string{"flink": "pw"}, // SASL DIGEST-MD5 users
//			TLS:           true,                             // secureClientPort only
//		}
//	})
//	cert := c.CA().Issue(t, "ckptfs")                     // client certificate, x509:CN=ckptfs
//	cl := zktest.Connect(t, c.Servers(), zktest.WithTLS(c.CA().ClientTLS(t, &cert)),
//		zktest.WithDigest("flink", "pw"))
//
// TLS makes a CA per cluster, a certificate for 127.0.0.1 per server
// (PEM key and trust stores, Netty, ssl.clientAuth want unless told) and
// no plain client port; the harness speaks TLS to the servers itself
// (FourLetterWordTLS). Debian's zookeeper.jar does not name
// netty-codec, which TLS needs: the harness adds it. SASL users go into a
// JAAS Server section with ZooKeeper's DigestLoginModule. Clients
// authenticate with WithDigest (addauth, before Connect returns) and
// WithSASL (every connection logs in before its first request, through
// internal/zksasl); ExpireSession's observer connects the same way.
// NewCA makes another CA, for certificates the servers must refuse.
//
// # Caveats
//
// Ports come from binding port 0, and are never handed out twice within a
// process, but another process can take one between allocation and the
// server binding it; the server then fails to start with "Address already
// in use" in its output. StartCluster then starts the cluster again on
// other ports, up to three times; a server restarted with Start keeps its
// ports and has no such retry. go-zookeeper redials after a one-second pause when
// it has tried every server, so a client of a single server needs a session
// timeout well above a second to survive a reconnect. On Linux the servers
// are killed by the kernel if the test binary dies without cleanup
// (Pdeathsig); elsewhere they may be left behind.
package zktest
