package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"github.com/ckptfs/ckptfs/manifest/javaser"
)

// Options tune Decode.
type Options struct {
	// KeepInline keeps the bytes of inline handles and master states, so
	// that Encode can write the file again. Without it they are skipped and
	// only their lengths are recorded.
	KeepInline bool
	// ChannelLayout forces the version-3 channel state layout.
	ChannelLayout ChannelLayout
	// MaxDepth bounds handle nesting; 0 means DefaultMaxDepth.
	MaxDepth int
}

// DefaultMaxDepth bounds the nesting of handles. Flink nests at most a few
// levels (changelog -> incremental -> stream); hostile input may try more.
const DefaultMaxDepth = 32

// maxPropertiesSize bounds the trailing CheckpointProperties stream, which
// Flink writes in well under a kilobyte.
const maxPropertiesSize = 1 << 20

const checkpointPropertiesClass = "org.apache.flink.runtime.checkpoint.CheckpointProperties"

// DecodeFile parses the _metadata file at path, the size it has when
// opened. Anything but a regular file there is refused, without waiting
// for a FIFO's writer or reading a device that has no end.
func DecodeFile(path string, opts Options) (*Metadata, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: path, Err: errors.New("not a regular file")}
	}
	return Decode(f, fi.Size(), opts)
}

// Decode parses a complete _metadata image of size bytes from r. It reads
// sequentially, checks every length against the bytes that remain before
// allocating, and requires the structure to end exactly at size.
func Decode(r io.ReaderAt, size int64, opts Options) (*Metadata, error) {
	m, _, err := run(r, nil, size, opts, nil)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeReferences decodes a complete _metadata image of size bytes from
// r with every check Decode makes, and fails exactly where Decode fails,
// but keeps nothing: it reports each reference to v as it reads it, in
// the order EachReference reports them, and returns the header and the
// inline totals. No handle, list or string is kept. Options.KeepInline
// is ignored.
//
// The references of a file that then fails to parse have been reported
// too: a caller keeps them only when DecodeReferences returns no error.
func DecodeReferences(r io.ReaderAt, size int64, opts Options, v Visitor) (Summary, error) {
	if v == nil {
		return Summary{}, errors.New("metadata: DecodeReferences needs a Visitor")
	}
	_, sum, err := run(r, nil, size, opts, v)
	return sum, err
}

// DecodeReferencesBytes is DecodeReferences of a _metadata image held in
// memory, such as a mapped file: it decodes data where it lies instead of
// copying it into a read buffer, and only reads it. The paths it reports
// may alias data.
func DecodeReferencesBytes(data []byte, opts Options, v Visitor) (Summary, error) {
	if v == nil {
		return Summary{}, errors.New("metadata: DecodeReferencesBytes needs a Visitor")
	}
	if data == nil {
		data = []byte{}
	}
	_, sum, err := run(nil, data, int64(len(data)), opts, v)
	return sum, err
}

// run decodes size bytes, read from r or, when data is not nil, held in
// data: it keeps what it decodes (visit nil) or reports the references
// to visit. It tries Flink 1.11's channel layout when the 1.12 layout
// fails on a version-3 file with channel state.
func run(r io.ReaderAt, data []byte, size int64, opts Options, visit Visitor) (*Metadata, Summary, error) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if visit != nil {
		opts.KeepInline = false
	}
	layout := opts.ChannelLayout
	if layout == ChannelLayoutAuto {
		layout = ChannelLayout112
	}
	m, d, err := decodeWithLayout(r, data, size, opts, layout, visit)
	if err != nil && d.sawChannels && opts.ChannelLayout == ChannelLayoutAuto && m != nil && m.Version == 3 {
		// Flink 1.11 wrote version 3 without the subtask index in channel
		// entries; the header does not say which, so try that layout too.
		if visit != nil {
			visit.Restart()
		}
		if m2, d2, err2 := decodeWithLayout(r, data, size, opts, ChannelLayout111, visit); err2 == nil {
			return m2, d2.summary(m2), nil
		}
	}
	if err != nil {
		return m, Summary{}, err
	}
	return m, d.summary(m), nil
}

func decodeWithLayout(r io.ReaderAt, data []byte, size int64, opts Options, layout ChannelLayout, visit Visitor) (*Metadata, *decoder, error) {
	d := &decoder{
		size:   size,
		opts:   opts,
		layout: layout,
		visit:  visit,
	}
	if data != nil {
		// Every byte is buffered: fill finds none missing or fails in
		// need, so it never writes to data.
		d.buf = data[:size:size]
	} else {
		d.src = io.NewSectionReader(r, 0, size)
		d.buf = make([]byte, 0, min(size, readBufferSize))
	}
	m, err := d.metadata()
	return m, d, err
}

func (d *decoder) summary(m *Metadata) Summary {
	return Summary{Version: m.Version, CheckpointID: m.CheckpointID, InlineCount: d.inlineCount, InlineBytes: d.inlineBytes}
}

// readBufferSize holds the longest writeUTF string (65535 bytes) with room
// to spare, so strings can be decoded straight from the buffer.
const readBufferSize = 128 << 10

