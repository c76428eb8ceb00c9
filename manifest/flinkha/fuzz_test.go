package flinkha

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ckptfs/ckptfs/integration/flinkdata"
	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// checkDecodeError fails unless err is a well-formed decoding error: a
// *javaser.DecodeError with an offset inside the input, or a plain error
// about the object graph.
func checkDecodeError(t *testing.T, err error, n int) {
	t.Helper()
	var de *javaser.DecodeError
	if errors.As(err, &de) && (de.Offset < 0 || de.Offset > int64(n)) {
		t.Fatalf("offset %d outside the %d-byte input: %v", de.Offset, n, err)
	}
	if err.Error() == "" {
		t.Fatal("empty error message")
	}
}

// FuzzDecodeCompletedCheckpoint: no input panics, hangs or allocates
// without bound; what decodes satisfies the FileRef invariants, and
// decoding is deterministic. Seeds: HA files of every field set we encode,
// (testdata/fuzz) HA files the JDK wrote, and the HA files real Flink
// wrote in the corpus (flinkdata.Corpus).
func FuzzDecodeCompletedCheckpoint(f *testing.F) {
	for _, fs := range fieldSets {
		spec := sampleSpec(fs)
		f.Add(encodeSpec(f, spec))
		spec.Metadata = nil
		f.Add(encodeSpec(f, spec))
	}
	for _, e := range flinkdata.Corpus(f) {
		for _, c := range e.Checkpoints {
			data, err := os.ReadFile(filepath.Join(e.Storage(), filepath.FromSlash(c.HAFile)))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cc, err := DecodeCompletedCheckpoint(data)
		if err != nil {
			checkDecodeError(t, err, len(data))
			return
		}
		switch cc.FieldSet {
		case FieldSet14, FieldSet15, FieldSet115, FieldSet1150:
		default:
			t.Fatalf("field set %q", cc.FieldSet)
		}
		if len(cc.JobID) != 32 {
			t.Fatalf("job id %q", cc.JobID)
		}
		refs := cc.Files
		if cc.Metadata != nil {
			refs = append(refs, *cc.Metadata)
		}
		for _, r := range refs {
			if r.Size < -1 || r.Offset < 0 || (r.Offset != 0 && !r.Segment) || (r.Dir && r.Size != -1) || r.Class == "" {
				t.Fatalf("bad reference %+v", r)
			}
			if _, err := PathToURI(r.Path); err != nil && r.Path != "" && r.Path[0] == '/' {
				t.Fatalf("absolute path %q is no Flink path: %v", r.Path, err)
			}
		}
		if cc.InlineBytes < 0 || cc.InlineBytes > int64(len(data)) {
			t.Fatalf("%d inline bytes in %d bytes", cc.InlineBytes, len(data))
		}
		again, err := DecodeCompletedCheckpoint(data)
		if err != nil || !reflect.DeepEqual(cc, again) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}

// FuzzDecodeStateHandle: no input panics; what decodes encodes to a znode
// that decodes to the same handle, and its path is a Flink path.
func FuzzDecodeStateHandle(f *testing.F) {
	for _, p := range []string{"file:/flink/ha/completedCheckpoint0a1b2c3d4e5f", "hdfs://nn:8020/ha/x y ü", "/ha/%#?"} {
		h, err := NewStateHandle(p, 1234)
		if err != nil {
			f.Fatal(err)
		}
		data, err := EncodeStateHandle(h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeStateHandle(data)
		if err != nil {
			checkDecodeError(t, err, len(data))
			return
		}
		if _, err := h.Path(); err != nil {
			t.Fatalf("decoded handle has no path: %v", err)
		}
		out, err := EncodeStateHandle(*h)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeStateHandle(out)
		if err != nil || *back != *h {
			t.Fatalf("round trip %+v, %v; want %+v", back, err, h)
		}
	})
}

// FuzzDecodeLeaderInfo: no input panics; what decodes round-trips.
func FuzzDecodeLeaderInfo(f *testing.F) {
	for _, li := range []LeaderInfo{
		{Address: "pekko.tcp://flink@jm:6123/user/rpc/dispatcher_1", SessionID: "01234567-89ab-cdef-fedc-ba9876543210"},
		{Address: "http://jm:8081"},
	} {
		data, err := EncodeLeaderInfo(li)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		li, err := DecodeLeaderInfo(data)
		if err != nil {
			checkDecodeError(t, err, len(data))
			return
		}
		if li == nil {
			if len(data) != 0 {
				t.Fatal("nil leader information for non-empty data")
			}
			return
		}
		out, err := EncodeLeaderInfo(*li)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeLeaderInfo(out)
		if err != nil || *back != *li {
			t.Fatalf("round trip %+v, %v; want %+v", back, err, li)
		}
	})
}

// FuzzPathToURI: PathToURI never makes a URI that URIToPath (and so the
// JDK) would refuse.
func FuzzPathToURI(f *testing.F) {
	for _, tc := range uriCases {
		f.Add(tc.path)
	}
	f.Fuzz(func(t *testing.T, p string) {
		u, err := PathToURI(p)
		if err != nil {
			return
		}
		if _, err := URIToPath(u); err != nil {
			t.Fatalf("PathToURI(%q) = %q, which URIToPath refuses: %v", p, u, err)
		}
	})
}
