package nasfault

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
	"github.com/ckptfs/ckptfs/manifest"
)

// TestPrimaryPassesErrorsOn: on a primary mount Flink gets the NAS's own
// error for every failing call, unchanged (not EIO for everything, not
// success), and once the fault ends the same calls work, without a
// restart.
func TestPrimaryPassesErrorsOn(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModePrimary, nil)
	defer s.dumpOnFailure()
	dir := filepath.Join(s.mnt, jobA, s.chk)
	write := func(name string) error { return os.WriteFile(filepath.Join(dir, name), make([]byte, 64<<10), 0o644) }
	cases := []struct {
		name string
		rule faultfs.Rule
		call func() error
	}{
		{"write ENOSPC", faultfs.Rule{Ops: faultfs.OpWrite, Err: syscall.ENOSPC}, func() error { return write("w") }},
		{"create ENOSPC", faultfs.Rule{Ops: faultfs.OpCreate, Err: syscall.ENOSPC}, func() error { return write("c") }},
		{"create EIO", faultfs.Rule{Ops: faultfs.OpCreate, Err: syscall.EIO}, func() error { return write("e") }},
		{"open ESTALE", faultfs.Rule{Ops: faultfs.OpOpen, Err: syscall.ESTALE}, func() error {
			_, err := os.ReadFile(filepath.Join(dir, "_metadata"))
			return err
		}},
		{"read EIO", faultfs.Rule{Ops: faultfs.OpRead, Err: syscall.EIO}, func() error {
			_, err := os.ReadFile(filepath.Join(dir, "_metadata"))
			return err
		}},
		{"mkdir ENOSPC", faultfs.Rule{Ops: faultfs.OpMkdir, Err: syscall.ENOSPC}, func() error { return os.Mkdir(filepath.Join(s.mnt, jobA, "chk-99"), 0o755) }},
		{"fsync EIO", faultfs.Rule{Ops: faultfs.OpFsync, Err: syscall.EIO}, func() error {
			f, err := os.OpenFile(filepath.Join(dir, "s"), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Write([]byte("x")); err != nil {
				return err
			}
			return f.Sync()
		}},
		{"rename EIO", faultfs.Rule{Ops: faultfs.OpRename, Err: syscall.EIO}, func() error {
			return os.Rename(filepath.Join(dir, "_metadata"), filepath.Join(dir, "_metadata.old"))
		}},
		{"unlink ESTALE", faultfs.Rule{Ops: faultfs.OpUnlink, Err: syscall.ESTALE}, func() error { return os.Remove(filepath.Join(dir, "w")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.rule.Path = jobA
			remove := s.fault.Add(c.rule)
			err := c.call()
			remove()
			if !errors.Is(err, c.rule.Err) {
				t.Errorf("got %v, want %v", err, c.rule.Err)
			}
		})
	}
	// Healed: every call works again (the rename and unlink last: they
	// move _metadata away).
	for _, c := range cases {
		if err := c.call(); err != nil {
			t.Errorf("%s after the fault: %v", c.name, err)
		}
	}
	s.waitFor(10*time.Second, "the other job's checkpoint still visible", func() bool { return s.visible(jobB) })
}

// writeCheckpoint writes the real checkpoint through the primary mount
// into job, as Flink does: every state file, then _metadata. skip names
// a state file that is not written (a lost write), "" none.
func (s *site) writeCheckpoint(job, skip string) error {
	dir := filepath.Join(s.mnt, job, s.chk)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "_metadata" || e.Name() == skip {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(filepath.Join(s.src, "_metadata"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "_metadata"), data, 0o644)
}

// sealed reports whether the primary sealed job's checkpoint (its sealed
// manifest is on the NAS).
func (s *site) sealed(job string) bool {
	_, err := os.Stat(manifest.SealedPath(s.lower, filepath.Join(job, s.chk)))
	return err == nil
}

// TestPrimarySealsAfterTheNASHeals: a checkpoint committed while the NAS
// fails reads of its _metadata and every write of the sealed manifest is
// not sealed then, and is sealed once the NAS works again, without a
// restart.
func TestPrimarySealsAfterTheNASHeals(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModePrimary, nil)
	defer s.dumpOnFailure()
	removeRead := s.fault.Add(faultfs.Rule{Ops: faultfs.OpRead, Path: jobC, Name: "_metadata", Err: syscall.EIO})
	removeWrite := s.fault.Add(faultfs.Rule{Ops: faultfs.OpCreate | faultfs.OpMkdir, Path: manifest.StateDir, Err: syscall.ENOSPC})
	if err := s.writeCheckpoint(jobC, ""); err != nil {
		t.Fatal(err)
	}
	s.waitFor(10*time.Second, "a seal attempt failed", func() bool { return s.logs.contains("sealing failed", filepath.Base(jobC)) })
	if s.sealed(jobC) {
		t.Fatal("sealed although the NAS failed")
	}
	removeRead()
	removeWrite()
	s.waitFor(15*time.Second, "sealed once the NAS works", func() bool { return s.sealed(jobC) })
}

// TestPrimaryDoesNotSealAnIncompleteCheckpoint: a checkpoint whose
// _metadata names a file the NAS does not hold (a write it lost) is not
// sealed: a sealed manifest vouches for what the primary holds.
func TestPrimaryDoesNotSealAnIncompleteCheckpoint(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModePrimary, nil)
	defer s.dumpOnFailure()
	entries, err := os.ReadDir(s.src)
	if err != nil {
		t.Fatal(err)
	}
	lost := ""
	for _, e := range entries {
		if e.Name() != "_metadata" {
			lost = e.Name()
			break
		}
	}
	if err := s.writeCheckpoint(jobC, lost); err != nil {
		t.Fatal(err)
	}
	if err := s.writeCheckpoint(jobD, ""); err != nil {
		t.Fatal(err)
	}
	s.waitFor(10*time.Second, "the complete checkpoint sealed", func() bool { return s.sealed(jobD) })
	s.waitFor(10*time.Second, "the incomplete one refused", func() bool { return s.logs.contains("sealing failed", filepath.Base(jobC)) })
	if s.sealed(jobC) {
		t.Errorf("sealed a checkpoint without its file %s", lost)
	}
}

