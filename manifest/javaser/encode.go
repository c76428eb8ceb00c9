package javaser

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Encode writes s as a serialization stream, header included.
//
// Handles follow Go identity, as ObjectOutputStream's follow Java identity:
// the first time a pointer (*Object, *String, *Array, *Enum, *Class,
// *ClassDesc) is met it is written in full and gets the next handle; later
// it is written as TC_REFERENCE. Interned strings with equal values share
// one handle. A Reset clears the table. Encode of a decoded stream
// reproduces the decoded bytes exactly. Errors are *EncodeError.
func Encode(s *Stream) ([]byte, error) {
	e := &encoder{
		handles:  make(map[Value]uint32),
		interned: make(map[string]uint32),
		busy:     make(map[*ClassDesc]bool),
		layouts:  make(map[*ClassDesc]layout),
	}
	e.buf = binary.BigEndian.AppendUint16(e.buf, StreamMagic)
	e.buf = binary.BigEndian.AppendUint16(e.buf, StreamVersion)
	for i, c := range s.Contents {
		e.push("contents", i)
		var err error
		switch c := c.(type) {
		case Reset:
			e.buf = append(e.buf, tcReset)
			clear(e.handles)
			clear(e.interned)
			e.next = 0
		case *BlockData:
			err = e.writeBlock(c)
		case Value:
			err = e.writeValue(c)
		case nil:
			e.buf = append(e.buf, tcNull)
		}
		if err != nil {
			return nil, err
		}
		e.pop()
	}
	return e.buf, nil
}

type encoder struct {
	buf      []byte
	handles  map[Value]uint32  // value → handle, by identity
	interned map[string]uint32 // interned string value → handle
	next     uint32            // next handle, minus baseWireHandle
	busy     map[*ClassDesc]bool
	layouts  map[*ClassDesc]layout
	path     []pathElem
}

// pathElem is one step of the location reported in errors: a name, an
// index, or both ("contents[2]").
type pathElem struct {
	name  string
	class string // if set, shown as name(class)
	index int    // -1: none
}

func (e *encoder) push(name string, index int) { e.path = append(e.path, pathElem{name, "", index}) }
func (e *encoder) pop()                        { e.path = e.path[:len(e.path)-1] }

// at renames the innermost path element.
func (e *encoder) at(name, class string) {
	p := &e.path[len(e.path)-1]
	p.name, p.class = name, class
}
func (e *encoder) fail(format string, args ...any) error {
	var b strings.Builder
	for i, p := range e.path {
		if p.name != "" {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.name)
			if p.class != "" {
				b.WriteString("(" + p.class + ")")
			}
		}
		if p.index >= 0 {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
		}
	}
	return &EncodeError{Path: b.String(), Msg: fmt.Sprintf(format, args...)}
}

func (e *encoder) assign(v Value) uint32 {
	h := baseWireHandle + e.next
	e.handles[v] = h
	e.next++
	return h
}

func (e *encoder) writeRef(h uint32) {
	e.buf = append(e.buf, tcReference)
	e.buf = binary.BigEndian.AppendUint32(e.buf, h)
}

// isNil reports whether v is null, including a typed nil pointer.
func isNil(v Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case *Object:
		return v == nil
	case *String:
		return v == nil
	case *Array:
		return v == nil
	case *Enum:
		return v == nil
	case *Class:
		return v == nil
	case *ClassDesc:
		return v == nil
	}
	return false
}

func (e *encoder) writeValue(v Value) error {
	if isNil(v) {
		e.buf = append(e.buf, tcNull)
		return nil
	}
	if h, ok := e.handles[v]; ok {
		e.writeRef(h)
		return nil
	}
	switch v := v.(type) {
	case *String:
		return e.writeString(v)
	case *Object:
		return e.writeObject(v)
	case *Array:
		return e.writeArray(v)
	case *Enum:
		return e.writeEnum(v)
	case *Class:
		e.buf = append(e.buf, tcClass)
		if err := e.writeClassDesc(v.Desc, false); err != nil {
			return err
		}
		e.assign(v)
		return nil
	case *ClassDesc:
		return e.writeClassDesc(v, false)
	}
	return e.fail("unknown value type %T", v)
}

