package flinkha

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// DecodeStateHandle decodes the data of a checkpoint or job-graph znode: a
// RetrievableStreamStateHandle wrapping a FileStateHandle whose Path holds
// the HA file's URI. The stream must hold exactly that object.
func DecodeStateHandle(data []byte) (*StateHandle, error) {
	root, err := decodeRoot(data, classRetrievable, suidRetrievable)
	if err != nil {
		return nil, fmt.Errorf("flinkha: znode: %w", err)
	}
	wrapped, err := objectField(root, "wrappedStreamStateHandle")
	if err != nil {
		return nil, err
	}
	if wrapped == nil {
		return nil, errors.New("flinkha: znode: wrappedStreamStateHandle is null")
	}
	if !isFileHandle(wrapped) {
		return nil, fmt.Errorf("flinkha: znode wraps a %s, want a FileStateHandle", wrapped.ClassName())
	}
	u, size, err := fileHandleURI(wrapped)
	if err != nil {
		return nil, fmt.Errorf("flinkha: znode: %w", err)
	}
	if _, err := URIToPath(u); err != nil {
		return nil, fmt.Errorf("flinkha: znode: %w", err)
	}
	if size < -1 {
		return nil, fmt.Errorf("flinkha: znode: state handle size %d (want -1 or more)", size)
	}
	return &StateHandle{URI: u, Size: size}, nil
}

// EncodeStateHandle writes h as Flink's ZooKeeperStateHandleStore does.
func EncodeStateHandle(h StateHandle) ([]byte, error) {
	if _, err := URIToPath(h.URI); err != nil {
		return nil, err
	}
	if h.Size < -1 {
		return nil, fmt.Errorf("flinkha: state handle size %d", h.Size)
	}
	var c classes
	file := javaser.NewObject(c.fileStateHandle()).
		With("stateSize", h.Size).
		With("filePath", javaser.NewObject(c.path()).With("uri", c.jdk.URI(h.URI)))
	root := javaser.NewObject(c.retrievable()).With("wrappedStreamStateHandle", file)
	return javaser.Encode(javaser.NewStream(root))
}

// NewStateHandle returns the state handle Flink stores for an HA file at
// the Flink path p (for example "file:/flink/ha/completedCheckpoint0a1b2c")
// of size bytes.
func NewStateHandle(p string, size int64) (StateHandle, error) {
	u, err := PathToURI(p)
	if err != nil {
		return StateHandle{}, err
	}
	return StateHandle{URI: u, Size: size}, nil
}

// Path returns the HA file as a Flink path (Path.toString(): the URI
// unescaped), the form _metadata uses and the Resolver maps.
func (h StateHandle) Path() (string, error) { return URIToPath(h.URI) }

// DecodeLeaderInfo decodes a leader information znode: the leader address
// written with writeUTF, then the leader session id as a java.util.UUID.
// Empty data means that no leader is known: nil, nil. A null session id
// gives an empty SessionID.
func DecodeLeaderInfo(data []byte) (*LeaderInfo, error) {
	if len(data) == 0 {
		return nil, nil
	}
	s, err := javaser.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("flinkha: leader information: %w", err)
	}
	r := s.Reader()
	addr, err := r.ReadUTF()
	if err != nil {
		return nil, fmt.Errorf("flinkha: leader information: address: %w", err)
	}
	v, err := r.ReadObject()
	if err != nil {
		return nil, fmt.Errorf("flinkha: leader information: session id: %w", err)
	}
	if !r.Done() {
		return nil, errors.New("flinkha: leader information: data after the session id")
	}
	li := &LeaderInfo{Address: addr}
	if v == nil {
		return li, nil
	}
	o, ok := v.(*javaser.Object)
	if !ok {
		return nil, fmt.Errorf("flinkha: leader information: session id is a %T, want java.util.UUID", v)
	}
	msb, lsb, err := javaser.UUIDOf(o)
	if err != nil {
		return nil, fmt.Errorf("flinkha: leader information: %w", err)
	}
	li.SessionID = formatUUID(msb, lsb)
	return li, nil
}

