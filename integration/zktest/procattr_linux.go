package zktest

import "syscall"

// serverProcAttr puts a server in its own process group, so a terminal's
// Ctrl-C reaches only the test binary, and has the kernel kill it when the
// test binary dies without running its cleanups (a panic, a -timeout).
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
