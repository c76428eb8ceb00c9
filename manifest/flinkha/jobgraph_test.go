package flinkha

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// realGraph is a job graph or execution plan HA file real Flink wrote
// (integration/realflink/testdata), with the job id and blob file name
// the harvest recorded beside it.
type realGraph struct {
	release, path, jobID, blob string
	data                       []byte
}

func realGraphs(tb testing.TB) []realGraph {
	tb.Helper()
	root := filepath.Join("..", "..", "integration", "realflink", "testdata")
	var out []realGraph
	for _, rel := range []string{"1.20.5", "2.3.0"} {
		var meta struct {
			JobID string `json:"job_id"`
		}
		var files struct {
			Entries []struct {
				Path string `json:"path"`
			} `json:"entries"`
		}
		for name, v := range map[string]any{"meta.json": &meta, "files.json": &files} {
			raw, err := os.ReadFile(filepath.Join(root, rel, name))
			if err != nil {
				tb.Fatal(err)
			}
			if err := json.Unmarshal(raw, v); err != nil {
				tb.Fatal(err)
			}
		}
		g := realGraph{release: rel, jobID: meta.JobID}
		for _, e := range files.Entries {
			base := filepath.Base(e.Path)
			switch {
			case strings.HasPrefix(base, "blob_p-"):
				g.blob = base
			case strings.HasPrefix(base, "submittedJobGraph"), strings.HasPrefix(base, "submittedExecutionPlan"):
				g.path = filepath.Join(root, rel, "storage", e.Path)
			}
		}
		data, err := os.ReadFile(g.path)
		if err != nil {
			tb.Fatal(err)
		}
		g.data = data
		out = append(out, g)
	}
	return out
}

// TestDecodeJobGraphRealFlink: the job graph (1.20.5) and execution plan
// (2.3.0) real Flink wrote decode completely, with the job's id and the
// one blob (the user jar) whose file the harvest listed.
func TestDecodeJobGraphRealFlink(t *testing.T) {
	for _, g := range realGraphs(t) {
		t.Run(g.release, func(t *testing.T) {
			jg, err := DecodeJobGraph(g.data)
			if err != nil {
				t.Fatal(err)
			}
			wantClass := classJobGraph
			if strings.HasPrefix(g.release, "2.") {
				wantClass = classStreamGraph
			}
			if jg.Class != wantClass || jg.JobID != g.jobID {
				t.Fatalf("class %s job %s, want %s %s", jg.Class, jg.JobID, wantClass, g.jobID)
			}
			if len(jg.Blobs) != 1 || jg.Blobs[0].FileName() != g.blob || jg.Blobs[0].Artifact != "" {
				t.Fatalf("blobs %+v, want the jar %s", jg.Blobs, g.blob)
			}
		})
	}
}

// TestDecodeJobGraphTruncated: no proper prefix of a real file decodes,
// and every one fails with a clear error rather than a panic.
func TestDecodeJobGraphTruncated(t *testing.T) {
	for _, g := range realGraphs(t) {
		// Every 11th prefix and the last 64: about a second.
		step := 11
		if testing.Short() {
			step = 97
		}
		for n := 0; n < len(g.data); n += max(1, step*min(1, len(g.data)-64-n)) {
			if _, err := DecodeJobGraph(g.data[:n]); err == nil {
				t.Fatalf("%s: prefix of %d of %d bytes decoded", g.release, n, len(g.data))
			} else {
				checkDecodeError(t, err, n)
			}
		}
	}
}

// TestDecodeJobGraphRefusesOtherObjects: an HA file of a checkpoint is no
// job graph.
func TestDecodeJobGraphRefusesOtherObjects(t *testing.T) {
	data := encodeSpec(t, sampleSpec(FieldSet115))
	if _, err := DecodeJobGraph(data); err == nil || !strings.Contains(err.Error(), "want a JobGraph or StreamGraph") {
		t.Fatalf("err %v", err)
	}
}

// sampleJobResult is an entry as FileSystemJobResultStore writes it
// (JobResultSerializer's fields).
const sampleJobResult = `{"result":{"id":"ce9c90d5b61c10c01b3201cb11df009f","name":"job","application-status":"CANCELED","accumulator-results":{},"net-runtime":1234,"start-time":1796157770316,"end-time":1796157771550},"version":1}`

func TestDecodeJobResult(t *testing.T) {
	jr, err := DecodeJobResult([]byte(sampleJobResult))
	if err != nil {
		t.Fatal(err)
	}
	want := &JobResult{JobID: "ce9c90d5b61c10c01b3201cb11df009f", ApplicationStatus: "CANCELED", Version: 1}
	if !reflect.DeepEqual(jr, want) {
		t.Fatalf("%+v, want %+v", jr, want)
	}
	for n := 0; n < len(sampleJobResult); n++ {
		if _, err := DecodeJobResult([]byte(sampleJobResult[:n])); err == nil {
			t.Fatalf("prefix of %d bytes decoded", n)
		}
	}
	for _, bad := range []string{sampleJobResult + "{}", `{"result":{"id":"x","application-status":"FAILED"}}`, `{"version":1}`, `[]`} {
		if _, err := DecodeJobResult([]byte(bad)); err == nil {
			t.Fatalf("%s decoded", bad)
		}
	}
	for name, want := range map[string][3]any{
		"ce9c90d5b61c10c01b3201cb11df009f_DIRTY.json": {"ce9c90d5b61c10c01b3201cb11df009f", true, true},
		"ce9c90d5b61c10c01b3201cb11df009f.json":       {"ce9c90d5b61c10c01b3201cb11df009f", false, true},
		"x.json":                                      {"", false, false},
		"ce9c90d5b61c10c01b3201cb11df009f.json.tmp":   {"", false, false},
	} {
		job, dirty, ok := JobResultName(name)
		if job != want[0] || dirty != want[1] || ok != want[2] {
			t.Errorf("JobResultName(%q) = %q %v %v", name, job, dirty, ok)
		}
	}
}

