package manifest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A changelog (DSTL) file is one flag byte and then the changes that its
// handles count: flink-dstl-dfs's StateChangeFsUploader (1.15) and
// OutputStreamWithPos (1.17+) write 1 when dstl.dfs.compression.enabled
// and 0 otherwise, then the changes, through SnappyStreamCompressionDecorator
// when compressed, and record as the handle's size the position of the
// uncompressed stream (apache/flink, flink-dstl/flink-dstl-dfs/.../
// StateChangeFsUploader.java, OutputStreamWithPos.java;
// flink-runtime/.../state/SnappyStreamCompressionDecorator.java).
//
// Compressed, the changes are xerial snappy-java's framed stream
// (SnappyFramedOutputStream, blocks of at most 64 KiB; xerial/snappy-java,
// src/main/java/org/xerial/snappy/SnappyFramedOutputStream.java): the
// stream identifier chunk, then chunks of a type byte (0 compressed, 1
// uncompressed), a 3-byte little-endian length and that many bytes, of
// which the first 4 are a CRC-32C of the uncompressed data. A compressed
// chunk's Snappy block starts with its uncompressed length as a varint.
// The sum of the chunks' uncompressed lengths is the handle's size, and
// the last chunk ends where the file does: reading the chunk headers,
// and seeking over their bodies, proves the file holds every byte.

const (
	dstlPlain      = 0
	dstlCompressed = 1

	snappyChunkCompressed   = 0x00
	snappyChunkUncompressed = 0x01
	// snappyMaxBlock is the largest uncompressed chunk of the framing
	// format, and SnappyFramedOutputStream's block size.
	snappyMaxBlock = 64 << 10
	// snappyHeaderRead covers a chunk's type, length, CRC and the
	// longest varint of a length up to snappyMaxBlock.
	snappyHeaderRead = 4 + 4 + 3
)

// snappyStreamID is the framing format's stream identifier chunk.
var snappyStreamID = []byte{0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'}

// dstlError says why a changelog file does not hold its changes. Short
// reports a file that ends too early (still being copied, or truncated);
// otherwise the bytes at Offset are not what Flink writes.
type dstlError struct {
	Offset int64
	Short  bool
	Msg    string
}

func (e *dstlError) Error() string { return fmt.Sprintf("at offset %d: %s", e.Offset, e.Msg) }

// changelogChanges reads the changelog file r of size bytes and returns
// whether it is compressed and how many bytes of changes it holds (what
// its handles record as their size). It reads the flag byte and, when
// compressed, the header of each chunk (at most snappyHeaderRead bytes a
// chunk). It stops once the file holds more than want bytes of changes:
// every chunk holds at least one, so a file of garbage costs at most
// want+1 reads.
func changelogChanges(r io.ReaderAt, size, want int64) (compressed bool, changes int64, err error) {
	var buf [snappyHeaderRead]byte
	if size < 1 {
		return false, 0, &dstlError{Short: true, Msg: "empty file, without the flag byte"}
	}
	if _, err := r.ReadAt(buf[:1], 0); err != nil {
		return false, 0, readError(err, 0)
	}
	switch buf[0] {
	case dstlPlain:
		return false, size - 1, nil
	case dstlCompressed:
	default:
		return false, 0, &dstlError{Msg: fmt.Sprintf("flag byte %d, neither 0 (plain) nor 1 (Snappy)", buf[0])}
	}
	off := int64(1)
	id := buf[:len(snappyStreamID)]
	if size-off < int64(len(id)) {
		return true, 0, &dstlError{Offset: off, Short: true, Msg: "ends inside the Snappy stream identifier"}
	}
	if _, err := r.ReadAt(id, off); err != nil {
		return true, 0, readError(err, off)
	}
	if !bytes.Equal(id, snappyStreamID) {
		return true, 0, &dstlError{Offset: off, Msg: fmt.Sprintf("no Snappy stream identifier: % x", id)}
	}
	off += int64(len(id))
	for off < size {
		h := buf[:min(int64(len(buf)), size-off)]
		if _, err := r.ReadAt(h, off); err != nil {
			return true, changes, readError(err, off)
		}
		if len(h) < 4 {
			return true, changes, &dstlError{Offset: off, Short: true, Msg: "ends inside a chunk header"}
		}
		typ := h[0]
		n := int64(h[1]) | int64(h[2])<<8 | int64(h[3])<<16
		end := off + 4 + n
		var u int64
		switch typ {
		case snappyChunkUncompressed:
			if n < 4+1 || n > 4+snappyMaxBlock {
				return true, changes, &dstlError{Offset: off, Msg: fmt.Sprintf("uncompressed chunk of %d bytes (with its CRC)", n)}
			}
			u = n - 4
		case snappyChunkCompressed:
			if n < 4+2 {
				return true, changes, &dstlError{Offset: off, Msg: fmt.Sprintf("compressed chunk of %d bytes (with its CRC)", n)}
			}
			// The varint lies in the chunk and in what was read.
			v := h[min(8, len(h)):min(int64(len(h)), 4+n)]
			x, k := binary.Uvarint(v)
			switch {
			case k == 0 && len(h) < snappyHeaderRead && end > off+int64(len(h)):
				// The file ends inside the varint.
				return true, changes, &dstlError{Offset: off, Short: true, Msg: "ends inside a chunk header"}
			case k <= 0 || x < 1 || x > snappyMaxBlock:
				return true, changes, &dstlError{Offset: off, Msg: "compressed chunk without a valid uncompressed length"}
			case n-4 > snappyMaxCompressed(int64(x)):
				return true, changes, &dstlError{Offset: off, Msg: fmt.Sprintf("compressed chunk of %d bytes for %d uncompressed", n-4, x)}
			}
			u = int64(x)
		default:
			return true, changes, &dstlError{Offset: off, Msg: fmt.Sprintf("chunk type 0x%02x, which Flink's SnappyFramedOutputStream never writes", typ)}
		}
		if end > size {
			return true, changes, &dstlError{Offset: off, Short: true, Msg: fmt.Sprintf("chunk of %d bytes runs past the end of the file", 4+n)}
		}
		changes += u
		if changes > want {
			return true, changes, nil
		}
		off = end
	}
	return true, changes, nil
}

// snappyMaxCompressed is Snappy's MaxCompressedLength of a block of n
// bytes: no compressor writes a longer one.
func snappyMaxCompressed(n int64) int64 { return 32 + n + n/6 }

func readError(err error, off int64) error {
	if errors.Is(err, io.EOF) {
		// The file shrank since it was stat'ed.
		return &dstlError{Offset: off, Short: true, Msg: "ends early (the file shrank while read)"}
	}
	return err
}
