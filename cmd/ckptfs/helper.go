package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helperName is the name mount(8) runs for `mount -t fuse.ckptfs` and
// systemd .mount units of that type.
const helperName = "mount.fuse.ckptfs"

// genericMountOptions are the options mount(8), fstab and systemd pass for
// themselves; the helper accepts and ignores them. The mode, not ro or rw,
// decides whether the mount is writable.
var genericMountOptions = map[string]bool{
	"rw": true, "ro": true, "defaults": true, "auto": true, "noauto": true, "_netdev": true,
	"nofail": true, "user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"suid": true, "nosuid": true, "dev": true, "nodev": true, "exec": true, "noexec": true,
	"sync": true, "async": true, "dirsync": true, "atime": true, "noatime": true,
	"diratime": true, "nodiratime": true, "relatime": true, "norelatime": true,
	"strictatime": true, "lazytime": true, "nolazytime": true, "silent": true, "loud": true,
	"default_permissions": true,
}

// mountHelperArgs turns `SOURCE MOUNTPOINT [-o opt[=value],...]...` into
// the arguments of `ckptfs mount`. Every setting of mount is an option
// (with "_" for "-" as FUSE spells allow_other), and so is config. fake
// reports mount(8)'s -f: check everything, mount nothing.
func mountHelperArgs(args []string) (margs []string, fake bool, err error) {
	options := map[string]*pflag.Flag{}
	mount, _, err := newRoot(nil).Find([]string{"mount"})
	if err != nil {
		return nil, false, err
	}
	mount.Flags().VisitAll(func(f *pflag.Flag) {
		if isSetting(f) || f.Name == configFlag {
			options[f.Name] = f
		}
	})
	var pos, out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || (strings.HasPrefix(a, "-o") && len(a) > 2):
			list := strings.TrimPrefix(a, "-o")
			if list == "" {
				if i+1 == len(args) {
					return nil, false, fmt.Errorf("-o needs options")
				}
				i++
				list = args[i]
			}
			opts, err := splitMountOptions(list)
			if err != nil {
				return nil, false, err
			}
			for _, opt := range opts {
				key, val, hasVal := strings.Cut(opt, "=")
				if genericMountOptions[key] || strings.HasPrefix(key, "x-") || key == "comment" || key == "" {
					continue
				}
				f, ok := options[strings.ReplaceAll(key, "_", "-")]
				switch {
				case !ok:
					return nil, false, fmt.Errorf("unknown mount option %q (ckptfs takes %s)", key, strings.Join(sortedFlagNames(options), ", "))
				case hasVal:
					out = append(out, "--"+f.Name+"="+val)
				case f.NoOptDefVal != "":
					out = append(out, "--"+f.Name)
				default:
					return nil, false, fmt.Errorf("mount option %s needs a value (%s=...)", key, key)
				}
			}
		case a == "-t" || a == "-N":
			// mount(8) passes the type (fuse.ckptfs) or a namespace.
			i++
		case strings.HasPrefix(a, "-"):
			// -n (no mtab), -s (sloppy), -v (verbose): mount(8)'s own;
			// -f (fake) mounts nothing.
			fake = fake || strings.Contains(a[1:], "f")
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, false, fmt.Errorf("usage: %s SOURCE MOUNTPOINT [-f] [-o options]", helperName)
	}
	return append(append([]string{"mount"}, out...), pos...), fake, nil
}

// splitMountOptions splits at commas outside double quotes and removes
// the quotes, as libmount does: zk="zk1:2181,zk2:2181".
func splitMountOptions(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	if quoted {
		return nil, fmt.Errorf("unbalanced quote in mount options %q", s)
	}
	return append(out, cur.String()), nil
}

func sortedFlagNames(m map[string]*pflag.Flag) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runMountHelper starts the daemon in the background, as mount(8) expects
// of a helper, and returns once the mount serves or the daemon failed.
func runMountHelper(args []string, stderr io.Writer) int {
	margs, fake, err := mountHelperArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return exitUsage
	}
	// Check the settings here, where mount(8) and systemd show the error,
	// rather than in the daemon.
	check := newRoot(func(*cobra.Command, *mountConfig) error { return nil })
	if code := run(check, margs, io.Discard, stderr); code != exitOK || fake {
		return code
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
	cmd.Env = append(os.Environ(), "CKPTFS_READY_FD=3", "CKPTFS_DETACH=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, helperName+":", err)
		return 1
	}
	w.Close()
	// The daemon writes READY on the pipe once it serves, or closes it
	// by exiting.
	r.SetReadDeadline(time.Now().Add(2 * time.Minute))
	line, err := bufio.NewReader(r).ReadString('\n')
	switch {
	case strings.TrimSpace(line) == "READY":
		cmd.Process.Release()
		return 0
	case errors.Is(err, os.ErrDeadlineExceeded):
		cmd.Process.Kill()
		fmt.Fprintln(stderr, helperName+": the mount daemon did not become ready")
		return 1
	}
	fmt.Fprintln(stderr, helperName+": the mount daemon failed:", cmd.Wait())
	return 1
}
