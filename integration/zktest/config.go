package zktest

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MaxServers is the largest ensemble StartCluster accepts. Five JVMs are
// already a lot for a two-core CI machine.
const MaxServers = 5

// Config describes the servers of one Cluster. Every server of the cluster
// gets a zoo.cfg generated from it. Start from DefaultConfig; StartCluster
// does, and applies its Options on top.
type Config struct {
	// TickTime is ZooKeeper's basic time unit (zoo.cfg tickTime). Heartbeats,
	// InitLimit, SyncLimit and the default session timeout bounds are
	// multiples of it. It must be a whole number of milliseconds.
	TickTime time.Duration

	// InitLimit is how many ticks a follower may take to connect to and sync
	// with the leader. JVMs start slowly on a loaded machine, so it is larger
	// than ZooKeeper's example value.
	InitLimit int

	// SyncLimit is how many ticks a follower may lag behind the leader before
	// it is dropped.
	SyncLimit int

	// MinSessionTimeout and MaxSessionTimeout bound the session timeout the
	// server grants: a client's request is clamped into [min, max]. Zero
	// means ZooKeeper's own default, 2 and 20 ticks.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// HeapMB is the JVM's maximum heap (-Xmx) in MiB.
	HeapMB int

	// StartTimeout bounds how long StartCluster and Start wait for servers
	// to serve (and, for an ensemble, to agree on one leader).
	StartTimeout time.Duration

	// StopTimeout is how long Stop waits after SIGTERM before it sends
	// SIGKILL.
	StopTimeout time.Duration

	// LogLevel is the log4j level of the server output sent to t.Log:
	// TRACE, DEBUG, INFO, WARN, ERROR or OFF.
	LogLevel string

	// FourLetterWords is the zoo.cfg 4lw.commands.whitelist. It must contain
	// "srvr", which the harness uses for readiness and Mode.
	FourLetterWords []string

	// Extra holds additional zoo.cfg entries. Keys the harness generates
	// itself (see reservedKeys) are rejected: set the typed field instead.
	Extra map[string]string

	// JVMFlags are appended to the JVM flags the harness chooses.
	JVMFlags []string

	// Security, when set, secures the servers: a digest super user,
	// enforced authentication, SASL users, clients over TLS only.
	Security *Security

	// Place, when set, puts server i on a host of the test's own network
	// rather than 127.0.0.1 (a site that is a network namespace): every
	// port of the server binds Host.Addr, which peers and clients use,
	// and the server runs as Host.Enter followed by its command line.
	Place func(i int) Host
}

// Host is where a server runs (Config.Place).
type Host struct {
	// Addr is an IPv4 address the server binds and is reached at.
	Addr string
	// Enter is the argv prefix that runs a program on the host, such as
	// nsenter(1) with its arguments up to "--".
	Enter []string
}

// Option changes a Config before StartCluster validates it.
type Option func(*Config)

// DefaultConfig returns the configuration StartCluster starts from: a 250 ms
// tick, so sessions can expire within a second and elections are quick, and
// a small heap.
func DefaultConfig() Config {
	return Config{
		TickTime:        250 * time.Millisecond,
		InitLimit:       40,
		SyncLimit:       10,
		HeapMB:          96,
		StartTimeout:    60 * time.Second,
		StopTimeout:     10 * time.Second,
		LogLevel:        "INFO",
		FourLetterWords: []string{"srvr", "ruok", "mntr", "stat", "cons", "dump", "conf", "envi", "wchs", "isro"},
	}
}

// reservedKeys are the zoo.cfg keys written from typed fields or fixed by
// the harness.
var reservedKeys = map[string]bool{
	"tickTime": true, "initLimit": true, "syncLimit": true,
	"minSessionTimeout": true, "maxSessionTimeout": true,
	"dataDir": true, "dataLogDir": true, "clientPort": true, "clientPortAddress": true,
	"admin.enableServer": true, "4lw.commands.whitelist": true,
	"standaloneEnabled": true, "reconfigEnabled": true,
}

var logLevels = map[string]bool{"TRACE": true, "DEBUG": true, "INFO": true, "WARN": true, "ERROR": true, "OFF": true}

