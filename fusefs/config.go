package fusefs

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// Mode says what a mount may do. It changes at runtime through
// Server.SetMode when ZooKeeper promotes or fences this site.
type Mode int32

const (
	// ModeReplica serves a standby site: read-only, and only what the
	// Visibility policy allows is shown.
	ModeReplica Mode = iota + 1
	// ModePrimary serves the active site: plain read-write passthrough
	// with sealing hooks.
	ModePrimary
	// ModeFenced serves a primary whose site is no longer active:
	// everything is shown, nothing may be written.
	ModeFenced
)

func (m Mode) String() string {
	switch m {
	case ModeReplica:
		return "replica"
	case ModePrimary:
		return "primary"
	case ModeFenced:
		return "fenced"
	}
	return fmt.Sprintf("Mode(%d)", int32(m))
}

// ParseMode is the inverse of Mode.String.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeReplica, ModePrimary, ModeFenced} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want replica, primary or fenced)", s)
}

func (m Mode) valid() bool { return m >= ModeReplica && m <= ModeFenced }

// writable reports whether mutations are allowed in m.
func (m Mode) writable() bool { return m == ModePrimary }

// filtered reports whether the Visibility policy applies in m: in every
// mode that does not write. A fenced site's JobManager may still run (cut
// off, or returning after another site took over) and must not open a
// checkpoint its NAS holds only in part, as a replica's must not.
func (m Mode) filtered() bool { return m != ModePrimary }

// AllVisible is a Visibility that hides nothing. The mount still hides
// its own .ckptfs directory.
type AllVisible struct{}

// Visible always returns nil.
func (AllVisible) Visible(dir, name string) error { return nil }

// Config describes one mount. Start from DefaultConfig.
type Config struct {
	// Backing is the directory served (the NAS or its replica).
	Backing string
	// MountPoint is where the file system appears (Flink's directory).
	MountPoint string
	// Mode is the initial mode.
	Mode Mode

	// Visibility decides what a replica shows. It is required even for a
	// primary mount because SetMode may turn the mount into a replica;
	// AllVisible is fine where that never happens.
	Visibility manifest.Visibility
	// Sealer receives what a primary mount saw written. May be nil: then
	// no checksums are computed.
	Sealer manifest.Sealer
	// DeleteGuard, when set, protects what the newest complete
	// checkpoint of each job holds for DeleteGrace after the mount is
	// promoted (SetMode from a mode that does not write to ModePrimary):
	// an unlink, rmdir or rename of it is refused with EPERM, or, with
	// DeleteHold, held until the grace period ends. Each is logged and
	// counted (Stats.DeletionsRefused, DeletionsHeld). After a takeover,
	// a job that reaches FAILED would otherwise have Flink delete the
	// checkpoint the failover restored.
	DeleteGuard manifest.DeletionGuard
	DeleteGrace time.Duration
	DeleteHold  bool
	// Gate, when set, admits every open and opendir before it is served
	// (nil admits everything).
	Gate Gate
	// CloseGate, when set, may hold the close of a file written through
	// the mount (nil holds none).
	CloseGate CloseGate
	// Logger receives the mount's own log lines and go-fuse's.
	Logger *slog.Logger
	// Now is the clock used for Sealer timestamps.
	Now func() time.Time

	// EntryTimeout and AttrTimeout bound how long the kernel trusts a
	// positive name lookup and file attributes. Server.Invalidate drops an
	// entry earlier.
	EntryTimeout time.Duration
	AttrTimeout  time.Duration
	// NegativeTimeout is how long the kernel remembers that a name does
	// not exist. The default 0 means a checkpoint that becomes complete is
	// visible on the next lookup even if nobody calls Invalidate.
	NegativeTimeout time.Duration

	// AllowOther lets users other than the mounting one (Flink runs as
	// "flink") use the mount.
	AllowOther bool
	// DefaultPermissions makes the kernel check permission bits, as it
	// does on the backing file system.
	DefaultPermissions bool
	// Passthrough lets the kernel read files opened read-only straight
	// from the backing file (Linux 6.9+, needs root).
	Passthrough bool
	// DeadlineFence makes the mount admit changes only before the write
	// deadline its daemon gives it (Server.SetWriteDeadline) as well as
	// in a mode that writes: the one fence of design §5.14. Without it
	// the mode alone decides (a mount without ZooKeeper).
	DeadlineFence bool
	// FenceTimeout bounds how long SetMode waits for the changes admitted
	// before fencing to come back from the backing file system.
	FenceTimeout time.Duration
	// ProbeTimeout is how long Mount waits for a FUSE mount already at
	// MountPoint to answer statfs. A ckptfs mount that does not is taken
	// for a hung daemon (stopped, deadlocked): its connection is aborted
	// and the mount detached. Any mount that answers is left alone.
	ProbeTimeout time.Duration
	// MaxWrite is the largest READ/WRITE request, at most 1 MiB.
	MaxWrite int
	// FsName is the first column of df; it defaults to Backing. The type
	// column always reads fuse.ckptfs.
	FsName string
	// Debug logs every FUSE opcode (very verbose).
	Debug bool
}

