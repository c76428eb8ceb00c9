package javaser

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// flinkTestdataEnv overrides where the real Flink test data is found.
const flinkTestdataEnv = "CKPTFS_FLINK_TESTDATA"

// flinkTestdata returns the directory of Flink-written checkpoints and
// savepoints. By default it sits beside the repository; its absence fails
// the test, because the proof against real Flink data must not silently
// turn into a skip, except under -short.
func flinkTestdata(tb testing.TB) string {
	tb.Helper()
	dir := flinkTestdataDir()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if testing.Short() {
			tb.Skipf("Flink test data not found at %s (set %s): skipping under -short", dir, flinkTestdataEnv)
		}
		tb.Fatalf("Flink test data not found at %s (set %s to its location): %v", dir, flinkTestdataEnv, err)
	}
	return dir
}

// flinkTestdataDir is where the Flink test data should be.
func flinkTestdataDir() string {
	if dir := os.Getenv(flinkTestdataEnv); dir != "" {
		return dir
	}
	return filepath.FromSlash("../../../shared/testdata/flink")
}

// propertiesStream is the Java stream at the end of a _metadata file.
type propertiesStream struct {
	path string // relative to the test data directory
	data []byte
}

var (
	propsOnce  sync.Once
	propsCache []propertiesStream
	propsErr   []string
	propsFiles int
)

// metadataProperties returns the trailing CheckpointProperties stream of
// every _metadata with format version >= 4. It fails the test for a file
// that has none.
func metadataProperties(tb testing.TB) []propertiesStream {
	tb.Helper()
	dir := flinkTestdata(tb)
	propsOnce.Do(func() {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "_metadata" {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if len(data) < 8 || binary.BigEndian.Uint32(data[4:8]) < 4 {
				return nil
			}
			propsFiles++
			rel, _ := filepath.Rel(dir, p)
			if s, ok := trailingStream(data); ok {
				propsCache = append(propsCache, propertiesStream{rel, s})
			} else {
				propsErr = append(propsErr, rel)
			}
			return nil
		})
		if err != nil {
			propsErr = append(propsErr, err.Error())
		}
	})
	for _, e := range propsErr {
		tb.Errorf("%s: no Java serialization stream that decodes exactly to EOF", e)
	}
	if propsFiles == 0 {
		tb.Fatalf("no _metadata of version >= 4 under %s", dir)
	}
	return propsCache
}

// trailingStream finds the first occurrence of the stream header from which
// Decode consumes exactly to the end of data.
func trailingStream(data []byte) ([]byte, bool) {
	hdr := []byte{0xAC, 0xED, 0x00, 0x05}
	for off := 8; ; {
		i := bytes.Index(data[off:], hdr)
		if i < 0 {
			return nil, false
		}
		off += i
		if _, err := Decode(data[off:]); err == nil {
			return data[off:], true
		}
		off++
	}
}