// decoder reads sequentially through its own buffer: the hot paths (ints,
// short strings) are slice operations, not calls through io.Reader.
type decoder struct {
	src  io.Reader
	buf  []byte // buf[pos:] is unread; buf[0] is at file offset base
	pos  int
	base int64
	size int64

	opts        Options
	layout      ChannelLayout
	depth       int
	sawChannels bool
	version     int32

	arena   []byte         // backing store for decoded strings
	streams []StreamHandle // slab for stream handles

	// visit is set by DecodeReferences. The decoder then checks
	// everything Decode checks but keeps nothing: strings are validated
	// and dropped, lists of handles and offsets are not collected, and
	// each stream handle is decoded into a scratch value per nesting
	// depth that the next handle at that depth overwrites. Paths go to
	// ref, which is reported.
	visit       Visitor
	ref         RawReference
	pathBuf     []byte         // holds ref.Path when it cannot stay in buf
	scratch     []StreamHandle // by depth
	changelog   int            // > 0 inside changelog handles
	inlineCount int
	inlineBytes int64
}

// visiting reports a decode for DecodeReferences, which keeps nothing.
func (d *decoder) visiting() bool { return d.visit != nil }

func (d *decoder) off() int64 { return d.base + int64(d.pos) }

func (d *decoder) fail(what string, err error) error {
	return &ParseError{Offset: d.off(), What: what, Err: err}
}

func (d *decoder) remaining() int64 { return d.size - d.off() }

// need fails unless n more bytes exist in the file.
func (d *decoder) need(n int64, what string) error {
	if n < 0 || d.remaining() < n {
		return d.fail(what, fmt.Errorf("%w: need %d bytes, %d left", ErrTruncated, n, d.remaining()))
	}
	return nil
}

// fill makes at least n (at most cap(buf)) unread bytes available.
func (d *decoder) fill(n int, what string) error {
	if len(d.buf)-d.pos >= n {
		return nil
	}
	if err := d.need(int64(n), what); err != nil {
		return err
	}
	unread := copy(d.buf[:cap(d.buf)], d.buf[d.pos:])
	d.base += int64(d.pos)
	d.pos = 0
	d.buf = d.buf[:unread]
	for len(d.buf) < n {
		k, err := d.src.Read(d.buf[len(d.buf):cap(d.buf)])
		d.buf = d.buf[:len(d.buf)+k]
		if err != nil && len(d.buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return d.fail(what, fmt.Errorf("%w: %v", ErrTruncated, err))
		}
	}
	return nil
}

// The readers below test whether the bytes are buffered before calling
// fill: most reads then cost a comparison, not a call.

func (d *decoder) u8(what string) (byte, error) {
	if d.pos >= len(d.buf) {
		if err := d.fill(1, what); err != nil {
			return 0, err
		}
	}
	b := d.buf[d.pos]
	d.pos++
	return b, nil
}

func (d *decoder) i32(what string) (int32, error) {
	if len(d.buf)-d.pos < 4 {
		if err := d.fill(4, what); err != nil {
			return 0, err
		}
	}
	v := int32(binary.BigEndian.Uint32(d.buf[d.pos:]))
	d.pos += 4
	return v, nil
}

func (d *decoder) i64(what string) (int64, error) {
	if len(d.buf)-d.pos < 8 {
		if err := d.fill(8, what); err != nil {
			return 0, err
		}
	}
	v := int64(binary.BigEndian.Uint64(d.buf[d.pos:]))
	d.pos += 8
	return v, nil
}

// rawUTF reads a DataOutput.writeUTF string and returns its modified UTF-8
// bytes, which alias the buffer until the next read.
func (d *decoder) rawUTF(what string) ([]byte, error) {
	if len(d.buf)-d.pos < 2 {
		if err := d.fill(2, what); err != nil {
			return nil, err
		}
	}
	n := int(binary.BigEndian.Uint16(d.buf[d.pos:]))
	if len(d.buf)-d.pos < 2+n {
		if err := d.fill(2+n, what); err != nil {
			return nil, err
		}
	}
	start := d.pos + 2
	d.pos = start + n
	return d.buf[start:d.pos:d.pos], nil
}

// utf reads a DataOutput.writeUTF string. Visiting, it checks the string
// and returns "".
func (d *decoder) utf(what string) (string, error) {
	b, err := d.rawUTF(what)
	if err != nil {
		return "", err
	}
	if isPlainASCII(b) {
		if d.visiting() {
			return "", nil
		}
		return d.ascii(b), nil
	}
	s, err := javaser.DecodeModifiedUTF8(b)
	if err != nil {
		return "", d.badUTF(b, what, err)
	}
	if d.visiting() {
		return "", nil
	}
	return s, nil
}

// path reads a writeUTF string that names a file or directory. Visiting,
// it puts the path into the reference to report and returns "".
func (d *decoder) path(what string) (string, error) {
	if !d.visiting() {
		return d.utf(what)
	}
	b, err := d.rawUTF(what)
	if err != nil {
		return "", err
	}
	if isPlainASCII(b) {
		d.ref.Path = b // valid until the buffer is next filled
		return "", nil
	}
	s, err := javaser.DecodeModifiedUTF8(b)
	if err != nil {
		return "", d.badUTF(b, what, err)
	}
	d.pathBuf = append(d.pathBuf[:0], s...)
	d.ref.Path = d.pathBuf
	return "", nil
}

// keepPath makes the path just read survive further reads: path leaves it
// in the read buffer, which the next fill overwrites.
func (d *decoder) keepPath() {
	d.pathBuf = append(d.pathBuf[:0], d.ref.Path...)
	d.ref.Path = d.pathBuf
}