// Name is the file system type suffix: df -T shows fuse.ckptfs.
const Name = "ckptfs"

const maxWriteLimit = 1 << 20

// DefaultConfig returns the daemon's defaults; Backing, MountPoint and
// Visibility still have to be set.
func DefaultConfig() Config {
	return Config{
		Mode:               ModeReplica,
		Logger:             slog.New(slog.DiscardHandler),
		Now:                time.Now,
		EntryTimeout:       time.Second,
		AttrTimeout:        time.Second,
		NegativeTimeout:    0,
		AllowOther:         true,
		DefaultPermissions: true,
		Passthrough:        true,
		FenceTimeout:       10 * time.Second,
		ProbeTimeout:       10 * time.Second,
		MaxWrite:           maxWriteLimit,
	}
}

// Validate reports every problem in c at once.
func (c *Config) Validate() error {
	var errs []error
	if !filepath.IsAbs(c.Backing) {
		errs = append(errs, fmt.Errorf("backing directory %q is not an absolute path", c.Backing))
	}
	if !filepath.IsAbs(c.MountPoint) {
		errs = append(errs, fmt.Errorf("mount point %q is not an absolute path", c.MountPoint))
	}
	if filepath.IsAbs(c.Backing) && filepath.IsAbs(c.MountPoint) {
		if err := CheckOverlap(c.Backing, c.MountPoint); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.Mode.valid() {
		errs = append(errs, fmt.Errorf("invalid mode %v", c.Mode))
	}
	if c.Visibility == nil {
		errs = append(errs, errors.New("no Visibility (use AllVisible to show everything)"))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("no Logger"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("no clock (Now)"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"entry", c.EntryTimeout}, {"attribute", c.AttrTimeout}, {"negative", c.NegativeTimeout}, {"fence", c.FenceTimeout}, {"delete grace", c.DeleteGrace}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s timeout %v", d.name, d.v))
		}
	}
	if c.ProbeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("probe timeout %v is not positive", c.ProbeTimeout))
	}
	if c.MaxWrite < 4096 || c.MaxWrite > maxWriteLimit {
		errs = append(errs, fmt.Errorf("MaxWrite %d outside [4096, %d]", c.MaxWrite, maxWriteLimit))
	}
	return errors.Join(errs...)
}

// CheckOverlap refuses a backing directory and a mount point (absolute
// paths) of which one is the other or lies inside it: the mount would
// serve itself.
func CheckOverlap(backing, mountPoint string) error {
	b, m := filepath.Clean(backing), filepath.Clean(mountPoint)
	if within(b, m) || within(m, b) {
		return fmt.Errorf("backing directory %q and mount point %q overlap: the mount would serve itself", b, m)
	}
	return nil
}

// within reports whether path p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/") || dir == "/"
}
