package javaser

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf16"
)

// Stream is a decoded serialization stream: everything after the header.
type Stream struct {
	// Contents are the top-level items in stream order: *BlockData
	// (primitive data written with writeInt, writeUTF, ...), Reset, or a
	// Value (nil for null).
	Contents []Content
}

// NewStream returns a stream with the given top-level contents.
func NewStream(contents ...Content) *Stream {
	return &Stream{Contents: contents}
}

// Reader reads the top-level contents the way ObjectInputStream would.
func (s *Stream) Reader() *ContentReader { return NewContentReader(s.Contents) }

// Object returns the only top-level item, which must be an object; this is
// the shape of everything Flink writes with InstantiationUtil.serializeObject.
func (s *Stream) Object() (*Object, error) {
	if len(s.Contents) != 1 {
		return nil, fmt.Errorf("javaser: stream has %d top-level items, want 1 object", len(s.Contents))
	}
	o, ok := s.Contents[0].(*Object)
	if !ok || o == nil {
		return nil, fmt.Errorf("javaser: top-level item is %s, want an object", kindOf(s.Contents[0]))
	}
	return o, nil
}

// Content is one item of the top-level contents or of an annotation:
// *BlockData, Reset, or a Value. A nil Content is Java null.
type Content interface{ isContent() }

// Value is anything a field, array element or annotation can refer to:
// *Object, *String, *Array, *Enum, *Class or *ClassDesc. A nil Value is
// Java null. Values have identity: the same pointer in two places is one
// Java object, written once and then referred to by handle.
type Value interface {
	Content
	isValue()
}

// BlockData is a run of primitive data (TC_BLOCKDATA or TC_BLOCKDATALONG).
// ObjectOutputStream splits long runs into blocks of 1024 bytes; each block
// is kept as its own BlockData. ContentReader joins them again.
type BlockData struct {
	Data []byte
	// Long selects TC_BLOCKDATALONG even for fewer than 256 bytes (longer
	// blocks always use it). The decoder sets it for every TC_BLOCKDATALONG.
	Long bool
}

// Reset marks a TC_RESET (ObjectOutputStream.reset): the handle table is
// cleared, so objects after it never refer to objects before it. It can
// only appear among the top-level contents.
type Reset struct{}

// String is a java.lang.String.
type String struct {
	Value string
	// Long selects TC_LONGSTRING even if the encoding fits in 65535 bytes
	// (longer strings always use it). The decoder sets it for every
	// TC_LONGSTRING.
	Long bool
	// Interned strings behave like Java's interned strings: all interned
	// *String with equal Value are one Java object, so the encoder writes
	// the first and refers to it afterwards. The JDK interns field type
	// signatures and enum constant names; the decoder never sets this.
	Interned bool
}

// NewString returns a new, not interned string.
func NewString(s string) *String { return &String{Value: s} }

// Interned returns an interned string (see String.Interned).
func Interned(s string) *String { return &String{Value: s, Interned: true} }

// ClassDesc is a class descriptor (ObjectStreamClass).
type ClassDesc struct {
	Name             string // binary name, e.g. "java.util.ArrayList", "[J"; empty for a proxy
	SerialVersionUID int64
	Flags            byte // SC* bits
	// Fields in wire order. Primitive fields must come before object fields.
	Fields []FieldDesc
	// Annotation is what annotateClass wrote; empty for the JDK's own writer.
	Annotation []Content
	Super      *ClassDesc // nil: no serializable superclass

	Proxy      bool     // a dynamic proxy class (TC_PROXYCLASSDESC)
	Interfaces []string // interfaces of a proxy class
}

// FieldDesc describes one serializable field.
type FieldDesc struct {
	Code byte // 'B','C','D','F','I','J','S','Z', or '[' / 'L' for object fields
	Name string
	// Type is the type signature of an object field, e.g.
	// "Ljava/lang/String;" or "[I"; nil for primitive fields.
	Type *String
}

// IsObject reports whether the field holds a reference rather than a primitive.
func (f FieldDesc) IsObject() bool { return f.Code == 'L' || f.Code == '[' }

// Signature returns the JVM type signature, e.g. "J" or "Ljava/lang/String;".
func (f FieldDesc) Signature() string {
	if f.IsObject() {
		if f.Type == nil {
			return ""
		}
		return f.Type.Value
	}
	return string(rune(f.Code))
}

// PrimField returns a primitive field descriptor; code is one of BCDFIJSZ.
func PrimField(code byte, name string) FieldDesc {
	return FieldDesc{Code: code, Name: name}
}

// ObjField returns an object field descriptor with an interned type
// signature such as "Ljava/lang/String;" or "[B".
func ObjField(name, signature string) FieldDesc {
	code := byte('L')
	if len(signature) > 0 && signature[0] == '[' {
		code = '['
	}
	return FieldDesc{Code: code, Name: name, Type: Interned(signature)}
}

