package metadata

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
)

// collector keeps what DecodeReferences reports, as References would
// list it for a checkpoint in dir.
type collector struct {
	dir      string
	refs     []Reference
	restarts int
}

func (c *collector) Reference(r *RawReference) {
	ref := Reference{Path: string(r.Path), Resolved: string(r.Path), Relative: r.Relative(), Size: r.Size, Kind: r.Kind(c.dir)}
	if r.Tag == TagSegmentFile {
		ref.Offset = r.Offset
	}
	if ref.Relative {
		ref.Resolved = c.dir + "/" + ref.Path
	}
	if ref.MinLength() != r.MinLength() {
		panic(fmt.Sprintf("min length %d, raw %d", ref.MinLength(), r.MinLength()))
	}
	c.refs = append(c.refs, ref)
}

func (c *collector) Restart() { c.refs, c.restarts = nil, c.restarts+1 }

// sameAsDecode fails unless DecodeReferences, DecodeReferencesBytes and
// Decode agree on data: the same error, or the same references, header
// and inline totals. DecodeReferencesBytes must leave data as it was.
func sameAsDecode(t *testing.T, data []byte, opts Options) *collector {
	t.Helper()
	const dir = "/replica/job/chk-42"
	m, derr := decode(data, opts)
	c := &collector{dir: dir}
	sum, serr := DecodeReferences(bytes.NewReader(data), int64(len(data)), opts, c)
	if (derr == nil) != (serr == nil) || (derr != nil && derr.Error() != serr.Error()) {
		t.Fatalf("Decode:           %v\nDecodeReferences: %v", derr, serr)
	}
	inMemory := bytes.Clone(data)
	cb := &collector{dir: dir}
	bsum, berr := DecodeReferencesBytes(inMemory, opts, cb)
	if (berr == nil) != (serr == nil) || (berr != nil && berr.Error() != serr.Error()) {
		t.Fatalf("DecodeReferences:      %v\nDecodeReferencesBytes: %v", serr, berr)
	}
	if !bytes.Equal(inMemory, data) {
		t.Fatalf("DecodeReferencesBytes changed its input at byte %d", firstDiff(inMemory, data))
	}
	if bsum != sum || !reflect.DeepEqual(cb.refs, c.refs) || cb.restarts != c.restarts {
		t.Fatalf("DecodeReferencesBytes: %+v, %d references, %d restarts; DecodeReferences: %+v, %d, %d", bsum, len(cb.refs), cb.restarts, sum, len(c.refs), c.restarts)
	}
	if derr != nil {
		return c
	}
	count, bytes := m.Inline()
	if want := (Summary{Version: m.Version, CheckpointID: m.CheckpointID, InlineCount: count, InlineBytes: bytes}); sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	if want := m.References(dir); !reflect.DeepEqual(c.refs, want) {
		t.Fatalf("DecodeReferences found %d references, Decode %d:\nreferences %+v\ndecode     %+v", len(c.refs), len(want), c.refs, want)
	}
	return c
}

func TestDecodeReferencesMatchesDecode(t *testing.T) {
	props := realProperties(t)
	for v := int32(2); v <= 7; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			data := encode(t, everyHandle(v, props))
			if c := sameAsDecode(t, data, Options{}); len(c.refs) == 0 {
				t.Fatal("no references")
			}
			// Every prefix fails, with Decode's error.
			for n := 0; n < len(data); n++ {
				sameAsDecode(t, data[:n], Options{})
			}
		})
	}
	t.Run("real", func(t *testing.T) {
		for _, f := range flinkdata.MetadataFiles(t) {
			data, err := os.ReadFile(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			sameAsDecode(t, data, Options{})
		}
	})
	t.Run("changelog nesting", func(t *testing.T) {
		// Files under a non-materialized handle are changelog files
		// however deep; files under a materialized one are not.
		m := everyHandle(7, props)
		cl := m.Operators[0].Subtasks[1].ManagedKeyed
		inner := &KeyedHandle{Tag: TagChangelogV2, KeyGroupCount: 1, StateHandleID: "inner",
			Materialized: []*KeyedHandle{{Tag: TagKeyGroupsV2, KeyGroupCount: 1, Offsets: []int64{0}, Delegate: fileHandle("file:/flink/job/shared/deep", 3), StateHandleID: "m"}}}
		cl.NonMaterialized = append(cl.NonMaterialized, inner)
		c := sameAsDecode(t, encode(t, m), Options{})
		for _, r := range c.refs {
			if r.Path == "file:/flink/job/shared/deep" && r.Kind != KindChangelog {
				t.Fatalf("a file under a non-materialized handle is %s", r.Kind)
			}
		}
	})
	t.Run("non-ASCII paths", func(t *testing.T) {
		m := everyHandle(5, props)
		m.Operators[0].Subtasks[0].RawKeyed.Delegate.Path = "file:/flink/ch\u00e9ckpoints/nul\x00/\U0001F680"
		data := encode(t, m)
		c := sameAsDecode(t, data, Options{})
		found := false
		for _, r := range c.refs {
			found = found || r.Path == m.Operators[0].Subtasks[0].RawKeyed.Delegate.Path
		}
		if !found {
			t.Fatalf("the non-ASCII path is not reported: %v", c.refs)
		}
	})
}