// FuzzDecodeJobGraph: no input panics, hangs or allocates without bound;
// what decodes has a job id and well-formed blob keys, deterministically.
// Seeds: the job graph and execution plan real Flink wrote.
func FuzzDecodeJobGraph(f *testing.F) {
	for _, g := range realGraphs(f) {
		f.Add(g.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jg, err := DecodeJobGraph(data)
		if err != nil {
			checkDecodeError(t, err, len(data))
			return
		}
		if len(jg.JobID) != 32 {
			t.Fatalf("job id %q", jg.JobID)
		}
		for _, b := range jg.Blobs {
			if len(b.Hash) != 40 || len(b.Random) != 32 || strings.ContainsAny(b.FileName(), "/\x00") {
				t.Fatalf("bad blob key %+v", b)
			}
		}
		again, err := DecodeJobGraph(data)
		if err != nil || !reflect.DeepEqual(jg, again) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}

// realJobResults are the job result entries real Flink wrote
// (testdata/jobresult).
func realJobResults(tb testing.TB) map[string][]byte {
	tb.Helper()
	names, _ := filepath.Glob(filepath.Join("testdata", "jobresult", "*.json"))
	if len(names) == 0 {
		tb.Fatal("no real job result entries in testdata/jobresult")
	}
	out := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(n)] = data
	}
	return out
}

// TestDecodeJobResultRealFlink: the entry real Flink 1.20.5 wrote for a
// FAILED job decodes completely; no proper prefix does.
func TestDecodeJobResultRealFlink(t *testing.T) {
	for name, data := range realJobResults(t) {
		jr, err := DecodeJobResult(data)
		if err != nil || jr.ApplicationStatus != "FAILED" || len(jr.JobID) != 32 || jr.Version != 1 {
			t.Fatalf("%s: %+v, %v", name, jr, err)
		}
		for n := 0; n < len(data); n += 997 {
			if _, err := DecodeJobResult(data[:n]); err == nil {
				t.Fatalf("%s: prefix of %d bytes decoded", name, n)
			}
		}
	}
}

// FuzzDecodeJobResult: no input panics; what decodes names a job.
// Seeds: the entry real Flink wrote (testdata/jobresult) and entries in
// the shape JobResultSerializer writes.
func FuzzDecodeJobResult(f *testing.F) {
	for _, data := range realJobResults(f) {
		f.Add(data)
	}
	f.Add([]byte(sampleJobResult))
	f.Add([]byte(`{"result":{"id":"00000000000000000000000000000001","application-status":"FAILED","accumulator-results":{},"net-runtime":5,"failure-cause":{"class":"java.lang.Exception","stack-trace":"x","serialized-throwable":"AAEC"}},"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jr, err := DecodeJobResult(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if len(jr.JobID) != 32 || jr.ApplicationStatus == "" {
			t.Fatalf("%+v", jr)
		}
	})
}

// TestEncodeJobGraph: what the emulator writes decodes to what it names.
func TestEncodeJobGraph(t *testing.T) {
	k := BlobKey{Permanent: true, Hash: strings.Repeat("ab", 20), Random: strings.Repeat("01", 16)}
	for _, stream := range []bool{false, true} {
		data, err := EncodeJobGraph(strings.Repeat("cd", 16), "j", stream, []BlobKey{k})
		if err != nil {
			t.Fatal(err)
		}
		jg, err := DecodeJobGraph(data)
		if err != nil {
			t.Fatal(err)
		}
		if jg.JobID != strings.Repeat("cd", 16) || jg.JobName != "j" || !reflect.DeepEqual(jg.Blobs, []BlobKey{k}) || (jg.Class == classStreamGraph) != stream {
			t.Fatalf("%+v", jg)
		}
	}
}

// TestEncodeSubmittedJobGraph: the 1.4 job graph HA file the emulator
// writes is a SubmittedJobGraph with 1.4's serialVersionUID and fields
// (jobGraph, a null jobInfo), and decodes as real 1.4.2's does: Submitted,
// the job's id and its jar.
func TestEncodeSubmittedJobGraph(t *testing.T) {
	k := BlobKey{Permanent: true, Hash: strings.Repeat("ab", 20), Random: strings.Repeat("01", 16)}
	data, err := EncodeSubmittedJobGraph(strings.Repeat("cd", 16), "j", []BlobKey{k})
	if err != nil {
		t.Fatal(err)
	}
	jg, err := DecodeJobGraph(data)
	if err != nil {
		t.Fatal(err)
	}
	if !jg.Submitted || jg.Class != classJobGraph || jg.JobID != strings.Repeat("cd", 16) || jg.JobName != "j" || !reflect.DeepEqual(jg.Blobs, []BlobKey{k}) {
		t.Fatalf("%+v", jg)
	}
	s, err := javaser.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.Object()
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, f := range root.Class.Fields {
		fields = append(fields, f.Name)
	}
	if root.ClassName() != classSubmittedJobGraph || root.SerialVersionUID() != 2836099271734771825 || !reflect.DeepEqual(fields, []string{"jobGraph", "jobInfo"}) {
		t.Fatalf("root %s (serialVersionUID %d) with fields %v", root.ClassName(), root.SerialVersionUID(), fields)
	}
	if info, ok := root.Field("jobInfo"); !ok || info != nil {
		t.Fatalf("jobInfo = %v (%v), want null", info, ok)
	}
	if _, err := EncodeSubmittedJobGraph("not an id", "j", nil); err == nil {
		t.Fatal("a bad job id encodes")
	}
}
