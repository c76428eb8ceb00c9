package manifest

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/flinkha"
)

// jobHASite is one job's HA state laid out as Flink does, from a job
// graph real Flink wrote (integration/realflink/testdata): the HA file
// under <root>/ha/<cluster>/, its blob (the user jar: the harvest keeps
// only its name, so the graph's blob key is rewritten in place to the
// SHA-1 of a stand-in jar, which keeps the stream valid) and the job
// result store beside it.
type jobHASite struct {
	root, haFile, blob, results string
	job                         string
	ref                         JobHARef
	graph                       []byte
	jar                         []byte
	v                           *Verifier
}

func newJobHASite(t *testing.T, release string) *jobHASite {
	t.Helper()
	src := filepath.Join("..", "integration", "realflink", "testdata", release)
	var meta struct {
		JobID string `json:"job_id"`
	}
	raw, err := os.ReadFile(filepath.Join(src, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(src, "storage", "ha", "{cluster}", "submitted*"))
	if len(names) != 1 {
		t.Fatalf("job graph HA files %v", names)
	}
	graph, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	jg, err := flinkha.DecodeJobGraph(graph)
	if err != nil || len(jg.Blobs) != 1 {
		t.Fatalf("%v %v", jg, err)
	}
	s := &jobHASite{root: t.TempDir(), job: meta.JobID, jar: []byte("PK\x03\x04 a stand-in user jar of job " + meta.JobID)}
	sum := sha1.Sum(s.jar)
	old, _ := hex.DecodeString(jg.Blobs[0].Hash)
	if bytes.Count(graph, old) != 1 {
		t.Fatal("the blob key's hash is not found once in the HA file")
	}
	s.graph = bytes.Replace(graph, old, sum[:], 1)
	key := jg.Blobs[0]
	key.Hash = hex.EncodeToString(sum[:])
	cluster := filepath.Join(s.root, "ha", "c1")
	s.haFile = filepath.Join(cluster, filepath.Base(names[0]))
	s.blob = filepath.Join(cluster, "blob", "job_"+s.job, key.FileName())
	s.results = filepath.Join(s.root, "ha", "job-result-store", "c1")
	for p, data := range map[string][]byte{s.haFile: s.graph, s.blob: s.jar} {
		writeFile(t, p, data)
	}
	if err := os.MkdirAll(s.results, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := flinkha.NewStateHandle("file:"+s.haFile, int64(len(s.graph)))
	if err != nil {
		t.Fatal(err)
	}
	s.ref = JobHARef{JobID: s.job, Graph: &h}
	s.v = newVerifier(t, nil, s.root)
	return s
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *jobHASite) verify(t *testing.T) *JobHAVerdict {
	t.Helper()
	jv := s.v.VerifyJobHA(context.Background(), s.ref)
	if jv.JobID != s.ref.JobID {
		t.Fatalf("verdict of job %s", jv.JobID)
	}
	return jv
}

const jobResultOf = `{"result":{"id":"%s","name":"j","application-status":"CANCELED","accumulator-results":{},"net-runtime":1,"start-time":1,"end-time":2},"version":1}`

// TestVerifyJobHA: the job graph (1.20.5) and execution plan (2.3.0) of
// real Flink with their blob are complete; each way a part can be
// missing or torn on a replica is found, in the right part.
func TestVerifyJobHA(t *testing.T) {
	for _, release := range []string{"1.20.5", "2.3.0"} {
		t.Run(release, func(t *testing.T) {
			cases := []struct {
				name   string
				break_ func(s *jobHASite)
				part   string
				kind   ProblemKind
			}{
				{"complete", func(s *jobHASite) {}, "", ""},
				{"graph missing", func(s *jobHASite) { os.Remove(s.haFile) }, "graph", ProblemMissing},
				{"graph short", func(s *jobHASite) { os.Truncate(s.haFile, int64(len(s.graph)-1)) }, "graph", ProblemSizeMismatch},
				{"graph torn at its size", func(s *jobHASite) {
					torn := append([]byte(nil), s.graph...)
					clear(torn[len(torn)/2:])
					os.WriteFile(s.haFile, torn, 0o644)
				}, "graph", ProblemParseError},
				{"graph of another job", func(s *jobHASite) { s.ref.JobID = strings.Repeat("ab", 16) }, "graph", ProblemWrongJob},
				{"blob dir missing", func(s *jobHASite) { os.RemoveAll(filepath.Dir(s.blob)) }, "blobs", ProblemMissing},
				{"blob short", func(s *jobHASite) { os.WriteFile(s.blob, s.jar[:len(s.jar)-1], 0o644) }, "blobs", ProblemChecksumMismatch},
				{"blob right size, wrong content", func(s *jobHASite) {
					os.WriteFile(s.blob, bytes.Repeat([]byte{0}, len(s.jar)), 0o644)
				}, "blobs", ProblemChecksumMismatch},
				{"clean result complete", func(s *jobHASite) {
					writeFile(t, filepath.Join(s.results, s.job+".json"), []byte(strings.ReplaceAll(jobResultOf, "%s", s.job)))
				}, "", ""},
				{"dirty result torn", func(s *jobHASite) {
					full := strings.ReplaceAll(jobResultOf, "%s", s.job)
					writeFile(t, filepath.Join(s.results, s.job+"_DIRTY.json"), []byte(full[:len(full)-9]))
				}, "results", ProblemParseError},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					s := newJobHASite(t, release)
					tc.break_(s)
					jv := s.verify(t)
					parts := map[string]*Verdict{"graph": jv.Graph, "blobs": jv.Blobs, "results": jv.Results}
					if tc.part == "" {
						if !jv.Complete() {
							t.Fatalf("incomplete: graph %v blobs %v results %v", jv.Graph, jv.Blobs, jv.Results)
						}
						if jv.Blobs == nil || jv.Blobs.Files != 1 || jv.Blobs.Bytes != int64(len(s.jar)) {
							t.Fatalf("blobs %+v", jv.Blobs)
						}
						return
					}
					if jv.Complete() {
						t.Fatal("complete")
					}
					oneProblem(t, parts[tc.part], tc.kind)
					for name, p := range parts {
						if name != tc.part && p != nil && !p.Complete {
							t.Fatalf("part %s incomplete too: %v", name, p)
						}
					}
				})
			}
		})
	}
}

// TestVerifyJobHAWithoutGraph: a job with no job graph znode has nothing
// to check unless the job result store is configured.
func TestVerifyJobHAWithoutGraph(t *testing.T) {
	s := newJobHASite(t, "2.3.0")
	jv := s.v.VerifyJobHA(context.Background(), JobHARef{JobID: s.job})
	if !jv.Complete() || jv.Graph != nil || jv.Blobs != nil || jv.Results != nil {
		t.Fatalf("%+v", jv)
	}
	writeFile(t, filepath.Join(s.results, s.job+"_DIRTY.json"), []byte("{"))
	jv = s.v.VerifyJobHA(context.Background(), JobHARef{JobID: s.job, JobResultStore: "file:" + s.results})
	if jv.ResultsComplete() {
		t.Fatalf("torn entry in the configured store: %+v", jv.Results)
	}
}
