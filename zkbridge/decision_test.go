package zkbridge

import (
	"testing"

	"github.com/ckptfs/ckptfs/manifest"
)

// TestDecideJob: each refusal reason, in the order Flink would fail, and
// the cases that are not refused.
func TestDecideJob(t *testing.T) {
	bad := &manifest.Verdict{Problems: []manifest.Problem{{Path: "x", Kind: manifest.ProblemMissing}}}
	good := &manifest.Verdict{Complete: true}
	ok := JobPlan{NewestComplete: 4, Keep: []int64{4}}
	cases := []struct {
		name string
		f    JobFacts
		want RefusalReason
	}{
		{"all complete", JobFacts{HA: &manifest.JobHAVerdict{Graph: good, Blobs: good}, HasGraph: true, Plan: ok, Visible: 1, MarkerID: 4}, ""},
		{"graph znode undecodable", JobFacts{HasGraph: true, GraphUnreadable: "truncated", Plan: ok, Visible: 1}, RefusedJobGraph},
		{"graph not verified", JobFacts{HasGraph: true, Plan: ok, Visible: 1}, RefusedJobGraph},
		{"graph incomplete before blobs", JobFacts{HA: &manifest.JobHAVerdict{Graph: bad, Blobs: bad}, HasGraph: true, Plan: ok, Visible: 1}, RefusedJobGraph},
		{"blobs", JobFacts{HA: &manifest.JobHAVerdict{Graph: good, Blobs: bad}, HasGraph: true, Plan: ok, Visible: 1}, RefusedBlobs},
		{"results", JobFacts{HA: &manifest.JobHAVerdict{Graph: good, Blobs: good, Results: bad}, HasGraph: true, Plan: ok, Visible: 1}, RefusedJobResult},
		{"HA before pointers", JobFacts{HA: &manifest.JobHAVerdict{Graph: good, Blobs: bad}, HasGraph: true, Plan: JobPlan{NewestComplete: -1, Refused: true}, Visible: 2}, RefusedBlobs},
		{"no complete pointer", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1, Refused: true, Keep: []int64{5}}, Visible: 1}, RefusedNoCompletePointer},
		{"no pointer, no evidence", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1}, MarkerID: -1}, ""},
		{"no pointer, marker", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1}, MarkerID: 7}, RefusedCheckpointsLost},
		{"no pointer, backups", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1}, MarkerID: -1, Backups: []int64{8}}, RefusedCheckpointsLost},
		{"no pointer, marker, accepted", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1}, MarkerID: 7, AcceptStateLoss: true}, ""},
		{"no pointer, no job graph: Flink does not start it", JobFacts{Plan: JobPlan{NewestComplete: -1}, MarkerID: 7}, ""},
		{"only ignored pointers, marker", JobFacts{HA: &manifest.JobHAVerdict{Graph: good}, HasGraph: true, Plan: JobPlan{NewestComplete: -1, Ignored: []int64{3}}, MarkerID: 3}, RefusedCheckpointsLost},
	}
	for _, tc := range cases {
		d := DecideJob(tc.f)
		if d.Refused != (tc.want != "") || d.Reason != tc.want || (d.Refused && d.Detail == "") {
			t.Errorf("%s: %+v, want %q", tc.name, d, tc.want)
		}
	}
}
