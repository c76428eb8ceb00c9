package flinkconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
