package javaser

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Decoder decodes serialization streams. The zero value is ready to use.
type Decoder struct {
	// MaxDepth bounds nesting: every object, array, string or class
	// descriptor read inside another one counts one level, and so does
	// every superclass descriptor. 0 means DefaultMaxDepth.
	MaxDepth int
	// MaxAlloc bounds what decoding allocates, in bytes (budget.go).
	// 0 means DecodeBudget of the input's size.
	MaxAlloc int64
}

// Decode decodes a complete stream: the header, then top-level contents up
// to exactly the end of data. Errors are *DecodeError.
func Decode(data []byte) (*Stream, error) {
	var d Decoder
	return d.Decode(data)
}

// DecodePrefix decodes the header and one top-level value (after any
// TC_RESET), and reports how many bytes it consumed; the rest of data is
// the caller's. It suits a stream embedded in another format.
func DecodePrefix(data []byte) (*Stream, int, error) {
	var d Decoder
	return d.DecodePrefix(data)
}

// Decode is the package-level Decode with this decoder's limits.
func (dc *Decoder) Decode(data []byte) (*Stream, error) {
	return dc.start(data).stream()
}

// stream decodes the whole input.
func (d *decoder) stream() (*Stream, error) {
	if err := d.header(); err != nil {
		return nil, err
	}
	s := &Stream{}
	for d.pos < len(d.data) {
		start := d.pos
		var c Content
		var err error
		switch d.data[d.pos] {
		case tcReset:
			d.pos++
			d.reset()
			c = Reset{}
		case tcBlockData, tcBlockDataLong:
			c, err = d.readBlockData()
		case tcEndBlockData:
			err = d.fail(d.pos, ErrMalformed, "TC_ENDBLOCKDATA at top level")
		default:
			var v Value
			v, err = d.readValue()
			c = v
		}
		if err != nil {
			return nil, err
		}
		if s.Contents, err = grow(d, s.Contents, start); err != nil {
			return nil, err
		}
		s.Contents = append(s.Contents, c)
	}
	return s, nil
}

// DecodePrefix is the package-level DecodePrefix with this decoder's limits.
func (dc *Decoder) DecodePrefix(data []byte) (*Stream, int, error) {
	d := dc.start(data)
	if err := d.header(); err != nil {
		return nil, 0, err
	}
	s := &Stream{}
	var err error
	for d.pos < len(d.data) && d.data[d.pos] == tcReset {
		if s.Contents, err = grow(d, s.Contents, d.pos); err != nil {
			return nil, 0, err
		}
		d.pos++
		d.reset()
		s.Contents = append(s.Contents, Reset{})
	}
	start := d.pos
	v, err := d.readValue()
	if err != nil {
		return nil, 0, err
	}
	if s.Contents, err = grow(d, s.Contents, start); err != nil {
		return nil, 0, err
	}
	s.Contents = append(s.Contents, v)
	return s, d.pos, nil
}

type decoder struct {
	data     []byte
	pos      int
	maxDepth int
	depth    int
	handles  []Value // index = handle - baseWireHandle
	descs    map[*ClassDesc]*descMeta
	budget   int64 // bytes left to allocate (budget.go)
	maxAlloc int64 // the budget at the start
}

// descMeta is what the decoder knows about a class descriptor it read.
type descMeta struct {
	// complete is set once the superclass is read. Only complete
	// descriptors may describe an object: before that the class data
	// layout is unknown (the JDK has the same rule).
	complete bool
	// dataSuper is the nearest superclass that has data, so reading an
	// object skips data-less classes in O(1) each.
	dataSuper *ClassDesc
	dataCount int // classes with data in the hierarchy, this one included
}

func (dc *Decoder) start(data []byte) *decoder {
	depth := dc.MaxDepth
	if depth <= 0 {
		depth = DefaultMaxDepth
	}
	budget := dc.MaxAlloc
	if budget <= 0 {
		budget = DecodeBudget(len(data))
	}
	return &decoder{data: data, maxDepth: depth, descs: make(map[*ClassDesc]*descMeta), budget: budget, maxAlloc: budget}
}

