package realflink

import (
	"strings"
	"testing"
)

// TestJudgeSink: the account of a sink after a failover fails on each
// way exactly-once can break, and passes the failovers it must.
func TestJudgeSink(t *testing.T) {
	// DC1 committed ids 0..5: checkpoint 1 holds 0-1, 2 holds 2-3, 3
	// holds 4-5. DC2 restored restored and produced from there on.
	dc1 := []eoRecord{{0, 1}, {1, 1}, {2, 2}, {3, 2}, {4, 3}, {5, 3}}
	dc2From := func(next int64, upTo int64) []eoRecord {
		var out []eoRecord
		for id := next; id <= upTo; id++ {
			out = append(out, eoRecord{id, 9})
		}
		return out
	}
	cases := []struct {
		name                string
		atLoss, final       []eoRecord
		restored, completed int64
		dups, gaps          int
		err                 string
	}{
		{name: "sync: the newest restored", atLoss: dc1, final: append(dc1, dc2From(6, 8)...), restored: 3, completed: 3},
		{name: "async: the window produced again", atLoss: dc1, final: append(dc1, dc2From(2, 8)...), restored: 1, completed: 3, dups: 4},
		{name: "a record of the window not produced again", atLoss: dc1, final: append(dc1, dc2From(3, 8)...), restored: 1, completed: 3, dups: 3, gaps: 0,
			err: "3 records produced twice; DC1 committed 4 records of checkpoints after 1"},
		{name: "a record lost", atLoss: dc1, final: append(dc1[:5:5], dc2From(6, 8)...), restored: 3, completed: 3, gaps: 1, err: "1 records lost below 8"},
		{name: "DC1 committed past what ckptfs says Flink completed", atLoss: dc1, final: append(dc1, dc2From(6, 8)...), restored: 2, completed: 2,
			err: "DC1 committed records of checkpoint 3, yet ckptfs says Flink completed 2"},
		{name: "a record three times", atLoss: dc1, final: append(append(dc1, dc2From(4, 8)...), eoRecord{5, 9}), restored: 2, completed: 3,
			err: "record 5 committed 3 times"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := judgeSink(tc.atLoss, tc.final, tc.restored, tc.completed)
			if tc.err == "" && err != nil {
				t.Fatalf("judgeSink: %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("judgeSink: %v, want %q", err, tc.err)
			}
			if tc.err == "" || !strings.Contains(tc.err, "times") {
				if c.Duplicates != tc.dups || c.Gaps != tc.gaps {
					t.Errorf("duplicates %d gaps %d, want %d %d", c.Duplicates, c.Gaps, tc.dups, tc.gaps)
				}
			}
		})
	}
}

// TestReportedWindow reads the takeover's rollback window lines.
func TestReportedWindow(t *testing.T) {
	for said, want := range map[string][2]int64{
		"  rollback window: 0 checkpoints (restores 7, the newest Flink completed)\n":                                      {7, 7},
		"  rollback window: 2 checkpoint ids (restores 1, Flink completed 3, 4s later): Kafka transactions and FileSink\n": {1, 3},
	} {
		r, c, err := reportedWindow(said)
		if err != nil || r != want[0] || c != want[1] {
			t.Errorf("%q: %d %d %v, want %v", said, r, c, err, want)
		}
	}
	if _, _, err := reportedWindow("job x: kept\n"); err == nil {
		t.Error("a report without a window read")
	}
}
