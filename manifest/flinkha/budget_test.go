package flinkha

import (
	"path/filepath"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/javaser"
	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// TestLargeHAFilesWithinBudget: HA files far larger than any in the
// corpus decode within javaser's budget rate alone, without its base.
// They are written by the encoder (which writes what Flink writes:
// manifest's TestCorpusHAEncoderMatches) from a checkpoint of every
// corpus entry with its operators repeated 200 times, and from an
// unaligned checkpoint whose channels hold 2000 offsets each, a Long
// object apiece: the costliest shape Flink writes.
func TestLargeHAFilesWithinBudget(t *testing.T) {
	write := func(t *testing.T, m *metadata.Metadata) []byte {
		t.Helper()
		data, err := EncodeCompletedCheckpoint(CheckpointSpec{JobID: "0123456789abcdef0123456789abcdef", CheckpointID: m.CheckpointID,
			ExternalPointer: "file:/flink/checkpoints/0123456789abcdef0123456789abcdef/chk-1", MetadataSize: 1000, Metadata: m})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	check := func(t *testing.T, data []byte) {
		t.Helper()
		rate := javaser.DecodeBudget(len(data)) - javaser.DecodeBudget(0)
		if _, err := (&javaser.Decoder{MaxAlloc: rate}).Decode(data); err != nil {
			t.Errorf("HA file of %d bytes: %v", len(data), err)
		}
	}
	for _, e := range flinkdata.Corpus(t) {
		if len(e.Checkpoints) == 0 {
			continue
		}
		t.Run(e.Release+"/"+e.Kind, func(t *testing.T) {
			m, err := metadata.DecodeFile(filepath.Join(e.Storage(), filepath.FromSlash(e.Checkpoints[0].Dir), "_metadata"), metadata.Options{KeepInline: true})
			if err != nil {
				t.Fatal(err)
			}
			ops := m.Operators
			m.Operators = nil
			for i := range 200 {
				for _, op := range ops {
					op.IDLower += int64(i) * 7919 // another operator
					m.Operators = append(m.Operators, op)
				}
			}
			check(t, write(t, m))
			if e.Kind != "unaligned" {
				return
			}
			m.Operators = ops
			for i := range m.Operators {
				for j := range m.Operators[i].Subtasks {
					st := &m.Operators[i].Subtasks[j]
					for _, hs := range [][]metadata.ChannelHandle{st.InputChannels, st.OutputChannels} {
						for k := range hs {
							hs[k].Offsets = make([]int64, 2000)
							for x := range hs[k].Offsets {
								hs[k].Offsets[x] = int64(x) << 15
							}
						}
					}
				}
			}
			check(t, write(t, m))
		})
	}
}