// badUTF reports the string b, just read, as not modified UTF-8.
func (d *decoder) badUTF(b []byte, what string, err error) error {
	return &ParseError{Offset: d.off() - int64(len(b)), What: what, Err: fmt.Errorf("%w: %v", ErrInvalid, err)}
}

// report hands the reference in d.ref (its path already read) to the
// visitor.
func (d *decoder) report(tag byte, size, offset int64) {
	changelog := d.changelog > 0
	d.ref.Tag, d.ref.Size, d.ref.Offset, d.ref.Changelog = tag, FileSize(size, changelog), offset, changelog
	d.visit.Reference(&d.ref)
}

// arenaChunk is the allocation unit of the string arena.
const arenaChunk = 32 << 10

// ascii turns plain ASCII bytes into a string. Nearly all paths and ids
// are ASCII; they are copied into an append-only arena, so a file with many
// handles costs a few large allocations rather than one per string.
func (d *decoder) ascii(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > arenaChunk/8 {
		return string(b)
	}
	if cap(d.arena)-len(d.arena) < len(b) {
		// Grow chunk sizes so that small files stay cheap.
		size := min(max(2*cap(d.arena), 1024, len(b)), arenaChunk)
		d.arena = make([]byte, 0, size)
	}
	start := len(d.arena)
	d.arena = append(d.arena, b...)
	// The arena is append-only: bytes once written never change.
	return unsafe.String(&d.arena[start], len(b))
}

// isPlainASCII reports whether b holds no byte with its high bit set and no
// zero byte: modified UTF-8 that is its own decoding.
func isPlainASCII(b []byte) bool {
	if len(b) < 8 {
		for _, c := range b {
			if c == 0 || c >= 0x80 {
				return false
			}
		}
		return true
	}
	// Accumulate over 8-byte words, two at a time, and test once:
	// (v-0x01..)&^v has the high bit of some byte set when v has a zero
	// byte. The last word may overlap the others.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	v := binary.LittleEndian.Uint64(b[len(b)-8:])
	acc := v | (v-ones)&^v
	for ; len(b) >= 16; b = b[16:] {
		v, w := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		acc |= v | (v-ones)&^v | w | (w-ones)&^w
	}
	if len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		acc |= v | (v-ones)&^v
	}
	return acc&highs == 0
}

// newStream returns a zeroed handle: from a slab, or visiting, the scratch
// handle of the current depth.
func (d *decoder) newStream() *StreamHandle {
	if d.visiting() {
		for len(d.scratch) <= d.depth {
			d.scratch = append(d.scratch, StreamHandle{})
		}
		h := &d.scratch[d.depth]
		*h = StreamHandle{}
		return h
	}
	if len(d.streams) == cap(d.streams) {
		d.streams = make([]StreamHandle, 0, min(max(2*cap(d.streams), 4), 64))
	}
	d.streams = d.streams[:len(d.streams)+1]
	return &d.streams[len(d.streams)-1]
}

// skip consumes n bytes without keeping them.
func (d *decoder) skip(n int64, what string) error {
	if err := d.need(n, what); err != nil {
		return err
	}
	for n > 0 {
		if d.pos == len(d.buf) {
			if err := d.fill(1, what); err != nil {
				return err
			}
		}
		k := int64(len(d.buf) - d.pos)
		if k > n {
			k = n
		}
		d.pos += int(k)
		n -= k
	}
	return nil
}

// read copies len(dst) bytes.
func (d *decoder) read(dst []byte, what string) error {
	if err := d.need(int64(len(dst)), what); err != nil {
		return err
	}
	for len(dst) > 0 {
		if d.pos == len(d.buf) {
			if err := d.fill(1, what); err != nil {
				return err
			}
		}
		k := copy(dst, d.buf[d.pos:])
		d.pos += k
		dst = dst[k:]
	}
	return nil
}

// blob reads n bytes, keeping them only when inline data is kept.
func (d *decoder) blob(n int32, what string) ([]byte, error) {
	if n < 0 {
		return nil, d.fail(what, fmt.Errorf("%w: negative length %d", ErrInvalid, n))
	}
	if !d.opts.KeepInline {
		return nil, d.skip(int64(n), what)
	}
	return d.bytes(int64(n), what)
}

// maxPrealloc bounds the elements (or bytes, times 64) allocated before
// they are parsed. A count or length is only a claim, which a sparse or
// hostile file of gigabytes backs with zeros or not at all: lists and
// byte strings grow with what the parse reaches.
const maxPrealloc = 1024

// bytes reads n bytes into a new slice that grows as they are read.
func (d *decoder) bytes(n int64, what string) ([]byte, error) {
	if err := d.need(n, what); err != nil {
		return nil, err
	}
	b := make([]byte, 0, min(n, 64*maxPrealloc))
	for int64(len(b)) < n {
		if d.pos == len(d.buf) {
			if err := d.fill(1, what); err != nil {
				return nil, err
			}
		}
		k := int(min(n-int64(len(b)), int64(len(d.buf)-d.pos)))
		b = append(b, d.buf[d.pos:d.pos+k]...)
		d.pos += k
	}
	return b, nil
}

