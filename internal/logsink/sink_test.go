package logsink

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReopenFollowsLogrotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckptfs.log")
	s, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "before")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "still the old file")
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "after")
	for p, want := range map[string]string{path + ".1": "before\nstill the old file\n", path: "after\n"} {
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s holds %q (%v), want %q", p, got, err, want)
		}
	}
	if s.Where() != path {
		t.Errorf("Where() = %q, want %q", s.Where(), path)
	}
}

func TestStandardError(t *testing.T) {
	var buf bytes.Buffer
	s, err := New("", &buf)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "line")
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "line\n" || s.Where() != "standard error" {
		t.Errorf("got %q, where %q", buf.String(), s.Where())
	}
	if _, err := New(filepath.Join(t.TempDir(), "missing", "x.log"), nil); err == nil || !strings.Contains(err.Error(), "log file") {
		t.Errorf("a log file in a missing directory: %v", err)
	}
}

func TestIsJournalStream(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	for env, want := range map[string]bool{
		fmt.Sprintf("%d:%d", st.Dev, st.Ino):   true,
		fmt.Sprintf("%d:%d", st.Dev, st.Ino+1): false,
		"":                                     false, "garbage": false,
	} {
		if got := isJournalStream(env, fd); got != want {
			t.Errorf("isJournalStream(%q) = %v, want %v", env, got, want)
		}
	}
}
