package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves src like the daemon does and parses /metrics with
// Prometheus's text parser.
func scrape(t *testing.T, src Sources) scraped {
	t.Helper()
	srv := httptest.NewServer(Handler(NewRegistry(src), src))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return scraped(fams)
}

// healthz serves src and reads /healthz with the query q.
func healthz(t *testing.T, src Sources, q string) (int, Health) {
	t.Helper()
	srv := httptest.NewServer(Handler(NewRegistry(src), src))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/healthz?" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h Health
	if resp.StatusCode != http.StatusBadRequest {
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatalf("/healthz JSON: %v", err)
		}
	}
	return resp.StatusCode, h
}

type scraped map[string]*dto.MetricFamily

// find returns the series of name whose labels include want
// ("k=v,k=v").
func (s scraped) find(name, want string) (*dto.Metric, bool) {
	fam := s[name]
	if fam == nil {
		return nil, false
	}
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range strings.Split(want, ",") {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				ok = false
			}
		}
		if ok {
			return m, true
		}
	}
	return nil, false
}

// value returns the value of a gauge or counter series, failing the
// test when it is absent.
func (s scraped) value(t *testing.T, name, labels string) float64 {
	t.Helper()
	m, ok := s.find(name, labels)
	if !ok {
		t.Fatalf("no series %s{%s}; have %s", name, labels, s.series(name))
		return 0
	}
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	t.Fatalf("%s{%s} is neither a gauge nor a counter", name, labels)
	return 0
}

func (s scraped) series(name string) string {
	fam := s[name]
	if fam == nil {
		return "nothing"
	}
	var out []string
	for _, m := range fam.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		out = append(out, fmt.Sprintf("{%s}", strings.Join(ls, ",")))
	}
	return strings.Join(out, " ")
}
