package zktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfig_DefaultIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}
}

func TestConfig_ValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error
	}{
		{"zero tick", func(c *Config) { c.TickTime = 0 }, "TickTime"},
		{"sub-millisecond tick", func(c *Config) { c.TickTime = 1500 * time.Microsecond }, "TickTime"},
		{"no init limit", func(c *Config) { c.InitLimit = 0 }, "InitLimit"},
		{"no sync limit", func(c *Config) { c.SyncLimit = 0 }, "SyncLimit"},
		{"min above max", func(c *Config) { c.MinSessionTimeout, c.MaxSessionTimeout = 4*time.Second, 2*time.Second }, "exceeds"},
		{"min above derived max", func(c *Config) { c.MinSessionTimeout = time.Minute }, "exceeds"},
		{"negative session timeout", func(c *Config) { c.MaxSessionTimeout = -time.Second }, "MaxSessionTimeout"},
		{"tiny heap", func(c *Config) { c.HeapMB = 8 }, "HeapMB"},
		{"no start timeout", func(c *Config) { c.StartTimeout = 0 }, "StartTimeout"},
		{"no stop timeout", func(c *Config) { c.StopTimeout = 0 }, "StopTimeout"},
		{"bad log level", func(c *Config) { c.LogLevel = "verbose" }, "LogLevel"},
		{"srvr not whitelisted", func(c *Config) { c.FourLetterWords = []string{"ruok"} }, "srvr"},
		{"reserved extra key", func(c *Config) { c.Extra = map[string]string{"tickTime": "10"} }, "generated"},
		{"server line in extra", func(c *Config) { c.Extra = map[string]string{"server.9": "x"} }, "generated"},
		{"extra value with newline", func(c *Config) { c.Extra = map[string]string{"jute.maxbuffer": "1\nx=y"} }, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestConfig_ZooCfg(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Extra = map[string]string{"snapCount": "1000", "globalOutstandingLimit": "500"}
	peers := []peer{{1, "127.0.0.1", 2181, 2888, 3888}, {2, "127.0.0.1", 2182, 2889, 3889}, {3, "127.0.0.1", 2183, 2890, 3890}}

	got := cfg.zooCfg(peers[1], peers, "/data/zk1")
	for _, want := range []string{
		"\ntickTime=250\n",
		"\nminSessionTimeout=500\n",
		"\nmaxSessionTimeout=5000\n",
		"\ndataDir=/data/zk1\n",
		"\nclientPortAddress=127.0.0.1\n",
		"\nclientPort=2182\n",
		"\nadmin.enableServer=false\n",
		"\n4lw.commands.whitelist=srvr,ruok,mntr,stat,cons,dump,",
		"\nserver.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\nserver.3=127.0.0.1:2890:3890\n",
		"\nglobalOutstandingLimit=500\nsnapCount=1000\n", // sorted
	} {
		if !strings.Contains(got, want) {
			t.Errorf("zoo.cfg lacks %q:\n%s", want, got)
		}
	}

	standalone := cfg.zooCfg(peers[0], peers[:1], "/data/zk0")
	if strings.Contains(standalone, "server.") {
		t.Errorf("standalone zoo.cfg has server lines:\n%s", standalone)
	}

	cfg.MinSessionTimeout, cfg.MaxSessionTimeout = 300*time.Millisecond, 9*time.Second
	got = cfg.zooCfg(peers[0], peers, "/d")
	if !strings.Contains(got, "\nminSessionTimeout=300\n") || !strings.Contains(got, "\nmaxSessionTimeout=9000\n") {
		t.Errorf("explicit session timeouts not rendered:\n%s", got)
	}
}

func TestPorts_NeverHandedOutTwice(t *testing.T) {
	const workers, each = 8, 30
	var mu sync.Mutex
	seen := make(map[int]bool)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for range each / 3 {
				ps, err := ports.take(3)
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				for _, p := range ps {
					if seen[p] {
						errs[w] = fmt.Errorf("port %d handed out twice", p)
					}
					seen[p] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d distinct ports, want %d", len(seen), workers*each)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		reply   string
		want    Mode
		wantErr error
	}{
		{"Zookeeper version: 3.8.0\nZxid: 0x0\nMode: follower\nNode count: 5\n", ModeFollower, nil},
		{"Mode: leader\n", ModeLeader, nil},
		{"Mode: standalone", ModeStandalone, nil},
		{"This ZooKeeper instance is not currently serving requests\n", "", ErrNotServing},
		{"srvr is not executed because it is not in the whitelist.\n", "", nil},
		{"", "", nil},
	}
	for _, tt := range tests {
		got, err := parseMode(tt.reply)
		if got != tt.want {
			t.Errorf("parseMode(%q) = %q, want %q", tt.reply, got, tt.want)
		}
		if (err == nil) != (tt.want != "") {
			t.Errorf("parseMode(%q) error = %v, want an error only when no mode", tt.reply, err)
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("parseMode(%q) error = %v, want %v", tt.reply, err, tt.wantErr)
		}
	}
}

func TestLineSink_SplitsAndKeepsTail(t *testing.T) {
	s := &lineSink{log: newTestLog(t, "sink| ")}
	for i := range tailLines + 5 {
		fmt.Fprintf(s, "line %d\r\n", i)
	}
	s.Write([]byte("unfinished"))
	tail := s.Tail()
	if len(tail) != tailLines+1 {
		t.Fatalf("Tail() has %d lines, want %d", len(tail), tailLines+1)
	}
	if tail[0] != "line 5" || tail[tailLines-1] != fmt.Sprintf("line %d", tailLines+4) || tail[tailLines] != "unfinished" {
		t.Fatalf("Tail() = %q", tail)
	}
}

// recordingTB records Log, Skipf and Fatalf calls, which return normally,
// and holds cleanups until runCleanups.
type recordingTB struct {
	testing.TB
	logs, skips, fatals []string
	cleanups            []func()
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Log(args ...any)  { r.logs = append(r.logs, fmt.Sprint(args...)) }
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skips = append(r.skips, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}
func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestTestLog_SilentAfterCleanup checks that output arriving once the
// test's cleanups have run is dropped: t.Log would panic after the test.
func TestTestLog_SilentAfterCleanup(t *testing.T) {
	tb := &recordingTB{TB: t}
	l := newTestLog(tb, "p: ")
	l.Printf("during %d", 1)
	tb.runCleanups()
	l.Printf("after")
	if len(tb.logs) != 1 || tb.logs[0] != "p: during 1" {
		t.Fatalf("logged %q, want only %q", tb.logs, "p: during 1")
	}
}

func TestFindInstallation_Overrides(t *testing.T) {
	t.Run("classpath", func(t *testing.T) {
		t.Setenv(EnvClasspath, "/x/a.jar:/x/b.jar")
		t.Setenv(EnvHome, "/ignored")
		inst, err := findInstallation()
		if errors.Is(err, errNotInstalled) {
			t.Skipf("no java: %v", err)
		}
		if err != nil || inst.classpath != "/x/a.jar:/x/b.jar" {
			t.Fatalf("findInstallation() = %+v, %v; want the classpath from $%s", inst, err, EnvClasspath)
		}
	})
	t.Run("home", func(t *testing.T) {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, "lib"), 0o755)
		os.WriteFile(filepath.Join(home, "lib", "zookeeper-3.8.4.jar"), nil, 0o644)
		t.Setenv(EnvClasspath, "")
		t.Setenv(EnvHome, home)
		inst, err := findInstallation()
		if errors.Is(err, errNotInstalled) {
			t.Skipf("no java: %v", err)
		}
		want := filepath.Join(home, "conf") + ":" + filepath.Join(home, "lib", "*")
		if err != nil || inst.classpath != want {
			t.Fatalf("findInstallation() = %+v, %v; want classpath %q", inst, err, want)
		}
	})
	t.Run("broken home", func(t *testing.T) {
		t.Setenv(EnvClasspath, "")
		t.Setenv(EnvHome, t.TempDir())
		_, err := findInstallation()
		if err == nil || errors.Is(err, errNotInstalled) {
			t.Fatalf("findInstallation() error = %v, want a configuration error (not a skip)", err)
		}
	})
}

func TestRequireInstallation_SkipsOrFailsWhenMissing(t *testing.T) {
	oldEnv, oldJar := debianZkEnv, debianJar
	t.Cleanup(func() { debianZkEnv, debianJar = oldEnv, oldJar })
	debianZkEnv, debianJar = "/nonexistent/zkEnv.sh", "/nonexistent/zookeeper.jar"
	t.Setenv(EnvClasspath, "")
	t.Setenv(EnvHome, "")
	if _, err := findJava(); err != nil {
		t.Skipf("no java here: %v", err)
	}
	t.Cleanup(func() { short = testing.Short })
	short = func() bool { return false }

	t.Setenv(EnvRequire, "")
	tb := &recordingTB{TB: t}
	requireInstallation(tb)
	if len(tb.skips) != 1 || !strings.Contains(tb.skips[0], "SKIPPING") || len(tb.fatals) != 0 {
		t.Fatalf("without %s: skips %q, fatals %q; want one loud skip", EnvRequire, tb.skips, tb.fatals)
	}

	t.Setenv(EnvRequire, "1")
	tb = &recordingTB{TB: t}
	requireInstallation(tb)
	if len(tb.fatals) != 1 || len(tb.skips) != 0 {
		t.Fatalf("with %s=1: skips %q, fatals %q; want one failure", EnvRequire, tb.skips, tb.fatals)
	}

	// -short skips quietly, whatever EnvRequire says.
	short = func() bool { return true }
	tb = &recordingTB{TB: t}
	requireInstallation(tb)
	if len(tb.skips) != 1 || !strings.Contains(tb.skips[0], "-short") || len(tb.fatals) != 0 {
		t.Fatalf("-short with %s=1: skips %q, fatals %q; want one skip naming -short", EnvRequire, tb.skips, tb.fatals)
	}
}

// TestFreePortsBelowEphemeralRange: no port is handed out from the
// range the kernel gives outgoing connections, which could take it
// before its server binds it.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	ps, err := FreePorts("127.0.0.1", 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p < lowPort || p >= ephemeralStart() {
			t.Errorf("port %d outside [%d, %d)", p, lowPort, ephemeralStart())
		}
	}
}