// Validate reports every problem with cfg, joined.
func (cfg Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Place != nil && cfg.Security != nil && cfg.Security.TLS {
		bad("Place with Security.TLS: the servers' certificates name 127.0.0.1")
	}

	if cfg.TickTime < time.Millisecond || cfg.TickTime%time.Millisecond != 0 {
		bad("TickTime %v must be a positive whole number of milliseconds", cfg.TickTime)
	}
	if cfg.InitLimit < 1 {
		bad("InitLimit %d must be at least 1 tick", cfg.InitLimit)
	}
	if cfg.SyncLimit < 1 {
		bad("SyncLimit %d must be at least 1 tick", cfg.SyncLimit)
	}
	for name, d := range map[string]time.Duration{"MinSessionTimeout": cfg.MinSessionTimeout, "MaxSessionTimeout": cfg.MaxSessionTimeout} {
		if d < 0 || d%time.Millisecond != 0 {
			bad("%s %v must be zero or a positive whole number of milliseconds", name, d)
		}
	}
	if cfg.TickTime > 0 && cfg.minSessionTimeout() > cfg.maxSessionTimeout() {
		bad("MinSessionTimeout %v exceeds MaxSessionTimeout %v", cfg.minSessionTimeout(), cfg.maxSessionTimeout())
	}
	if cfg.HeapMB < 16 {
		bad("HeapMB %d is below 16", cfg.HeapMB)
	}
	if cfg.StartTimeout <= 0 {
		bad("StartTimeout %v must be positive", cfg.StartTimeout)
	}
	if cfg.StopTimeout <= 0 {
		bad("StopTimeout %v must be positive", cfg.StopTimeout)
	}
	if !logLevels[cfg.LogLevel] {
		bad("LogLevel %q is not one of TRACE, DEBUG, INFO, WARN, ERROR, OFF", cfg.LogLevel)
	}
	hasSrvr := false
	for _, w := range cfg.FourLetterWords {
		if w == "srvr" || w == "*" {
			hasSrvr = true
		}
		if strings.ContainsAny(w, ", \n=") {
			bad("four-letter word %q contains a separator", w)
		}
	}
	if !hasSrvr {
		bad("FourLetterWords %q must include srvr", cfg.FourLetterWords)
	}
	if cfg.Security != nil {
		errs = append(errs, cfg.Security.validate()...)
	}
	for k, v := range cfg.Extra {
		switch {
		case cfg.Security != nil && (securedKeys[k] || strings.HasPrefix(k, "ssl.")):
			bad("Extra key %q is generated from Security", k)
		case reservedKeys[k] || strings.HasPrefix(k, "server."):
			bad("Extra key %q is generated by the harness", k)
		case k == "" || strings.ContainsAny(k, "=:\n \t#!"):
			bad("Extra key %q is not a plain zoo.cfg key", k)
		case strings.ContainsAny(v, "\n\r"):
			bad("Extra value for %q contains a line break", k)
		}
	}
	return errors.Join(errs...)
}

func (cfg Config) minSessionTimeout() time.Duration {
	if cfg.MinSessionTimeout == 0 {
		return 2 * cfg.TickTime
	}
	return cfg.MinSessionTimeout
}

func (cfg Config) maxSessionTimeout() time.Duration {
	if cfg.MaxSessionTimeout == 0 {
		return 20 * cfg.TickTime
	}
	return cfg.MaxSessionTimeout
}

// peer is one ensemble member as seen from zoo.cfg.
type peer struct {
	id           int    // myid, 1-based
	host         string // the address every port binds
	clientPort   int
	quorumPort   int
	electionPort int
}

// zooCfg renders the zoo.cfg of member self of peers, which must be one of
// them. A single peer runs standalone and has no server.N lines.
func (cfg Config) zooCfg(self peer, peers []peer, dataDir string) string {
	ms := func(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }
	lines := []string{
		"# Generated by github.com/ckptfs/ckptfs/integration/zktest.",
		"tickTime=" + ms(cfg.TickTime),
		fmt.Sprintf("initLimit=%d", cfg.InitLimit),
		fmt.Sprintf("syncLimit=%d", cfg.SyncLimit),
		"minSessionTimeout=" + ms(cfg.minSessionTimeout()),
		"maxSessionTimeout=" + ms(cfg.maxSessionTimeout()),
		"dataDir=" + dataDir,
	}
	if cfg.Security != nil && cfg.Security.TLS {
		lines = append(lines, "secureClientPortAddress="+self.host, fmt.Sprintf("secureClientPort=%d", self.clientPort))
	} else {
		lines = append(lines, "clientPortAddress="+self.host, fmt.Sprintf("clientPort=%d", self.clientPort))
	}
	lines = append(lines,
		"admin.enableServer=false",
		"4lw.commands.whitelist="+strings.Join(cfg.FourLetterWords, ","),
		"reconfigEnabled=false",
		"standaloneEnabled=true",
		// Every test client comes from 127.0.0.1; the default of 60
		// connections per address is easy to hit.
		"maxClientCnxns=0",
		// Test data is disposable: skip fsync and the 64 MB log preallocation.
		"forceSync=no",
		"preAllocSize=1024",
	)
	if cfg.Security != nil {
		lines = append(lines, cfg.Security.zooCfgLines(filepath.Dir(dataDir))...)
	}
	if len(peers) > 1 {
		for _, p := range peers {
			lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", p.id, p.host, p.quorumPort, p.electionPort))
		}
	}
	keys := make([]string, 0, len(cfg.Extra))
	for k := range cfg.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lines = append(lines, k+"="+cfg.Extra[k])
	}
	return strings.Join(lines, "\n") + "\n"
}

// log4jProperties sends all server logging to the console (the pipe that
// feeds t.Log) at the configured level.
func (cfg Config) log4jProperties() string {
	// Connection handling logs every four-letter word at INFO, and the
	// harness polls srvr.
	cnxnLevel := "WARN"
	if cfg.LogLevel == "DEBUG" || cfg.LogLevel == "TRACE" {
		cnxnLevel = cfg.LogLevel
	}
	return strings.Join([]string{
		"log4j.rootLogger=" + cfg.LogLevel + ", CONSOLE",
		"log4j.logger.org.apache.zookeeper.server.NIOServerCnxn=" + cnxnLevel,
		"log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender",
		"log4j.appender.CONSOLE.Target=System.out",
		"log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout",
		"log4j.appender.CONSOLE.layout.ConversionPattern=%d{HH:mm:ss,SSS} %-5p [%t:%C{1}@%L] - %m%n",
	}, "\n") + "\n"
}