// NewClassDesc returns a descriptor for a serializable class. The fields
// are sorted as the JDK sorts default serializable fields: primitives
// first, then by name. Set Fields directly to keep another order.
func NewClassDesc(name string, suid int64, flags byte, fields ...FieldDesc) *ClassDesc {
	fs := slices.Clone(fields)
	slices.SortStableFunc(fs, func(a, b FieldDesc) int {
		if a.IsObject() != b.IsObject() {
			if a.IsObject() {
				return 1
			}
			return -1
		}
		return compareUTF16(a.Name, b.Name)
	})
	return &ClassDesc{Name: name, SerialVersionUID: suid, Flags: flags, Fields: fs}
}

// compareUTF16 orders strings like Java's String.compareTo.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// Field returns the descriptor of the field called name declared by this class.
func (c *ClassDesc) Field(name string) (FieldDesc, bool) {
	for _, f := range c.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return FieldDesc{}, false
}

// IsEnum reports whether the class is an enum type.
func (c *ClassDesc) IsEnum() bool { return c.Flags&SCEnum != 0 }

// IsExternalizable reports whether the class implements Externalizable.
func (c *ClassDesc) IsExternalizable() bool { return !c.Proxy && c.Flags&SCExternalizable != 0 }

// hasData reports whether instances carry data for this class in a
// Serializable object: field values, or an annotation from writeObject.
// Classes without data contribute nothing on the wire.
func (c *ClassDesc) hasData() bool {
	return len(c.Fields) > 0 || (!c.Proxy && c.Flags&SCWriteMethod != 0)
}

// Hierarchy returns the class and its superclasses, most derived first.
// It stops at a repeated class, so a cyclic chain built by hand ends.
func (c *ClassDesc) Hierarchy() []*ClassDesc {
	var out []*ClassDesc
	seen := map[*ClassDesc]bool{}
	for d := c; d != nil && !seen[d]; d = d.Super {
		seen[d] = true
		out = append(out, d)
	}
	return out
}

// Object is an instance of a Serializable or Externalizable class.
type Object struct {
	Class *ClassDesc
	// Data holds one entry per class of the hierarchy that has data on the
	// wire, superclass first. For a Serializable object these are the
	// classes with fields or a writeObject method; for an Externalizable
	// object it is a single entry whose Annotation holds what
	// writeExternal wrote.
	Data []ClassData
}

// ClassData is the part of an object that one class wrote.
type ClassData struct {
	Class *ClassDesc
	// Values has one entry per Class.Fields: int8 (B), uint16 (C),
	// float64 (D), float32 (F), int32 (I), int64 (J), int16 (S), bool (Z),
	// and a Value or nil for object fields.
	Values []any
	// Annotation is what writeObject wrote after the fields (block data
	// and objects), or what writeExternal wrote.
	Annotation []Content
}

// Field returns the value of the field called name declared by this class.
func (d *ClassData) Field(name string) (any, bool) {
	for i, f := range d.Class.Fields {
		if f.Name == name && i < len(d.Values) {
			return d.Values[i], true
		}
	}
	return nil, false
}

// Reader reads the annotation the way the class's readObject would.
func (d *ClassData) Reader() *ContentReader { return NewContentReader(d.Annotation) }

// NewObject returns an instance of class with every field at its Java
// default (0, false, null), ready for Set.
func NewObject(class *ClassDesc) *Object {
	o := &Object{Class: class}
	if class == nil {
		return o
	}
	if class.IsExternalizable() {
		o.Data = []ClassData{{Class: class}}
		return o
	}
	h := class.Hierarchy()
	for i := len(h) - 1; i >= 0; i-- {
		c := h[i]
		if !c.hasData() {
			continue
		}
		vals := make([]any, len(c.Fields))
		for j, f := range c.Fields {
			vals[j] = zeroValue(f.Code)
		}
		o.Data = append(o.Data, ClassData{Class: c, Values: vals})
	}
	return o
}

func zeroValue(code byte) any {
	switch code {
	case 'B':
		return int8(0)
	case 'C':
		return uint16(0)
	case 'D':
		return float64(0)
	case 'F':
		return float32(0)
	case 'I':
		return int32(0)
	case 'J':
		return int64(0)
	case 'S':
		return int16(0)
	case 'Z':
		return false
	}
	return nil
}

// ClassName returns the name of the object's class.
func (o *Object) ClassName() string {
	if o.Class == nil {
		return ""
	}
	return o.Class.Name
}

// SerialVersionUID returns the serialVersionUID of the object's class.
func (o *Object) SerialVersionUID() int64 {
	if o.Class == nil {
		return 0
	}
	return o.Class.SerialVersionUID
}

