package javaser

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodingCostIsBounded: what decoding allocates is bounded by the
// size of the input, however the input spends its bytes. Each case is a
// valid stream of 6 MiB whose values cost a 16-byte slot (and more) for
// one to three bytes: it fails with ErrTooLarge, having allocated at most
// twice its budget (the budget counts what the result would hold;
// growing slices leave as much again in garbage).
func TestDecodingCostIsBounded(t *testing.T) {
	const n = 6 << 20
	rep := func(count int, parts ...any) []byte { return bytes.Repeat(raw(parts...), count) }
	manyBooleans := make([][]byte, 1000)
	for i := range manyBooleans {
		manyBooleans[i] = primFieldDesc('Z', "z")
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"null elements", stream(tcArray, classDesc("[Ljava.lang.Object;", 1, SCSerializable, tcNull), u32(n), rep(n, tcNull))},
		{"null annotation", stream(tcObject, classDesc("A", 1, SCSerializable|SCWriteMethod, tcNull), rep(n, tcNull), tcEndBlockData)},
		{"boolean fields", stream(tcObject, classDesc("B", 1, SCSerializable, tcNull, manyBooleans...), make([]byte, 1000),
			rep(n/1006, tcObject, tcReference, u32(baseWireHandle), make([]byte, 1000)))},
		{"empty strings", stream(rep(n/3, tcString, u16(0)))},
		{"empty blocks", stream(rep(n/2, tcBlockData, 0))},
		{"resets", stream(rep(n, tcReset))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := uint64(DecodeBudget(len(tc.in)))
			var err error
			b, _ := allocated(func() { _, err = Decode(tc.in) })
			if b > 2*budget {
				t.Errorf("allocated %d MiB decoding %d MiB, more than twice the budget of %d MiB", b>>20, len(tc.in)>>20, budget>>20)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %v, want a *DecodeError", err)
			}
			if !errors.Is(err, ErrTooLarge) || de.Offset < 4 || de.Offset > int64(len(tc.in)) || !strings.Contains(err.Error(), fmt.Sprint(budget)) {
				t.Errorf("Decode = %v", err)
			}
		})
	}
}

// realFlinkStreams returns Flink-written streams: the HA files (job
// graphs, execution plans, completed checkpoints) of the repository's
// test data, the JDK-written seeds, and the CheckpointProperties of
// every real _metadata when the Flink test data is there.
func realFlinkStreams(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	root := filepath.FromSlash("../../integration")
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if n := e.Name(); strings.HasPrefix(n, "completedCheckpoint") || strings.HasPrefix(n, "submittedJobGraph") || strings.HasPrefix(n, "submittedExecutionPlan") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(p)] = data
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no HA file under %s", root)
	}
	if _, err := os.Stat(flinkTestdataDir()); err == nil || !testing.Short() {
		for _, p := range metadataProperties(t) {
			out[filepath.ToSlash(p.path)] = p.data
		}
	}
	return out
}

// TestRealStreamsCostLittle: the streams real Flink wrote cost at most
// half the budget's rate (flinkha's TestLargeHAFilesWithinBudget scales
// them up).
func TestRealStreamsCostLittle(t *testing.T) {
	worst, worstName := 0.0, ""
	for name, data := range realFlinkStreams(t) {
		d := (&Decoder{}).start(data)
		if _, err := d.stream(); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		perByte := float64(d.maxAlloc-d.budget) / float64(len(data))
		if perByte > worst {
			worst, worstName = perByte, name
		}
	}
	t.Logf("at most %.2f bytes a byte of input (%s)", worst, worstName)
	if worst > budgetPerByte/2 {
		t.Errorf("%s costs %.2f bytes a byte of input, more than half the budget's %d", worstName, worst, budgetPerByte)
	}
}
