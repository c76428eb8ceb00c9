package javaser

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Helpers to write streams by hand in tests.
type (
	u16 uint16
	u32 uint32
	u64 uint64
)

// utf is a writeUTF string with raw (already encoded) bytes.
func utf(s string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...)
}

// raw concatenates parts: int and byte are one byte, string and []byte are
// copied, u16/u32/u64 are big-endian.
func raw(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b = append(b, byte(p))
		case byte:
			b = append(b, p)
		case rune:
			b = append(b, byte(p))
		case string:
			b = append(b, p...)
		case []byte:
			b = append(b, p...)
		case u16:
			b = binary.BigEndian.AppendUint16(b, uint16(p))
		case u32:
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		case u64:
			b = binary.BigEndian.AppendUint64(b, uint64(p))
		default:
			panic(fmt.Sprintf("raw: %T", p))
		}
	}
	return b
}

// stream is raw with the stream header in front.
func stream(parts ...any) []byte {
	return raw(append([]any{0xAC, 0xED, 0x00, 0x05}, parts...)...)
}

// classDesc is a new class descriptor without annotation, with the given
// superclass parts (e.g. tcNull) and fields (raw field descriptors).
func classDesc(name string, suid int64, flags byte, super any, fields ...[]byte) []byte {
	b := raw(tcClassDesc, utf(name), u64(suid), flags, u16(len(fields)))
	for _, f := range fields {
		b = append(b, f...)
	}
	return raw(b, tcEndBlockData, super)
}

func primFieldDesc(code byte, name string) []byte { return raw(code, utf(name)) }

func objFieldDesc(name, sig string) []byte {
	return raw(sig[0], utf(name), tcString, utf(sig))
}

// parseSeed reads a file of the Go fuzz corpus format holding one []byte.
func parseSeed(b []byte) ([]byte, error) {
	const head = "go test fuzz v1\n[]byte("
	s := string(b)
	if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, ")\n") {
		return nil, fmt.Errorf("not a single-[]byte fuzz corpus file")
	}
	v, err := strconv.Unquote(s[len(head) : len(s)-2])
	return []byte(v), err
}
