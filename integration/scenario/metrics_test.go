package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ckptfs/ckptfs/internal/metrics"
)

// metricsAddr returns where a site's daemon serves /metrics (it logs the
// address it bound, in JSON).
func (s *site) metricsAddr(t *testing.T) string {
	t.Helper()
	var addr string
	waitFor(t, s.name+"'s daemon to serve metrics", func() bool {
		for _, l := range s.daemon.Lines() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "serving metrics" && rec.Addr != "" {
				addr = rec.Addr
				return true
			}
		}
		return false
	})
	return addr
}

// lag scrapes a daemon's lag behind Flink's newest pointer for a job, as
// Prometheus would; ok is false while the daemon publishes none (no
// pointer complete on its site yet).
func lag(addr, job string) (checkpoints float64, ok bool, err error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, false, fmt.Errorf("parsing /metrics: %w", err)
	}
	fam := fams[metrics.LagCheckpoints]
	if fam == nil {
		return 0, false, nil
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "job_id" && l.GetValue() == job {
				return m.GetGauge().GetValue(), true, nil
			}
		}
	}
	return 0, false, nil
}

// waitLag waits until DC2's daemon reports a lag that want accepts.
func (w *world) waitLag(t *testing.T, addr, what string, want func(float64) bool) float64 {
	t.Helper()
	var (
		got  float64
		last string
	)
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, ok, err := lag(addr, w.job)
		switch {
		case err != nil:
			last = err.Error()
		case !ok:
			last = "no lag series for the job"
		case want(v):
			return v
		default:
			got = v
			last = fmt.Sprintf("lag %v checkpoints", got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("DC2's metrics: timed out waiting for %s (%s)", what, strings.TrimSpace(last))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sampleLag scrapes the lag every 100ms until the returned function is
// called, which returns the highest value seen.
func sampleLag(ctx context.Context, addr, job string) func() float64 {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan float64, 1)
	go func() {
		peak := 0.0
		for ctx.Err() == nil {
			if v, ok, err := lag(addr, job); err == nil && ok {
				peak = max(peak, v)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		done <- peak
	}()
	return func() float64 {
		cancel()
		return <-done
	}
}
