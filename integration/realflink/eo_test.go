package realflink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// eoModes are the releases whose run of TestIntegration_RealFlinkFailover
// has the job's exactly-once sinks (issue 33), with DC1's replication
// mode: a transactional KafkaSink to a real Kafka broker in the
// tie-breaker site, read with read_committed, and a FileSink on the
// replicated NAS. In sync mode (design §4.8) DC1's mount holds each
// checkpoint's completion until DC2's daemon confirms it holds the
// checkpoint, so DC2 restores the newest checkpoint Flink completed: no
// record is produced twice or lost. The async run cuts the replication
// while DC1 completes two more checkpoints: DC2 restores an older one,
// and what DC1 committed after it, exactly the checkpoints of the
// rollback window ckptfs reports, is produced again.
var eoModes = map[string]string{"1.20.5": "sync", "2.3.0": "async"}

// eoTopic is the job's Kafka topic.
const eoTopic = "ckptfs-eo"

// eoSinks is a run's exactly-once sinks: the broker, where the FileSink
// writes, and what DC1 had committed when it was lost.
type eoSinks struct {
	kafka *Kafka
	// files is the FileSink's directory as Flink sees it in both sites:
	// out/ on the site's NAS, beside the checkpoints, so the replication
	// carries it. Flink reaches it through a link on the machine's local
	// disk to the NAS's path, resolved at each open as a NAS mount is: a
	// bind mount would hold on to a directory the snapshot replication
	// replaced (and Flink would fail to create files in it).
	files string
	// atLoss: per sink, what DC1 had committed when it was lost (for
	// files, what of it had reached DC2's NAS).
	atLoss map[string][]eoRecord
}

// startSinks starts the broker in a tie-breaker site and links each
// site's local disk to its NAS (eoSinks.files).
func (w *world) startSinks(t *testing.T) {
	t.Helper()
	tb := NewSite(t, "tiebreaker", filepath.Join(w.root, "tiebreaker", "log"))
	// w.local[site] is the site's view of root/local.
	w.eo = &eoSinks{kafka: StartKafka(t, tb, filepath.Join(w.root, "tiebreaker", "kafka")), files: filepath.Join(w.root, "local", "nas", "out")}
	for _, s := range []*Site{w.dc1, w.dc2} {
		if err := os.Symlink(w.backing[s.Name], filepath.Join(w.local[s.Name], "nas")); err != nil {
			t.Fatal(err)
		}
	}
	w.say(t, "tie-breaker: a Kafka broker (%s, KRaft) at %s", kafkaRelease, w.eo.kafka.Bootstrap)
}

// outDir is a site's FileSink directory on the host.
func (w *world) outDir(site string) string { return filepath.Join(w.backing[site], "out") }

// eoArgs are the job's arguments for its sinks.
func (w *world) eoArgs() []string {
	return []string{"--kafka", w.eo.kafka.Bootstrap, "--kafka-topic", eoTopic, "--file-sink", w.eo.files}
}

// readSinks is what each sink holds committed now: Kafka's topic read
// with read_committed, and the finished part files of DC2's NAS.
func (w *world) readSinks(ctx context.Context, t *testing.T) map[string][]eoRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	vals, err := w.eo.kafka.ReadCommitted(ctx, eoTopic, 5*time.Second)
	if err != nil {
		t.Fatalf("kafka: %v", err)
	}
	kafka, err := parseRecords(vals)
	if err != nil {
		t.Fatalf("kafka: %v", err)
	}
	files, err := committedParts(w.outDir("dc2"))
	if err != nil {
		t.Fatalf("file sink: %v", err)
	}
	return map[string][]eoRecord{"kafka": kafka, "files": files}
}

// committedParts reads the FileSink's finished part files: those whose
// name does not start with a dot (in-progress and pending files do).
func committedParts(dir string) ([]eoRecord, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var all []eoRecord
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		recs, err := parseRecords(strings.Split(strings.TrimRight(string(data), "\n"), "\n"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		all = append(all, recs...)
	}
	return all, nil
}

// eoRecord is one output record: the sequence number and the checkpoint
// whose completion commits it (EoSinks.Tagger).
type eoRecord struct{ id, tag int64 }

func parseRecords(vals []string) ([]eoRecord, error) {
	out := make([]eoRecord, 0, len(vals))
	for _, v := range vals {
		if v == "" {
			continue
		}
		a, b, ok := strings.Cut(v, " ")
		id, err1 := strconv.ParseInt(a, 10, 64)
		tag, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("record %q is not \"ID TAG\"", v)
		}
		out = append(out, eoRecord{id, tag})
	}
	return out, nil
}

// eoCount is one sink's account after the failover.
type eoCount struct {
	Records int
	// Duplicates: ids committed more than once; Gaps: ids below the
	// largest committed that were never committed.
	Duplicates, Gaps int
	// DC1Newest is the newest checkpoint whose records DC1 committed
	// before its loss.
	DC1Newest int64
	// Replayed: DC1's records of checkpoints after the restored one,
	// which the window says are produced again.
	Replayed int
}

