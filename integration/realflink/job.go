package realflink

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var jobJars sync.Map // version (+ "-eo") -> *jobJar

type jobJar struct {
	once sync.Once
	path string
	err  error
}

// JobJar returns the test job (integration/realflink/job) built against
// the distribution, from the cache when its sources have not changed.
func JobJar(t testing.TB, d Dist) string {
	t.Helper()
	return jobJarWith(t, d, "")
}

// EOJobJar returns the test job with its exactly-once sinks (job/src-eo:
// a transactional KafkaSink and a FileSink), built with the Kafka
// connector of flink/jars.tsv's connectors-VERSION.
func EOJobJar(t testing.TB, d Dist) string {
	t.Helper()
	return jobJarWith(t, d, JarSet(t, "connectors-"+d.Version))
}

func jobJarWith(t testing.TB, d Dist, connectors string) string {
	t.Helper()
	key := d.Version
	if connectors != "" {
		key += "-eo"
	}
	v, _ := jobJars.LoadOrStore(key, &jobJar{})
	j := v.(*jobJar)
	j.once.Do(func() { j.path, j.err = buildJob(d, connectors) })
	if j.err != nil {
		t.Fatalf("realflink: building the job for Flink %s: %v", d.Version, j.err)
	}
	return j.path
}

func buildJob(d Dist, connectors string) (string, error) {
	src := filepath.Join(RepoRoot(), "integration", "realflink", "job")
	h := sha256.New()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		return "", err
	}
	name := "seqjob-"
	args := []string{filepath.Join(src, "build.sh"), filepath.Join(d.Home, "lib")}
	if connectors != "" {
		name = "seqjob-eo-"
		// The jar set's content, as fetch.sh checked it.
		sum, err := os.ReadFile(filepath.Join(connectors, ".sha256"))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "connectors %s\n", sum)
	}
	out := filepath.Join(cacheDir(), "flink", "job", fmt.Sprintf("%s%s-%s.jar", name, d.Version, hex.EncodeToString(h.Sum(nil))[:12]))
	args = append(args, out)
	if connectors != "" {
		args = append(args, connectors)
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("bash", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, tail(string(b), 30))
	}
	return out, nil
}

// Report is what the job wrote to its report file (job/README.md).
type Report struct {
	// Restores are the checkpoint ids the job's keyed subtasks said they
	// restored, one per subtask start from a checkpoint; -1 where the
	// release cannot tell.
	Restores []int64
	// Starts counts subtask starts without restored state.
	Starts int
	// MaxSeen is, per checkpoint, the largest record each subtask had
	// processed when it took the snapshot.
	MaxSeen map[int64][]int64
	// Keys are the first records per key after each (re)start, with the
	// state the key had before them.
	Keys []KeyState
	// Corrupt lists the job's own detection of corrupted state.
	Corrupt []string
}

// KeyState is a key's state as the job found it, before record First.
type KeyState struct {
	Key, First int64
	Count      int64
	Hash       uint64
}

// ReadReport parses a report file; a missing file is an empty report.
func ReadReport(path string) (*Report, error) {
	r := &Report{MaxSeen: map[int64][]int64{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		kind, fields, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		num := func(k string) int64 {
			v, e := strconv.ParseInt(fields[k], 10, 64)
			if e != nil && err == nil {
				err = fmt.Errorf("%s:%d: %s=%q: %w", path, n, k, fields[k], e)
			}
			return v
		}
		switch kind {
		case "restore":
			id := int64(-1)
			if fields["checkpoint"] != "unknown" {
				id = num("checkpoint")
			}
			r.Restores = append(r.Restores, id)
		case "start":
			r.Starts++
		case "snapshot":
			id := num("checkpoint")
			r.MaxSeen[id] = append(r.MaxSeen[id], num("maxseen"))
		case "key":
			h, e := strconv.ParseUint(fields["hash"], 10, 64)
			if e != nil {
				return nil, fmt.Errorf("%s:%d: hash: %w", path, n, e)
			}
			r.Keys = append(r.Keys, KeyState{Key: num("key"), First: num("first"), Count: num("count"), Hash: h})
		case "corrupt":
			r.Corrupt = append(r.Corrupt, line)
		default:
			return nil, fmt.Errorf("%s:%d: unknown line %q", path, n, line)
		}
		if err != nil {
			return nil, err
		}
	}
	return r, sc.Err()
}

// parseLine splits "kind a=1 b=2" or "key=1 first=2 ..." (whose kind is
// its first key).
func parseLine(line string) (string, map[string]string, error) {
	parts := strings.Fields(line)
	if len(parts) == 0 {
		return "", nil, errors.New("empty line")
	}
	kind := parts[0]
	if k, _, ok := strings.Cut(kind, "="); ok {
		kind = k
	} else {
		parts = parts[1:]
	}
	fields := map[string]string{}
	for _, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return "", nil, fmt.Errorf("field %q has no value", p)
		}
		fields[k] = v
	}
	return kind, fields, nil
}

// NextRecord is the first record not yet in checkpoint id's state: one
// past the largest record any keyed subtask had processed at its
// snapshot. ok is false when no subtask reported that checkpoint.
func (r *Report) NextRecord(id int64) (int64, bool) {
	seen, ok := r.MaxSeen[id]
	if !ok {
		return 0, false
	}
	return slices.Max(seen) + 1, true
}

// Splitmix64 is the job's mixing function.
func Splitmix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// StateBefore is key k's state (with keys keys) once every record below
// next has been processed: what a checkpoint whose next record is next
// holds for k.
func StateBefore(k, keys, next int64) (count int64, hash uint64) {
	for v := k; v < next; v += keys {
		hash = Splitmix64(hash ^ uint64(v))
		count++
	}
	return count, hash
}

// CheckRestore checks that the state the job found after its restore is
// exactly the state of a checkpoint whose next record is next: every key
// is reported, each with the state of all records below next, and no
// record at or above next had been applied. It returns the first
// mismatch.
func (r *Report) CheckRestore(keys, next int64) error {
	if len(r.Corrupt) > 0 {
		return fmt.Errorf("the job found corrupted state: %s", r.Corrupt[0])
	}
	got := map[int64]KeyState{}
	for _, ks := range r.Keys {
		if _, dup := got[ks.Key]; !dup {
			got[ks.Key] = ks
		}
	}
	for k := range keys {
		ks, ok := got[k]
		if !ok {
			return fmt.Errorf("key %d: not reported after the restore", k)
		}
		if ks.First < next {
			return fmt.Errorf("key %d: first record after the restore is %d, below the checkpoint's next record %d (replayed)", k, ks.First, next)
		}
		if ks.First >= next+keys {
			return fmt.Errorf("key %d: first record after the restore is %d, records from %d on were lost", k, ks.First, next)
		}
		c, h := StateBefore(k, keys, next)
		if ks.Count != c || ks.Hash != h {
			return fmt.Errorf("key %d: restored count %d hash %d, the checkpoint (next record %d) holds count %d hash %d", k, ks.Count, ks.Hash, next, c, h)
		}
	}
	return nil
}
