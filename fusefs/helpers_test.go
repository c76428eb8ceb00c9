package fusefs_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// ls runs ls(1) on dir from a separate process (its working directory is
// the package directory, not the mount) and returns the names it lists.
// With long, it runs ls -la, which makes the kernel use READDIRPLUS and
// stat every entry.
func ls(t *testing.T, dir string, long bool) []string {
	t.Helper()
	args := []string{"-1a", dir}
	if long {
		args = []string{"-la", dir}
	}
	out, err := exec.Command("ls", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ls %v: %v\n%s", args, err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if long {
			if strings.HasPrefix(line, "total ") {
				continue
			}
			f := strings.Fields(line)
			line = f[len(f)-1]
		}
		if line != "." && line != ".." {
			names = append(names, line)
		}
	}
	slices.Sort(names)
	return names
}

// run runs a command in another process and returns its output.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// runAs is run as user uid.
func runAs(uid uint32, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// containsField reports whether a whitespace-separated field of out
// equals f.
func containsField(out, f string) bool {
	return slices.Contains(strings.Fields(out), f)
}

// readDir lists dir with os.ReadDir and Lstats every entry.
func readDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		if _, err := os.Lstat(filepath.Join(dir, e.Name())); err != nil {
			t.Errorf("listed %s but Lstat fails: %v", e.Name(), err)
		}
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// wantErrno fails unless err carries errno.
func wantErrno(t *testing.T, what string, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Errorf("%s: got %v, want %v", what, err, errno)
	}
}

// records is a slog handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
	next slog.Handler
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return r.next.Handle(ctx, rec)
}
func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{records: r, attrs: as}
}
func (r *records) WithGroup(string) slog.Handler { return r }

// withAttrs keeps logger.With attributes on the records it stores.
type withAttrs struct {
	*records
	attrs []slog.Attr
}

func (w *withAttrs) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(w.attrs...)
	return w.records.Handle(ctx, rec)
}
func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{records: w.records, attrs: append(slices.Clone(w.attrs), as...)}
}

// find returns the attributes of every record with message msg.
func (r *records) find(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.recs {
		if rec.Message != msg {
			continue
		}
		attrs := map[string]string{}
		rec.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value.String()
			return true
		})
		out = append(out, attrs)
	}
	return out
}
