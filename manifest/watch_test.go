package manifest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDirWatchSettles: a directory is listed when first seen and when
// its stamp changes, and once more a settle later, which is short for a
// stamp from a clock finer than a second and 2 s for one of whole
// seconds.
func TestDirWatchSettles(t *testing.T) {
	for _, c := range []struct {
		s    dirStamp
		want time.Duration
	}{
		{dirStamp{mtime: 5e9, ctime: 7e9}, settle},
		{dirStamp{mtime: 5e9 + 4e6, ctime: 5e9 + 4e6}, settleFine},
		{dirStamp{mtime: 5e9, ctime: 5e9 + 1}, settleFine},
	} {
		if got := settleFor(c.s); got != c.want {
			t.Errorf("settleFor(%+v) = %v, want %v", c.s, got, c.want)
		}
	}

	dir := t.TempDir()
	res, err := NewResolver(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	w := newDirWatch(dir)
	defer w.close()
	now := time.Unix(1000, 0).UnixNano()
	observe := func(at int64) bool {
		t.Helper()
		list, err := w.observe(res, at)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if !observe(now) {
		t.Fatal("a directory seen first is not listed")
	}
	d := settleFor(w.stamp).Nanoseconds()
	for _, c := range []struct {
		at   int64
		want bool
	}{{now + d - 1, false}, {now + d, true}, {now + 2*d, false}} {
		if got := observe(c.at); got != c.want {
			t.Fatalf("unchanged, %v after the listing: listed %v, want %v", time.Duration(c.at-now), got, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !observe(now + 3*d) {
		t.Fatal("a directory whose names changed is not listed")
	}
}
