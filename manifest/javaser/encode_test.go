package javaser

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEncodeHandles(t *testing.T) {
	a, b := Interned("sig"), Interned("sig")
	n1, n2 := NewString("v"), NewString("v")
	got, err := Encode(NewStream(a, b, n1, n2, n1, Reset{}, n1, b))
	if err != nil {
		t.Fatal(err)
	}
	want := stream(
		tcString, utf("sig"), // handle 0
		tcReference, u32(baseWireHandle), // interned: same handle
		tcString, utf("v"), tcString, utf("v"), // equal but distinct strings
		tcReference, u32(baseWireHandle+1),
		tcReset,
		tcString, utf("v"), // after a reset everything is new
		tcString, utf("sig"),
	)
	if !bytes.Equal(got, want) {
		t.Fatalf("got:\n%s", diffBytes(got, want))
	}
}

func TestEncodeTypedNilIsNull(t *testing.T) {
	c := NewClassDesc("N", 1, SCSerializable, ObjField("o", "Ljava/lang/Object;"))
	o := NewObject(c)
	o.Data[0].Values[0] = (*Object)(nil)
	got, err := Encode(NewStream(o, (*String)(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if want := stream(tcObject, classDesc("N", 1, SCSerializable, tcNull, objFieldDesc("o", "Ljava/lang/Object;")), tcNull, tcNull); !bytes.Equal(got, want) {
		t.Fatalf("got:\n%s", diffBytes(got, want))
	}
}

func TestEncodeErrors(t *testing.T) {
	var jdk JDK
	serial := func(name string, fields ...FieldDesc) *ClassDesc {
		return NewClassDesc(name, 1, SCSerializable, fields...)
	}
	long := serial("L", PrimField('J', "stateSize"))
	cyclic := serial("Cyc")
	cyclic.Super = cyclic
	tests := []struct {
		name    string
		content func() Content
		path    string
		msg     string
	}{
		{"object without class", func() Content { return &Object{} }, "contents[0]", "object without class descriptor"},
		{"wrong field type", func() Content {
			o := NewObject(long)
			o.Data[0].Values[0] = 5 // a Go int, not int64
			return jdk.ArrayList(o)
		}, "contents[0].annotation(java.util.ArrayList)[1].stateSize", "field stateSize of type J holds Go int"},
		{"missing class data", func() Content { return &Object{Class: long} }, "contents[0]", "has data for 0 classes"},
		{"class data of another class", func() Content {
			o := NewObject(long)
			o.Data[0].Class = serial("Other", PrimField('J', "stateSize"))
			return o
		}, "contents[0]", `is for class "Other", want "L"`},
		{"value count", func() Content {
			o := NewObject(long)
			o.Data[0].Values = nil
			return o
		}, "contents[0]", "1 fields but 0 values"},
		{"annotation without writeObject", func() Content {
			o := NewObject(long)
			o.Data[0].Annotation = []Content{NewString("x")}
			return o
		}, "contents[0].annotation(L)", "no SCWriteMethod flag"},
		{"reset in annotation", func() Content {
			l := jdk.ArrayList()
			l.Data[0].Annotation = append(l.Data[0].Annotation, Reset{})
			return l
		}, "contents[0].annotation(java.util.ArrayList)[1]", "Reset is only allowed among the top-level contents"},
		{"primitive after object field", func() Content {
			c := serial("P")
			c.Fields = []FieldDesc{ObjField("o", "LA;"), PrimField('I', "i")}
			return c
		}, "contents[0].class(P)", "primitive field i after object fields"},
		{"object field without type", func() Content {
			c := serial("T")
			c.Fields = []FieldDesc{{Code: 'L', Name: "o"}}
			return c
		}, "contents[0].class(T)", "no valid type signature"},
		{"invalid field code", func() Content { return serial("Q", PrimField('Q', "q")) }, "contents[0].class(Q)", "invalid type code 'Q'"},
		{"flags conflict", func() Content { return NewClassDesc("F", 1, SCSerializable|SCExternalizable) }, "contents[0].class(F)", "flags conflict"},
		{"superclass cycle", func() Content { return NewObject(cyclic) }, "contents[0].class(Cyc)", "used inside its own descriptor"},
		{"enum of non-enum class", func() Content { return &Enum{Class: serial("E"), Constant: Interned("A")} }, "contents[0]", "no SCEnum flag"},
		{"enum without name", func() Content { return &Enum{Class: jdk.EnumClass("E")} }, "contents[0]", "without a name"},
		{"array of non-array class", func() Content { return NewArray(serial("A"), []int32{1}) }, "contents[0]", "not an array class"},
		{"array elements of the wrong type", func() Content {
			a, _ := jdk.Array([]int32{1})
			a.Elements = []int64{1}
			return a
		}, "contents[0]", "array of class [I holds Go []int64"},
		{"externalizable version 1", func() Content { return NewObject(NewClassDesc("X", 1, SCExternalizable)) }, "contents[0]", "without SCBlockData"},
		{"externalizable with values", func() Content {
			o := NewObject(NewClassDesc("X", 1, SCExternalizable|SCBlockData))
			o.Data[0].Values = []any{int32(1)}
			return o
		}, "contents[0]", "without values"},
		{"string not UTF-8", func() Content { return NewString("\xff") }, "contents[0]", "not valid UTF-8"},
		{"class name too long", func() Content { return serial(strings.Repeat("x", 65536)) }, "contents[0].class(" + strings.Repeat("x", 65536) + ")", "class name encodes to 65536 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(NewStream(tc.content()))
			var ee *EncodeError
			if !errors.As(err, &ee) {
				t.Fatalf("Encode error %v, want *EncodeError", err)
			}
			if ee.Path != tc.path || !strings.Contains(ee.Msg, tc.msg) {
				t.Errorf("error at %q: %q; want at %q containing %q", ee.Path, ee.Msg, tc.path, tc.msg)
			}
		})
	}
}

func TestNewClassDescSortsLikeTheJDK(t *testing.T) {
	c := NewClassDesc("S", 1, SCSerializable,
		ObjField("b", "LB;"), PrimField('I', "z"), ObjField("a", "LA;"), PrimField('J', "y"), PrimField('Z', "\uff00"), PrimField('Z', "\U00010000"))
	var names []string
	for _, f := range c.Fields {
		names = append(names, f.Name)
	}
	// Java compares UTF-16: the surrogate pair of U+10000 (D800 DC00) sorts before U+FF00.
	wantEqual(t, "order", names, []string{"y", "z", "\U00010000", "\uff00", "a", "b"})
}

func TestSetAndFieldAs(t *testing.T) {
	base := NewClassDesc("Base", 1, SCSerializable, PrimField('I', "x"), PrimField('B', "b"))
	sub := NewClassDesc("Sub", 2, SCSerializable, PrimField('I', "x"), ObjField("s", "Ljava/lang/String;"),
		PrimField('C', "c"), PrimField('F', "f"), PrimField('S', "sh"))
	sub.Super = base
	o := NewObject(sub)
	for _, step := range []struct {
		name string
		v    any
		ok   bool
	}{
		{"x", 7, true}, {"b", -128, true}, {"b", 128, false}, {"c", 65535, true}, {"c", -1, false},
		{"f", 1.5, true}, {"f", "x", false}, {"sh", 1 << 15, false}, {"s", "str", true}, {"s", 3, false},
		{"s", nil, true}, {"s", NewString("p"), true}, {"x", int64(1), false}, {"missing", 1, false},
	} {
		if err := o.Set(step.name, step.v); (err == nil) != step.ok {
			t.Errorf("Set(%s, %#v) = %v, want ok=%v", step.name, step.v, err, step.ok)
		}
	}
	if err := o.SetIn("Base", "x", 3); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "Sub.x", field[int32](t, o, "x"), int32(7))
	wantEqual(t, "Base.x", must[any](t)(fieldIn(o, "Base", "x")), any(int32(3)))
	wantEqual(t, "b", field[int8](t, o, "b"), int8(-128))
	wantEqual(t, "f", field[float32](t, o, "f"), float32(1.5))
	wantEqual(t, "s", must[string](t)(o.StringField("s")), "p")
	if err := o.SetIn("Nope", "x", 1); err == nil {
		t.Error("SetIn of a class outside the hierarchy succeeded")
	}
	if _, err := FieldAs[int64](o, "x"); err == nil || !strings.Contains(err.Error(), "not int64") {
		t.Errorf("FieldAs[int64] of an int field: %v", err)
	}
	if _, err := FieldAs[int32](o, "nope"); err == nil {
		t.Error("FieldAs of a missing field succeeded")
	}
	if err := o.Set("s", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := FieldAs[*Object](o, "s"); v != nil || err != nil {
		t.Errorf("FieldAs[*Object] of null = %v, %v; want nil, nil", v, err)
	}
	if _, err := o.StringField("s"); err == nil {
		t.Error("StringField of null succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Error("With of a missing field did not panic")
		}
	}()
	o.With("missing", 1)
}

func TestContentWriterBlocks(t *testing.T) {
	var w ContentWriter
	w.WriteInt64(1)
	w.Write(make([]byte, 2040))
	w.WriteObject(nil)
	w.WriteBool(true)
	w.Flush()
	w.WriteInt8(-1)
	var sizes []int
	for _, c := range w.Contents() {
		if b, ok := c.(*BlockData); ok {
			sizes = append(sizes, len(b.Data))
		} else {
			sizes = append(sizes, -1)
		}
	}
	wantEqual(t, "blocks (-1 = object)", sizes, []int{1024, 1024, -1, 1, 1})
	if err := w.WriteUTF(strings.Repeat("é", 40000)); err == nil {
		t.Error("WriteUTF of 80000 bytes succeeded")
	}
}

func TestContentReader(t *testing.T) {
	contents := []Content{
		&BlockData{Data: []byte{0, 0}}, &BlockData{}, Reset{}, &BlockData{Data: []byte{0, 5, 'h'}},
		NewString("o"), nil, &BlockData{Data: []byte{1}},
	}
	r := NewContentReader(contents)
	if _, err := r.ReadObject(); !errors.Is(err, ErrDataNext) {
		t.Errorf("ReadObject before the primitive data: %v, want ErrDataNext", err)
	}
	wantEqual(t, "int across blocks", must[int32](t)(r.ReadInt32()), int32(5))
	if _, err := r.ReadInt16(); err != ErrObjectNext {
		t.Errorf("ReadInt16 with one byte before an object: %v, want ErrObjectNext", err)
	}
	r = NewContentReader(contents)
	must[[]byte](t)(r.ReadFull(4))
	wantEqual(t, "byte", must[int8](t)(r.ReadInt8()), int8('h'))
	wantString(t, must[Value](t)(r.ReadObject()), "o")
	wantEqual(t, "null", must[Value](t)(r.ReadObject()), Value(nil))
	wantEqual(t, "bool", must[bool](t)(r.ReadBool()), true)
	if !r.Done() {
		t.Error("not done")
	}
	if _, err := r.ReadObject(); err != io.EOF {
		t.Errorf("ReadObject at the end: %v, want io.EOF", err)
	}
	if _, err := r.ReadInt8(); err != io.EOF {
		t.Errorf("ReadInt8 at the end: %v, want io.EOF", err)
	}
	if _, err := NewContentReader([]Content{&BlockData{Data: []byte{1}}}).ReadInt32(); err != io.ErrUnexpectedEOF {
		t.Errorf("ReadInt32 of one byte: %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestWalk(t *testing.T) {
	var jdk JDK
	node := NewClassDesc("Node", 1, SCSerializable, ObjField("next", "LNode;"))
	a, b := NewObject(node), NewObject(node)
	a.With("next", b)
	b.With("next", a)
	s := NewStream(jdk.ArrayList(a, b, a), a)
	seen := map[Value]int{}
	if err := s.Walk(func(v Value) error { seen[v]++; return nil }); err != nil {
		t.Fatal(err)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s visited %d times", kindOf(v), n)
		}
	}
	for _, v := range []Value{a, b, node, node.Fields[0].Type} {
		if seen[v] != 1 {
			t.Errorf("%s not visited", kindOf(v))
		}
	}
	wantEqual(t, "objects", len(s.Objects()), 3)
	stop := errors.New("stop")
	calls := 0
	if err := s.Walk(func(Value) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("Walk returned %v after %d calls, want stop after 1", err, calls)
	}
}

func TestHierarchyOfCycle(t *testing.T) {
	a, b := &ClassDesc{Name: "A"}, &ClassDesc{Name: "B"}
	a.Super, b.Super = b, a
	if h := a.Hierarchy(); len(h) != 2 {
		t.Errorf("Hierarchy of a cycle has %d classes, want 2", len(h))
	}
	if o := NewObject(a); len(o.Data) != 0 {
		t.Errorf("NewObject of a cycle of data-less classes has %d class data", len(o.Data))
	}
}
