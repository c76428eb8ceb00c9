package fusefs

import (
	"testing"
)

func TestUnescapeMountinfo(t *testing.T) {
	tests := map[string]string{
		`/mnt/plain`:            "/mnt/plain",
		`/mnt/with\040space`:    "/mnt/with space",
		`/mnt/tab\011and\134bs`: "/mnt/tab\tand\\bs",
		`/mnt/trailing\`:        `/mnt/trailing\`,
		`/mnt/short\04`:         `/mnt/short\04`,
	}
	for in, want := range tests {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		line   string
		ok     bool
		point  string
		fstype string
		dev    uint64
	}{
		{"36 35 0:52 / /mnt/flink rw,nosuid,nodev,relatime shared:19 - fuse.ckptfs /srv/nas rw,user_id=0", true, "/mnt/flink", "fuse.ckptfs", 52},
		{"40 25 8:1 / /mnt/with\\040space rw - ext4 /dev/sda1 rw", true, "/mnt/with space", "ext4", 8<<20 | 1},
		{"41 25 259:3 / / rw - xfs /dev/nvme0n1p3 rw", true, "/", "xfs", 259<<20 | 3},
		{"42 25 x:1 / /mnt rw - ext4 /dev/sda1 rw", false, "", "", 0},
		{"43 25 0:5 / /mnt rw", false, "", "", 0},
		{"", false, "", "", 0},
	} {
		m, point, ok := parseMountinfo(tc.line)
		if ok != tc.ok || point != tc.point || m.fstype != tc.fstype || m.dev != tc.dev {
			t.Errorf("parseMountinfo(%q) = %+v, %q, %v; want %s %q dev %d, %v", tc.line, m, point, ok, tc.fstype, tc.point, tc.dev, tc.ok)
		}
	}
}
