package realflink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// REST is a client of a JobManager's REST API, the second witness of what
// Flink did (the job's own report is the first).
type REST struct {
	Base string // http://host:port
	c    *http.Client
	// legacy: the web monitor of Flink 1.4 (Dist.Legacy), whose paths
	// and shapes differ where the methods below say.
	legacy bool
}

// NewREST returns a client for the API at base.
func NewREST(base string) *REST {
	return &REST{Base: base, c: &http.Client{Timeout: 20 * time.Second}}
}

func (r *REST) do(ctx context.Context, method, path string, body io.Reader, ctype string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, r.Base+path, body)
	if err != nil {
		return err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w: %.200s", method, path, err, data)
	}
	return nil
}

// Get decodes the JSON answer of GET path into out.
func (r *REST) Get(ctx context.Context, path string, out any) error {
	return r.do(ctx, http.MethodGet, path, nil, "", out)
}

// Overview is GET /overview.
type Overview struct {
	TaskManagers int    `json:"taskmanagers"`
	Slots        int    `json:"slots-total"`
	SlotsFree    int    `json:"slots-available"`
	Running      int    `json:"jobs-running"`
	Version      string `json:"flink-version"`
}

// Overview returns the cluster's overview.
func (r *REST) Overview(ctx context.Context) (*Overview, error) {
	var o Overview
	return &o, r.Get(ctx, "/overview", &o)
}

// JobStatus is one entry of GET /jobs.
type JobStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Jobs lists the cluster's jobs and their states (Flink 1.4:
// /joboverview, whose entries give jid and state).
func (r *REST) Jobs(ctx context.Context) ([]JobStatus, error) {
	if r.legacy {
		type details struct {
			ID    string `json:"jid"`
			State string `json:"state"`
		}
		var out struct {
			Running  []details `json:"running"`
			Finished []details `json:"finished"`
		}
		if err := r.Get(ctx, "/joboverview", &out); err != nil {
			return nil, err
		}
		var jobs []JobStatus
		for _, d := range append(out.Running, out.Finished...) {
			jobs = append(jobs, JobStatus{ID: d.ID, Status: d.State})
		}
		return jobs, nil
	}
	var out struct {
		Jobs []JobStatus `json:"jobs"`
	}
	return out.Jobs, r.Get(ctx, "/jobs", &out)
}

