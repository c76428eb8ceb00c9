package nasfault

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/faultfs"
)

// TestPrimaryPassesErrorsOn: on a primary mount Flink gets the NAS's own
// error for every failing call, unchanged (not EIO for everything, not
// success), and once the fault ends the same calls work, without a
// restart.
func TestPrimaryPassesErrorsOn(t *testing.T) {
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
