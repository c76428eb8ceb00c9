package flinkconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecoveryWarnings: each setting that lets Flink delete a job's
// checkpoints after a failover is named with the key to set; a safe
// configuration has no warning.
func TestRecoveryWarnings(t *testing.T) {
	safe := "execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION\n"
	cases := []struct {
		conf string
		want []string // one substring per warning
	}{
		{safe, nil},
		{safe + "restart-strategy.type: exponential-delay\n", nil},
		{safe + "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 2147483647\n", nil},
		{"", []string{"NO_EXTERNALIZED_CHECKPOINTS, from Flink's default"}},
		{"execution.checkpointing.externalized-checkpoint-retention: DELETE_ON_CANCELLATION\n", []string{"set execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION"}},
		{safe + "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 3\n", []string{"restart-strategy.fixed-delay.attempts 3 from restart-strategy.fixed-delay.attempts (line 3)"}},
		{safe + "restart-strategy: fixed-delay\n", []string{"restart-strategy.fixed-delay.attempts 1 from Flink's default"}},
		{safe + "restart-strategy.type: none\n", []string{"at the first failure; set restart-strategy.type"}},
		{safe + "restart-strategy.type: failure-rate\n", []string{"failure-rate"}},
		{safe + "restart-strategy.type: exponential-delay\nrestart-strategy.exponential-delay.attempts-before-reset-backoff: 10\n", []string{"attempts-before-reset-backoff 10"}},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, Standard)
		if err != nil {
			t.Fatal(err)
		}
		got := c.RecoveryWarnings()
		if len(got) != len(tc.want) {
			t.Errorf("%q: warnings %q, want %d", tc.conf, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%q: warning %q lacks %q", tc.conf, got[i], w)
			}
		}
	}
}

// TestSyncWarnings: a checkpoint timeout not above sync-timeout, and, for
// strict, no failed checkpoint tolerated (Flink's default).
func TestSyncWarnings(t *testing.T) {
	cases := []struct {
		conf, mode string
		want       []string // one substring per warning
	}{
		{"", "sync", nil},
		{"", "strict", []string{"execution.checkpointing.tolerable-failed-checkpoints is 0, from Flink's default"}},
		{"execution.checkpointing.tolerable-failed-checkpoints: 5\n", "strict", nil},
		{"execution.checkpointing.timeout: 10 s\n", "sync", []string{"checkpoint timeout 10 s, from execution.checkpointing.timeout (line 1), is not longer than sync-timeout 10s"}},
		{"execution.checkpointing.timeout: 10000\n", "sync", []string{"not longer than sync-timeout"}},
		{"execution.checkpointing.timeout: 11s\n", "sync", nil},
		{"execution.checkpointing.timeout: 1min\nexecution.checkpointing.tolerable-failed-checkpoints: -1\n", "strict", []string{"is -1"}},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, Standard)
		if err != nil {
			t.Fatal(err)
		}
		got := c.SyncWarnings(tc.mode, 10*time.Second)
		if len(got) != len(tc.want) {
			t.Errorf("%s %q: warnings %q, want %d", tc.mode, tc.conf, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s %q: warning %q lacks %q", tc.mode, tc.conf, got[i], w)
			}
		}
	}
}
