package zkbridge

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ckptfs/ckptfs/manifest"
)

// siteVerifier adapts a manifest.Verifier: L2 of pointers, L1 of
// directories, both through its Resolver (--map, roots). It waits for
// the NAS at most the backing timeout: a takeover, the sweeper and the
// lag tracker verify holding ZooKeeper work (the takeover lock among
// it), and on a hung NAS they must judge "unknown" and go on.
type siteVerifier struct {
	v       *manifest.Verifier
	backing *manifest.BackingWaits
}

// NewSiteVerifier verifies checkpoints on this site with v, waiting for
// the backing file system at most backingTimeout for each. Decisions
// that act on the result (takeover) should use a Verifier with MaxAge
// zero.
func NewSiteVerifier(v *manifest.Verifier, backingTimeout time.Duration) Verifier {
	return &siteVerifier{v: v, backing: manifest.NewBackingWaits(backingTimeout)}
}

// unknown is the verdict of what the NAS did not answer.
func unknown(id int64, path string, err error) *manifest.Verdict {
	return &manifest.Verdict{CheckpointID: id, Unknown: true,
		Problems: []manifest.Problem{{Path: path, Kind: manifest.ProblemIOError, Detail: err.Error()}}}
}

func (s *siteVerifier) VerifyCheckpointDir(ctx context.Context, flinkDir string) *manifest.Verdict {
	local, err := s.v.Resolver().Local(flinkDir)
	if err != nil {
		return &manifest.Verdict{CheckpointID: -1, Dir: flinkDir, Problems: []manifest.Problem{{Path: flinkDir, Kind: manifest.ProblemOutsideRoot, Detail: err.Error()}}}
	}
	v, err := manifest.Bounded(ctx, s.backing, "dir "+local, func(ctx context.Context) (*manifest.Verdict, error) {
		return s.v.VerifyDir(ctx, local), nil
	})
	if err != nil {
		v = unknown(-1, flinkDir, err)
		v.Dir = flinkDir
	}
	return v
}

func (s *siteVerifier) ListCheckpointDirs(flinkJobDir string) ([]int64, error) {
	local, err := s.v.Resolver().Local(strings.TrimRight(flinkJobDir, "/"))
	if err != nil {
		return nil, err
	}
	dirs, err := manifest.Bounded(context.Background(), s.backing, "list "+local, func(context.Context) ([]manifest.CheckpointDir, error) {
		return manifest.ListCheckpoints(local)
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", local, err)
	}
	ids := make([]int64, len(dirs))
	for i, d := range dirs {
		ids[i] = d.ID
	}
	return ids, nil
}

func (s *siteVerifier) VerifyPointer(ctx context.Context, ref PointerRef) *manifest.PointerVerdict {
	v, err := manifest.Bounded(ctx, s.backing, "pointer "+ref.Znode, func(ctx context.Context) (*manifest.PointerVerdict, error) {
		return s.v.VerifyPointer(ctx, ref.CheckpointID, ref.Handle), nil
	})
	if err != nil {
		v = &manifest.PointerVerdict{Verdict: unknown(ref.CheckpointID, ref.Handle.URI, err)}
	}
	return v
}

func (s *siteVerifier) VerifyJobHA(ctx context.Context, ref manifest.JobHARef) *manifest.JobHAVerdict {
	v, err := manifest.Bounded(ctx, s.backing, "job "+ref.JobID, func(ctx context.Context) (*manifest.JobHAVerdict, error) {
		return s.v.VerifyJobHA(ctx, ref), nil
	})
	if err != nil {
		path := ref.JobID
		if ref.Graph != nil {
			path = ref.Graph.URI
		}
		v = &manifest.JobHAVerdict{JobID: ref.JobID, Graph: unknown(-1, path, err)}
	}
	return v
}

func (s *siteVerifier) HAFileChecksum(ctx context.Context, name string, size int64) (uint32, error) {
	return manifest.Bounded(ctx, s.backing, "checksum "+name, func(ctx context.Context) (uint32, error) {
		return s.v.HAFileChecksum(ctx, name, size)
	})
}
