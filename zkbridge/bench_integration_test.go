package zkbridge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ckptfs/ckptfs/integration/flinkemu"
	"github.com/ckptfs/ckptfs/integration/zktest"
	"github.com/ckptfs/ckptfs/manifest"
)

// BenchmarkIntegration_Takeover20Jobs: takeover of 20 jobs with 3
// pointers each on a three-server ensemble, after liveness cleared,
// including L2 verification of all 60 pointers (no cache) and one
// retraction per job. Between iterations the pointers are put back and
// another site made active (not timed).
func BenchmarkIntegration_Takeover20Jobs(b *testing.B) {
	c := zktest.StartCluster(b, 3)
	e := newEnv(b, c)
	jm, _ := e.startJM(flinkemu.Flink1_20, false)
	var jobs []string
	for range 20 {
		job := flinkemu.NewJobID()
		jobs = append(jobs, job)
		if err := jm.SubmitJob(job); err != nil {
			b.Fatal(err)
		}
		for range 3 {
			if _, err := jm.CompleteCheckpoint(job, flinkemu.CheckpointSpec{StateSizes: []int{4096, 4096, 4096, 4096}}); err != nil {
				b.Fatal(err)
			}
		}
		hideFile(b, jm.Checkpoints(job)[2].StateFiles[0])
	}
	jm.Close()
	br := e.bridge("dc2")
	reset := zktest.Connect(b, e.servers)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 {
			// Undo the last takeover: dc2 is active, its restore runs.
			if _, err := br.RestorePruned(ctx, RestoreOptions{Unverified: true}); err != nil {
				b.Fatal(err)
			}
			if _, err := reset.Set(e.ckptfs+"/default/active-site", []byte("dc1"), -1); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		rep, err := br.Takeover(ctx, TakeoverOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if !rep.Activated || len(rep.Jobs) != 20 {
			b.Fatalf("takeover: activated %v, %d jobs", rep.Activated, len(rep.Jobs))
		}
		for _, j := range rep.Jobs {
			if !slices.Equal(j.Retracted, []int64{3}) || !slices.Equal(j.Kept, []int64{1, 2}) {
				b.Fatalf("job %s: kept %v retracted %v", j.JobID, j.Kept, j.Retracted)
			}
		}
		b.StartTimer()
	}
}

// BenchmarkIntegration_MarkerLatency: from Publisher.Trigger after a
// verdict changed to the new marker seen by a watcher on another
// connection, on a three-server ensemble.
func BenchmarkIntegration_MarkerLatency(b *testing.B) {
	c := zktest.StartCluster(b, 3)
	e := newEnv(b, c)
	br := e.bridge("dc2", func(cfg *Config) {
		cfg.ClusterID = "default"
		cfg.MarkerInterval = time.Hour
		cfg.MarkerJitter = 0
	})
	src := newFakeSource()
	job := "00112233445566778899aabbccddeeff"
	src.set(job, 1, manifest.L2)
	pub, err := br.NewPublisher(src)
	if err != nil {
		b.Fatal(err)
	}
	runPublisher(b, pub)
	observer := zktest.Connect(b, e.servers)
	path := e.ckptfs + "/default/sites/dc2/jobs/" + job
	waitFor(b, 10*time.Second, "the first marker", func() (bool, error) {
		m, ok := readMarker(b, observer.Conn, path)
		return ok && m.CheckpointID == 1, nil
	})
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := int64(i + 2)
		_, _, ch, err := observer.GetW(path)
		if err != nil {
			b.Fatal(err)
		}
		src.set(job, id, manifest.L2)
		b.StartTimer()
		start := time.Now()
		pub.Trigger()
		for {
			<-ch
			data, _, wch, err := observer.GetW(path)
			if err != nil {
				b.Fatal(err)
			}
			if m, err := decodeMarker(data); err == nil && m.CheckpointID == id {
				break
			}
			ch = wch
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
	}
}
