package manifest

import (
	"testing"
	"unsafe"
)

// TestPathEntrySize: a path entry is most of the catalog's memory a file
// (design §3.6's bound counts 128 bytes of it); a field more takes it to
// the next size class, 144 bytes.
func TestPathEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(pathEntry{}); n > 128 {
		t.Fatalf("pathEntry is %d bytes, more than 128", n)
	}
}