// Checkpoints is GET /jobs/<id>/checkpoints, in the fields the tests use.
type Checkpoints struct {
	Counts struct {
		Restored  int `json:"restored"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"counts"`
	Latest struct {
		Completed *CompletedCheckpoint `json:"completed"`
		Restored  *RestoredCheckpoint  `json:"restored"`
	} `json:"latest"`
	History []CompletedCheckpoint `json:"history"`
}

// CompletedCheckpoint is a checkpoint's statistics.
type CompletedCheckpoint struct {
	ID               int64  `json:"id"`
	Status           string `json:"status"`
	EndToEnd         int64  `json:"end_to_end_duration"` // ms
	StateSize        int64  `json:"state_size"`
	CheckpointedSize int64  `json:"checkpointed_size"`
	ExternalPath     string `json:"external_path"`
	TriggerMillis    int64  `json:"trigger_timestamp"`
}

// RestoredCheckpoint is what the job last restored.
type RestoredCheckpoint struct {
	ID            int64  `json:"id"`
	RestoreMillis int64  `json:"restore_timestamp"`
	ExternalPath  string `json:"external_path"`
	Savepoint     bool   `json:"is_savepoint"`
}

// Checkpoints returns a job's checkpoint statistics.
func (r *REST) Checkpoints(ctx context.Context, job string) (*Checkpoints, error) {
	var c Checkpoints
	return &c, r.Get(ctx, "/jobs/"+job+"/checkpoints", &c)
}

// Exception is one entry of a job's exception history.
type Exception struct {
	Name       string `json:"exceptionName"`
	Stacktrace string `json:"stacktrace"`
	Millis     int64  `json:"timestamp"`
}

// Exceptions returns a job's exception history, newest first (Flink 1.4:
// only its root exception, whose name is its first line).
func (r *REST) Exceptions(ctx context.Context, job string) ([]Exception, error) {
	if r.legacy {
		var out struct {
			Root   string `json:"root-exception"`
			Millis int64  `json:"timestamp"`
		}
		if err := r.Get(ctx, "/jobs/"+job+"/exceptions", &out); err != nil || out.Root == "" {
			return nil, err
		}
		name, _, _ := strings.Cut(out.Root, "\n")
		name, _, _ = strings.Cut(name, ":")
		return []Exception{{Name: strings.TrimSpace(name), Stacktrace: out.Root, Millis: out.Millis}}, nil
	}
	var out struct {
		History struct {
			Entries []Exception `json:"entries"`
		} `json:"exceptionHistory"`
	}
	return out.History.Entries, r.Get(ctx, "/jobs/"+job+"/exceptions?maxExceptions=100", &out)
}

// Submit uploads a job jar and runs it with args; it returns the job's id.
func (r *REST) Submit(ctx context.Context, jar string, args []string) (string, error) {
	return r.SubmitAs(ctx, jar, args, "")
}

// SubmitAs is Submit with the job's id chosen by the caller (32 hex
// digits; "" lets Flink pick one), as the run request's jobId.
func (r *REST) SubmitAs(ctx context.Context, jar string, args []string, jobID string) (string, error) {
	f, err := os.Open(jar)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("jarfile", filepath.Base(jar))
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(part, f); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	var up struct {
		Filename string `json:"filename"`
		Error    string `json:"error"` // Flink 1.4 answers 200 with it
	}
	if err := r.do(ctx, http.MethodPost, "/jars/upload", &body, mw.FormDataContentType(), &up); err != nil {
		return "", err
	}
	if up.Filename == "" {
		return "", fmt.Errorf("the jar upload did not name the jar: %s", up.Error)
	}
	id := filepath.Base(up.Filename)
	if r.legacy {
		// Flink 1.4 takes the run's parameters from the query only, the
		// arguments as one string split at spaces, and picks the job id.
		if jobID != "" {
			return "", fmt.Errorf("Flink 1.4 cannot run a job with a given id (%s)", jobID)
		}
		for _, a := range args {
			if strings.ContainsAny(a, " \t\"") {
				return "", fmt.Errorf("Flink 1.4 splits program-args at spaces: argument %q", a)
			}
		}
		var run struct {
			JobID string `json:"jobid"`
			Error string `json:"error"`
		}
		q := url.Values{"program-args": {strings.Join(args, " ")}}
		if err := r.do(ctx, http.MethodPost, "/jars/"+id+"/run?"+q.Encode(), strings.NewReader("{}"), "application/json", &run); err != nil {
			return "", err
		}
		if run.JobID == "" {
			return "", fmt.Errorf("Flink 1.4 did not run the job: %s", run.Error)
		}
		return run.JobID, nil
	}
	runReq := map[string]any{"programArgsList": args}
	if jobID != "" {
		runReq["jobId"] = jobID
	}
	req, err := json.Marshal(runReq)
	if err != nil {
		return "", err
	}
	var run struct {
		JobID string `json:"jobid"`
	}
	if err := r.do(ctx, http.MethodPost, "/jars/"+id+"/run", bytes.NewReader(req), "application/json", &run); err != nil {
		return "", err
	}
	return run.JobID, nil
}

// Cancel cancels a job.
func (r *REST) Cancel(ctx context.Context, job string) error {
	if r.legacy {
		return r.do(ctx, http.MethodDelete, "/jobs/"+job+"/cancel", nil, "", nil)
	}
	return r.do(ctx, http.MethodPatch, "/jobs/"+job+"?mode=cancel", nil, "", nil)
}
