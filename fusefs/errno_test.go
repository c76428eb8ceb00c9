package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"os"
	"syscall"
	"testing"

	"github.com/ckptfs/ckptfs/manifest"
)

func TestErrnoFor(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    syscall.Errno
		wantLog bool
	}{
		{"nil", nil, 0, false},
		{"hidden", manifest.ErrHidden, syscall.ENOENT, false},
		{"wrapped hidden", fmt.Errorf("chk-3/x: %w", manifest.ErrHidden), syscall.ENOENT, false},
		{"incomplete", fmt.Errorf("verify chk-7: %w", manifest.ErrIncomplete), syscall.ENOENT, false},
		{"wrapped read-only", fmt.Errorf("fenced: %w", syscall.EROFS), syscall.EROFS, false},
		{"bare errno", syscall.EACCES, syscall.EACCES, false},
		{"path error", &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOSPC}, syscall.ENOSPC, false},
		{"deeply wrapped errno", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &os.PathError{Op: "stat", Err: syscall.ESTALE})), syscall.ESTALE, false},
		{"joined errno", errors.Join(errors.New("first"), syscall.EXDEV), syscall.EXDEV, false},
		{"not exist without errno", fmt.Errorf("lookup: %w", iofs.ErrNotExist), syscall.ENOENT, false},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), syscall.EINTR, false},
		{"deadline", context.DeadlineExceeded, syscall.EINTR, false},
		{"policy wins over errno", errors.Join(syscall.EIO, manifest.ErrIncomplete), syscall.ENOENT, false},
		{"zero errno", syscall.Errno(0), syscall.EIO, true},
		{"unknown", errors.New("manifest corrupt"), syscall.EIO, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			fsys := &fileSystem{log: slog.New(slog.NewTextHandler(&buf, nil))}
			if got := fsys.errnoFor(tc.err); got != tc.want {
				t.Errorf("errnoFor(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if logged := buf.Len() > 0; logged != tc.wantLog {
				t.Errorf("logged %q, want a log line: %v", buf.String(), tc.wantLog)
			}
		})
	}
}
