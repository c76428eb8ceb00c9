package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// helperName is the name mount(8) runs for `mount -t fuse.ckptfs` and
// systemd .mount units of that type.
const helperName = "mount.fuse.ckptfs"

// helperOptions maps -o options to ckptfs mount flags. Options mount(8)
// and systemd pass for themselves are accepted and ignored.
var helperOptions = map[string]string{
	"mode": "--mode", "site": "--site", "poll": "--poll", "hidden": "--hidden", "map": "--map",
	"root": "--root", "zk": "--zk", "cluster-id": "--cluster-id", "path-root": "--path-root",
	"config": "--config", "log-format": "--log-format", "log-level": "--log-level",
	"lease": "--lease", "passthrough": "--passthrough", "allow_other": "--allow-other",
	"seal-read-unwritten": "--seal-read-unwritten", "metrics-addr": "--metrics-addr",
	"lag-interval": "--lag-interval",
}

// mountHelperArgs turns `SOURCE MOUNTPOINT [-o opt[=value],...]...` into
// the arguments of `ckptfs mount`.
func mountHelperArgs(args []string) ([]string, error) {
	var pos, out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o":
			if i+1 == len(args) {
				return nil, fmt.Errorf("-o needs options")
			}
			i++
			for _, opt := range strings.Split(args[i], ",") {
				key, val, hasVal := strings.Cut(opt, "=")
				flag, ok := helperOptions[key]
				switch {
				case ok && hasVal:
					out = append(out, flag+"="+val)
				case ok:
					out = append(out, flag)
				case key == "rw", key == "ro", key == "default_permissions", key == "_netdev", key == "nofail",
					key == "noauto", key == "auto", key == "defaults", key == "nosuid", key == "nodev", key == "noexec",
					key == "suid", key == "dev", key == "exec", key == "user", key == "nouser", key == "users",
					strings.HasPrefix(key, "x-"), strings.HasPrefix(key, "comment="):
				default:
					return nil, fmt.Errorf("unknown mount option %q", key)
				}
			}
		case strings.HasPrefix(a, "-"):
			// -n (no mtab), -s (sloppy), -f (fake), -v (verbose): mount(8)'s own.
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("usage: %s SOURCE MOUNTPOINT [-o options]", helperName)
	}
	return append(append([]string{"mount"}, out...), pos...), nil
}

// runMountHelper starts the daemon in the background, as mount(8) expects
// of a helper, and returns once the mount serves or the daemon failed.
func runMountHelper(args []string, stderr io.Writer) int {
	margs, err := mountHelperArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return exitUsage
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return 1
	}
	cmd := exec.Command(self, margs...)
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return 1
	}
	w.Close()
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- strings.TrimSpace(line) == "READY"
	}()
	select {
	case ok := <-ready:
		if ok {
			cmd.Process.Release()
			return 0
		}
		// The daemon closed the pipe without being ready: it failed.
		err := cmd.Wait()
		fmt.Fprintln(stderr, helperName+": the mount daemon failed:", err)
		return 1
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		fmt.Fprintln(stderr, helperName+": the mount daemon did not become ready")
		return 1
	}
}