// writeString writes s as new, or as a reference if it was written before.
func (e *encoder) writeString(s *String) error {
	if h, ok := e.handles[s]; ok {
		e.writeRef(h)
		return nil
	}
	if s.Interned {
		if h, ok := e.interned[s.Value]; ok {
			e.writeRef(h)
			return nil
		}
	}
	if !validJavaString(s.Value) {
		return e.fail("string %q is not valid UTF-8", s.Value)
	}
	n := ModifiedUTF8Len(s.Value)
	if s.Long || n > math.MaxUint16 {
		e.buf = append(e.buf, tcLongString)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(n))
	} else {
		e.buf = append(e.buf, tcString)
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	}
	e.buf = AppendModifiedUTF8(e.buf, s.Value)
	h := e.assign(s)
	if s.Interned {
		e.interned[s.Value] = h
	}
	return nil
}

// writeUTF writes a writeUTF string (class, field and interface names).
func (e *encoder) writeUTF(s, what string) error {
	if !validJavaString(s) {
		return e.fail("%s %q is not valid UTF-8", what, s)
	}
	n := ModifiedUTF8Len(s)
	if n > math.MaxUint16 {
		return e.fail("%s encodes to %d bytes (max 65535)", what, n)
	}
	e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(n))
	e.buf = AppendModifiedUTF8(e.buf, s)
	return nil
}

func (e *encoder) writeBlock(b *BlockData) error {
	n := len(b.Data)
	switch {
	case n > math.MaxInt32:
		return e.fail("block data of %d bytes", n)
	case b.Long || n > math.MaxUint8:
		e.buf = append(e.buf, tcBlockDataLong)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	default:
		e.buf = append(e.buf, tcBlockData, byte(n))
	}
	e.buf = append(e.buf, b.Data...)
	return nil
}

// writeAnnotation writes contents and the closing TC_ENDBLOCKDATA.
func (e *encoder) writeAnnotation(contents []Content, name string) error {
	for i, c := range contents {
		e.push(name, i)
		var err error
		switch c := c.(type) {
		case nil:
			e.buf = append(e.buf, tcNull)
		case *BlockData:
			err = e.writeBlock(c)
		case Value:
			err = e.writeValue(c)
		case Reset:
			err = e.fail("Reset is only allowed among the top-level contents")
		}
		if err != nil {
			return err
		}
		e.pop()
	}
	e.buf = append(e.buf, tcEndBlockData)
	return nil
}

func (e *encoder) writeClassDesc(c *ClassDesc, allowNull bool) error {
	if c == nil {
		if !allowNull {
			return e.fail("missing class descriptor")
		}
		e.buf = append(e.buf, tcNull)
		return nil
	}
	if h, ok := e.handles[c]; ok {
		if e.busy[c] {
			return e.fail("class descriptor %q is used inside its own descriptor (annotation or superclass chain)", c.Name)
		}
		e.writeRef(h)
		return nil
	}
	e.push("", -1)
	e.at("class", c.Name)
	defer e.pop()
	if c.Proxy {
		e.buf = append(e.buf, tcProxyClassDesc)
		e.assign(c)
		if len(c.Interfaces) > maxProxyInterfaces {
			return e.fail("proxy class with %d interfaces", len(c.Interfaces))
		}
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(len(c.Interfaces)))
		for _, name := range c.Interfaces {
			if err := e.writeUTF(name, "interface name"); err != nil {
				return err
			}
		}
	} else {
		e.buf = append(e.buf, tcClassDesc)
		if err := e.writeUTF(c.Name, "class name"); err != nil {
			return err
		}
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(c.SerialVersionUID))
		e.assign(c)
		if c.Flags&SCSerializable != 0 && c.Flags&SCExternalizable != 0 {
			return e.fail("serializable and externalizable flags conflict")
		}
		e.buf = append(e.buf, c.Flags)
		if len(c.Fields) > math.MaxInt16 {
			return e.fail("%d fields", len(c.Fields))
		}
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(c.Fields)))
		objects := false
		for _, f := range c.Fields {
			e.buf = append(e.buf, f.Code)
			if err := e.writeUTF(f.Name, "field name"); err != nil {
				return err
			}
			switch f.Code {
			case 'B', 'C', 'D', 'F', 'I', 'J', 'S', 'Z':
				if objects {
					return e.fail("primitive field %s after object fields", f.Name)
				}
			case 'L', '[':
				objects = true
				if f.Type == nil || f.Type.Value == "" || (f.Type.Value[0] != 'L' && f.Type.Value[0] != '[') {
					return e.fail("object field %s has no valid type signature", f.Name)
				}
				if err := e.writeString(f.Type); err != nil {
					return err
				}
			default:
				return e.fail("field %s has invalid type code %q", f.Name, f.Code)
			}
		}
	}
	e.busy[c] = true
	if err := e.writeAnnotation(c.Annotation, "annotation"); err != nil {
		return err
	}
	if err := e.writeClassDesc(c.Super, true); err != nil {
		return err
	}
	delete(e.busy, c)
	return nil
}

