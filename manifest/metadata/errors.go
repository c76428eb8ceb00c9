package metadata

import (
	"errors"
	"fmt"
)

// Sentinels that callers branch on; a *ParseError wraps one of them.
var (
	// ErrTruncated means the file ended before the structure did.
	ErrTruncated = errors.New("truncated")
	// ErrBadMagic means the file does not start with the _metadata magic.
	ErrBadMagic = errors.New("not a Flink _metadata file (bad magic number)")
	// ErrUnsupportedVersion is returned for version 1 and unknown versions.
	ErrUnsupportedVersion = errors.New("unsupported metadata version")
	// ErrUnknownTag means a handle tag this parser does not know: corrupt
	// data, or a Flink newer than this parser.
	ErrUnknownTag = errors.New("unknown handle tag")
	// ErrInvalid means a value is impossible (negative count, bad magic of a
	// master state, bytes after the end, ...).
	ErrInvalid = errors.New("invalid value")
)

// ParseError says where and why a _metadata file could not be parsed. Its
// message holds no bytes of the file but a few in hex (the magic number
// or a tag): the file may be anything.
type ParseError struct {
	// Offset is the byte offset at which the problem was found.
	Offset int64
	// What names the element being read.
	What string
	// Err is one of the sentinels above, possibly wrapping a cause.
	Err error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("_metadata offset %d: %s: %v", e.Offset, e.What, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }
