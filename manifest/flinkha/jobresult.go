package flinkha

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The JobResultStore (Flink 1.15+; flink-runtime .../highavailability/
// FileSystemJobResultStore.java, JobResultStoreOptions.java) keeps one
// JSON file per finished job in job-result-store.storage-path (default
// <high-availability.storageDir>/job-result-store/<cluster-id>):
// <job>_DIRTY.json while Flink cleans the job up, renamed to <job>.json
// once clean. A recovering JobManager reads every dirty entry
// (getDirtyResultsInternal, Jackson) and skips the job graphs of jobs with
// any entry, so a torn entry fails the recovery and a missing one re-runs
// a finished job. The JSON is {"result": {...}, "version": 1}, the result
// as rest/messages/json/JobResultSerializer.java writes it.

// Suffixes of job result store entries.
const (
	JobResultDirtySuffix = "_DIRTY.json"
	JobResultCleanSuffix = ".json"
)

// MaxJobResultSize bounds the job result files DecodeJobResult reads (a
// result holds the accumulators and the failure cause; Flink reads the
// whole file too).
const MaxJobResultSize = 64 << 20

// JobResult is one entry of the job result store.
type JobResult struct {
	// JobID is result.id, 32 hex digits.
	JobID string
	// ApplicationStatus is result.application-status (SUCCEEDED, FAILED,
	// CANCELED, UNKNOWN).
	ApplicationStatus string
	// Version is the entry's schema version.
	Version int
}

// JobResultName splits a job result store file name into the job id and
// whether the entry is dirty; ok is false for any other name.
func JobResultName(name string) (job string, dirty, ok bool) {
	switch {
	case strings.HasSuffix(name, JobResultDirtySuffix):
		job, dirty = strings.TrimSuffix(name, JobResultDirtySuffix), true
	case strings.HasSuffix(name, JobResultCleanSuffix):
		job = strings.TrimSuffix(name, JobResultCleanSuffix)
	default:
		return "", false, false
	}
	if _, _, err := parseID(job); err != nil {
		return "", false, false
	}
	return job, dirty, true
}

// DecodeJobResult decodes a job result store entry completely: one JSON
// object, nothing after it, a result with a 32-hex-digit id and an
// application status. A torn file fails with the offset where it broke.
func DecodeJobResult(data []byte) (*JobResult, error) {
	if len(data) > MaxJobResultSize {
		return nil, fmt.Errorf("flinkha: job result: %d bytes is more than %d", len(data), MaxJobResultSize)
	}
	var entry struct {
		Result *struct {
			ID     *string `json:"id"`
			Status *string `json:"application-status"`
		} `json:"result"`
		Version *int `json:"version"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&entry); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("flinkha: job result: truncated at offset %d", dec.InputOffset())
		}
		return nil, fmt.Errorf("flinkha: job result: at offset %d: %w", dec.InputOffset(), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("flinkha: job result: data after the entry at offset %d", dec.InputOffset())
	}
	switch {
	case entry.Result == nil:
		return nil, errors.New("flinkha: job result: no result")
	case entry.Result.ID == nil:
		return nil, errors.New("flinkha: job result: the result has no id")
	case entry.Result.Status == nil || *entry.Result.Status == "":
		return nil, errors.New("flinkha: job result: the result has no application-status")
	}
	if _, _, err := parseID(*entry.Result.ID); err != nil {
		return nil, fmt.Errorf("flinkha: job result: %w", err)
	}
	jr := &JobResult{JobID: *entry.Result.ID, ApplicationStatus: *entry.Result.Status}
	if entry.Version != nil {
		jr.Version = *entry.Version
	}
	return jr, nil
}
