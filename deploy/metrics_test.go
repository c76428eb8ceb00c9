package deploy

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ckptfs/ckptfs/internal/metrics"
)

// seriesRef matches a ckptfs metric name in PromQL, with its label
// matchers if any.
var seriesRef = regexp.MustCompile(`\b(ckptfs_[a-zA-Z0-9_]+)\b(\{[^}]*\})?`)

// upRef matches Prometheus's own series up (whether a target answered
// its scrape), with its label matchers if any.
var upRef = regexp.MustCompile(`(?:^|[^"\w])(up)\b(\s*\{[^}]*\})?`)

// matcherLabel matches the label names of matchers inside {...}.
var matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)

// jobMatcher matches a matcher of the job label inside {...}.
var jobMatcher = regexp.MustCompile(`\bjob\s*(=~|=)\s*"([^"]*)"`)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// scrapeJob is the job_name of the scrape configuration docs/deploy.md
// gives.
var scrapeJob = sync.OnceValues(func() (string, error) {
	data, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s*- job_name:\s*(\S+)\s*$`).FindSubmatch(data)
	if m == nil {
		return "", errors.New("docs/deploy.md: no scrape configuration with a job_name")
	}
	return string(m[1]), nil
})

// checkExpr checks that every ckptfs metric an expression names is one
// ckptfs exports (metrics.Families), that its label matchers name its
// labels, and that a matcher of the job label matches deploy.md's scrape
// job. It returns the metrics the expression uses: ckptfs families, and
// up.
func checkExpr(t *testing.T, where, expr string) []string {
	t.Helper()
	var used []string
	for _, m := range seriesRef.FindAllStringSubmatch(expr, -1) {
		name, matchers := m[1], m[2]
		fam, suffixLabels := familyOf(name)
		if fam == nil {
			t.Errorf("%s: %s is not a metric ckptfs exports: %s", where, name, expr)
			continue
		}
		used = append(used, fam.Name)
		allowed := slices.Concat([]string{"site"}, targetLabels, fam.Labels, suffixLabels)
		for _, lm := range matcherLabel.FindAllStringSubmatch(matchers, -1) {
			if !slices.Contains(allowed, lm[1]) {
				t.Errorf("%s: %s has no label %q (it has %v): %s", where, name, lm[1], allowed, expr)
			}
		}
		checkJobMatcher(t, where, matchers)
	}
	for _, m := range upRef.FindAllStringSubmatch(expr, -1) {
		used = append(used, m[1])
		for _, lm := range matcherLabel.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(targetLabels, lm[1]) {
				t.Errorf("%s: up has no label %q (it has %v): %s", where, lm[1], targetLabels, expr)
			}
		}
		checkJobMatcher(t, where, m[2])
	}
	return used
}

// checkJobMatcher checks that the job matchers among matchers select the
// scrape job docs/deploy.md configures.
func checkJobMatcher(t *testing.T, where, matchers string) {
	t.Helper()
	for _, jm := range jobMatcher.FindAllStringSubmatch(matchers, -1) {
		job, err := scrapeJob()
		if err != nil {
			t.Fatal(err)
		}
		ok := jm[2] == job
		if jm[1] == "=~" {
			re, err := regexp.Compile("^(?:" + jm[2] + ")$") // PromQL anchors its regular expressions
			ok = err == nil && re.MatchString(job)
		}
		if !ok {
			t.Errorf("%s: job%s%q does not select docs/deploy.md's scrape job %q", where, jm[1], jm[2], job)
		}
	}
}

// familyOf finds the family of a series name; a histogram's series carry
// a suffix (and le on buckets).
func familyOf(name string) (*metrics.Family, []string) {
	for i := range metrics.Families {
		f := &metrics.Families[i]
		if f.Name == name {
			return f, nil
		}
		if f.Type != "histogram" {
			continue
		}
		switch name {
		case f.Name + "_bucket":
			return f, []string{"le"}
		case f.Name + "_sum", f.Name + "_count":
			return f, nil
		}
	}
	return nil, nil
}

// TestAlertRulesPromtool has Prometheus's own promtool check the alert
// rules and run their unit tests (ckptfs-alerts_test.yml: each alert fires
// when it should and not before). Without promtool it skips, or fails
// under CKPTFS_REQUIRE_SYSTEMD=1, the switch of the deployment tools (make
// deps installs Debian's prometheus package, which carries promtool).
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CKPTFS_REQUIRE_SYSTEMD") == "1" {
			t.Fatalf("promtool is required (CKPTFS_REQUIRE_SYSTEMD=1): %v; make deps installs it", err)
		}
		t.Skipf("promtool not found (set CKPTFS_REQUIRE_SYSTEMD=1 to fail instead): %v", err)
	}
	dir := "prometheus"
	for _, args := range [][]string{
		{"check", "rules", "ckptfs-alerts.yml"},
		{"test", "rules", "ckptfs-alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// rule is one alerting rule of ckptfs-alerts.yml.
type rule struct {
	Alert       string
	Expr        string
	For         string
	Labels      map[string]string
	Annotations map[string]string
}

// readRules parses the example alert rules, refusing unknown keys.
func readRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("prometheus", "ckptfs-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string
			Rules []rule
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	var rules []rule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("grafana", "ckptfs-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	return dash
}

// panelMetrics checks every query of the dashboard's panels and returns
// the metrics each panel shows, by panel title.
func panelMetrics(t *testing.T, dash dashboard) map[string][]string {
	t.Helper()
	shown := map[string][]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := checkExpr(t, "panel "+p.Title, q.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query uses no ckptfs metric: %s", p.Title, q.Expr)
			}
			shown[p.Title] = append(shown[p.Title], names...)
		}
	}
	return shown
}

func readMetricsDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestAlertRulesUseExportedMetrics parses the example alert rules and
// checks every metric they use; a renamed metric breaks this test, not a
// production alert.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	alerts := map[string]bool{}
	for _, r := range readRules(t) {
		if r.Alert == "" || alerts[r.Alert] {
			t.Errorf("rule without a name or a name twice: %q", r.Alert)
		}
		alerts[r.Alert] = true
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a severity, a summary and a description", r.Alert)
		}
		if used := checkExpr(t, r.Alert, r.Expr); len(used) == 0 {
			t.Errorf("%s: uses no ckptfs metric: %s", r.Alert, r.Expr)
		}
	}
	// What the rules must cover.
	for _, want := range []string{"CkptfsLagHigh", "CkptfsNoCompleteCheckpoint", "CkptfsZooKeeperSessionDown", "CkptfsHiddenCheckpointAccess", "CkptfsTakeoverRefused", "CkptfsBackingHung", "CkptfsDaemonDown"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// TestDashboardUsesExportedMetrics parses the Grafana dashboard and
// checks every metric its queries and variables use.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	dash := readDashboard(t)
	used := map[string]bool{}
	for _, names := range panelMetrics(t, dash) {
		for _, n := range names {
			used[n] = true
		}
	}
	for _, v := range dash.Templating.List {
		checkExpr(t, "variable "+v.Name, v.Definition)
	}
	// The panels the dashboard exists for.
	for _, want := range []string{metrics.LagCheckpoints, metrics.LagSeconds, metrics.FlinkPointer, metrics.SiteNewestComplete,
		metrics.IncompleteCheckpoints, metrics.HiddenCheckpointAccesses, metrics.FUSERequestDuration, metrics.ZooKeeperSessionState,
		metrics.TakeoverActions, metrics.ReconcileActions, metrics.ZooKeeperSessionLosses, metrics.ZooKeeperLastOutage,
		metrics.ActiveSiteLastRead, metrics.ZooKeeperStateSince} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// TestAlertMetricsHavePanels: every metric an alert reads is shown by a
// panel of the dashboard, so whoever gets the alert can see its history.
func TestAlertMetricsHavePanels(t *testing.T) {
	shown := map[string]bool{}
	for _, names := range panelMetrics(t, readDashboard(t)) {
		for _, n := range names {
			shown[n] = true
		}
	}
	for _, r := range readRules(t) {
		for _, n := range checkExpr(t, r.Alert, r.Expr) {
			if !shown[n] {
				t.Errorf("%s reads %s, which no panel of the dashboard shows", r.Alert, n)
			}
		}
	}
}

// docAlertRow matches a row of the alert table of docs/metrics.md.
var docAlertRow = regexp.MustCompile("(?m)^\\| `(Ckptfs[A-Za-z]+)` \\|")

// TestAlertsDocumented: the alert table of docs/metrics.md lists every
// alert of the rules, and no other.
func TestAlertsDocumented(t *testing.T) {
	var documented []string
	for _, m := range docAlertRow.FindAllStringSubmatch(readMetricsDoc(t), -1) {
		documented = append(documented, m[1])
	}
	var rules []string
	for _, r := range readRules(t) {
		rules = append(rules, r.Alert)
		if !slices.Contains(documented, r.Alert) {
			t.Errorf("docs/metrics.md's alert table has no row for %s", r.Alert)
		}
	}
	for _, a := range documented {
		if !slices.Contains(rules, a) {
			t.Errorf("docs/metrics.md's alert table lists %s, which ckptfs-alerts.yml does not have", a)
		}
	}
	if len(documented) != len(slices.Compact(slices.Sorted(slices.Values(documented)))) {
		t.Errorf("docs/metrics.md's alert table lists an alert twice: %v", documented)
	}
}

// TestMetricsReferenceIsComplete: docs/metrics.md has a row for every
// family ckptfs exports, naming its labels and every value a counter's
// label is exported with from the start, and names no metric that does
// not exist.
func TestMetricsReferenceIsComplete(t *testing.T) {
	doc := readMetricsDoc(t)
	for _, f := range metrics.Families {
		row := docRow(doc, f.Name)
		if row == nil {
			t.Errorf("docs/metrics.md has no table row for %s", f.Name)
			continue
		}
		if row[1] != f.Type {
			t.Errorf("docs/metrics.md: %s is a %s, not a %s", f.Name, f.Type, row[1])
		}
		for _, l := range f.Labels {
			if !strings.Contains(row[2], "`"+l+"`") {
				t.Errorf("docs/metrics.md: the row of %s does not name its label %s", f.Name, l)
			}
		}
		for _, v := range f.Values {
			if !strings.Contains(row[2]+row[3], "`"+v+"`") {
				t.Errorf("docs/metrics.md: the row of %s does not name the value %s of %s", f.Name, v, f.Labels[0])
			}
		}
	}
	for _, m := range seriesRef.FindAllStringSubmatch(doc, -1) {
		if f, _ := familyOf(m[1]); f == nil {
			t.Errorf("docs/metrics.md names %s, which ckptfs does not export", m[1])
		}
	}
}

// docRow returns the cells of name's row in a metric table of doc: the
// name, the type, the labels, the meaning (nil: no row).
func docRow(doc, name string) []string {
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `"+name+"` |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			return nil
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		return []string{cells[0], cells[1], cells[2], strings.Join(cells[3:], "|")}
	}
	return nil
}
