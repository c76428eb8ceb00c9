package javaser

import (
	"errors"
	"fmt"
)

// Categories of decoding failure. Every *DecodeError unwraps to exactly one
// of them, so callers can tell an incomplete file (ErrTruncated) from a
// corrupt one without parsing messages.
var (
	// ErrTruncated: the input ended inside the stream.
	ErrTruncated = errors.New("javaser: truncated stream")
	// ErrMalformed: the bytes break the grammar or its consistency rules.
	ErrMalformed = errors.New("javaser: malformed stream")
	// ErrTooDeep: nesting exceeded Decoder.MaxDepth.
	ErrTooDeep = errors.New("javaser: nesting too deep")
	// ErrUnsupported: valid Java serialization that cannot be parsed
	// without the writing class (TC_EXCEPTION, old Externalizable format).
	ErrUnsupported = errors.New("javaser: unsupported stream content")
	// ErrTooLarge: decoding would allocate more than the budget of the
	// stream's size (budget.go).
	ErrTooLarge = errors.New("javaser: stream costs too much to decode")
)

// DecodeError reports where and why decoding failed.
type DecodeError struct {
	Offset int64  // byte offset into the input where the failing item starts
	Msg    string // what went wrong, e.g. "truncated: need 8 bytes for long field stateSize"
	Err    error  // one of ErrTruncated, ErrMalformed, ErrTooDeep, ErrUnsupported, ErrTooLarge
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("javaser: %s at offset %d", e.Msg, e.Offset)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// EncodeError reports a graph that cannot be written, and where in it.
type EncodeError struct {
	Path string // location in the graph, e.g. "contents[0].filePath.uri"
	Msg  string
}

func (e *EncodeError) Error() string {
	if e.Path == "" {
		return "javaser: encode: " + e.Msg
	}
	return fmt.Sprintf("javaser: encode %s: %s", e.Path, e.Msg)
}

// UTFError reports malformed modified UTF-8.
type UTFError struct {
	Index  int // byte index of the bad sequence within the encoded string
	Reason string
}

func (e *UTFError) Error() string {
	return fmt.Sprintf("malformed modified UTF-8 at byte %d: %s", e.Index, e.Reason)
}