// layout says which classes of a hierarchy have data, as the decoder's
// descMeta does, so that writing an object costs O(1) per class with data
// even in a long superclass chain.
type layout struct {
	dataSuper *ClassDesc // nearest superclass with data
	count     int        // classes with data, this one included
}

// layoutOf computes the layout of c and of its superclasses not yet seen.
func (e *encoder) layoutOf(c *ClassDesc) (layout, error) {
	if l, ok := e.layouts[c]; ok {
		return l, nil
	}
	var pending []*ClassDesc
	seen := map[*ClassDesc]bool{}
	for d := c; d != nil; d = d.Super {
		if _, ok := e.layouts[d]; ok {
			break
		}
		if seen[d] {
			return layout{}, e.fail("superclass chain of %s is a cycle", c.Name)
		}
		seen[d] = true
		pending = append(pending, d)
	}
	for i := len(pending) - 1; i >= 0; i-- {
		d := pending[i]
		var l layout
		if s := d.Super; s != nil {
			l = e.layouts[s]
			if s.hasData() {
				l.dataSuper = s
			}
		}
		if d.hasData() {
			l.count++
		}
		e.layouts[d] = l
	}
	return e.layouts[c], nil
}

func (e *encoder) writeObject(o *Object) error {
	if o.Class == nil {
		return e.fail("object without class descriptor")
	}
	e.buf = append(e.buf, tcObject)
	if err := e.writeClassDesc(o.Class, false); err != nil {
		return err
	}
	e.assign(o)
	e.push("", -1) // replaced by field names below
	defer e.pop()
	if o.Class.IsExternalizable() {
		if o.Class.Flags&SCBlockData == 0 {
			return e.fail("Externalizable class %s without SCBlockData (protocol version 1) is not supported", o.Class.Name)
		}
		if len(o.Data) != 1 || o.Data[0].Class != o.Class || len(o.Data[0].Values) != 0 {
			return e.fail("Externalizable object of %s needs exactly one ClassData for its class, without values", o.Class.Name)
		}
		e.at("external", o.Class.Name)
		return e.writeAnnotation(o.Data[0].Annotation, "")
	}
	l, err := e.layoutOf(o.Class)
	if err != nil {
		return err
	}
	if len(o.Data) != l.count {
		return e.fail("object of %s has data for %d classes; its hierarchy has %d classes with fields or writeObject", o.Class.Name, len(o.Data), l.count)
	}
	c := o.Class
	if !c.hasData() {
		c = l.dataSuper
	}
	for i := len(o.Data) - 1; i >= 0; i-- {
		if o.Data[i].Class != c {
			return e.fail("Data[%d] of object of %s is for class %q, want %q", i, o.Class.Name, className(o.Data[i].Class), className(c))
		}
		c = e.layouts[c].dataSuper
	}
	for i := range o.Data {
		d := &o.Data[i]
		c := d.Class
		if len(d.Values) != len(c.Fields) {
			return e.fail("class %s has %d fields but %d values", c.Name, len(c.Fields), len(d.Values))
		}
		for j, f := range c.Fields {
			e.at(f.Name, "")
			if err := e.writeField(f, d.Values[j]); err != nil {
				return err
			}
		}
		e.at("annotation", c.Name)
		if c.Flags&SCWriteMethod != 0 && !c.Proxy {
			if err := e.writeAnnotation(d.Annotation, ""); err != nil {
				return err
			}
		} else if len(d.Annotation) > 0 {
			return e.fail("class %s has annotation contents but no SCWriteMethod flag", c.Name)
		}
	}
	return nil
}

func className(c *ClassDesc) string {
	if c == nil {
		return "<nil>"
	}
	return c.Name
}

func (e *encoder) writeField(f FieldDesc, v any) error {
	if !fieldValueOK(f.Code, v) {
		return e.fail("field %s of type %s holds %s", f.Name, f.Signature(), kindOf(v))
	}
	switch v := v.(type) {
	case int8:
		e.buf = append(e.buf, byte(v))
	case uint16:
		e.buf = binary.BigEndian.AppendUint16(e.buf, v)
	case float64:
		e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(v))
	case float32:
		e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(v))
	case int32:
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v))
	case int64:
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v))
	case int16:
		e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v))
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		e.buf = append(e.buf, b)
	case Value:
		return e.writeValue(v)
	case nil:
		e.buf = append(e.buf, tcNull)
	}
	return nil
}

func (e *encoder) writeArray(a *Array) error {
	e.buf = append(e.buf, tcArray)
	if err := e.writeClassDesc(a.Class, false); err != nil {
		return err
	}
	e.assign(a)
	code := a.ComponentCode()
	if elementSize(code) == 0 {
		return e.fail("array of class %q, which is not an array class", a.Class.Name)
	}
	if a.Elements != nil && !elementsMatch(code, a.Elements) {
		return e.fail("array of class %s holds Go %T", a.Class.Name, a.Elements)
	}
	n := a.Len()
	if n > math.MaxInt32 {
		return e.fail("array of %d elements", n)
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	switch el := a.Elements.(type) {
	case []byte:
		e.buf = append(e.buf, el...)
	case []bool:
		for _, x := range el {
			b := byte(0)
			if x {
				b = 1
			}
			e.buf = append(e.buf, b)
		}
	case []uint16:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint16(e.buf, x)
		}
	case []int16:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(x))
		}
	case []int32:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(x))
		}
	case []float32:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(x))
		}
	case []int64:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(x))
		}
	case []float64:
		for _, x := range el {
			e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(x))
		}
	case []Value:
		for i, x := range el {
			e.push("", i)
			if err := e.writeValue(x); err != nil {
				return err
			}
			e.pop()
		}
	}
	return nil
}

// elementsMatch reports whether elements is the slice type Array.Elements
// documents for component type code.
func elementsMatch(code byte, elements any) bool {
	switch elements.(type) {
	case []byte:
		return code == 'B'
	case []bool:
		return code == 'Z'
	case []uint16:
		return code == 'C'
	case []int16:
		return code == 'S'
	case []int32:
		return code == 'I'
	case []float32:
		return code == 'F'
	case []int64:
		return code == 'J'
	case []float64:
		return code == 'D'
	case []Value:
		return code == 'L' || code == '['
	}
	return false
}

func (e *encoder) writeEnum(v *Enum) error {
	e.buf = append(e.buf, tcEnum)
	if err := e.writeClassDesc(v.Class, false); err != nil {
		return err
	}
	if !v.Class.IsEnum() {
		return e.fail("enum constant of class %q, which has no SCEnum flag", v.Class.Name)
	}
	e.assign(v)
	if v.Constant == nil {
		return e.fail("enum constant of %s without a name", v.Class.Name)
	}
	return e.writeString(v.Constant)
}