func (d *decoder) fail(off int, kind error, format string, args ...any) error {
	return &DecodeError{Offset: int64(off), Msg: fmt.Sprintf(format, args...), Err: kind}
}

// need checks that n more bytes are available; what and name describe
// them for the error message ("long field", "stateSize").
func (d *decoder) need(n int64, what, name string) error {
	left := int64(len(d.data) - d.pos)
	if n <= left {
		return nil
	}
	if name != "" {
		what += " " + name
	}
	unit := "bytes"
	if n == 1 {
		unit = "byte"
	}
	return d.fail(d.pos, ErrTruncated, "truncated: need %d %s for %s, %d left", n, unit, what, left)
}

// needFor is need for count items taking n bytes at least.
func (d *decoder) needFor(n, count int64, what, name string) error {
	if n <= int64(len(d.data)-d.pos) {
		return nil
	}
	return d.need(n, fmt.Sprint(count, " ", what), name)
}

// elementSize returns the wire size of an array element with type code
// code, a lower bound for object elements, or 0 for an invalid code.
func elementSize(code byte) int64 {
	switch code {
	case 'B', 'Z', 'L', '[':
		return 1
	case 'C', 'S':
		return 2
	case 'I', 'F':
		return 4
	case 'J', 'D':
		return 8
	}
	return 0
}

func (d *decoder) u8(what, name string) (byte, error) {
	if err := d.need(1, what, name); err != nil {
		return 0, err
	}
	b := d.data[d.pos]
	d.pos++
	return b, nil
}

func (d *decoder) u16(what, name string) (uint16, error) {
	if err := d.need(2, what, name); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint16(d.data[d.pos:])
	d.pos += 2
	return v, nil
}

func (d *decoder) u32(what, name string) (uint32, error) {
	if err := d.need(4, what, name); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(d.data[d.pos:])
	d.pos += 4
	return v, nil
}

func (d *decoder) u64(what, name string) (uint64, error) {
	if err := d.need(8, what, name); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(d.data[d.pos:])
	d.pos += 8
	return v, nil
}

