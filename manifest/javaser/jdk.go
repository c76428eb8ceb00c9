package javaser

import (
	"fmt"
	"math"
)

// SerialVersionUIDs of JDK classes, as the JDK writes them.
const (
	suidUUID      = -4856846361193249489
	suidURI       = -6052424284110960213
	suidArrayList = 8683452581122892189
	suidHashMap   = 362498820763181265
	suidNumber    = -8742448824652078965
	suidInteger   = 1360826667806852920
	suidLong      = 4290774380558885855
	suidByteArray = -5984413125824719648
)

// JDK builds objects of common JDK classes exactly as ObjectOutputStream
// writes them. Like a JVM it makes each class descriptor and each enum
// constant once, so objects built by one JDK share them and Encode writes
// each descriptor once, then back references. The zero value is ready to
// use; a JDK is not safe for concurrent use.
type JDK struct {
	classes map[string]*ClassDesc
	enums   map[[2]string]*Enum
	boxes   map[boxKey]*Object // Integer.valueOf and Long.valueOf cache
}

type boxKey struct {
	class string
	value int64
}

func (j *JDK) class(name string, build func() *ClassDesc) *ClassDesc {
	if c, ok := j.classes[name]; ok {
		return c
	}
	if j.classes == nil {
		j.classes = make(map[string]*ClassDesc)
	}
	c := build()
	j.classes[name] = c
	return c
}

// UUID returns a java.util.UUID.
func (j *JDK) UUID(mostSigBits, leastSigBits int64) *Object {
	c := j.class("java.util.UUID", func() *ClassDesc {
		return NewClassDesc("java.util.UUID", suidUUID, SCSerializable,
			PrimField('J', "leastSigBits"), PrimField('J', "mostSigBits"))
	})
	return NewObject(c).With("mostSigBits", mostSigBits).With("leastSigBits", leastSigBits)
}

// URI returns a java.net.URI; s must be its escaped string form.
func (j *JDK) URI(s string) *Object {
	c := j.class("java.net.URI", func() *ClassDesc {
		return NewClassDesc("java.net.URI", suidURI, SCSerializable|SCWriteMethod,
			ObjField("string", "Ljava/lang/String;"))
	})
	return NewObject(c).With("string", s)
}

// ArrayList returns a java.util.ArrayList of elements.
func (j *JDK) ArrayList(elements ...Value) *Object {
	c := j.class("java.util.ArrayList", func() *ClassDesc {
		return NewClassDesc("java.util.ArrayList", suidArrayList, SCSerializable|SCWriteMethod,
			PrimField('I', "size"))
	})
	o := NewObject(c).With("size", len(elements))
	var w ContentWriter
	w.WriteInt32(int32(len(elements))) // capacity, as ArrayList.writeObject writes it
	for _, e := range elements {
		w.WriteObject(e)
	}
	o.Data[0].Annotation = w.Contents()
	return o
}

// MapEntry is one key-value pair of a map.
type MapEntry struct{ Key, Value Value }

// HashMap returns a java.util.HashMap holding entries in the given order.
// Java writes entries in bucket order, which depends on the keys' hash
// codes; to match a JDK-written map byte for byte, pass them in that
// order. Capacity and threshold are those of a new HashMap() after
// len(entries) puts.
func (j *JDK) HashMap(entries ...MapEntry) *Object {
	c := j.class("java.util.HashMap", func() *ClassDesc {
		return NewClassDesc("java.util.HashMap", suidHashMap, SCSerializable|SCWriteMethod,
			PrimField('F', "loadFactor"), PrimField('I', "threshold"))
	})
	buckets, threshold := 16, 0
	if len(entries) > 0 {
		for buckets*3/4 < len(entries) {
			buckets *= 2
		}
		threshold = buckets * 3 / 4
	}
	o := NewObject(c).With("loadFactor", float32(0.75)).With("threshold", threshold)
	var w ContentWriter
	w.WriteInt32(int32(buckets))
	w.WriteInt32(int32(len(entries)))
	for _, e := range entries {
		w.WriteObject(e.Key)
		w.WriteObject(e.Value)
	}
	o.Data[0].Annotation = w.Contents()
	return o
}

func (j *JDK) number(name string, suid int64, code byte) *ClassDesc {
	return j.class(name, func() *ClassDesc {
		c := NewClassDesc(name, suid, SCSerializable, PrimField(code, "value"))
		c.Super = j.class("java.lang.Number", func() *ClassDesc {
			return NewClassDesc("java.lang.Number", suidNumber, SCSerializable)
		})
		return c
	})
}

// Integer returns a java.lang.Integer as autoboxing makes it: values from
// -128 to 127 are cached, so equal small values give the same *Object.
func (j *JDK) Integer(v int32) *Object {
	return j.box("java.lang.Integer", suidInteger, 'I', int64(v), v)
}

// Long returns a java.lang.Long, cached like Integer.
func (j *JDK) Long(v int64) *Object {
	return j.box("java.lang.Long", suidLong, 'J', v, v)
}

func (j *JDK) box(class string, suid int64, code byte, key int64, v any) *Object {
	cached := key >= -128 && key <= 127
	k := boxKey{class, key}
	if o, ok := j.boxes[k]; ok && cached {
		return o
	}
	o := NewObject(j.number(class, suid, code)).With("value", v)
	if cached {
		if j.boxes == nil {
			j.boxes = make(map[boxKey]*Object)
		}
		j.boxes[k] = o
	}
	return o
}

