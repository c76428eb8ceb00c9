package manifest

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ckptfs/ckptfs/manifest/metadata"
)

// errShrankWhileRead: a mapped _metadata lost bytes while it was parsed.
var errShrankWhileRead = errors.New("_metadata shrank while it was read")

// testHookMapped, when set by a test, runs once _metadata is mapped.
var testHookMapped atomic.Pointer[func()]

// populateLimit is the largest _metadata mapped with its pages faulted in
// at once. Beyond it pages are faulted in as the parse reaches them: a
// file of gigabytes (sparse, or not a _metadata at all) whose parse fails
// early then costs the pages before that point, not its size.
const populateLimit = 16 << 20

// decodeFileReferences decodes the first size bytes of the open
// _metadata f and reports its references to v. It maps the file rather
// than reading it: a re-verification is mostly this parse, and decoding
// the page cache in place spares copying every byte through a read
// buffer. A file system that cannot map is read instead.
func decodeFileReferences(f *os.File, size int64, v metadata.Visitor) (metadata.Summary, error) {
	m, err := mapMetadata(f, size)
	if err != nil {
		return metadata.Summary{}, err
	}
	defer m.close()
	return m.decode(v)
}

// mappedMetadata is an open _metadata, mapped (data) unless the file
// system cannot map it.
type mappedMetadata struct {
	f    *os.File
	size int64
	data []byte
}

// mapMetadata maps the first size bytes of f and, up to populateLimit,
// reads them in: the reading that can fail or hang on a failing NAS
// happens here, so a caller can do it before taking a lock that others
// wait for. Its error is the file system's.
func mapMetadata(f *os.File, size int64) (*mappedMetadata, error) {
	m := &mappedMetadata{f: f, size: size}
	if size <= 0 || size > math.MaxInt {
		return m, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return m, nil
	}
	m.data = data
	if size <= populateLimit {
		// Not MAP_POPULATE: when the file system fails a read (EIO from
		// a NAS), mmap(2) with MAP_POPULATE retries it forever (Linux
		// 6.18, over FUSE at least). MADV_POPULATE_READ returns the error.
		if err := unix.Madvise(data, unix.MADV_POPULATE_READ); err != nil && !errors.Is(err, unix.EINVAL) {
			m.close()
			return nil, fmt.Errorf("the file system failed a read of %s (%w)", f.Name(), err)
		}
	} else {
		// Read ahead of the parse, and drop what it passed when memory is short.
		unix.Madvise(data, unix.MADV_SEQUENTIAL)
	}
	return m, nil
}

func (m *mappedMetadata) close() {
	if m.data != nil {
		unix.Munmap(m.data)
		m.data = nil
	}
}

// decode decodes the references, from the mapping or by reading.
func (m *mappedMetadata) decode(v metadata.Visitor) (metadata.Summary, error) {
	if m.data == nil {
		return metadata.DecodeReferences(m.f, m.size, metadata.Options{}, v)
	}
	if hook := testHookMapped.Load(); hook != nil {
		(*hook)()
	}
	return decodeMappedReferences(m.data, v)
}

// decodeMappedReferences decodes a mapped _metadata. A file truncated
// while mapped makes a read past its new end fault (SIGBUS); that fault
// is recovered here and returned as an error, so a replica rewriting a
// _metadata cannot crash the verifier. Any other panic goes on.
func decodeMappedReferences(data []byte, v metadata.Visitor) (sum metadata.Summary, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if fault, ok := r.(interface{ Addr() uintptr }); ok {
			start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
			if a := fault.Addr(); a >= start && a-start < uintptr(len(data)) {
				sum, err = metadata.Summary{}, fmt.Errorf("%w: no byte at offset %d of %d", errShrankWhileRead, a-start, len(data))
				return
			}
		}
		panic(r)
	}()
	return metadata.DecodeReferencesBytes(data, metadata.Options{}, v)
}