// Field returns the value of the field called name. Like Java's field
// lookup it searches the object's own class first, then its superclasses;
// use FieldIn for a field hidden by a subclass field of the same name.
func (o *Object) Field(name string) (any, bool) {
	for i := len(o.Data) - 1; i >= 0; i-- {
		if v, ok := o.Data[i].Field(name); ok {
			return v, true
		}
	}
	return nil, false
}

// FieldIn returns the value of the field called name declared by the class
// called className.
func (o *Object) FieldIn(className, name string) (any, bool) {
	if d := o.DataOf(className); d != nil {
		return d.Field(name)
	}
	return nil, false
}

// DataOf returns the data written by the class called className, or nil if
// that class has no data in this object.
func (o *Object) DataOf(className string) *ClassData {
	for i := len(o.Data) - 1; i >= 0; i-- {
		if o.Data[i].Class != nil && o.Data[i].Class.Name == className {
			return &o.Data[i]
		}
	}
	return nil
}

// Annotation returns what the writeObject (or writeExternal) method of the
// class called className wrote, or nil.
func (o *Object) Annotation(className string) []Content {
	if d := o.DataOf(className); d != nil {
		return d.Annotation
	}
	return nil
}

// StringField returns the value of a non-null String field.
func (o *Object) StringField(name string) (string, error) {
	s, err := FieldAs[*String](o, name)
	if err != nil {
		return "", err
	}
	if s == nil {
		return "", fmt.Errorf("javaser: field %s of %s is null", name, o.ClassName())
	}
	return s.Value, nil
}

// FieldAs returns the value of the field called name (see Object.Field)
// as a T: int64 for a long field, *Object or *String for object fields, ...
// A null object field gives T's zero value when T is a pointer or Value.
func FieldAs[T any](o *Object, name string) (T, error) {
	var zero T
	v, ok := o.Field(name)
	if !ok {
		return zero, fmt.Errorf("javaser: class %s has no field %s", o.ClassName(), name)
	}
	if t, ok := v.(T); ok {
		return t, nil
	}
	if v == nil {
		switch any(&zero).(type) {
		case **Object, **String, **Array, **Enum, **Class, **ClassDesc, *Value, *any:
			return zero, nil
		}
	}
	return zero, fmt.Errorf("javaser: field %s of %s holds %s, not %T", name, o.ClassName(), kindOf(v), zero)
}

// Set assigns the field called name, searching like Field. Besides the
// exact types listed at ClassData.Values it accepts an int for any integral
// field (if in range), a float64 for a float field, and a Go string for an
// object field (as a new *String).
func (o *Object) Set(name string, v any) error {
	for i := len(o.Data) - 1; i >= 0; i-- {
		if ok, err := o.Data[i].set(name, v); ok {
			return err
		}
	}
	return fmt.Errorf("javaser: class %s has no field %s", o.ClassName(), name)
}

// SetIn assigns the field called name declared by the class className.
func (o *Object) SetIn(className, name string, v any) error {
	d := o.DataOf(className)
	if d == nil {
		return fmt.Errorf("javaser: object of class %s has no data for class %s", o.ClassName(), className)
	}
	if ok, err := d.set(name, v); ok {
		return err
	}
	return fmt.Errorf("javaser: class %s has no field %s", className, name)
}

// With is Set for building literals: it returns o, and panics where Set
// would return an error (a programming error in the literal).
func (o *Object) With(name string, v any) *Object {
	if err := o.Set(name, v); err != nil {
		panic(err)
	}
	return o
}

// SetAnnotation sets what the writeObject or writeExternal method of the
// class called className wrote (see ContentWriter).
func (o *Object) SetAnnotation(className string, contents []Content) error {
	d := o.DataOf(className)
	if d == nil {
		return fmt.Errorf("javaser: object of class %s has no data for class %s", o.ClassName(), className)
	}
	d.Annotation = contents
	return nil
}

func (d *ClassData) set(name string, v any) (bool, error) {
	for i, f := range d.Class.Fields {
		if f.Name != name {
			continue
		}
		if len(d.Values) != len(d.Class.Fields) {
			return true, fmt.Errorf("javaser: class %s: %d values for %d fields", d.Class.Name, len(d.Values), len(d.Class.Fields))
		}
		cv, err := coerce(f.Code, v)
		if err != nil {
			return true, fmt.Errorf("javaser: field %s of %s: %w", name, d.Class.Name, err)
		}
		d.Values[i] = cv
		return true, nil
	}
	return false, nil
}

