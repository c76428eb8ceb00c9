package alertse2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/ckptfs/ckptfs/integration/zktest"
)

// How often Prometheus scrapes and evaluates the rules: short, so that a
// fault shows within seconds.
const interval = time.Second

// forFactor divides every for: of the rules in the copy the second
// Prometheus loads (2m becomes 6s, 10m 30s, 15m 45s).
const forFactor = 20

// rulesFile is the repository's alert rules, loaded unchanged.
func rulesFile(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs("../../deploy/prometheus/ckptfs-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// forLine is a rule's for: line.
var forLine = regexp.MustCompile(`(?m)^(\s+for:[ \t]*)(\S+)[ \t]*$`)

// scaleFor returns the rules with every for: divided by factor, and
// nothing else changed: the copy differs from the original only in the
// durations of its for: lines.
func scaleFor(rules []byte, factor int) ([]byte, error) {
	var errs []error
	out := forLine.ReplaceAllFunc(rules, func(line []byte) []byte {
		m := forLine.FindSubmatch(line)
		d, err := model.ParseDuration(string(m[2]))
		if err != nil {
			errs = append(errs, err)
			return line
		}
		scaled := model.Duration(time.Duration(d) / time.Duration(factor))
		return append(append([]byte{}, m[1]...), scaled.String()...)
	})
	return out, errors.Join(errs...)
}

// ruleFile is what the tests read of a rules file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func parseRules(data []byte) (ruleFile, error) {
	var f ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&f)
	return f, err
}

// forOf returns each alert's for: (0 without one).
func forOf(t testing.TB, path string) map[string]time.Duration {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseRules(data)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			var d model.Duration
			if r.For != "" {
				if d, err = model.ParseDuration(r.For); err != nil {
					t.Fatal(err)
				}
			}
			out[r.Alert] = time.Duration(d)
		}
	}
	return out
}

