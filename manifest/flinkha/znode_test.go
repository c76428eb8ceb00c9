package flinkha

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// cat concatenates byte strings, strings and single bytes.
func cat(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case []byte:
			b = append(b, p...)
		case string:
			b = append(b, p...)
		case byte:
			b = append(b, p)
		case int:
			b = append(b, byte(p))
		case rune:
			b = append(b, byte(p))
		default:
			panic(fmt.Sprintf("cat: %T", p))
		}
	}
	return b
}

// utf is a Java modified-UTF-8 string with its u16 length (ASCII here).
func utf(s string) []byte { return binary.BigEndian.AppendUint16(nil, uint16(len(s))) }

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// The znode bytes of docs/flink-formats.md §1.7, written out by hand.
func TestStateHandleGolden(t *testing.T) {
	const uri = "file:/flink/ha/completedCheckpoint0a1b2c3d4e5f"
	str := func(s string) []byte { return cat(utf(s), s) }
	want := cat(
		[]byte{0xAC, 0xED, 0x00, 0x05},
		0x73, 0x72, str("org.apache.flink.runtime.state.RetrievableStreamStateHandle"),
		[]byte{0x00, 0x01, 0x1E, 0x18, 0xF1, 0x55, 0x97, 0x2B}, 0x02, []byte{0x00, 0x01},
		'L', str("wrappedStreamStateHandle"), 0x74, str("Lorg/apache/flink/runtime/state/StreamStateHandle;"),
		0x78, 0x70,
		0x73, 0x72, str("org.apache.flink.runtime.state.filesystem.FileStateHandle"),
		[]byte{0x04, 0xDC, 0x75, 0xD8, 0x62, 0xBD, 0x1B, 0xB3}, 0x02, []byte{0x00, 0x02},
		'J', str("stateSize"), 'L', str("filePath"), 0x74, str("Lorg/apache/flink/core/fs/Path;"),
		0x78, 0x70,
		u64(4242),
		0x73, 0x72, str("org.apache.flink.core.fs.Path"),
		[]byte{0, 0, 0, 0, 0, 0, 0, 1}, 0x02, []byte{0x00, 0x01},
		'L', str("uri"), 0x74, str("Ljava/net/URI;"),
		0x78, 0x70,
		0x73, 0x72, str("java.net.URI"),
		[]byte{0xAC, 0x01, 0x78, 0x2E, 0x43, 0x9E, 0x49, 0xAB}, 0x03, []byte{0x00, 0x01},
		'L', str("string"), 0x74, str("Ljava/lang/String;"),
		0x78, 0x70,
		0x74, str(uri), 0x78,
	)
	got, err := EncodeStateHandle(StateHandle{URI: uri, Size: 4242})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded znode differs from §1.7:\n got % x\nwant % x", got, want)
	}
	h, err := DecodeStateHandle(want)
	if err != nil {
		t.Fatal(err)
	}
	if h.URI != uri || h.Size != 4242 {
		t.Fatalf("decoded %+v", h)
	}
	if p, err := h.Path(); err != nil || p != uri {
		t.Fatalf("Path() = %q, %v", p, err)
	}
}