// each decodes n elements with one into a list that grows with the
// elements parsed (maxPrealloc). Visiting keeps nothing: every element
// is decoded into one scratch value, zeroed first, and the list is nil,
// as it is for n == 0.
func each[T any](d *decoder, n int, one func(*T) error) ([]T, error) {
	if n == 0 {
		return nil, nil
	}
	var zero T
	if d.visiting() {
		scratch := new(T)
		for range n {
			*scratch = zero
			if err := one(scratch); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	out := make([]T, 0, min(n, maxPrealloc))
	for range n {
		out = append(out, zero)
		if err := one(&out[len(out)-1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// count reads an element count and checks that count elements of at least
// minSize bytes each fit in what remains.
func (d *decoder) count(what string, minSize int64) (int, error) {
	n, err := d.i32(what)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, d.fail(what, fmt.Errorf("%w: negative count %d", ErrInvalid, n))
	}
	if int64(n)*minSize > d.remaining() {
		return 0, d.fail(what, fmt.Errorf("%w: %d elements cannot fit in %d bytes", ErrTruncated, n, d.remaining()))
	}
	return int(n), nil
}

func (d *decoder) longs(n int, what string) ([]int64, error) {
	if err := d.need(int64(n)*8, what); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if d.visiting() {
		return nil, d.skip(int64(n)*8, what)
	}
	out := make([]int64, 0, min(n, maxPrealloc))
	for range n {
		v, err := d.i64(what)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) enter(what string) error {
	d.depth++
	if d.depth > d.opts.MaxDepth {
		return d.fail(what, fmt.Errorf("%w: handles nested deeper than %d", ErrInvalid, d.opts.MaxDepth))
	}
	return nil
}

func (d *decoder) leave() { d.depth-- }

func (d *decoder) metadata() (*Metadata, error) {
	magic, err := d.i32("magic number")
	if err != nil {
		return nil, err
	}
	if magic != Magic {
		return nil, &ParseError{Offset: 0, What: "magic number", Err: fmt.Errorf("%w: %#08x", ErrBadMagic, uint32(magic))}
	}
	version, err := d.i32("version")
	if err != nil {
		return nil, err
	}
	m := &Metadata{Version: version}
	d.version = version
	switch {
	case version == 0:
		return m, d.fail("version", fmt.Errorf("%w 0 (Flink 1.1 savepoints; restore them with Flink 1.2 or 1.3 and take a new savepoint)", ErrUnsupportedVersion))
	case version == 1:
		return m, d.fail("version", fmt.Errorf("%w 1 (Flink 1.1/1.2 savepoints; restore them with Flink 1.3-1.10 and take a new savepoint)", ErrUnsupportedVersion))
	case version < 0 || version > 7:
		return m, d.fail("version", fmt.Errorf("%w %d (written by a newer Flink, or not a _metadata file)", ErrUnsupportedVersion, version))
	}
	if version >= 3 && version <= 5 {
		m.ChannelLayout = d.layout
	}
	if m.CheckpointID, err = d.i64("checkpoint id"); err != nil {
		return m, err
	}
	if m.CheckpointID < 0 {
		return m, d.fail("checkpoint id", fmt.Errorf("%w: negative checkpoint id %d", ErrInvalid, m.CheckpointID))
	}
	n, err := d.count("master state count", 8)
	if err != nil {
		return m, err
	}
	if m.MasterStates, err = each(d, n, d.masterState); err != nil {
		return m, err
	}
	// The smallest operator is 29 bytes: ids, parallelisms, a null
	// coordinator and a zero subtask count (version 3).
	if n, err = d.count("operator count", 29); err != nil {
		return m, err
	}
	if m.Operators, err = each(d, n, d.operator); err != nil {
		return m, err
	}
	if version >= 4 {
		if err := d.properties(m); err != nil {
			return m, err
		}
	}
	if d.remaining() != 0 {
		return m, d.fail("end of file", fmt.Errorf("%w: %d bytes after the last element", ErrInvalid, d.remaining()))
	}
	return m, nil
}

func (d *decoder) masterState(ms *MasterState) error {
	magic, err := d.i32("master state magic")
	if err != nil {
		return err
	}
	if magic != masterStateMagic {
		return d.fail("master state magic", fmt.Errorf("%w: %#08x", ErrInvalid, uint32(magic)))
	}
	length, err := d.i32("master state length")
	if err != nil {
		return err
	}
	if length <= 0 {
		return d.fail("master state length", fmt.Errorf("%w: %d", ErrInvalid, length))
	}
	if err := d.need(int64(length), "master state"); err != nil {
		return err
	}
	end := d.off() + int64(length)
	if ms.Version, err = d.i32("master state version"); err != nil {
		return err
	}
	if ms.Name, err = d.utf("master state name"); err != nil {
		return err
	}
	dataLen, err := d.i32("master state data length")
	if err != nil {
		return err
	}
	if d.off()+int64(dataLen) > end || dataLen < 0 {
		return d.fail("master state data length", fmt.Errorf("%w: %d bytes do not fit the payload", ErrInvalid, dataLen))
	}
	if ms.Data, err = d.blob(dataLen, "master state data"); err != nil {
		return err
	}
	if ms.Data == nil {
		// Master state is tiny and opaque; keep it so Encode can use it.
		ms.Data = []byte{}
	}
	if d.off() != end {
		return d.fail("master state", fmt.Errorf("%w: %d trailing bytes in the payload", ErrInvalid, end-d.off()))
	}
	return nil
}

func (d *decoder) operator(op *Operator) error {
	var err error
	if d.version >= 5 {
		if op.Name, err = d.utf("operator name"); err != nil {
			return err
		}
		if op.UID, err = d.utf("operator uid"); err != nil {
			return err
		}
	}
	if op.IDLower, err = d.i64("operator id"); err != nil {
		return err
	}
	if op.IDUpper, err = d.i64("operator id"); err != nil {
		return err
	}
	if op.Parallelism, err = d.i32("parallelism"); err != nil {
		return err
	}
	if op.MaxParallelism, err = d.i32("max parallelism"); err != nil {
		return err
	}
	if d.version == 2 {
		if op.ChainLength, err = d.i32("chain length"); err != nil {
			return err
		}
	} else {
		if op.Coordinator, err = d.streamHandle("coordinator state"); err != nil {
			return err
		}
		if op.Coordinator != nil && op.Coordinator.Tag != TagByteStream {
			return d.fail("coordinator state", fmt.Errorf("%w: coordinator state must be inline, found tag %d", ErrInvalid, op.Coordinator.Tag))
		}
	}
	n, err := d.i32("subtask count")
	if err != nil {
		return err
	}
	if n < 0 {
		if d.version >= 3 && n == -1 && op.Coordinator == nil {
			op.FullyFinished = true
			return nil
		}
		return d.fail("subtask count", fmt.Errorf("%w: %d", ErrInvalid, n))
	}
	if int64(n)*4 > d.remaining() {
		return d.fail("subtask count", fmt.Errorf("%w: %d subtasks cannot fit in %d bytes", ErrTruncated, n, d.remaining()))
	}
	op.Subtasks, err = each(d, int(n), func(st *Subtask) error {
		idx, err := d.i32("subtask index")
		if err != nil {
			return err
		}
		if idx < 0 {
			if d.version < 3 {
				return d.fail("subtask index", fmt.Errorf("%w: negative index %d", ErrInvalid, idx))
			}
			st.Index, st.Finished = -idx-1, true
			return nil
		}
		st.Index = idx
		return d.subtask(st)
	})
	return err
}

func (d *decoder) subtask(st *Subtask) error {
	var err error
	if d.version == 2 {
		if st.Duration, err = d.i64("subtask duration"); err != nil {
			return err
		}
		if st.LegacyFlag, err = d.i32("legacy state flag"); err != nil {
			return err
		}
		if st.LegacyFlag != 0 {
			if st.Legacy, err = d.streamHandle("legacy operator state"); err != nil {
				return err
			}
		}
	}
	if st.ManagedOperatorFlag, err = d.i32("managed operator state flag"); err != nil {
		return err
	}
	if st.ManagedOperatorFlag != 0 {
		if st.ManagedOperator, err = d.operatorHandle("managed operator state"); err != nil {
			return err
		}
	}
	if st.RawOperatorFlag, err = d.i32("raw operator state flag"); err != nil {
		return err
	}
	if st.RawOperatorFlag != 0 {
		if st.RawOperator, err = d.operatorHandle("raw operator state"); err != nil {
			return err
		}
	}
	if st.ManagedKeyed, err = d.keyedHandle("managed keyed state"); err != nil {
		return err
	}
	if st.RawKeyed, err = d.keyedHandle("raw keyed state"); err != nil {
		return err
	}
	if d.version >= 3 {
		if st.InputChannels, err = d.channels("input channel state", true); err != nil {
			return err
		}
		if st.OutputChannels, err = d.channels("output channel state", false); err != nil {
			return err
		}
	}
	if d.version >= 7 {
		if st.RefCheckpointMarker, err = d.u8("reference checkpoint marker"); err != nil {
			return err
		}
		if st.RefCheckpointMarker == 1 {
			if st.RefCheckpointID, err = d.i64("reference checkpoint id"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *decoder) channels(what string, input bool) ([]ChannelHandle, error) {
	n, err := d.count("count", 9)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	d.sawChannels = true
	if d.visiting() {
		var c ChannelHandle
		for range n {
			if err := d.channel(&c, what, input); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return each(d, n, func(c *ChannelHandle) error { return d.channel(c, what, input) })
}

func (d *decoder) channel(c *ChannelHandle, what string, input bool) error {
	var err error
	if d.version >= 6 {
		if c.Type, err = d.u8("type"); err != nil {
			return err
		}
		plain, merged := ChannelOutput, ChannelMergedOutput
		if input {
			plain, merged = ChannelInput, ChannelMergedInput
		}
		switch c.Type {
		case plain:
		case merged:
			if c.SubtaskIndex, err = d.i32("subtask index"); err != nil {
				return err
			}
			if c.StateSize, err = d.i64("state size"); err != nil {
				return err
			}
			if c.Delegate, err = d.streamHandle(what); err != nil {
				return err
			}
			n, err := d.i32("offsets length")
			if err != nil {
				return err
			}
			if c.MergedOffsets, err = d.keptBlob(n, "offsets"); err != nil {
				return err
			}
			return nil
		default:
			return d.fail("type", fmt.Errorf("%w: channel handle type %d", ErrUnknownTag, c.Type))
		}
	}
	if d.layout != ChannelLayout111 {
		if c.SubtaskIndex, err = d.i32("subtask index"); err != nil {
			return err
		}
	}
	if c.A, err = d.i32("index"); err != nil {
		return err
	}
	if c.B, err = d.i32("index"); err != nil {
		return err
	}
	n, err := d.count("offset count", 8)
	if err != nil {
		return err
	}
	if c.Offsets, err = d.longs(n, "offsets"); err != nil {
		return err
	}
	if c.StateSize, err = d.i64("state size"); err != nil {
		return err
	}
	c.Delegate, err = d.streamHandle(what)
	return err
}

// keptBlob reads bytes that are always kept (they are structure, not state).
func (d *decoder) keptBlob(n int32, what string) ([]byte, error) {
	if n < 0 {
		return nil, d.fail(what, fmt.Errorf("%w: negative length %d", ErrInvalid, n))
	}
	if d.visiting() {
		return nil, d.skip(int64(n), what)
	}
	return d.bytes(int64(n), what)
}

func (d *decoder) operatorHandle(what string) (*OperatorHandle, error) {
	tag, err := d.u8(what)
	if err != nil {
		return nil, err
	}
	switch tag {
	case TagNull:
		// Flink writes a null handle after a non-zero flag only if it
		// was corrupted, but reads it; keep it as an empty handle so the
		// bytes round-trip.
		return &OperatorHandle{Tag: TagNull}, nil
	case TagPartitionableOperator, TagFileMergingOperator:
	default:
		return nil, d.fail("tag", fmt.Errorf("%w: operator handle tag %d", ErrUnknownTag, tag))
	}
	h := &OperatorHandle{Tag: tag}
	n, err := d.count("state count", 7)
	if err != nil {
		return nil, err
	}
	h.States, err = each(d, n, func(s *OperatorStateMeta) error {
		var err error
		if s.Name, err = d.utf("state name"); err != nil {
			return err
		}
		if s.Mode, err = d.u8("distribution mode"); err != nil {
			return err
		}
		if s.Mode > 2 {
			return d.fail("distribution mode", fmt.Errorf("%w: mode %d", ErrInvalid, s.Mode))
		}
		k, err := d.count("offset count", 8)
		if err != nil {
			return err
		}
		s.Offsets, err = d.longs(k, "offsets")
		return err
	})
	if err != nil {
		return nil, err
	}
	if tag == TagFileMergingOperator {
		if h.TaskOwnedDir, err = d.path("task-owned directory"); err != nil {
			return nil, err
		}
		if d.visiting() {
			d.report(TagFileMergingOperator, -1, 0)
		}
		if h.SharedDir, err = d.path("shared directory"); err != nil {
			return nil, err
		}
		if d.visiting() {
			d.report(TagFileMergingOperator, -1, 0)
		}
		if h.EmptyFlag, err = d.u8("empty flag"); err != nil {
			return nil, err
		}
	}
	if h.Delegate, err = d.streamHandle(what); err != nil {
		return nil, err
	}
	if tag == TagFileMergingOperator && (h.Delegate == nil || (h.Delegate.Tag != TagSegmentFile && h.Delegate.Tag != TagEmptySegmentFile)) {
		return nil, d.fail(what, fmt.Errorf("%w: a file-merging operator handle must delegate to a segment", ErrInvalid))
	}
	return h, nil
}

func (d *decoder) keyedHandle(what string) (*KeyedHandle, error) {
	tag, err := d.u8(what)
	if err != nil {
		return nil, err
	}
	if tag == TagNull {
		return nil, nil
	}
	if err := d.enter(what); err != nil {
		return nil, err
	}
	h, err := d.keyedHandleBody(tag, what)
	d.leave()
	return h, err
}

func (d *decoder) keyedHandleBody(tag byte, what string) (*KeyedHandle, error) {
	var err error
	h := &KeyedHandle{Tag: tag}
	switch tag {
	case TagKeyGroups, TagKeyGroupsV2, TagSavepointKeyGroups:
		if err := d.keyGroupRange(h, what); err != nil {
			return nil, err
		}
		if h.Offsets, err = d.longs(int(h.KeyGroupCount), "key-group offsets"); err != nil {
			return nil, err
		}
		if h.Delegate, err = d.streamHandle(what); err != nil {
			return nil, err
		}
		if tag == TagKeyGroupsV2 {
			if h.StateHandleID, err = d.utf("state handle id"); err != nil {
				return nil, err
			}
		}
	case TagIncrementalKeyGroups, TagIncrementalKeyGroupsV2:
		if h.CheckpointID, err = d.i64("checkpoint id"); err != nil {
			return nil, err
		}
		if h.BackendID, err = d.utf("backend id"); err != nil {
			return nil, err
		}
		if err := d.keyGroupRange(h, what); err != nil {
			return nil, err
		}
		if tag == TagIncrementalKeyGroupsV2 {
			if h.CheckpointedSize, err = d.i64("checkpointed size"); err != nil {
				return nil, err
			}
		}
		if h.Meta, err = d.streamHandle("meta"); err != nil {
			return nil, err
		}
		if h.Shared, err = d.namedHandles("shared"); err != nil {
			return nil, err
		}
		if h.Private, err = d.namedHandles("private"); err != nil {
			return nil, err
		}
		if tag == TagIncrementalKeyGroupsV2 {
			if h.StateHandleID, err = d.utf("state handle id"); err != nil {
				return nil, err
			}
		}
	case TagChangelog, TagChangelogV2:
		if err := d.keyGroupRange(h, what); err != nil {
			return nil, err
		}
		if h.CheckpointedSize, err = d.i64("checkpointed size"); err != nil {
			return nil, err
		}
		if h.Materialized, err = d.keyedList("materialized"); err != nil {
			return nil, err
		}
		d.changelog++
		h.NonMaterialized, err = d.keyedList("non-materialized")
		d.changelog--
		if err != nil {
			return nil, err
		}
		if h.MaterializationID, err = d.i64("materialization id"); err != nil {
			return nil, err
		}
		if tag == TagChangelogV2 {
			if h.CheckpointID, err = d.i64("checkpoint id"); err != nil {
				return nil, err
			}
		}
		if h.StateHandleID, err = d.utf("state handle id"); err != nil {
			return nil, err
		}
	case TagChangelogByteIncrement:
		if err := d.keyGroupRange(h, what); err != nil {
			return nil, err
		}
		if h.From, err = d.i64("from"); err != nil {
			return nil, err
		}
		if h.To, err = d.i64("to"); err != nil {
			return nil, err
		}
		n, err := d.count("change count", 8)
		if err != nil {
			return nil, err
		}
		h.Changes, err = each(d, n, func(c *StateChange) error {
			var err error
			if c.KeyGroup, err = d.i32("change key group"); err != nil {
				return err
			}
			if c.DataLen, err = d.i32("change length"); err != nil {
				return err
			}
			c.Data, err = d.blob(c.DataLen, "change")
			return err
		})
		if err != nil {
			return nil, err
		}
		if h.StateHandleID, err = d.utf("state handle id"); err != nil {
			return nil, err
		}
	case TagChangelogFileIncrement, TagChangelogFileIncrementV2:
		if err := d.keyGroupRange(h, what); err != nil {
			return nil, err
		}
		n, err := d.count("part count", 9)
		if err != nil {
			return nil, err
		}
		d.changelog++
		h.Parts, err = each(d, n, func(p *OffsetHandle) error {
			var err error
			if p.Offset, err = d.i64("part offset"); err != nil {
				return err
			}
			p.Handle, err = d.streamHandle("part")
			return err
		})
		d.changelog--
		if err != nil {
			return nil, err
		}
		if h.StateSize, err = d.i64("state size"); err != nil {
			return nil, err
		}
		if h.CheckpointedSize, err = d.i64("checkpointed size"); err != nil {
			return nil, err
		}
		if h.StateHandleID, err = d.utf("state handle id"); err != nil {
			return nil, err
		}
		if tag == TagChangelogFileIncrementV2 {
			if h.StorageIdentifier, err = d.utf("storage identifier"); err != nil {
				return nil, err
			}
		}
	default:
		return nil, &ParseError{Offset: d.off() - 1, What: "tag", Err: fmt.Errorf("%w: keyed handle tag %d", ErrUnknownTag, tag)}
	}
	return h, nil
}

func (d *decoder) keyGroupRange(h *KeyedHandle, what string) error {
	var err error
	if h.KeyGroupStart, err = d.i32("key-group start"); err != nil {
		return err
	}
	if h.KeyGroupCount, err = d.i32("key-group count"); err != nil {
		return err
	}
	if h.KeyGroupStart < 0 || h.KeyGroupCount < 0 {
		return d.fail("key-group range", fmt.Errorf("%w: start %d count %d", ErrInvalid, h.KeyGroupStart, h.KeyGroupCount))
	}
	return nil
}

func (d *decoder) keyedList(what string) ([]*KeyedHandle, error) {
	n, err := d.count("count", 1)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if d.visiting() {
		for range n {
			if _, err := d.keyedHandle(what); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return each(d, n, func(h **KeyedHandle) error {
		var err error
		*h, err = d.keyedHandle(what)
		return err
	})
}

func (d *decoder) namedHandles(what string) ([]NamedHandle, error) {
	n, err := d.count("count", 3)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	if d.visiting() {
		// A named file handle nests one level: the fast path needs room.
		fast := d.depth < d.opts.MaxDepth
		for range n {
			if fast && d.namedFileStream() {
				continue
			}
			if _, err := d.utf("local name"); err != nil {
				return nil, err
			}
			if _, err := d.streamHandle(what); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return each(d, n, func(h *NamedHandle) error {
		var err error
		if h.LocalName, err = d.utf("local name"); err != nil {
			return err
		}
		h.Handle, err = d.streamHandle(what)
		return err
	})
}

// namedFileStream reads one named file handle (a local name and a
// TagFileStream handle), most of what an incremental checkpoint's
// _metadata holds, straight from the buffer. It does what utf and
// streamHandle do for it. For anything else, or when its bytes are not
// all buffered, it reads nothing and reports false: the general path
// then reads the handle, with its errors. The caller has checked that a
// handle may nest here.
func (d *decoder) namedFileStream() bool {
	b := d.buf[d.pos:]
	if len(b) < 2 {
		return false
	}
	name := int(binary.BigEndian.Uint16(b))
	p := 2 + name // the tag
	if len(b) < p+1+8+2 || b[p] != TagFileStream || !isPlainASCII(b[2:p]) {
		return false
	}
	size := int64(binary.BigEndian.Uint64(b[p+1:]))
	p += 1 + 8
	n := int(binary.BigEndian.Uint16(b[p:]))
	p += 2
	if len(b) < p+n {
		return false
	}
	path := b[p : p+n : p+n]
	if !isPlainASCII(path) {
		return false
	}
	d.ref.Path = path
	d.pos += p + n
	d.report(TagFileStream, size, 0)
	return true
}

func (d *decoder) streamHandle(what string) (*StreamHandle, error) {
	tag, err := d.u8(what)
	if err != nil {
		return nil, err
	}
	if tag == TagNull {
		return nil, nil
	}
	if err := d.enter(what); err != nil {
		return nil, err
	}
	h, err := d.streamHandleBody(tag, what)
	d.leave()
	return h, err
}

func (d *decoder) streamHandleBody(tag byte, what string) (*StreamHandle, error) {
	var err error
	h := d.newStream()
	h.Tag = tag
	switch tag {
	case TagByteStream:
		if h.Name, err = d.utf("handle name"); err != nil {
			return nil, err
		}
		if h.DataLen, err = d.i32("inline length"); err != nil {
			return nil, err
		}
		if h.Data, err = d.blob(h.DataLen, "inline bytes"); err != nil {
			return nil, err
		}
		d.inlineCount++
		d.inlineBytes += int64(h.DataLen)
	case TagFileStream:
		if h.Size, err = d.i64("file size"); err != nil {
			return nil, err
		}
		if h.Path, err = d.path("file path"); err != nil {
			return nil, err
		}
	case TagRelativeStream:
		if h.Path, err = d.path("relative path"); err != nil {
			return nil, err
		}
		d.keepPath()
		if h.Size, err = d.i64("file size"); err != nil {
			return nil, err
		}
	case TagKeyGroups:
		kg := &KeyGroupOffsets{}
		if kg.Start, err = d.i32("key-group start"); err != nil {
			return nil, err
		}
		n, err := d.i32("key-group count")
		if err != nil {
			return nil, err
		}
		if kg.Start < 0 || n < 0 {
			return nil, d.fail("key-group range", fmt.Errorf("%w: start %d count %d", ErrInvalid, kg.Start, n))
		}
		if kg.Offsets, err = d.longs(int(n), "key-group offsets"); err != nil {
			return nil, err
		}
		h.KeyGroups = kg
		if h.Delegate, err = d.streamHandle(what); err != nil {
			return nil, err
		}
	case TagSegmentFile:
		if h.Offset, err = d.i64("segment start"); err != nil {
			return nil, err
		}
		if h.Size, err = d.i64("segment size"); err != nil {
			return nil, err
		}
		if h.Scope, err = d.i32("segment scope"); err != nil {
			return nil, err
		}
		if h.Scope < 0 || h.Scope > 1 {
			return nil, d.fail("segment scope", fmt.Errorf("%w: scope %d", ErrInvalid, h.Scope))
		}
		if h.Offset < 0 || h.Size < 0 {
			return nil, d.fail("segment", fmt.Errorf("%w: start %d size %d", ErrInvalid, h.Offset, h.Size))
		}
		if h.Path, err = d.path("segment path"); err != nil {
			return nil, err
		}
		d.keepPath()
		if h.LogicalFileID, err = d.utf("logical file id"); err != nil {
			return nil, err
		}
	case TagEmptySegmentFile:
	default:
		return nil, &ParseError{Offset: d.off() - 1, What: "stream handle tag", Err: fmt.Errorf("%w: stream handle tag %d", ErrUnknownTag, tag)}
	}
	if d.visiting() {
		switch tag {
		case TagFileStream, TagRelativeStream, TagSegmentFile:
			d.report(tag, h.Size, h.Offset)
		}
	}
	return h, nil
}

func (d *decoder) properties(m *Metadata) error {
	n := d.remaining()
	if n == 0 {
		return d.fail("checkpoint properties", fmt.Errorf("%w: version %d needs trailing checkpoint properties", ErrTruncated, m.Version))
	}
	if n > maxPropertiesSize {
		return d.fail("checkpoint properties", fmt.Errorf("%w: %d bytes of properties (at most %d expected)", ErrInvalid, n, maxPropertiesSize))
	}
	start := d.off()
	buf := make([]byte, n)
	if err := d.read(buf, "checkpoint properties"); err != nil {
		return err
	}
	// The errors name no class or field: those are bytes of the file.
	stream, err := javaser.Decode(buf)
	if err == nil && len(stream.Contents) == 1 && stream.Contents[0] == nil {
		// Flink reads one object, (CheckpointProperties) readObject(), and
		// Java null is one: the State Processor API's SavepointWriter
		// writes no properties (CheckpointMetadata's are null), and Flink
		// restores such a savepoint.
		m.Properties = buf
		return nil
	}
	if err == nil {
		// Flink reads exactly one CheckpointProperties object.
		var obj *javaser.Object
		if obj, err = stream.Object(); err == nil && obj.Class.Name != checkpointPropertiesClass {
			return &ParseError{Offset: start, What: "checkpoint properties", Err: fmt.Errorf("%w: an object of another class than %s", ErrInvalid, checkpointPropertiesClass)}
		}
	}
	if err != nil {
		var de *javaser.DecodeError
		off, why := start, error(javaser.ErrMalformed)
		if errors.As(err, &de) {
			off, why = start+de.Offset, de.Err
		}
		werr := ErrInvalid
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, javaser.ErrTruncated) {
			werr = ErrTruncated
		}
		return &ParseError{Offset: off, What: "checkpoint properties", Err: fmt.Errorf("%w: %v", werr, why)}
	}
	m.Properties = buf
	return nil
}
