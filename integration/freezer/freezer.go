// Package freezer freezes and thaws a group of processes with the
// kernel's cgroup freezer: what a paused VM, or a whole site that stops
// without dying, looks like to those processes. Tests put a site's
// processes (its daemon, its Flink, its writers) in one Group.
//
// The cgroup v2 freezer (cgroup.freeze) is used when a cgroup2 hierarchy
// is mounted (at /sys/fs/cgroup, or /sys/fs/cgroup/unified beside the v1
// controllers), else the v1 freezer controller. They differ in one way
// that matters to ckptfs's watchdog: v2 lets a fatal signal end a frozen
// process while it is frozen, v1 only as it thaws. Both are real; Kind
// says which a Group uses.
package freezer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireEnv makes tests that need a freezer fail instead of skipping
// when none is usable (CI runs as root, where it is).
const RequireEnv = "CKPTFS_REQUIRE_FUSE"

// Kind is the cgroup freezer a Group uses.
type Kind string

const (
	V2 Kind = "cgroup2"
	V1 Kind = "cgroup1-freezer"
)

// roots are where each kind's hierarchy may be mounted.
var roots = []struct {
	kind Kind
	dir  string
}{
	{V2, "/sys/fs/cgroup"},
	{V2, "/sys/fs/cgroup/unified"},
	{V1, "/sys/fs/cgroup/freezer"},
}

// Available lists the freezers usable here, v2 first.
func Available() []Kind {
	var out []Kind
	for _, r := range roots {
		if usable(r.kind, r.dir) && (len(out) == 0 || out[len(out)-1] != r.kind) {
			out = append(out, r.kind)
		}
	}
	return out
}

func usable(kind Kind, dir string) bool {
	if os.Geteuid() != 0 {
		return false
	}
	switch kind {
	case V2:
		_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return false
		}
		_, err = os.Stat(filepath.Join(dir, "cgroup.controllers"))
		return err == nil
	default:
		_, err := os.Stat(filepath.Join(dir, "freezer.state"))
		if err == nil {
			return true
		}
		// The root of a v1 freezer hierarchy has no freezer.state.
		_, err = os.Stat(filepath.Join(dir, "cgroup.procs"))
		return err == nil
	}
}

// Group is one cgroup of processes that freeze and thaw together.
type Group struct {
	Kind Kind
	dir  string
}

// New makes a group of the given kind ("" the first available) named
// after name, removed (thawed, its processes moved out) in t.Cleanup.
// It skips the test loudly when no freezer is usable, or fails it with
// RequireEnv=1.
func New(t testing.TB, name string, kind Kind) *Group {
	t.Helper()
	for _, r := range roots {
		if (kind == "" || r.kind == kind) && usable(r.kind, r.dir) {
			g := &Group{Kind: r.kind, dir: filepath.Join(r.dir, fmt.Sprintf("ckptfs-%s-%d", name, os.Getpid()))}
			if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				t.Fatalf("freezer: %v", err)
			}
			t.Cleanup(func() {
				if err := g.remove(r.dir); err != nil {
					t.Errorf("freezer: removing %s: %v", g.dir, err)
				}
			})
			return g
		}
	}
	reason := "no cgroup freezer is usable here (not root, or no cgroup hierarchy mounted)"
	if kind != "" {
		reason = fmt.Sprintf("the %s freezer is not usable here", kind)
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("freezer: %s (%s=1)", reason, RequireEnv)
	}
	t.Skipf("SKIPPED: FREEZER TEST NOT RUN: %s", reason)
	return nil
}

// Add moves a process (all its threads) into the group.
func (g *Group) Add(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// Freeze freezes every process of the group and returns once the kernel
// says they all are frozen.
func (g *Group) Freeze() error { return g.set(true) }

// Thaw lets them run again.
func (g *Group) Thaw() error { return g.set(false) }

func (g *Group) set(frozen bool) error {
	var file, value, want string
	switch g.Kind {
	case V2:
		file, value = "cgroup.freeze", "0"
		if frozen {
			value = "1"
		}
	default:
		file, value, want = "freezer.state", "THAWED", "THAWED"
		if frozen {
			value, want = "FROZEN", "FROZEN"
		}
	}
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(value), 0); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		done, err := g.settled(frozen, want)
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freezer: %s did not settle (frozen=%v)", g.dir, frozen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (g *Group) settled(frozen bool, want string) (bool, error) {
	if g.Kind == V2 {
		data, err := os.ReadFile(filepath.Join(g.dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		return strings.Contains(string(data), "frozen "+map[bool]string{true: "1", false: "0"}[frozen]), nil
	}
	data, err := os.ReadFile(filepath.Join(g.dir, "freezer.state"))
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(data)) == want, nil
}

// remove thaws the group, moves what is left to parent and removes it.
func (g *Group) remove(parent string) error {
	_ = g.Thaw()
	data, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, pid := range strings.Fields(string(data)) {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.procs"), []byte(pid), 0)
	}
	var rerr error
	for i := 0; i < 100; i++ {
		if rerr = os.Remove(g.dir); rerr == nil || errors.Is(rerr, os.ErrNotExist) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return rerr
}