func TestStateHandleRoundTrip(t *testing.T) {
	for _, tc := range []struct{ path, uri, back string }{
		{"file:/flink/ha/completedCheckpoint0a1b2c3d4e5f", "file:/flink/ha/completedCheckpoint0a1b2c3d4e5f", ""},
		{"/flink/ha/default/completedCheckpoint1", "/flink/ha/default/completedCheckpoint1", ""},
		{"hdfs://nn:8020/flink/ha/submittedJobGraph1", "hdfs://nn:8020/flink/ha/submittedJobGraph1", ""},
		{"hdfs:///flink/ha/x", "hdfs:///flink/ha/x", "hdfs:/flink/ha/x"},
		{"file:/flink/ha dir/völlig €/x#1?q", "file:/flink/ha%20dir/völlig%20€/x%231%3Fq", ""},
		{"s3://bucket/ha//cluster/", "s3://bucket/ha/cluster", "s3://bucket/ha/cluster"},
	} {
		h, err := NewStateHandle(tc.path, 77)
		if err != nil {
			t.Fatalf("%q: %v", tc.path, err)
		}
		if h.URI != tc.uri {
			t.Errorf("NewStateHandle(%q).URI = %q, want %q", tc.path, h.URI, tc.uri)
		}
		data, err := EncodeStateHandle(h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeStateHandle(data)
		if err != nil {
			t.Fatal(err)
		}
		if *got != h {
			t.Errorf("round trip %+v, want %+v", got, h)
		}
		back := tc.back
		if back == "" {
			back = tc.path
		}
		if p, err := got.Path(); err != nil || p != back {
			t.Errorf("Path() of %q = %q, %v, want %q", tc.path, p, err, back)
		}
	}
}

func TestStateHandleRejects(t *testing.T) {
	good, err := EncodeStateHandle(StateHandle{URI: "file:/ha/completedCheckpoint1", Size: 9})
	if err != nil {
		t.Fatal(err)
	}
	var c classes
	encode := func(root *javaser.Object) []byte {
		b, err := javaser.Encode(javaser.NewStream(root))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	wrap := func(v javaser.Value) []byte {
		return encode(javaser.NewObject(c.retrievable()).With("wrappedStreamStateHandle", v))
	}
	inline := javaser.NewObject(c.byteStream()).With("handleName", "x").With("data", c.jdk.ByteArray([]byte{1}))
	badURI := javaser.NewObject(c.fileStateHandle()).With("stateSize", int64(1)).
		With("filePath", javaser.NewObject(c.path()).With("uri", c.jdk.URI("file:/a b")))
	noPath := javaser.NewObject(c.fileStateHandle()).With("stateSize", int64(1))
	otherSUID := *c.retrievable()
	otherSUID.SerialVersionUID = 2
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"header only", good[:4], "truncated"},
		{"trailing data", append(slices.Clone(good), 0x70), "2 top-level items"},
		{"wrapped null", wrap(nil), "wrappedStreamStateHandle is null"},
		{"wrapped inline", wrap(inline), "wraps a org.apache.flink.runtime.state.memory.ByteStreamStateHandle"},
		{"bad URI", wrap(badURI), "invalid URI"},
		{"no path", wrap(noPath), "filePath is null"},
		{"other class", encode(inline), "want org.apache.flink.runtime.state.RetrievableStreamStateHandle"},
		{"other suid", encode(javaser.NewObject(&otherSUID)), "serialVersionUID 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := DecodeStateHandle(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeStateHandle = %+v, %v; want an error containing %q", h, err, tc.want)
			}
		})
	}
	if _, err := EncodeStateHandle(StateHandle{URI: "file:/a b", Size: 1}); err == nil {
		t.Error("EncodeStateHandle accepted an invalid URI")
	}
	if _, err := EncodeStateHandle(StateHandle{URI: "file:/a", Size: -2}); err == nil {
		t.Error("EncodeStateHandle accepted size -2")
	}
}

func TestStateHandleTruncation(t *testing.T) {
	data, err := EncodeStateHandle(StateHandle{URI: "file:/flink/ha/completedCheckpoint%20x", Size: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		h, err := DecodeStateHandle(data[:i])
		if err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded: %+v", i, len(data), h)
		}
		if i >= 4 && !errors.Is(err, javaser.ErrTruncated) {
			t.Fatalf("prefix of %d bytes: %v, want ErrTruncated", i, err)
		}
	}
	// The URI claiming 65535 bytes fails at once.
	mod := slices.Clone(data)
	i := bytes.Index(mod, []byte("file:/flink/ha/completed"))
	mod[i-2], mod[i-1] = 0xFF, 0xFF
	if _, err := DecodeStateHandle(mod); !errors.Is(err, javaser.ErrTruncated) {
		t.Fatalf("long URI: %v, want ErrTruncated", err)
	}
}

