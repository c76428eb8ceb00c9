package fusefs

import "testing"

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