// process is a program the test runs (Prometheus, the node exporter),
// its output in a log file. It gets SIGKILL if the test binary dies
// first; the test's cleanup stops it with SIGTERM.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(t testing.TB, name, logPath string, argv ...string) *process {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: %v", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop within 15s of SIGTERM; killed\n%s", name, p.tail(20))
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) tail(n int) string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freeAddr is a loopback address with a port nothing listens on now (and
// that this process never handed out before).
func freeAddr(t testing.TB) string {
	t.Helper()
	ps, err := zktest.FreePorts("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(ps[0])
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t testing.TB, p *process, u string, limit time.Duration) {
	t.Helper()
	client := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%s does not answer %s (exited: %v)\n%s", p.name, u, p.exited(), p.tail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startNodeExporter runs the node exporter with its textfile collector
// alone (every other collector disabled) reading dir, and returns its
// address.
func startNodeExporter(t testing.TB, dir, logDir string) string {
	t.Helper()
	bin := need(t, "prometheus-node-exporter")
	addr := freeAddr(t)
	p := startProcess(t, "node exporter", filepath.Join(logDir, "node-exporter.log"), bin,
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir,
		"--web.listen-address="+addr)
	waitHTTP(t, p, "http://"+addr+"/metrics", 30*time.Second)
	return addr
}

// prom is one Prometheus server: the rules as the repository has them
// (factor 1), or the copy with every for: divided by forFactor.
type prom struct {
	name      string
	factor    int
	url       string
	proc      *process
	rulesPath string // the rules file it loads
}

// targets are what a Prometheus scrapes: the ckptfs daemons (scrape job
// ckptfs, as docs/deploy.md names it) and the node exporter (job node).
type targets struct {
	ckptfs []string
	node   string
}

// startProm runs Prometheus over a fresh storage directory with the
// rules (factor 1) or the scaled copy. backfill, if not nil, is
// OpenMetrics text that promtool writes into the storage first.
func startProm(t testing.TB, dir string, factor int, tg targets, backfill []byte) *prom {
	t.Helper()
	bin := need(t, "prometheus")
	name := "unchanged"
	rules := rulesFile(t)
	if factor != 1 {
		name = fmt.Sprintf("for/%d", factor)
		data, err := os.ReadFile(rules)
		if err != nil {
			t.Fatal(err)
		}
		scaled, err := scaleFor(data, factor)
		if err != nil {
			t.Fatal(err)
		}
		rules = filepath.Join(dir, "ckptfs-alerts-scaled.yml")
		if err := os.WriteFile(rules, scaled, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if backfill != nil {
		promtool := need(t, "promtool")
		in := filepath.Join(dir, "backfill.om")
		if err := os.WriteFile(in, backfill, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", in, data).CombinedOutput(); err != nil {
			t.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, out)
		}
	}
	quote := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	cfg := fmt.Sprintf(`# written by integration/alertse2e
global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files: [%[2]q]
scrape_configs:
  - job_name: ckptfs
    static_configs:
      - targets: %[3]s
`, model.Duration(interval), rules, quote(tg.ckptfs))
	if tg.node != "" {
		cfg += fmt.Sprintf(`  - job_name: node
    static_configs:
      - targets: [%q]
`, tg.node)
	}
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := &prom{name: name, factor: factor, url: "http://" + addr, rulesPath: rules}
	p.proc = startProcess(t, "prometheus ("+name+")", filepath.Join(dir, "prometheus.log"), bin,
		"--config.file="+conf, "--storage.tsdb.path="+data, "--web.listen-address="+addr)
	waitHTTP(t, p.proc, p.url+"/-/ready", 60*time.Second)
	return p
}

// api calls one of Prometheus's HTTP API endpoints and decodes its data.
func (p *prom) api(path string, q url.Values, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// alert is one entry of /api/v1/alerts.
type alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

func (a alert) String() string {
	return fmt.Sprintf("%s %s %v", a.Labels["alertname"], a.State, a.Labels)
}

// alerts is every pending and firing alert (/api/v1/alerts).
func (p *prom) alerts() ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := p.api("/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// ruleState is one alerting rule of /api/v1/rules.
type ruleState struct {
	Name      string  `json:"name"`
	Query     string  `json:"query"`
	Duration  float64 `json:"duration"` // its for:, in seconds
	Health    string  `json:"health"`
	LastError string  `json:"lastError"`
	Type      string  `json:"type"`
}

// rules is every alerting rule Prometheus loaded (/api/v1/rules).
func (p *prom) rules() ([]ruleState, error) {
	var data struct {
		Groups []struct {
			Rules []ruleState `json:"rules"`
		} `json:"groups"`
	}
	err := p.api("/api/v1/rules", url.Values{"type": {"alert"}}, &data)
	var out []ruleState
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, err
}

// sample is one series of a query's result: its labels and its samples
// (one for an instant vector, every raw sample for a range selector).
type sample struct {
	Metric map[string]string
	Points []point
}

type point struct {
	T time.Time
	V float64
}

// query evaluates expr at time at (/api/v1/query). A range selector
// (expr[5m]) returns the raw samples with their own timestamps.
func (p *prom) query(expr string, at time.Time) ([]sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	if err := p.api("/api/v1/query", q, &data); err != nil {
		return nil, err
	}
	parse := func(v []any) (point, error) {
		if len(v) != 2 {
			return point{}, fmt.Errorf("sample %v", v)
		}
		ts, ok1 := v[0].(float64)
		s, ok2 := v[1].(string)
		if !ok1 || !ok2 {
			return point{}, fmt.Errorf("sample %v", v)
		}
		f, err := strconv.ParseFloat(s, 64)
		sec, frac := math.Modf(ts)
		return point{T: time.Unix(int64(sec), int64(frac*1e9)).Round(time.Millisecond), V: f}, err
	}
	var out []sample
	for _, r := range data.Result {
		s := sample{Metric: r.Metric}
		vals := r.Values
		if r.Value != nil {
			vals = [][]any{r.Value}
		}
		for _, v := range vals {
			pt, err := parse(v)
			if err != nil {
				return nil, err
			}
			s.Points = append(s.Points, pt)
		}
		out = append(out, s)
	}
	return out, nil
}

// selector is a PromQL series selector of name with labels.
func selector(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var m []string
	for _, k := range keys {
		m = append(m, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return name + "{" + strings.Join(m, ",") + "}"
}

// promDuration spells d for a range selector, rounded up to a second.
func promDuration(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(math.Ceil(d.Seconds())))
}

// firstAlertSample is when Prometheus first evaluated the alert name in
// state (with labels) at or after since: the first sample of its ALERTS
// series.
func (p *prom) firstAlertSample(name, state string, labels map[string]string, since time.Time) (time.Time, error) {
	l := map[string]string{"alertname": name, "alertstate": state}
	for k, v := range labels {
		l[k] = v
	}
	now := time.Now()
	res, err := p.query(selector("ALERTS", l)+"["+promDuration(now.Sub(since)+interval)+"]", now)
	if err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for _, s := range res {
		for _, pt := range s.Points {
			if !pt.T.Before(since.Truncate(time.Millisecond)) && (first.IsZero() || pt.T.Before(first)) {
				first = pt.T
			}
		}
	}
	if first.IsZero() {
		return first, fmt.Errorf("no sample of %s since %v", selector("ALERTS", l), since)
	}
	return first, nil
}

// active is an alert that was pending or firing in a stretch of time.
type active struct {
	name, state string
	labels      map[string]string
}

// activeBetween is every alert Prometheus held pending or firing between
// from and to, read from its ALERTS series (one sample an evaluation
// while an alert is pending or firing).
func (p *prom) activeBetween(from, to time.Time) ([]active, error) {
	res, err := p.query("max_over_time(ALERTS["+promDuration(to.Sub(from))+"])", to)
	if err != nil {
		return nil, err
	}
	var out []active
	for _, s := range res {
		a := active{name: s.Metric["alertname"], state: s.Metric["alertstate"], labels: map[string]string{}}
		for k, v := range s.Metric {
			if k != "alertname" && k != "alertstate" && k != "severity" {
				a.labels[k] = v
			}
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b active) int {
		return strings.Compare(a.name+a.state+fmt.Sprint(a.labels), b.name+b.state+fmt.Sprint(b.labels))
	})
	return out, nil
}