// EncodeLeaderInfo writes li as Flink writes leader information. An empty
// SessionID is written as null.
func EncodeLeaderInfo(li LeaderInfo) ([]byte, error) {
	var w javaser.ContentWriter
	if err := w.WriteUTF(li.Address); err != nil {
		return nil, fmt.Errorf("flinkha: leader address: %w", err)
	}
	if li.SessionID == "" {
		w.WriteObject(nil)
	} else {
		msb, lsb, err := parseUUID(li.SessionID)
		if err != nil {
			return nil, err
		}
		var jdk javaser.JDK
		w.WriteObject(jdk.UUID(msb, lsb))
	}
	return javaser.Encode(javaser.NewStream(w.Contents()...))
}

// formatUUID is UUID.toString().
func formatUUID(msb, lsb int64) string {
	var b [16]byte
	putBE(b[:8], uint64(msb))
	putBE(b[8:], uint64(lsb))
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// parseUUID reads the canonical 8-4-4-4-12 form (either case).
func parseUUID(s string) (msb, lsb int64, err error) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return 0, 0, fmt.Errorf("flinkha: %q is not a UUID in 8-4-4-4-12 form", s)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return 0, 0, fmt.Errorf("flinkha: %q is not a UUID in 8-4-4-4-12 form", s)
	}
	return int64(getBE(b[:8])), int64(getBE(b[8:])), nil
}

func putBE(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getBE(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// decodeRoot decodes a stream that must hold exactly one object of class,
// with the serialVersionUID the JDK would insist on.
func decodeRoot(data []byte, class string, suid int64) (*javaser.Object, error) {
	s, err := javaser.Decode(data)
	if err != nil {
		return nil, err
	}
	if len(s.Contents) == 0 {
		return nil, &javaser.DecodeError{Offset: int64(len(data)), Msg: "truncated: stream ends after its header", Err: javaser.ErrTruncated}
	}
	root, err := s.Object()
	if err != nil {
		return nil, err
	}
	if root.ClassName() != class {
		return nil, fmt.Errorf("stream holds a %s, want %s", root.ClassName(), class)
	}
	if root.SerialVersionUID() != suid {
		return nil, fmt.Errorf("%s has serialVersionUID %d, want %d", class, root.SerialVersionUID(), suid)
	}
	return root, nil
}

// objectField returns an object field (nil for null); anything else in it
// is an error.
func objectField(o *javaser.Object, name string) (*javaser.Object, error) {
	v, err := javaser.FieldAs[javaser.Value](o, name)
	if err != nil {
		return nil, fmt.Errorf("flinkha: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	f, ok := v.(*javaser.Object)
	if !ok {
		return nil, fmt.Errorf("flinkha: field %s of %s is not an object", name, o.ClassName())
	}
	return f, nil
}

// isFileHandle reports a FileStateHandle-like object: one whose class or a
// superclass is named *FileStateHandle (FileStateHandle,
// RelativeFileStateHandle, SegmentFileStateHandle, ...).
func isFileHandle(o *javaser.Object) bool {
	for _, c := range o.Class.Hierarchy() {
		if strings.HasSuffix(c.Name, "FileStateHandle") {
			return true
		}
	}
	return false
}

// pathURI returns the URI string held by a Flink Path object.
func pathURI(p *javaser.Object, what string) (string, error) {
	if p == nil {
		return "", fmt.Errorf("%s is null", what)
	}
	if p.ClassName() != classPath {
		return "", fmt.Errorf("%s is a %s, want %s", what, p.ClassName(), classPath)
	}
	u, err := objectField(p, "uri")
	if err != nil {
		return "", err
	}
	if u == nil || u.ClassName() != "java.net.URI" {
		return "", fmt.Errorf("%s holds no java.net.URI", what)
	}
	s, err := u.StringField("string")
	if err != nil {
		return "", err
	}
	return s, nil
}

// fileHandleURI returns the URI string and stateSize of a file handle.
func fileHandleURI(o *javaser.Object) (string, int64, error) {
	size, err := javaser.FieldAs[int64](o, "stateSize")
	if err != nil {
		return "", 0, err
	}
	p, err := objectField(o, "filePath")
	if err != nil {
		return "", 0, err
	}
	u, err := pathURI(p, o.ClassName()+".filePath")
	if err != nil {
		return "", 0, err
	}
	return u, size, nil
}
