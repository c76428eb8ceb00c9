package zkbridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest"
)

// siteVerifier adapts a manifest.Verifier: L2 of pointers, L1 of
// directories, both through its Resolver (--map, roots).
type siteVerifier struct {
	v *manifest.Verifier
}

// NewSiteVerifier verifies checkpoints on this site with v. Decisions that
// act on the result (takeover) should use a Verifier with MaxAge zero.
func NewSiteVerifier(v *manifest.Verifier) Verifier { return &siteVerifier{v: v} }

func (s *siteVerifier) VerifyCheckpointDir(ctx context.Context, flinkDir string) *manifest.Verdict {
	local, err := s.v.Resolver().Local(flinkDir)
	if err != nil {
		return &manifest.Verdict{CheckpointID: -1, Dir: flinkDir, Problems: []manifest.Problem{{Path: flinkDir, Kind: manifest.ProblemOutsideRoot, Detail: err.Error()}}}
	}
	return s.v.VerifyDir(ctx, local)
}

func (s *siteVerifier) ListCheckpointDirs(flinkJobDir string) ([]int64, error) {
	local, err := s.v.Resolver().Local(strings.TrimRight(flinkJobDir, "/"))
	if err != nil {
		return nil, err
	}
	dirs, err := manifest.ListCheckpoints(local)
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
	return s.v.VerifyPointer(ctx, ref.CheckpointID, ref.Handle)
}

func (s *siteVerifier) VerifyJobHA(ctx context.Context, ref manifest.JobHARef) *manifest.JobHAVerdict {
	return s.v.VerifyJobHA(ctx, ref)
}
