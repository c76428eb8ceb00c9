package javaser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Reading the wrong kind of item fails like Java's OptionalDataException.
var (
	// ErrObjectNext: primitive data was read but an object comes next.
	ErrObjectNext = errors.New("javaser: next item is an object, not primitive data")
	// ErrDataNext: an object was read but primitive data comes next.
	ErrDataNext = errors.New("javaser: next item is primitive data, not an object")
)

// ContentReader reads contents (top-level or an annotation) like
// ObjectInputStream: consecutive blocks form one byte stream, objects come
// in between, and TC_RESET markers are skipped.
type ContentReader struct {
	items []Content
	next  int    // index of the next unread item
	block []byte // unread bytes of the current run of block data
}

// NewContentReader returns a reader over contents.
func NewContentReader(contents []Content) *ContentReader {
	return &ContentReader{items: contents}
}

// fill makes the current block non-empty if block data follows; it
// reports whether it did.
func (r *ContentReader) fill() bool {
	for len(r.block) == 0 && r.next < len(r.items) {
		switch it := r.items[r.next].(type) {
		case *BlockData:
			r.block = it.Data
		case Reset:
		default:
			return false
		}
		r.next++
	}
	return len(r.block) > 0
}

// ReadFull returns the next n bytes of primitive data; the slice may share
// memory with the contents. It fails with
// io.ErrUnexpectedEOF (or io.EOF if nothing is left) at the end of the
// contents and with ErrObjectNext before an object.
func (r *ContentReader) ReadFull(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("javaser: negative read length %d", n)
	}
	if r.fill() && len(r.block) >= n { // common case: no copy
		b := r.block[:n]
		r.block = r.block[n:]
		return b, nil
	}
	var out []byte
	for len(out) < n {
		if !r.fill() {
			if r.next < len(r.items) {
				return nil, ErrObjectNext
			}
			if len(out) == 0 {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		k := min(n-len(out), len(r.block))
		out = append(out, r.block[:k]...)
		r.block = r.block[k:]
	}
	return out, nil
}

// ReadBool reads a boolean (any non-zero byte is true, as in Java).
func (r *ContentReader) ReadBool() (bool, error) {
	b, err := r.ReadFull(1)
	if err != nil {
		return false, err
	}
	return b[0] != 0, nil
}

// ReadInt8 reads a Java byte.
func (r *ContentReader) ReadInt8() (int8, error) {
	b, err := r.ReadFull(1)
	if err != nil {
		return 0, err
	}
	return int8(b[0]), nil
}

// ReadInt16 reads a Java short.
func (r *ContentReader) ReadInt16() (int16, error) {
	v, err := r.ReadUint16()
	return int16(v), err
}

// ReadUint16 reads a Java char (or an unsigned short).
func (r *ContentReader) ReadUint16() (uint16, error) {
	b, err := r.ReadFull(2)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint16(b), nil
}

// ReadInt32 reads a Java int.
func (r *ContentReader) ReadInt32() (int32, error) {
	b, err := r.ReadFull(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// ReadInt64 reads a Java long.
func (r *ContentReader) ReadInt64() (int64, error) {
	b, err := r.ReadFull(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// ReadFloat32 reads a Java float.
func (r *ContentReader) ReadFloat32() (float32, error) {
	b, err := r.ReadFull(4)
	if err != nil {
		return 0, err
	}
	return math.Float32frombits(binary.BigEndian.Uint32(b)), nil
}

// ReadFloat64 reads a Java double.
func (r *ContentReader) ReadFloat64() (float64, error) {
	b, err := r.ReadFull(8)
	if err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
}

// ReadUTF reads a string written with DataOutput.writeUTF.
func (r *ContentReader) ReadUTF() (string, error) {
	n, err := r.ReadUint16()
	if err != nil {
		return "", err
	}
	b, err := r.ReadFull(int(n))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	return DecodeModifiedUTF8(b)
}

// ReadObject reads the next object (nil for null). It fails if primitive
// data comes first, and returns io.EOF at the end of the contents.
func (r *ContentReader) ReadObject() (Value, error) {
	if r.fill() {
		return nil, fmt.Errorf("%w (%d bytes or more)", ErrDataNext, len(r.block))
	}
	if r.next >= len(r.items) {
		return nil, io.EOF
	}
	v, _ := r.items[r.next].(Value) // fill stopped at a Value or nil
	r.next++
	return v, nil
}

// Done reports whether everything has been read.
func (r *ContentReader) Done() bool {
	return !r.fill() && r.next >= len(r.items)
}

// ContentWriter builds contents (top-level or an annotation) the way
// ObjectOutputStream writes them: primitive data is collected into blocks
// of at most 1024 bytes, and a block ends before each object.
type ContentWriter struct {
	items []Content
	buf   []byte // primitive data not yet in a block
}

// Write appends primitive data; it never fails.
func (w *ContentWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), maxBlockSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == maxBlockSize {
			w.Flush()
		}
	}
	return n, nil
}

// WriteBool writes a boolean.
func (w *ContentWriter) WriteBool(v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	w.Write([]byte{b})
}

// WriteInt8 writes a Java byte.
func (w *ContentWriter) WriteInt8(v int8) { w.Write([]byte{byte(v)}) }

// WriteInt16 writes a Java short.
func (w *ContentWriter) WriteInt16(v int16) { w.WriteUint16(uint16(v)) }

// WriteUint16 writes a Java char (or an unsigned short).
func (w *ContentWriter) WriteUint16(v uint16) { w.Write(binary.BigEndian.AppendUint16(nil, v)) }

// WriteInt32 writes a Java int.
func (w *ContentWriter) WriteInt32(v int32) { w.Write(binary.BigEndian.AppendUint32(nil, uint32(v))) }

// WriteInt64 writes a Java long.
func (w *ContentWriter) WriteInt64(v int64) { w.Write(binary.BigEndian.AppendUint64(nil, uint64(v))) }

// WriteFloat32 writes a Java float.
func (w *ContentWriter) WriteFloat32(v float32) { w.WriteInt32(int32(math.Float32bits(v))) }

// WriteFloat64 writes a Java double.
func (w *ContentWriter) WriteFloat64(v float64) { w.WriteInt64(int64(math.Float64bits(v))) }

// WriteUTF writes s like DataOutput.writeUTF; s must encode to at most
// 65535 bytes.
func (w *ContentWriter) WriteUTF(s string) error {
	n := ModifiedUTF8Len(s)
	if n > math.MaxUint16 {
		return fmt.Errorf("javaser: writeUTF of a string encoding to %d bytes (max 65535)", n)
	}
	w.Write(AppendModifiedUTF8(binary.BigEndian.AppendUint16(make([]byte, 0, 2+n), uint16(n)), s))
	return nil
}

// WriteObject ends the current block and appends v (nil for null).
func (w *ContentWriter) WriteObject(v Value) {
	w.Flush()
	w.items = append(w.items, v)
}

// Flush ends the current block, like ObjectOutputStream.flush.
func (w *ContentWriter) Flush() {
	if len(w.buf) > 0 {
		w.items = append(w.items, &BlockData{Data: w.buf})
		w.buf = nil
	}
}

// Contents flushes and returns everything written so far.
func (w *ContentWriter) Contents() []Content {
	w.Flush()
	return w.items
}