// ByteArray returns a byte[].
func (j *JDK) ByteArray(b []byte) *Array {
	a, _ := j.Array(b)
	return a
}

// Array returns a primitive array for a slice of the types listed at
// Array.Elements, or an Object[] for a []Value.
func (j *JDK) Array(elements any) (*Array, error) {
	var name string
	var suid int64
	switch elements.(type) {
	case []byte:
		name, suid = "[B", suidByteArray
	case []uint16:
		name, suid = "[C", -5753798564021173076
	case []float64:
		name, suid = "[D", 4514449696888150558
	case []float32:
		name, suid = "[F", 836686056779680834
	case []int32:
		name, suid = "[I", 5600894804908749477
	case []int64:
		name, suid = "[J", 8655923659555304851
	case []int16:
		name, suid = "[S", -1188055269542874886
	case []bool:
		name, suid = "[Z", 6309297032502205922
	case []Value:
		name, suid = "[Ljava.lang.Object;", -8012369246846506644
	default:
		return nil, fmt.Errorf("javaser: no JDK array class for Go %T", elements)
	}
	c := j.class(name, func() *ClassDesc { return NewClassDesc(name, suid, SCSerializable) })
	return NewArray(c, elements), nil
}

// EnumClass returns the descriptor of the enum type called name.
func (j *JDK) EnumClass(name string) *ClassDesc {
	return j.class(name, func() *ClassDesc {
		c := NewClassDesc(name, 0, SCSerializable|SCEnum)
		c.Super = j.class("java.lang.Enum", func() *ClassDesc {
			return NewClassDesc("java.lang.Enum", 0, SCSerializable|SCEnum)
		})
		return c
	})
}

// Enum returns the constant called constant of the enum type className.
// Enum constants are singletons: equal arguments give the same *Enum.
func (j *JDK) Enum(className, constant string) *Enum {
	k := [2]string{className, constant}
	if e, ok := j.enums[k]; ok {
		return e
	}
	if j.enums == nil {
		j.enums = make(map[[2]string]*Enum)
	}
	e := &Enum{Class: j.EnumClass(className), Constant: Interned(constant)}
	j.enums[k] = e
	return e
}

// UUIDOf returns the bits of a java.util.UUID.
func UUIDOf(o *Object) (mostSigBits, leastSigBits int64, err error) {
	if o == nil || o.ClassName() != "java.util.UUID" {
		return 0, 0, fmt.Errorf("javaser: %s is not a java.util.UUID", kindOf(o))
	}
	if mostSigBits, err = FieldAs[int64](o, "mostSigBits"); err != nil {
		return 0, 0, err
	}
	leastSigBits, err = FieldAs[int64](o, "leastSigBits")
	return mostSigBits, leastSigBits, err
}

// ListElements returns the elements of a java.util.ArrayList (or a
// subclass) from what its writeObject wrote.
func ListElements(o *Object) ([]Value, error) {
	d := o.DataOf("java.util.ArrayList")
	if d == nil {
		return nil, fmt.Errorf("javaser: %s is not a java.util.ArrayList", kindOf(o))
	}
	size, err := FieldAs[int32](o, "size")
	if err != nil {
		return nil, err
	}
	r := d.Reader()
	if _, err := r.ReadInt32(); err != nil { // capacity
		return nil, fmt.Errorf("javaser: ArrayList capacity: %w", err)
	}
	return readObjects(r, int64(size), "ArrayList")
}

// MapEntries returns the entries of a java.util.HashMap (or a subclass such
// as LinkedHashMap) in the order they were written.
func MapEntries(o *Object) ([]MapEntry, error) {
	d := o.DataOf("java.util.HashMap")
	if d == nil {
		return nil, fmt.Errorf("javaser: %s is not a java.util.HashMap", kindOf(o))
	}
	r := d.Reader()
	if _, err := r.ReadInt32(); err != nil { // buckets
		return nil, fmt.Errorf("javaser: HashMap buckets: %w", err)
	}
	size, err := r.ReadInt32()
	if err != nil {
		return nil, fmt.Errorf("javaser: HashMap size: %w", err)
	}
	if size < 0 || int64(size) > math.MaxInt32/2 {
		return nil, fmt.Errorf("javaser: HashMap size %d", size)
	}
	kv, err := readObjects(r, 2*int64(size), "HashMap")
	if err != nil {
		return nil, err
	}
	out := make([]MapEntry, size)
	for i := range out {
		out[i] = MapEntry{kv[2*i], kv[2*i+1]}
	}
	return out, nil
}

// readObjects reads exactly n objects and requires nothing after them.
func readObjects(r *ContentReader, n int64, what string) ([]Value, error) {
	if n < 0 || n > int64(len(r.items)) { // each object is one item
		return nil, fmt.Errorf("javaser: %s claims %d elements, has at most %d", what, n, len(r.items))
	}
	out := make([]Value, n)
	for i := range out {
		v, err := r.ReadObject()
		if err != nil {
			return nil, fmt.Errorf("javaser: %s element %d: %w", what, i, err)
		}
		out[i] = v
	}
	if !r.Done() {
		return nil, fmt.Errorf("javaser: %s has data after its %d elements", what, n)
	}
	return out, nil
}
