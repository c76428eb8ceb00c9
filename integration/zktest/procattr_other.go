//go:build !linux

package zktest

import "syscall"

// serverProcAttr has nothing to add outside Linux, which alone can kill a
// server when the test binary dies; elsewhere a crashed test run may leave
// servers behind.
func serverProcAttr() *syscall.SysProcAttr { return nil }
