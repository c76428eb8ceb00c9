package fusefs_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/fusefs"
	"github.com/ckptfs/ckptfs/integration/mounttest"
)

const nobody = 65534

// fileCaps is a valid security.capability value (revision 2,
// CAP_NET_BIND_SERVICE permitted and effective).
func fileCaps() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(b[4:], 1<<10)
	return b
}

// TestIntegration_KillPriv compares what writes and truncates through a
// primary mount do to setuid, setgid and file capabilities with what the
// kernel does on the backing file system directly (the mount handles
// FUSE_HANDLE_KILLPRIV_V2 itself).
func TestIntegration_KillPriv(t *testing.T) {
	m := mounttest.New(t, &mounttest.Options{Mode: fusefs.ModePrimary})
	for _, p := range []string{filepath.Dir(m.Mnt), filepath.Dir(filepath.Dir(m.Mnt)), m.Orig} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		mode os.FileMode
		caps bool
		uid  uint32 // who acts
		op   string // shell command on "$1"
	}{
		{"setuid, user appends", os.ModeSetuid | 0o757, false, nobody, `printf x >> "$1"`},
		{"setuid, root appends", os.ModeSetuid | 0o757, false, 0, `printf x >> "$1"`},
		{"setgid group-exec, user appends", os.ModeSetgid | 0o777, false, nobody, `printf x >> "$1"`},
		{"setgid no group-exec, user appends", os.ModeSetgid | 0o767, false, nobody, `printf x >> "$1"`},
		{"setuid, user truncates", os.ModeSetuid | 0o757, false, nobody, `truncate -s 1 "$1"`},
		{"setuid, user O_TRUNC", os.ModeSetuid | 0o757, false, nobody, `printf x > "$1"`},
		{"capabilities, root appends", 0o755, true, 0, `printf x >> "$1"`},
		{"capabilities, root truncates", 0o755, true, 0, `truncate -s 1 "$1"`},
		{"plain file, user appends", 0o757, false, nobody, `printf x >> "$1"`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result := func(name, via string) string {
				p := m.OrigPath(name)
				if err := os.WriteFile(p, []byte("data"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, nobody, nobody); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tc.mode); err != nil {
					t.Fatal(err)
				}
				if tc.caps {
					if err := unix.Setxattr(p, "security.capability", fileCaps(), 0); err != nil {
						t.Skipf("backing file system refuses file capabilities: %v", err)
					}
				}
				target := p
				if via == "mount" {
					target = m.Path(name)
				}
				if out, err := runAs(tc.uid, "sh", "-c", tc.op, "sh", target); err != nil {
					t.Fatalf("%s as %d via %s: %v\n%s", tc.op, tc.uid, via, err, out)
				}
				var st unix.Stat_t
				if err := unix.Lstat(p, &st); err != nil {
					t.Fatal(err)
				}
				_, capErr := unix.Getxattr(p, "security.capability", nil)
				return fmt.Sprintf("mode %o, capabilities kept: %v", st.Mode&0o7777, capErr == nil)
			}
			direct := result(fmt.Sprintf("direct-%d", i), "direct")
			mounted := result(fmt.Sprintf("mount-%d", i), "mount")
			if direct != mounted {
				t.Errorf("through the mount: %s; directly: %s", mounted, direct)
			}
		})
	}
}