// take returns the next n bytes without copying.
func (d *decoder) take(n int64, what, name string) ([]byte, error) {
	if err := d.need(n, what, name); err != nil {
		return nil, err
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

// utf reads a writeUTF string: u16 length, then modified UTF-8.
func (d *decoder) utf(what, name string) (string, error) {
	n, err := d.u16(what+" length", name)
	if err != nil {
		return "", err
	}
	start := d.pos
	b, err := d.take(int64(n), what, name)
	if err != nil {
		return "", err
	}
	if err := d.charge(int64(n), start); err != nil {
		return "", err
	}
	s, err := DecodeModifiedUTF8(b)
	if err != nil {
		ue := err.(*UTFError)
		return "", d.fail(start+ue.Index, ErrMalformed, "%s: %s", what, ue.Reason)
	}
	return s, nil
}

func (d *decoder) header() error {
	want := [4]byte{StreamMagic >> 8, StreamMagic & 0xFF, 0, StreamVersion}
	for i, b := range want {
		if i >= len(d.data) {
			return d.fail(i, ErrTruncated, "truncated: need 4 bytes for stream header, %d left", len(d.data))
		}
		if d.data[i] != b {
			return d.fail(0, ErrMalformed, "bad stream header % x (want ac ed 00 05)", d.data[:min(4, len(d.data))])
		}
	}
	d.pos = 4
	return nil
}

func (d *decoder) reset() {
	clear(d.handles)
	d.handles = d.handles[:0]
}

func (d *decoder) enter(off int) error {
	d.depth++
	if d.depth > d.maxDepth {
		return d.fail(off, ErrTooDeep, "nesting deeper than %d levels", d.maxDepth)
	}
	return nil
}

// readValue reads one object-like item (the grammar's "object" minus
// TC_RESET, which is only valid at top level).
func (d *decoder) readValue() (Value, error) {
	start := d.pos
	if start >= len(d.data) {
		return nil, d.need(1, "type code", "")
	}
	if err := d.enter(start); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	var v Value
	var err error
	switch tc := d.data[start]; tc {
	case tcNull:
		d.pos++
		return nil, nil
	case tcReference:
		v, _, err = d.readHandle()
	case tcObject:
		v, err = d.readObject()
	case tcString, tcLongString:
		v, err = d.readString()
	case tcArray:
		v, err = d.readArray()
	case tcEnum:
		v, err = d.readEnum()
	case tcClass:
		v, err = d.readClass()
	case tcClassDesc, tcProxyClassDesc:
		v, err = d.readClassDesc(false, "value", "")
	case tcException:
		err = d.fail(start, ErrUnsupported, "TC_EXCEPTION: the writer failed while serializing")
	case tcReset:
		err = d.fail(start, ErrMalformed, "TC_RESET inside an object (only valid at top level)")
	case tcBlockData, tcBlockDataLong, tcEndBlockData:
		err = d.fail(start, ErrMalformed, "unexpected %s where an object is expected", tcName(tc))
	default:
		err = d.fail(start, ErrMalformed, "invalid type code 0x%02x where an object is expected", tc)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// readHandle reads TC_REFERENCE and returns the earlier value and its handle.
func (d *decoder) readHandle() (Value, uint32, error) {
	start := d.pos
	d.pos++
	h, err := d.u32("handle", "")
	if err != nil {
		return nil, 0, err
	}
	i := int64(h) - baseWireHandle
	if i < 0 || i >= int64(len(d.handles)) {
		return nil, 0, d.fail(start, ErrMalformed, "reference to unknown handle 0x%x", h)
	}
	return d.handles[i], h, nil
}

func (d *decoder) readObject() (*Object, error) {
	start := d.pos
	d.pos++
	desc, err := d.readClassDesc(false, "object", "")
	if err != nil {
		return nil, err
	}
	if err := d.charge(sizeObject, start); err != nil {
		return nil, err
	}
	o := &Object{Class: desc}
	if err := d.addHandle(o, start); err != nil {
		return nil, err
	}
	if desc.IsExternalizable() {
		if desc.Flags&SCBlockData == 0 {
			return nil, d.fail(start, ErrUnsupported,
				"object of Externalizable class %s written in protocol version 1 (no SC_BLOCK_DATA): its data cannot be delimited without the class", desc.Name)
		}
		ann, err := d.readAnnotation("external data of", desc.Name)
		if err != nil {
			return nil, err
		}
		if err := d.charge(sizeClassData, start); err != nil {
			return nil, err
		}
		o.Data = []ClassData{{Class: desc, Annotation: ann}}
		return o, nil
	}
	m := d.descs[desc]
	if m.dataCount == 0 {
		return o, nil
	}
	if err := d.charge(int64(m.dataCount)*sizeClassData, start); err != nil {
		return nil, err
	}
	o.Data = make([]ClassData, m.dataCount)
	c := desc
	if !c.hasData() {
		c = m.dataSuper
	}
	for i := len(o.Data) - 1; i >= 0; i-- {
		o.Data[i].Class = c
		c = d.descs[c].dataSuper
	}
	for i := range o.Data {
		if err := d.readClassData(&o.Data[i]); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// readClassData reads the field values of one class and, if it has a
// writeObject method, the annotation after them. Primitive fields come
// first on the wire; readNewClassDesc enforces that order.
func (d *decoder) readClassData(cd *ClassData) error {
	c := cd.Class
	if len(c.Fields) > 0 {
		// A slot each, and a primitive wider than a byte is boxed: it
		// takes about its size (Go packs small values).
		cost := int64(len(c.Fields)) * sizeValue
		for _, f := range c.Fields {
			if n := elementSize(f.Code); n > 1 && f.Code != 'L' && f.Code != '[' {
				cost += n
			}
		}
		if err := d.charge(cost, d.pos); err != nil {
			return err
		}
		cd.Values = make([]any, len(c.Fields))
	}
	for i, f := range c.Fields {
		var err error
		switch f.Code {
		case 'B':
			var b byte
			b, err = d.u8("byte field", f.Name)
			cd.Values[i] = int8(b)
		case 'C':
			var v uint16
			v, err = d.u16("char field", f.Name)
			cd.Values[i] = v
		case 'D':
			var v uint64
			v, err = d.u64("double field", f.Name)
			cd.Values[i] = math.Float64frombits(v)
		case 'F':
			var v uint32
			v, err = d.u32("float field", f.Name)
			cd.Values[i] = math.Float32frombits(v)
		case 'I':
			var v uint32
			v, err = d.u32("int field", f.Name)
			cd.Values[i] = int32(v)
		case 'J':
			var v uint64
			v, err = d.u64("long field", f.Name)
			cd.Values[i] = int64(v)
		case 'S':
			var v uint16
			v, err = d.u16("short field", f.Name)
			cd.Values[i] = int16(v)
		case 'Z':
			var b byte
			b, err = d.u8("boolean field", f.Name)
			if err == nil && b > 1 {
				err = d.fail(d.pos-1, ErrMalformed, "boolean field %s holds 0x%02x (want 0 or 1)", f.Name, b)
			}
			cd.Values[i] = b == 1
		default: // 'L', '['; readNewClassDesc rejected other codes
			var v Value
			v, err = d.readValue()
			if v != nil {
				cd.Values[i] = v
			}
		}
		if err != nil {
			return err
		}
	}
	if !c.Proxy && c.Flags&SCWriteMethod != 0 {
		ann, err := d.readAnnotation("writeObject data of", c.Name)
		if err != nil {
			return err
		}
		cd.Annotation = ann
	}
	return nil
}

// readAnnotation reads block data and objects up to TC_ENDBLOCKDATA.
func (d *decoder) readAnnotation(what, name string) ([]Content, error) {
	var out []Content
	for {
		if d.pos >= len(d.data) {
			return nil, d.need(1, what, name+" (missing TC_ENDBLOCKDATA)")
		}
		tc := d.data[d.pos]
		if tc == tcEndBlockData {
			d.pos++
			return out, nil
		}
		var err error
		if out, err = grow(d, out, d.pos); err != nil {
			return nil, err
		}
		var c Content
		if tc == tcBlockData || tc == tcBlockDataLong {
			c, err = d.readBlockData()
		} else {
			c, err = d.readValue()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

func (d *decoder) readBlockData() (*BlockData, error) {
	start := d.pos
	long := d.data[start] == tcBlockDataLong
	d.pos++
	var n int64
	if long {
		v, err := d.u32("block data length", "")
		if err != nil {
			return nil, err
		}
		if int32(v) < 0 {
			return nil, d.fail(start, ErrMalformed, "negative block data length %d", int32(v))
		}
		n = int64(v)
	} else {
		v, err := d.u8("block data length", "")
		if err != nil {
			return nil, err
		}
		n = int64(v)
	}
	b, err := d.take(n, "block data", "")
	if err != nil {
		return nil, err
	}
	if err := d.charge(sizeBlockData+n, start); err != nil {
		return nil, err
	}
	return &BlockData{Data: bytes.Clone(b), Long: long}, nil
}

func (d *decoder) readString() (*String, error) {
	start := d.pos
	long := d.data[start] == tcLongString
	d.pos++
	var n int64
	if long {
		v, err := d.u64("long string length", "")
		if err != nil {
			return nil, err
		}
		if int64(v) < 0 {
			return nil, d.fail(start, ErrMalformed, "negative long string length %d", int64(v))
		}
		n = int64(v)
	} else {
		v, err := d.u16("string length", "")
		if err != nil {
			return nil, err
		}
		n = int64(v)
	}
	body := d.pos
	b, err := d.take(n, "string", "")
	if err != nil {
		return nil, err
	}
	if err := d.charge(sizeString+n, start); err != nil {
		return nil, err
	}
	v, err := DecodeModifiedUTF8(b)
	if err != nil {
		ue := err.(*UTFError)
		return nil, d.fail(body+ue.Index, ErrMalformed, "string: %s", ue.Reason)
	}
	s := &String{Value: v, Long: long}
	if err := d.addHandle(s, start); err != nil {
		return nil, err
	}
	return s, nil
}

// readStringRef reads a String that may be a back reference: the type
// signature of an object field, or the name of an enum constant.
func (d *decoder) readStringRef(what, name string) (*String, error) {
	start := d.pos
	if start >= len(d.data) {
		return nil, d.need(1, what, name)
	}
	switch tc := d.data[start]; tc {
	case tcString, tcLongString:
		return d.readString()
	case tcReference:
		v, h, err := d.readHandle()
		if err != nil {
			return nil, err
		}
		s, ok := v.(*String)
		if !ok {
			return nil, d.fail(start, ErrMalformed, "%s %s refers to handle 0x%x, which is a %s, not a string", what, name, h, kindOf(v))
		}
		return s, nil
	default:
		return nil, d.fail(start, ErrMalformed, "%s %s: %s (0x%02x) where a string is expected", what, name, tcName(tc), tc)
	}
}

// readClassDesc reads a class descriptor: new, back reference, or (if
// allowNull) TC_NULL. what and name describe its use for error messages.
func (d *decoder) readClassDesc(allowNull bool, what, name string) (*ClassDesc, error) {
	start := d.pos
	if start >= len(d.data) {
		return nil, d.need(1, "class descriptor of "+what, name)
	}
	if err := d.enter(start); err != nil {
		return nil, err
	}
	defer func() { d.depth-- }()
	use := func() string { return strings.TrimSpace(what + " " + name) }
	switch tc := d.data[start]; tc {
	case tcNull:
		if !allowNull {
			return nil, d.fail(start, ErrMalformed, "null class descriptor for %s", use())
		}
		d.pos++
		return nil, nil
	case tcReference:
		v, h, err := d.readHandle()
		if err != nil {
			return nil, err
		}
		c, ok := v.(*ClassDesc)
		if !ok {
			return nil, d.fail(start, ErrMalformed, "class descriptor of %s refers to handle 0x%x, which is a %s", use(), h, kindOf(v))
		}
		if !d.descs[c].complete {
			return nil, d.fail(start, ErrMalformed, "class descriptor of %s refers to handle 0x%x, class %q, while it is still being read", use(), h, c.Name)
		}
		return c, nil
	case tcClassDesc:
		return d.readNewClassDesc()
	case tcProxyClassDesc:
		return d.readProxyClassDesc()
	default:
		return nil, d.fail(start, ErrMalformed, "%s (0x%02x) where the class descriptor of %s is expected", tcName(tc), tc, use())
	}
}

func (d *decoder) readNewClassDesc() (*ClassDesc, error) {
	start := d.pos
	d.pos++
	name, err := d.utf("class name", "")
	if err != nil {
		return nil, err
	}
	u, err := d.u64("serialVersionUID of class", name)
	if err != nil {
		return nil, err
	}
	if err := d.charge(sizeClassDesc, start); err != nil {
		return nil, err
	}
	c := &ClassDesc{Name: name, SerialVersionUID: int64(u)}
	m := &descMeta{}
	if err := d.addHandle(c, start); err != nil {
		return nil, err
	}
	d.descs[c] = m
	flagsAt := d.pos
	if c.Flags, err = d.u8("flags of class", name); err != nil {
		return nil, err
	}
	if c.Flags&SCSerializable != 0 && c.Flags&SCExternalizable != 0 {
		return nil, d.fail(flagsAt, ErrMalformed, "class %s: serializable and externalizable flags conflict", name)
	}
	countAt := d.pos
	n, err := d.u16("field count of class", name)
	if err != nil {
		return nil, err
	}
	if int16(n) < 0 {
		return nil, d.fail(countAt, ErrMalformed, "class %s: negative field count %d", name, int16(n))
	}
	// Each field takes at least a type code and a name length.
	if err := d.needFor(int64(n)*3, int64(n), "fields of class", name); err != nil {
		return nil, err
	}
	if n > 0 {
		if err := d.charge(int64(n)*sizeFieldDesc, countAt); err != nil {
			return nil, err
		}
		c.Fields = make([]FieldDesc, n)
	}
	objects := false
	for i := range c.Fields {
		at := d.pos
		code, err := d.u8("field type code in class", name)
		if err != nil {
			return nil, err
		}
		f := FieldDesc{Code: code}
		if f.Name, err = d.utf("field name in class", name); err != nil {
			return nil, err
		}
		switch code {
		case 'B', 'C', 'D', 'F', 'I', 'J', 'S', 'Z':
			if objects {
				return nil, d.fail(at, ErrMalformed, "class %s: primitive field %s after object fields", name, f.Name)
			}
		case 'L', '[':
			objects = true
			sigAt := d.pos
			if f.Type, err = d.readStringRef("type of field", f.Name); err != nil {
				return nil, err
			}
			if sig := f.Type.Value; sig == "" || (sig[0] != 'L' && sig[0] != '[') {
				return nil, d.fail(sigAt, ErrMalformed, "class %s: field %s has type signature %q", name, f.Name, sig)
			}
		default:
			return nil, d.fail(at, ErrMalformed, "class %s: field %s has invalid type code 0x%02x", name, f.Name, code)
		}
		c.Fields[i] = f
	}
	if err := d.finishClassDesc(c, m); err != nil {
		return nil, err
	}
	return c, nil
}

func (d *decoder) readProxyClassDesc() (*ClassDesc, error) {
	start := d.pos
	d.pos++
	if err := d.charge(sizeClassDesc, start); err != nil {
		return nil, err
	}
	c := &ClassDesc{Proxy: true}
	m := &descMeta{}
	if err := d.addHandle(c, start); err != nil {
		return nil, err
	}
	d.descs[c] = m
	u, err := d.u32("interface count of proxy class", "")
	if err != nil {
		return nil, err
	}
	n := int32(u)
	if n < 0 || n > maxProxyInterfaces {
		return nil, d.fail(start, ErrMalformed, "proxy class with %d interfaces", n)
	}
	if err := d.needFor(int64(n)*2, int64(n), "interface names of proxy class", ""); err != nil {
		return nil, err
	}
	if n > 0 {
		if err := d.charge(int64(n)*sizeValue, start); err != nil {
			return nil, err
		}
		c.Interfaces = make([]string, n)
	}
	for i := range c.Interfaces {
		if c.Interfaces[i], err = d.utf("interface name of proxy class", ""); err != nil {
			return nil, err
		}
	}
	if err := d.finishClassDesc(c, m); err != nil {
		return nil, err
	}
	return c, nil
}

// finishClassDesc reads the class annotation and the superclass.
func (d *decoder) finishClassDesc(c *ClassDesc, m *descMeta) error {
	var err error
	if c.Annotation, err = d.readAnnotation("annotation of class", c.Name); err != nil {
		return err
	}
	if c.Super, err = d.readClassDesc(true, "superclass of", c.Name); err != nil {
		return err
	}
	m.complete = true
	if s := c.Super; s != nil {
		sm := d.descs[s]
		m.dataSuper, m.dataCount = sm.dataSuper, sm.dataCount
		if s.hasData() {
			m.dataSuper = s
		}
	}
	if c.hasData() {
		m.dataCount++
	}
	return nil
}

func (d *decoder) readArray() (*Array, error) {
	start := d.pos
	d.pos++
	c, err := d.readClassDesc(false, "array", "")
	if err != nil {
		return nil, err
	}
	if c.Proxy || len(c.Name) < 2 || c.Name[0] != '[' {
		return nil, d.fail(start, ErrMalformed, "array of class %q, which is not an array class", c.Name)
	}
	if err := d.charge(sizeArray, start); err != nil {
		return nil, err
	}
	a := &Array{Class: c}
	if err := d.addHandle(a, start); err != nil {
		return nil, err
	}
	lenAt := d.pos
	u, err := d.u32("array length", "")
	if err != nil {
		return nil, err
	}
	n := int64(int32(u))
	if n < 0 {
		return nil, d.fail(lenAt, ErrMalformed, "negative array length %d", n)
	}
	code := c.Name[1]
	size := elementSize(code)
	if size == 0 {
		return nil, d.fail(start, ErrMalformed, "array class %q has invalid component type", c.Name)
	}
	// Object elements take at least one byte each (TC_NULL).
	if err := d.needFor(n*size, n, "elements of array", c.Name); err != nil {
		return nil, err
	}
	// In memory a reference takes an interface, a primitive its size.
	mem := size
	if code == 'L' || code == '[' {
		mem = sizeValue
	}
	if err := d.charge(n*mem, start); err != nil {
		return nil, err
	}
	b, err := d.take(n*size, "", "")
	if err != nil {
		return nil, err
	}
	switch code {
	case 'B':
		a.Elements = bytes.Clone(b)
	case 'Z':
		e := make([]bool, n)
		for i, x := range b {
			if x > 1 {
				return nil, d.fail(lenAt+4+i, ErrMalformed, "boolean array element %d holds 0x%02x (want 0 or 1)", i, x)
			}
			e[i] = x == 1
		}
		a.Elements = e
	case 'C':
		e := make([]uint16, n)
		for i := range e {
			e[i] = binary.BigEndian.Uint16(b[2*i:])
		}
		a.Elements = e
	case 'S':
		e := make([]int16, n)
		for i := range e {
			e[i] = int16(binary.BigEndian.Uint16(b[2*i:]))
		}
		a.Elements = e
	case 'I':
		e := make([]int32, n)
		for i := range e {
			e[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
		}
		a.Elements = e
	case 'F':
		e := make([]float32, n)
		for i := range e {
			e[i] = math.Float32frombits(binary.BigEndian.Uint32(b[4*i:]))
		}
		a.Elements = e
	case 'J':
		e := make([]int64, n)
		for i := range e {
			e[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
		}
		a.Elements = e
	case 'D':
		e := make([]float64, n)
		for i := range e {
			e[i] = math.Float64frombits(binary.BigEndian.Uint64(b[8*i:]))
		}
		a.Elements = e
	default: // 'L', '[': only the lower bound was checked; read the elements
		d.pos -= len(b)
		e := make([]Value, n)
		for i := range e {
			if e[i], err = d.readValue(); err != nil {
				return nil, err
			}
		}
		a.Elements = e
	}
	return a, nil
}

func (d *decoder) readEnum() (*Enum, error) {
	start := d.pos
	d.pos++
	c, err := d.readClassDesc(false, "enum", "")
	if err != nil {
		return nil, err
	}
	if !c.IsEnum() {
		return nil, d.fail(start, ErrMalformed, "TC_ENUM of class %q, which is not an enum", c.Name)
	}
	if err := d.charge(sizeEnum, start); err != nil {
		return nil, err
	}
	e := &Enum{Class: c}
	if err := d.addHandle(e, start); err != nil {
		return nil, err
	}
	if e.Constant, err = d.readStringRef("name of constant of enum", c.Name); err != nil {
		return nil, err
	}
	return e, nil
}

func (d *decoder) readClass() (*Class, error) {
	start := d.pos
	d.pos++
	c, err := d.readClassDesc(false, "class", "")
	if err != nil {
		return nil, err
	}
	if err := d.charge(sizeClass, start); err != nil {
		return nil, err
	}
	k := &Class{Desc: c}
	if err := d.addHandle(k, start); err != nil {
		return nil, err
	}
	return k, nil
}