// The leader information bytes of docs/flink-formats.md §1.3, by hand.
func TestLeaderInfoGolden(t *testing.T) {
	const addr = "pekko.tcp://flink@jm:6123/user/rpc/dispatcher_1"
	msb, lsb := int64(0x0123456789abcdef), int64(-0x0123456789abcdf0)
	want := cat(
		[]byte{0xAC, 0xED, 0x00, 0x05},
		0x77, byte(2+len(addr)), utf(addr), addr,
		0x73, 0x72, 0x00, 0x0E, "java.util.UUID", []byte{0xBC, 0x99, 0x03, 0xF7, 0x98, 0x6D, 0x85, 0x2F}, 0x02, 0x00, 0x02,
		0x4A, 0x00, 0x0C, "leastSigBits", 0x4A, 0x00, 0x0B, "mostSigBits", 0x78, 0x70,
		u64(lsb), u64(msb),
	)
	li := LeaderInfo{Address: addr, SessionID: "01234567-89ab-cdef-fedc-ba9876543210"}
	got, err := EncodeLeaderInfo(li)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded leader information differs from §1.3:\n got % x\nwant % x", got, want)
	}
	back, err := DecodeLeaderInfo(want)
	if err != nil || *back != li {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

func TestLeaderInfoRoundTrip(t *testing.T) {
	long := "http://" + strings.Repeat("hé", 2000) // several 1024-byte blocks
	for _, li := range []LeaderInfo{
		{Address: "http://jm:8081", SessionID: "00000000-0000-0000-0000-000000000000"},
		{Address: "", SessionID: "ffffffff-ffff-ffff-ffff-ffffffffffff"},
		{Address: "pekko://flink@jm ü\x00/user", SessionID: ""},
		{Address: long, SessionID: "0a0b0c0d-0e0f-1011-1213-141516171819"},
	} {
		data, err := EncodeLeaderInfo(li)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeLeaderInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		if *got != li {
			t.Errorf("round trip %+v, want %+v", got, li)
		}
	}
	if got, err := EncodeLeaderInfo(LeaderInfo{Address: "a", SessionID: "01234567-89AB-CDEF-FEDC-BA9876543210"}); err != nil {
		t.Error(err)
	} else if li, _ := DecodeLeaderInfo(got); li.SessionID != "01234567-89ab-cdef-fedc-ba9876543210" {
		t.Errorf("upper-case session id came back as %q", li.SessionID)
	}
}

func TestLeaderInfoRejects(t *testing.T) {
	if li, err := DecodeLeaderInfo(nil); li != nil || err != nil {
		t.Fatalf("empty data: %+v, %v; want nil, nil", li, err)
	}
	for _, bad := range []LeaderInfo{
		{Address: strings.Repeat("x", 65536)},
		{Address: "a", SessionID: "not-a-uuid"},
		{Address: "a", SessionID: "0123456789abcdef0123456789abcdef"},
	} {
		if _, err := EncodeLeaderInfo(bad); err == nil {
			t.Errorf("EncodeLeaderInfo accepted %.40q", bad)
		}
	}
	var jdk javaser.JDK
	stream := func(items ...javaser.Content) []byte {
		b, err := javaser.Encode(javaser.NewStream(items...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var w javaser.ContentWriter
	w.WriteUTF("addr")
	w.WriteObject(jdk.UUID(1, 2))
	good := w.Contents()
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"object first", stream(jdk.UUID(1, 2)), "address"},
		{"no session", stream(good[0]), "session id"},
		{"not a UUID", stream(good[0], jdk.URI("x")), "not a java.util.UUID"},
		{"string session", stream(good[0], javaser.NewString("x")), "want java.util.UUID"},
		{"data after", stream(append(slices.Clone(good), &javaser.BlockData{Data: []byte{1}})...), "data after the session id"},
		{"not a stream", []byte("addr"), "bad stream header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			li, err := DecodeLeaderInfo(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeLeaderInfo = %+v, %v; want an error containing %q", li, err, tc.want)
			}
		})
	}
	data := stream(good...)
	for i := 1; i < len(data); i++ {
		if li, err := DecodeLeaderInfo(data[:i]); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded: %+v", i, len(data), li)
		}
	}
}
