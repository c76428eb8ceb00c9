package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Takeover actions, the values of the action label of
// ckptfs_takeover_actions_total.
const (
	ActionRun         = "run"          // a takeover or restore-pruned ran (dry runs are not recorded)
	ActionRetract     = "retract"      // pointers retracted
	ActionRefuseJob   = "refuse_job"   // jobs refused: no pointer complete here
	ActionRefuseAlive = "refuse_alive" // takeovers refused: a JobManager was alive
	ActionActivate    = "activate"     // takeovers that made this site active
	ActionError       = "error"        // runs that ended with a ZooKeeper or I/O error
	ActionRestore     = "restore"      // pointers put back by restore-pruned
)

// maxTextfileSize bounds what RecordTakeover reads back.
const maxTextfileSize = 1 << 20

// RecordTakeover adds actions to the counters in path, a file for
// node_exporter's textfile collector, and sets the last run's time and
// exit code. The counters accumulate across runs (a counter that a run
// reset would hide a second identical run from increase()), every action
// is written (0 for one that never happened); the file is replaced
// atomically, so the collector never reads half of it. rollbacks, the
// rollback windows of a takeover that made the site active, replace
// those the file held (nil: kept).
func RecordTakeover(path, site string, actions map[string]uint64, rollbacks map[string]int64, exitCode int, now time.Time) error {
	totals, held, err := readRecorded(path)
	if err != nil {
		return err
	}
	if rollbacks == nil {
		rollbacks = held
	}
	for a, n := range actions {
		totals[a] += n
	}
	// Every action is written, 0 when none happened yet, so each series
	// exists before its first event.
	for _, a := range family(TakeoverActions).Values {
		if _, ok := totals[a]; !ok {
			totals[a] = 0
		}
	}
	reg := prometheus.NewRegistry()
	var r prometheus.Registerer = reg
	if site != "" {
		r = prometheus.WrapRegistererWith(prometheus.Labels{labelSite: site}, reg)
	}
	var ms []prometheus.Metric
	for _, a := range slices.Sorted(maps.Keys(totals)) {
		ms = append(ms, prometheus.MustNewConstMetric(desc(TakeoverActions), prometheus.CounterValue, float64(totals[a]), a))
	}
	ms = append(ms,
		prometheus.MustNewConstMetric(desc(TakeoverLastRun), prometheus.GaugeValue, unixSeconds(now)),
		prometheus.MustNewConstMetric(desc(TakeoverLastExitCode), prometheus.GaugeValue, float64(exitCode)))
	for _, job := range slices.Sorted(maps.Keys(rollbacks)) {
		ms = append(ms, prometheus.MustNewConstMetric(desc(TakeoverRollback), prometheus.GaugeValue, float64(rollbacks[job]), job))
	}
	if err := r.Register(constCollector(ms)); err != nil {
		return err
	}
	return prometheus.WriteToTextfile(path, reg)
}

// readRecorded returns the action counters and the rollback windows a
// file holds (none when it does not exist).
func readRecorded(path string) (map[string]uint64, map[string]int64, error) {
	actions, rollbacks := map[string]uint64{}, map[string]int64{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return actions, rollbacks, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, nil, err
	} else if st.Size() > maxTextfileSize {
		return nil, nil, fmt.Errorf("%s: %d bytes is too large for a metrics textfile", path, st.Size())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, m := range fams[TakeoverActions].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == labelAction && m.GetCounter() != nil {
				actions[l.GetValue()] += uint64(m.GetCounter().GetValue())
			}
		}
	}
	for _, m := range fams[TakeoverRollback].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == labelJob && m.GetGauge() != nil {
				rollbacks[l.GetValue()] = int64(m.GetGauge().GetValue())
			}
		}
	}
	return actions, rollbacks, nil
}

// constCollector collects a fixed set of metrics.
type constCollector []prometheus.Metric

func (c constCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c {
		ch <- m.Desc()
	}
}

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}