// TestDecodeReferencesRestartsForLayout111: a Flink 1.11 file is decoded
// twice, and the visitor is told to forget the first attempt.
func TestDecodeReferencesRestartsForLayout111(t *testing.T) {
	m := everyHandle(3, nil)
	m.ChannelLayout = ChannelLayout111
	c := sameAsDecode(t, encode(t, m), Options{})
	if c.restarts != 1 {
		t.Fatalf("%d restarts, want 1", c.restarts)
	}
}

// TestDecodeReferencesKeepsNothing: DecodeReferences allocates per
// subtask, not per file handle.
func TestDecodeReferencesKeepsNothing(t *testing.T) {
	data := encode(t, synthetic(10000, 10))
	var v countVisitor
	allocs := testing.AllocsPerRun(3, func() {
		v = 0
		if _, err := DecodeReferences(bytes.NewReader(data), int64(len(data)), Options{}, &v); err != nil {
			t.Fatal(err)
		}
	})
	if v != 10000+10 {
		t.Fatalf("%d references, want 10010", v)
	}
	if allocs > 100 {
		t.Fatalf("%v allocations to decode the references of 10,000 file handles", allocs)
	}
}

type countVisitor int

func (c *countVisitor) Reference(*RawReference) { *c++ }
func (c *countVisitor) Restart()                { *c = 0 }

func TestIsPlainASCII(t *testing.T) {
	for n := 0; n <= 40; n++ {
		plain := bytes.Repeat([]byte{'a'}, n)
		if !isPlainASCII(plain) {
			t.Fatalf("%d plain bytes refused", n)
		}
		for i := range n {
			for _, c := range []byte{0, 0x80, 0xC0, 0xFF} {
				b := bytes.Clone(plain)
				b[i] = c
				if isPlainASCII(b) {
					t.Fatalf("byte %#x at %d of %d taken for plain ASCII", c, i, n)
				}
			}
		}
	}
}

// TestDecodeReferencesMatchesDecodeAcrossRefills: a file several read
// buffers long, whose relative and segment paths (which further reads
// follow before they are reported) and plain file paths fall at every
// distance from a buffer refill, reports the references Decode finds.
func TestDecodeReferencesMatchesDecodeAcrossRefills(t *testing.T) {
	m := &Metadata{Version: 3, CheckpointID: 7, ChannelLayout: ChannelLayout112}
	op := Operator{IDLower: 1, IDUpper: 2, Parallelism: 1, MaxParallelism: 128}
	k := &KeyedHandle{Tag: TagIncrementalKeyGroupsV2, CheckpointID: 7, BackendID: "b", KeyGroupCount: 1, StateHandleID: "x"}
	for i := range 6000 {
		pad := strings.Repeat("p", i%97)
		var h *StreamHandle
		switch i % 3 {
		case 2:
			h = &StreamHandle{Tag: TagRelativeStream, Path: fmt.Sprintf("rel-%d-%s", i, pad), Size: int64(i)}
		case 1:
			h = &StreamHandle{Tag: TagSegmentFile, Path: fmt.Sprintf("file:/d/shared/seg-%d-%s", i, pad), Offset: int64(i), Size: 3, LogicalFileID: "l" + pad}
		default:
			h = &StreamHandle{Tag: TagFileStream, Path: fmt.Sprintf("file:/d/shared/f-%d-%s", i, pad), Size: int64(i)}
		}
		k.Shared = append(k.Shared, NamedHandle{LocalName: fmt.Sprintf("%06d.sst", i), Handle: h})
	}
	op.Subtasks = []Subtask{{Index: 0, ManagedKeyed: k}}
	m.Operators = []Operator{op}
	data := encode(t, m)
	if len(data) < 3*readBufferSize {
		t.Fatalf("only %d bytes", len(data))
	}
	if c := sameAsDecode(t, data, Options{}); len(c.refs) != len(k.Shared) {
		t.Fatalf("%d references, want %d", len(c.refs), len(k.Shared))
	}
	// Nesting limits fail DecodeReferences where they fail Decode, also
	// for the handles DecodeReferences reads straight from its buffer.
	for depth := 1; depth <= 3; depth++ {
		sameAsDecode(t, data, Options{MaxDepth: depth})
	}
}
