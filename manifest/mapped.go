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
	if size <= 0 || size > math.MaxInt {
		return metadata.DecodeReferences(f, size, metadata.Options{}, v)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return metadata.DecodeReferences(f, size, metadata.Options{}, v)
	}
	defer unix.Munmap(data)
	if size <= populateLimit {
		// Not MAP_POPULATE: when the file system fails a read (EIO from
		// a NAS), mmap(2) with MAP_POPULATE retries it forever (Linux
		// 6.18, over FUSE at least). MADV_POPULATE_READ returns the error.
		if err := unix.Madvise(data, unix.MADV_POPULATE_READ); err != nil && !errors.Is(err, unix.EINVAL) {
			return metadata.Summary{}, fmt.Errorf("the file system failed a read of %s (%w)", f.Name(), err)
		}
	} else {
		// Read ahead of the parse, and drop what it passed when memory is short.
		unix.Madvise(data, unix.MADV_SEQUENTIAL)
	}
	if hook := testHookMapped.Load(); hook != nil {
		(*hook)()
	}
	return decodeMappedReferences(data, v)
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