// coerce converts v to the canonical Go type for a field of type code.
func coerce(code byte, v any) (any, error) {
	if n, ok := v.(int); ok {
		var lo, hi int64
		switch code {
		case 'B':
			lo, hi = math.MinInt8, math.MaxInt8
		case 'C':
			lo, hi = 0, math.MaxUint16
		case 'I':
			lo, hi = math.MinInt32, math.MaxInt32
		case 'J':
			lo, hi = math.MinInt64, math.MaxInt64
		case 'S':
			lo, hi = math.MinInt16, math.MaxInt16
		default:
			return nil, fmt.Errorf("int given for type %c", code)
		}
		if int64(n) < lo || int64(n) > hi {
			return nil, fmt.Errorf("%d out of range for type %c", n, code)
		}
		switch code {
		case 'B':
			return int8(n), nil
		case 'C':
			return uint16(n), nil
		case 'I':
			return int32(n), nil
		case 'S':
			return int16(n), nil
		}
		return int64(n), nil
	}
	if f, ok := v.(float64); ok && code == 'F' {
		return float32(f), nil
	}
	if s, ok := v.(string); ok && (code == 'L' || code == '[') {
		return NewString(s), nil
	}
	if !fieldValueOK(code, v) {
		return nil, fmt.Errorf("%s given for type %c", kindOf(v), code)
	}
	return v, nil
}

// fieldValueOK reports whether v has the canonical type for type code.
func fieldValueOK(code byte, v any) bool {
	switch code {
	case 'B':
		_, ok := v.(int8)
		return ok
	case 'C':
		_, ok := v.(uint16)
		return ok
	case 'D':
		_, ok := v.(float64)
		return ok
	case 'F':
		_, ok := v.(float32)
		return ok
	case 'I':
		_, ok := v.(int32)
		return ok
	case 'J':
		_, ok := v.(int64)
		return ok
	case 'S':
		_, ok := v.(int16)
		return ok
	case 'Z':
		_, ok := v.(bool)
		return ok
	case 'L', '[':
		if v == nil {
			return true
		}
		_, ok := v.(Value)
		return ok
	}
	return false
}

// Array is a Java array.
type Array struct {
	Class *ClassDesc // name starts with '[', e.g. "[J" or "[Ljava.lang.String;"
	// Elements is a typed slice chosen by the component type: []byte (B),
	// []uint16 (C), []float64 (D), []float32 (F), []int32 (I), []int64 (J),
	// []int16 (S), []bool (Z), []Value for object arrays (nil = null).
	Elements any
}

// NewArray returns an array of class with the given elements (see Array.Elements).
func NewArray(class *ClassDesc, elements any) *Array {
	return &Array{Class: class, Elements: elements}
}

// ComponentCode returns the type code of the elements: one of BCDFIJSZ,
// '[' or 'L', or 0 if the class is not an array class.
func (a *Array) ComponentCode() byte {
	if a.Class == nil || len(a.Class.Name) < 2 || a.Class.Name[0] != '[' {
		return 0
	}
	return a.Class.Name[1]
}

// Len returns the number of elements.
func (a *Array) Len() int {
	switch e := a.Elements.(type) {
	case []byte:
		return len(e)
	case []uint16:
		return len(e)
	case []float64:
		return len(e)
	case []float32:
		return len(e)
	case []int32:
		return len(e)
	case []int64:
		return len(e)
	case []int16:
		return len(e)
	case []bool:
		return len(e)
	case []Value:
		return len(e)
	}
	return 0
}

// Values returns the elements of an object array, or nil.
func (a *Array) Values() []Value {
	v, _ := a.Elements.([]Value)
	return v
}

// Enum is an enum constant.
type Enum struct {
	Class    *ClassDesc // SCEnum set; its Super is java.lang.Enum
	Constant *String    // the constant's name
}

// Name returns the constant's name, e.g. "NATIVE".
func (e *Enum) Name() string {
	if e.Constant == nil {
		return ""
	}
	return e.Constant.Value
}

// ClassName returns the name of the enum type.
func (e *Enum) ClassName() string {
	if e.Class == nil {
		return ""
	}
	return e.Class.Name
}

// Class is a java.lang.Class object (TC_CLASS).
type Class struct {
	Desc *ClassDesc
}

func (*BlockData) isContent() {}
func (Reset) isContent()      {}
func (*String) isContent()    {}
func (*Object) isContent()    {}
func (*Array) isContent()     {}
func (*Enum) isContent()      {}
func (*Class) isContent()     {}
func (*ClassDesc) isContent() {}
func (*String) isValue()      {}
func (*Object) isValue()      {}
func (*Array) isValue()       {}
func (*Enum) isValue()        {}
func (*Class) isValue()       {}
func (*ClassDesc) isValue()   {}

// kindOf describes a value's kind for error messages.
func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case *Object:
		if v == nil {
			return "null"
		}
		return "object of " + v.ClassName()
	case *String:
		return "string"
	case *Array:
		return "array"
	case *Enum:
		return "enum constant"
	case *Class:
		return "class"
	case *ClassDesc:
		return "class descriptor"
	case *BlockData:
		return "block data"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Go %T", v)
}