// TestHealthProbesTheNAS: health fails while the NAS fails or does not
// answer the daemon's probe, even when no verification waits on it, and
// passes again once it answers.
func TestHealthProbesTheNAS(t *testing.T) {
	t.Parallel()
	s := startSite(t, fusefs.ModePrimary, nil)
	defer s.dumpOnFailure()
	s.waitFor(10*time.Second, "healthy", func() bool { return s.health().OK })
	hasProblem := func(words ...string) func() bool {
		return func() bool {
			for _, p := range s.health().Problems {
				ok := true
				for _, w := range words {
					ok = ok && strings.Contains(p, w)
				}
				if ok {
					return true
				}
			}
			return false
		}
	}
	remove := s.fault.Add(faultfs.Rule{Ops: faultfs.OpStatfs, Err: syscall.ENOSPC})
	s.waitFor(10*time.Second, "health names the failing NAS", hasProblem("backing file system failing", "no space left"))
	remove()
	s.waitFor(10*time.Second, "healthy again", func() bool { return s.health().OK })
	s.fault.Add(faultfs.Rule{Ops: faultfs.OpStatfs, Hang: true})
	s.waitFor(10*time.Second, "health names the hung NAS", hasProblem("backing file system not answering", "probe"))
	if d := s.metric("ckptfs_backing_probe_duration_seconds"); d < 2 {
		t.Errorf("ckptfs_backing_probe_duration_seconds %v while the probe hangs, want at least the 2 s timeout", d)
	}
	t.Logf("health: %q", s.health().Problems)
	s.fault.Clear()
	s.waitFor(10*time.Second, "healthy again", func() bool { return s.health().OK })
}
