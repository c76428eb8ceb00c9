package javaser

import "unsafe"

// What a stream may cost to decode. Checking counts against the bytes
// left is not enough: a value slot (an interface) takes 16 bytes, and an
// element of an array of references, a field, an item of an annotation
// or of the top-level contents costs as little as one input byte
// (TC_NULL, a boolean), a handle with its String three, a ClassData (56
// bytes) one. A 256 MiB HA file of nulls would take 4 GiB of slots, one
// of empty strings or annotations more. So the decoder charges what it
// allocates (the capacity of the slices it grows included) to
// DecodeBudget, and fails with ErrTooLarge before allocating past it.
//
// The rate is what real Flink streams need, with room: HA files of
// every state backend scaled to thousands of operators cost 4 to 7
// bytes a byte, those of unaligned checkpoints up to 10.5 (a Long object
// of 14 bytes for every offset of in-flight data; flinkha's
// TestLargeHAFilesWithinBudget). The streams ckptfs reads are mostly
// small (znodes, CheckpointProperties, HA files of kilobytes) and stay
// within budgetBase alone, which also lets small hostile streams decode
// as they are.
const (
	budgetBase    = 16 << 20
	budgetPerByte = 12
)

// DecodeBudget is the most Decode and DecodePrefix allocate for a stream
// of n bytes, besides the garbage of growing slices (at most as much
// again): 16 MiB and 12 bytes a byte of input.
func DecodeBudget(n int) int64 { return budgetBase + budgetPerByte*int64(n) }

// Sizes charged: the structs the decoder allocates, an interface value,
// and a map entry of descs with its share of buckets.
const (
	sizeValue     = int64(unsafe.Sizeof(Value(nil)))
	sizeObject    = int64(unsafe.Sizeof(Object{}))
	sizeClassData = int64(unsafe.Sizeof(ClassData{}))
	sizeString    = int64(unsafe.Sizeof(String{}))
	sizeBlockData = int64(unsafe.Sizeof(BlockData{}))
	sizeArray     = int64(unsafe.Sizeof(Array{}))
	sizeEnum      = int64(unsafe.Sizeof(Enum{}))
	sizeClass     = int64(unsafe.Sizeof(Class{}))
	sizeFieldDesc = int64(unsafe.Sizeof(FieldDesc{}))
	sizeClassDesc = int64(unsafe.Sizeof(ClassDesc{})+unsafe.Sizeof(descMeta{})) + 48
)

// charge takes n bytes, about to be allocated for the item at off, from
// the budget.
func (d *decoder) charge(n int64, off int) error {
	if n <= d.budget {
		d.budget -= n
		return nil
	}
	return d.fail(off, ErrTooLarge, "decoding the %d-byte stream takes more than its budget of %d bytes", len(d.data), d.maxAlloc)
}

// grow returns s with room for one more element, charging the larger
// backing array for the item at off. Doubling keeps the garbage of
// growing below what the slice ends up holding.
func grow[T any](d *decoder, s []T, off int) ([]T, error) {
	if len(s) < cap(s) {
		return s, nil
	}
	n := max(2*cap(s), 4)
	var zero T
	if err := d.charge(int64(n-cap(s))*int64(unsafe.Sizeof(zero)), off); err != nil {
		return nil, err
	}
	t := make([]T, len(s), n)
	copy(t, s)
	return t, nil
}

// addHandle gives v, the item at off, the next handle.
func (d *decoder) addHandle(v Value, off int) error {
	h, err := grow(d, d.handles, off)
	if err != nil {
		return err
	}
	d.handles = append(h, v)
	return nil
}