// judgeSink counts a sink's duplicates and gaps and checks them against
// the rollback window: DC2 restored checkpoint restored, the newest Flink
// completed was completed (ckptfs's report). DC1 committed no record of
// a checkpoint after completed; the duplicates are exactly DC1's records
// of the checkpoints after restored, each once more; nothing is lost.
func judgeSink(atLoss, final []eoRecord, restored, completed int64) (eoCount, error) {
	c := eoCount{Records: len(final)}
	seen := map[int64]int{}
	var top int64 = -1
	for _, r := range final {
		seen[r.id]++
		top = max(top, r.id)
	}
	var dups []int64
	for id, n := range seen {
		if n > 2 {
			return c, fmt.Errorf("record %d committed %d times", id, n)
		}
		if n == 2 {
			dups = append(dups, id)
		}
	}
	c.Duplicates = len(dups)
	for id := int64(0); id <= top; id++ {
		if seen[id] == 0 {
			c.Gaps++
		}
	}
	var replayed []int64
	for _, r := range atLoss {
		c.DC1Newest = max(c.DC1Newest, r.tag)
		if r.tag > restored {
			replayed = append(replayed, r.id)
		}
	}
	c.Replayed = len(replayed)
	slices.Sort(dups)
	slices.Sort(replayed)
	switch {
	case c.DC1Newest > completed:
		return c, fmt.Errorf("DC1 committed records of checkpoint %d, yet ckptfs says Flink completed %d", c.DC1Newest, completed)
	case c.Gaps > 0:
		return c, fmt.Errorf("%d records lost below %d", c.Gaps, top)
	case !slices.Equal(dups, replayed):
		return c, fmt.Errorf("%d records produced twice; DC1 committed %d records of checkpoints after %d, the restored one", len(dups), len(replayed), restored)
	}
	return c, nil
}

// rollbackRe reads the takeover's "rollback window:" line.
var rollbackRe = regexp.MustCompile(`rollback window: (\d+) checkpoint(?: id)?s \(restores (\d+)(?:, the newest Flink completed|, Flink completed (\d+))`)

// reportedWindow is the rollback window the takeover's text gives for
// the job: the checkpoint it restores and the newest Flink completed.
func reportedWindow(said string) (restored, completed int64, err error) {
	m := rollbackRe.FindStringSubmatch(said)
	if m == nil {
		return 0, 0, fmt.Errorf("no rollback window in the takeover's report")
	}
	restored, _ = strconv.ParseInt(m[2], 10, 64)
	completed = restored
	if m[3] != "" {
		completed, _ = strconv.ParseInt(m[3], 10, 64)
	}
	return restored, completed, nil
}

// checkSinks judges both sinks once DC2, running from checkpoint
// restored, has committed past every record DC1 committed, and its
// TaskManager tm is stopped (nothing more is committed while they are
// read).
func (w *world) checkSinks(ctx context.Context, t *testing.T, fl *Cluster, tm *Process, said string, restored int64) {
	t.Helper()
	var top int64 = -1
	for _, recs := range w.eo.atLoss {
		for _, r := range recs {
			top = max(top, r.id)
		}
	}
	// A checkpoint past top completed, and the next one too: DC2's
	// sinks had been told the first completed, and committed it.
	var past int64 = -1
	waitUntil(t, stepTimeout, fmt.Sprintf("DC2 to commit past record %d", top), func() bool {
		cp, err := fl.REST.Checkpoints(ctx, w.job)
		if err != nil || cp.Latest.Completed == nil {
			return false
		}
		if past < 0 {
			for id, seen := range w.report("dc2").MaxSeen {
				if slices.Max(seen) > top && id > restored && cp.Latest.Completed.ID >= id {
					past = id
				}
			}
			return false
		}
		return cp.Latest.Completed.ID > past
	}, tm)
	tm.Kill()
	wr, completed, err := reportedWindow(said)
	if err != nil {
		t.Fatalf("%v:\n%s", err, said)
	}
	if wr != restored {
		t.Errorf("the takeover's window restores %d; Flink restored %d", wr, restored)
	}
	final := w.readSinks(ctx, t)
	w.r.out.Completed, w.r.out.Sinks = completed, map[string]eoCount{}
	for _, sink := range []string{"kafka", "files"} {
		c, err := judgeSink(w.eo.atLoss[sink], final[sink], restored, completed)
		w.r.out.Sinks[sink] = c
		w.say(t, "%s sink (%s mode): %d records, %d duplicates, %d gaps; DC1 committed through checkpoint %d, %d of its records after checkpoint %d; ckptfs's window %d..%d",
			sink, w.r.modeOr(), c.Records, c.Duplicates, c.Gaps, c.DC1Newest, c.Replayed, restored, restored, completed)
		if err != nil {
			t.Errorf("%s sink: %v", sink, err)
		}
		if w.r.mode != "async" && (c.Duplicates > 0 || completed != restored) {
			t.Errorf("%s sink, %s mode: DC2 restored %d, Flink completed %d, %d duplicates: want the newest, none", sink, w.r.mode, restored, completed, c.Duplicates)
		}
		if c.Records == 0 {
			t.Errorf("%s sink: no record committed", sink)
		}
	}
}

// checkpointMillis is the end-to-end duration of the job's completed
// checkpoints Flink's history holds, oldest first; nil when it cannot
// tell.
func checkpointMillis(ctx context.Context, fl *Cluster, job string) []int64 {
	cp, err := fl.REST.Checkpoints(ctx, job)
	if err != nil {
		return nil
	}
	var ms []int64
	for _, h := range slices.Backward(cp.History) {
		if h.Status == "COMPLETED" {
			ms = append(ms, h.EndToEnd)
		}
	}
	return ms
}

// modeOr is the run's replication mode, async when unset.
func (r *run) modeOr() string {
	if r.mode == "" {
		return "async"
	}
	return r.mode
}
