package javaser

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/ckptfs/ckptfs/integration/jdktest"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the JDK seeds in testdata/fuzz/FuzzDecode from the JDK's output")

// maxSeedSize keeps huge streams (the TC_LONGSTRING case) out of the fuzz
// corpus, where they would only slow the fuzzer down.
const maxSeedSize = 16 << 10

// javaSources returns testdata/java as jdktest.Compile wants it.
func javaSources(t *testing.T) map[string]string {
	t.Helper()
	src := map[string]string{}
	root := filepath.Join("testdata", "java")
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".java") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		src[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestJDK proves the decoder and the encoder against the real JDK: streams
// written by ObjectOutputStream are decoded, checked and re-encoded byte
// for byte; streams built from scratch in Go are read by ObjectInputStream.
func TestJDK(t *testing.T) {
	classes := jdktest.Compile(t, javaSources(t))
	dir := t.TempDir()
	classes.Run(t, "JavaserWriter", jdktest.Options{Args: []string{dir}})
	streams := map[string][]byte{}
	files, err := filepath.Glob(filepath.Join(dir, "*.ser"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		streams[strings.TrimSuffix(filepath.Base(f), ".ser")] = b
	}
	for name := range streams {
		if jdkChecks[name] == nil {
			t.Errorf("JDK case %s has no check", name)
		}
	}
	for name, check := range jdkChecks {
		t.Run("JavaToGo/"+name, func(t *testing.T) {
			data, ok := streams[name]
			if !ok {
				t.Fatalf("JavaserWriter wrote no %s.ser", name)
			}
			if name == "selfannotation" {
				check(t, nil)
				_, err := Decode(data)
				var de *DecodeError
				if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "still being read") {
					t.Fatalf("Decode = %v, want ErrMalformed about a descriptor still being read (the JDK cannot read it either)", err)
				}
				return
			}
			s, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			check(t, s)
			out, err := Encode(s)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(out, data) {
				t.Fatalf("re-encoded stream differs from the JDK's:\n%s", diffBytes(out, data))
			}
		})
	}
	t.Run("GoMatchesJDK", func(t *testing.T) { goMatchesJDK(t, streams) })
	t.Run("GoToJava", func(t *testing.T) { goToJava(t, classes) })
	t.Run("SeedCorpus", func(t *testing.T) { checkSeeds(t, streams) })
}

// diffBytes describes the first difference of two byte strings.
func diffBytes(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-16)
	return fmt.Sprintf("first difference at offset %d (got %d bytes, want %d)\ngot:  % x\nwant: % x",
		i, len(got), len(want), got[lo:min(len(got), i+16)], want[lo:min(len(want), i+16)])
}

// items returns the top-level values, failing unless there are n of them.
func items(t *testing.T, s *Stream, n int) []Value {
	t.Helper()
	var vs []Value
	r := s.Reader()
	for !r.Done() {
		v, err := r.ReadObject()
		if err != nil {
			t.Fatalf("top-level item %d: %v", len(vs), err)
		}
		vs = append(vs, v)
	}
	if len(vs) != n {
		t.Fatalf("%d top-level values, want %d", len(vs), n)
	}
	return vs
}

// as asserts that v is a T.
func as[T any](t *testing.T, v any) T {
	t.Helper()
	x, ok := v.(T)
	if !ok {
		var zero T
		t.Fatalf("got %s, want %T", kindOf(v), zero)
	}
	return x
}

func field[T any](t *testing.T, o *Object, name string) T {
	t.Helper()
	v, err := FieldAs[T](o, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantString(t *testing.T, v any, want string) {
	t.Helper()
	if s := as[*String](t, v); s.Value != want {
		t.Errorf("string %q, want %q", s.Value, want)
	}
}

func wantEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// integerValue returns the value of a java.lang.Integer.
func integerValue(t *testing.T, v any) int32 {
	t.Helper()
	o := as[*Object](t, v)
	if o.ClassName() != "java.lang.Integer" {
		t.Fatalf("class %s, want java.lang.Integer", o.ClassName())
	}
	return field[int32](t, o, "value")
}

// wantDone fails unless everything in r has been read.
func wantDone(t *testing.T, r *ContentReader) {
	t.Helper()
	if !r.Done() {
		t.Error("contents left after the expected reads")
	}
}

// must unwraps a (value, error) result, failing the test on error.
func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

var jdkChecks = map[string]func(t *testing.T, s *Stream){
	"strings": func(t *testing.T, s *Stream) {
		vs := items(t, s, 8)
		for i, want := range goStrings() {
			wantString(t, vs[i], want.(*String).Value)
		}
		if vs[6] != vs[0] {
			t.Error("the second write of the same String is not the same *String")
		}
		if vs[7] == vs[0] {
			t.Error("new String(\"hello\") shares the first one's *String")
		}
	},
	"longstring": func(t *testing.T, s *Stream) {
		vs := items(t, s, 3)
		for i, want := range []struct {
			value string
			long  bool
		}{{strings.Repeat("a", 65535), false}, {strings.Repeat("a", 65536), true}, {longMixed, true}} {
			got := as[*String](t, vs[i])
			if got.Value != want.value || got.Long != want.long {
				t.Errorf("string %d: %d bytes, Long=%v; want %d bytes, Long=%v", i, len(got.Value), got.Long, len(want.value), want.long)
			}
		}
	},
	"uuid": func(t *testing.T, s *Stream) {
		msb, lsb, err := UUIDOf(as[*Object](t, items(t, s, 1)[0]))
		if err != nil {
			t.Fatal(err)
		}
		if msb != 0x0123456789abcdef || uint64(lsb) != 0xfedcba9876543210 {
			t.Errorf("UUID %x %x", msb, lsb)
		}
	},
	"arraylist": func(t *testing.T, s *Stream) {
		list := as[*Object](t, items(t, s, 1)[0])
		el := must[[]Value](t)(ListElements(list))
		if len(el) != 5 {
			t.Fatalf("%d elements, want 5", len(el))
		}
		wantString(t, el[0], "a")
		wantEqual(t, "element 1", integerValue(t, el[1]), int32(7))
		wantEqual(t, "element 2", el[2], Value(nil))
		wantEqual(t, "element 3", field[int64](t, as[*Object](t, el[3]), "value"), int64(1)<<40)
		inner := must[[]Value](t)(ListElements(as[*Object](t, el[4])))
		if len(inner) != 1 {
			t.Fatalf("inner list has %d elements", len(inner))
		}
		wantString(t, inner[0], "b")
	},
	"hashmap": func(t *testing.T, s *Stream) {
		m := as[*Object](t, items(t, s, 1)[0])
		wantEqual(t, "loadFactor", field[float32](t, m, "loadFactor"), float32(0.75))
		wantEqual(t, "threshold", field[int32](t, m, "threshold"), int32(12))
		got := map[string]int32{}
		for _, e := range must[[]MapEntry](t)(MapEntries(m)) {
			got[as[*String](t, e.Key).Value] = integerValue(t, e.Value)
		}
		wantEqual(t, "entries", got, map[string]int32{"one": 1, "two": 2, "three": 3})
	},
	"enum": func(t *testing.T, s *Stream) {
		vs := items(t, s, 3)
		for i, want := range []string{"RED", "GREEN", "RED"} {
			e := as[*Enum](t, vs[i])
			if e.Name() != want || e.ClassName() != "Color" || e.Class.Super == nil || e.Class.Super.Name != "java.lang.Enum" {
				t.Errorf("item %d: %s.%s (super %v), want Color.%s extending java.lang.Enum", i, e.ClassName(), e.Name(), e.Class.Super, want)
			}
		}
		if vs[0] != vs[2] {
			t.Error("RED written twice is not one *Enum")
		}
	},
	"primarrays": func(t *testing.T, s *Stream) {
		vs := items(t, s, 9)
		el := func(i int) any { return as[*Array](t, vs[i]).Elements }
		wantEqual(t, "int[]", el(0), []int32{1, -1, math.MaxInt32, math.MinInt32})
		wantEqual(t, "long[]", el(1), []int64{0, -2, math.MaxInt64})
		b := make([]byte, 300)
		for i := range b {
			b[i] = byte(i)
		}
		wantEqual(t, "byte[]", el(2), b)
		wantEqual(t, "boolean[]", el(3), []bool{true, false, true})
		wantEqual(t, "char[]", el(4), []uint16{'a', 0xe9, 0xffff, 0})
		wantEqual(t, "short[]", el(5), []int16{-32768, 32767})
		var fbits []uint32
		for _, f := range el(6).([]float32) {
			fbits = append(fbits, math.Float32bits(f))
		}
		// ObjectOutputStream writes floats with floatToIntBits, which makes every NaN canonical.
		wantEqual(t, "float[] bits", fbits, []uint32{0x3fc00000, 0x7fc00000, 0x80000000, 0x7fc00000})
		var dbits []uint64
		for _, f := range el(7).([]float64) {
			dbits = append(dbits, math.Float64bits(f))
		}
		wantEqual(t, "double[] bits", dbits, []uint64{0x4002000000000000, 0xfff0000000000000, 0x7ff8000000000000})
		wantEqual(t, "empty int[]", el(8), []int32{})
		if as[*Array](t, vs[8]).Class != as[*Array](t, vs[0]).Class {
			t.Error("the two int[] do not share one class descriptor")
		}
	},
	"objarrays": func(t *testing.T, s *Stream) {
		vs := items(t, s, 4)
		strs := as[*Array](t, vs[0])
		if strs.Class.Name != "[Ljava.lang.String;" || strs.Len() != 3 {
			t.Fatalf("String[]: class %s, %d elements", strs.Class.Name, strs.Len())
		}
		wantString(t, strs.Values()[0], "x")
		wantEqual(t, "String[1]", strs.Values()[1], Value(nil))
		if strs.Values()[2] != strs.Values()[0] {
			t.Error("String[2] is not the same *String as String[0]")
		}
		objs := as[*Array](t, vs[1]).Values()
		if len(objs) != 4 {
			t.Fatalf("Object[] has %d elements", len(objs))
		}
		wantEqual(t, "Object[0]", integerValue(t, objs[0]), int32(1))
		wantString(t, objs[1], "s")
		wantEqual(t, "Object[2]", as[*Array](t, objs[2]).Elements, []int32{1})
		wantEqual(t, "Object[3]", objs[3], Value(nil))
		nested := as[*Array](t, vs[2])
		if nested.ComponentCode() != '[' || nested.Len() != 2 {
			t.Fatalf("int[][]: component %q, %d elements", nested.ComponentCode(), nested.Len())
		}
		wantEqual(t, "int[][0]", as[*Array](t, nested.Values()[0]).Elements, []int32{1, 2})
		wantEqual(t, "int[][1]", as[*Array](t, nested.Values()[1]).Elements, []int32{3})
		empty := as[*Array](t, vs[3])
		if empty.Len() != 0 || empty.Class != strs.Class {
			t.Errorf("String[0]: %d elements, shares class: %v", empty.Len(), empty.Class == strs.Class)
		}
	},
	"nested": func(t *testing.T, s *Stream) {
		outer := must[*Object](t)(s.Object())
		if got := must[string](t)(outer.StringField("name")); got != "outer" {
			t.Errorf("name %q", got)
		}
		inner := field[*Object](t, outer, "inner")
		wantEqual(t, "inner.v", field[int32](t, inner, "v"), int32(42))
		wantString(t, field[*String](t, inner, "s"), "in")
		wantEqual(t, "inner SUID", inner.SerialVersionUID(), int64(14))
	},
	"hierarchy": func(t *testing.T, s *Stream) {
		o := must[*Object](t)(s.Object())
		if len(o.Data) != 2 || o.Data[0].Class.Name != "Base" || o.Data[1].Class.Name != "Derived" {
			t.Fatalf("class data %v, want Base then Derived (Root is not serializable)", o.Data)
		}
		wantEqual(t, "x", field[int32](t, o, "x"), int32(2))
		wantEqual(t, "Base.x", must[any](t)(fieldIn(o, "Base", "x")), any(int32(1)))
		wantString(t, field[*String](t, o, "name"), "derived")
		wantString(t, must[any](t)(fieldIn(o, "Base", "name")), "base")
		wantEqual(t, "onlyBase", field[int64](t, o, "onlyBase"), int64(5))
		wantEqual(t, "onlyDerived", field[float64](t, o, "onlyDerived"), 2.5)
		if _, ok := o.Field("notSerialized"); ok {
			t.Error("field of the non-serializable superclass was found")
		}
	},
	"custom": func(t *testing.T, s *Stream) {
		o := must[*Object](t)(s.Object())
		d := o.DataOf("Custom")
		wantEqual(t, "a", field[int32](t, o, "a"), int32(1))
		wantString(t, field[*String](t, o, "s"), "f")
		var blocks []int
		for _, c := range d.Annotation {
			if b, ok := c.(*BlockData); ok {
				blocks = append(blocks, len(b.Data))
			}
		}
		// int + UTF; then long + 2000 bytes, split at 1024 as the JDK does.
		wantEqual(t, "block sizes", blocks, []int{4 + 2 + len("extra é") + 6, 1024, 8 + 2000 - 1024})
		r := d.Reader()
		wantEqual(t, "int", must[int32](t)(r.ReadInt32()), int32(42))
		wantEqual(t, "utf", must[string](t)(r.ReadUTF()), "extra é𝄞")
		wantEqual(t, "int[]", as[*Array](t, must[Value](t)(r.ReadObject())).Elements, []int32{7, 8})
		wantEqual(t, "long", must[int64](t)(r.ReadInt64()), int64(-1))
		wantEqual(t, "bytes", must[[]byte](t)(r.ReadFull(2000)), bytePattern(2000))
		wantString(t, must[Value](t)(r.ReadObject()), "after")
		wantDone(t, r)
	},
	"externalizable": func(t *testing.T, s *Stream) {
		o := must[*Object](t)(s.Object())
		if !o.Class.IsExternalizable() || o.Class.Flags != SCExternalizable|SCBlockData {
			t.Fatalf("flags %#x, want Externalizable with block data", o.Class.Flags)
		}
		r := NewContentReader(o.Annotation("Ext"))
		wantEqual(t, "int", must[int32](t)(r.ReadInt32()), int32(5))
		wantEqual(t, "utf", must[string](t)(r.ReadUTF()), "ext")
		msb, lsb, err := UUIDOf(as[*Object](t, must[Value](t)(r.ReadObject())))
		if err != nil || msb != 1 || lsb != 2 {
			t.Errorf("UUID %d %d %v", msb, lsb, err)
		}
		wantEqual(t, "bool", must[bool](t)(r.ReadBool()), true)
		wantDone(t, r)
	},
	"backrefs": func(t *testing.T, s *Stream) {
		el := must[[]Value](t)(ListElements(must[*Object](t)(s.Object())))
		a, b := as[*Object](t, el[0]), as[*Object](t, el[1])
		if el[2] != el[0] || field[*Object](t, a, "next") != b || field[*Object](t, b, "next") != a || field[*Object](t, a, "self") != a {
			t.Error("the cycle a -> b -> a and a.self = a is not kept as shared pointers")
		}
		if field[*Object](t, b, "self") != nil {
			t.Error("b.self is not null")
		}
		if n := len(s.Objects()); n != 3 {
			t.Errorf("Objects() found %d objects, want 3 (list, a, b)", n)
		}
	},
	"reset": func(t *testing.T, s *Stream) {
		if len(s.Contents) != 6 {
			t.Fatalf("%d top-level items, want 6", len(s.Contents))
		}
		if _, ok := s.Contents[3].(Reset); !ok {
			t.Fatalf("item 3 is %s, want Reset", kindOf(s.Contents[3]))
		}
		r := s.Reader()
		wantEqual(t, "int", must[int32](t)(r.ReadInt32()), int32(7))
		wantEqual(t, "utf", must[string](t)(r.ReadUTF()), "top")
		x, y := must[Value](t)(r.ReadObject()), must[Value](t)(r.ReadObject())
		z := must[Value](t)(r.ReadObject())
		if x != y || z == x {
			t.Error("want the same *String before the reset and a new one after it")
		}
		wantString(t, z, "shared")
		u := as[*Object](t, must[Value](t)(r.ReadObject()))
		wantEqual(t, "uuid", field[int64](t, u, "leastSigBits"), int64(4))
		wantDone(t, r)
	},
	"proxy": func(t *testing.T, s *Stream) {
		o := must[*Object](t)(s.Object())
		if !o.Class.Proxy || !slices.Equal(o.Class.Interfaces, []string{"Greeter"}) || o.Class.Super.Name != "java.lang.reflect.Proxy" {
			t.Fatalf("class %+v, want a proxy for Greeter extending java.lang.reflect.Proxy", o.Class)
		}
		h := field[*Object](t, o, "h")
		wantString(t, field[*String](t, h, "msg"), "hi")
	},
	"classobj": func(t *testing.T, s *Stream) {
		vs := items(t, s, 4)
		wantEqual(t, "String.class", as[*Class](t, vs[0]).Desc.Name, "java.lang.String")
		if c := as[*Class](t, vs[1]).Desc; c.Name != "Color" || !c.IsEnum() {
			t.Errorf("Color.class: %s enum=%v", c.Name, c.IsEnum())
		}
		wantEqual(t, "int[].class", as[*Class](t, vs[2]).Desc.Name, "[I")
		d := as[*ClassDesc](t, vs[3])
		if d.Name != "java.util.UUID" || len(d.Fields) != 2 || d.SerialVersionUID != suidUUID {
			t.Errorf("ObjectStreamClass of UUID: %+v", d)
		}
	},
	"flinkznode": func(t *testing.T, s *Stream) {
		h := must[*Object](t)(s.Object())
		for _, c := range []struct {
			o    *Object
			name string
			suid int64
		}{
			{h, "org.apache.flink.runtime.state.RetrievableStreamStateHandle", 314567453677355},
			{field[*Object](t, h, "wrappedStreamStateHandle"), "org.apache.flink.runtime.state.filesystem.FileStateHandle", 350284443258002355},
		} {
			if c.o.ClassName() != c.name || c.o.SerialVersionUID() != c.suid {
				t.Errorf("%s (%d), want %s (%d)", c.o.ClassName(), c.o.SerialVersionUID(), c.name, c.suid)
			}
		}
		var handles []*Object
		for _, o := range s.Objects() {
			if strings.HasSuffix(o.ClassName(), "FileStateHandle") {
				handles = append(handles, o)
			}
		}
		if len(handles) != 1 {
			t.Fatalf("%d FileStateHandles, want 1", len(handles))
		}
		wantEqual(t, "stateSize", field[int64](t, handles[0], "stateSize"), int64(znodeSize))
		path := field[*Object](t, handles[0], "filePath")
		wantEqual(t, "Path SUID", path.SerialVersionUID(), int64(1))
		uri := field[*Object](t, path, "uri")
		if uri.ClassName() != "java.net.URI" || uri.Class.Flags != SCSerializable|SCWriteMethod || uri.SerialVersionUID() != suidURI {
			t.Errorf("uri: %s flags %#x", uri.ClassName(), uri.Class.Flags)
		}
		wantEqual(t, "uri", must[string](t)(uri.StringField("string")), znodeURI)
		if a := uri.Annotation("java.net.URI"); len(a) != 0 {
			t.Errorf("URI annotation %v, want empty", a)
		}
	},
	"leaderinfo": func(t *testing.T, s *Stream) {
		r := s.Reader()
		wantEqual(t, "address", must[string](t)(r.ReadUTF()), leaderURL)
		msb, lsb, err := UUIDOf(as[*Object](t, must[Value](t)(r.ReadObject())))
		if err != nil || msb != 0x1111222233334444 || lsb != 0x5555666677778888 {
			t.Errorf("leader session id %x %x %v", msb, lsb, err)
		}
		wantDone(t, r)
	},
	"jdkbuilt": func(t *testing.T, s *Stream) {
		vs := items(t, s, 7)
		entries := must[[]MapEntry](t)(MapEntries(as[*Object](t, vs[4])))
		for i, e := range entries {
			if integerValue(t, e.Key) != int32(i) {
				t.Errorf("entry %d has key %d", i, integerValue(t, e.Key))
			}
			wantString(t, e.Value, "v"+strconv.Itoa(i))
		}
	},
	"classannotation": func(t *testing.T, s *Stream) {
		vs := items(t, s, 2)
		for _, c := range []*ClassDesc{as[*Object](t, vs[0]).Class, as[*Object](t, vs[1]).Class, as[*Object](t, vs[1]).Class.Super} {
			r := NewContentReader(c.Annotation)
			wantEqual(t, "annotation text", must[string](t)(r.ReadUTF()), "ann:"+c.Name)
			wantString(t, must[Value](t)(r.ReadObject()), c.Name[strings.LastIndex(c.Name, ".")+1:])
			wantDone(t, r)
		}
		wantEqual(t, "Integer", integerValue(t, vs[1]), int32(7))
	},
	"selfannotation": func(t *testing.T, s *Stream) {}, // must not decode; see TestJDK
}

func fieldIn(o *Object, class, name string) (any, error) {
	v, ok := o.FieldIn(class, name)
	if !ok {
		return nil, fmt.Errorf("no field %s in class %s", name, class)
	}
	return v, nil
}

// goMatchesJDK builds streams from scratch and compares them with the
// JDK's bytes for the same values.
func goMatchesJDK(t *testing.T, streams map[string][]byte) {
	var jdk JDK
	msb, lsb := int64(0x0123456789abcdef), int64(-0x0123456789abcdf0) // 0xfedcba9876543210
	var leader ContentWriter
	if err := leader.WriteUTF(leaderURL); err != nil {
		t.Fatal(err)
	}
	leader.WriteObject(jdk.UUID(0x1111222233334444, 0x5555666677778888))
	built := map[string]*Stream{
		"flinkznode":     NewStream(newFlinkClasses().znode(znodeURI, znodeSize)),
		"uuid":           NewStream(jdk.UUID(msb, lsb)),
		"leaderinfo":     NewStream(leader.Contents()...),
		"enum":           NewStream(jdk.Enum("Color", "RED"), jdk.Enum("Color", "GREEN"), jdk.Enum("Color", "RED")),
		"strings":        NewStream(goStrings()...),
		"custom":         NewStream(goCustom(&jdk)),
		"hierarchy":      NewStream(goDerived()),
		"externalizable": NewStream(goExt(&jdk)),
		"backrefs":       NewStream(goBackrefs(&jdk)),
		"jdkbuilt":       goJDKBuilt(),
	}
	for name, s := range built {
		got, err := Encode(s)
		if err != nil {
			t.Errorf("%s: Encode: %v", name, err)
			continue
		}
		if !bytes.Equal(got, streams[name]) {
			t.Errorf("%s: Go-built stream differs from the JDK's:\n%s", name, diffBytes(got, streams[name]))
		}
	}
}

// javaHash is Java's String.hashCode.
func javaHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// goToJava has ObjectInputStream read streams built in Go, and checks what
// it printed.
func goToJava(t *testing.T, classes *jdktest.Classes) {
	var jdk JDK
	arrays := func() []Content {
		var out []Content
		for _, e := range []any{[]int32{1, -1, math.MaxInt32}, []int64{math.MinInt64, 0}, []float64{2.25, math.Inf(-1), math.NaN()}, []byte{1, 2, 0xff}} {
			a, err := jdk.Array(e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
		nested, err := jdk.Array([]int32{1, 2})
		if err != nil {
			t.Fatal(err)
		}
		objs, err := jdk.Array([]Value{NewString("x"), nil, nested})
		if err != nil {
			t.Fatal(err)
		}
		return append(out, objs)
	}
	var leader ContentWriter
	if err := leader.WriteUTF(leaderURL); err != nil {
		t.Fatal(err)
	}
	leader.WriteObject(jdk.UUID(0x1111222233334444, 0x5555666677778888))
	cases := []struct {
		name   string
		stream *Stream
		want   []string
	}{
		{"flinkznode", NewStream(newFlinkClasses().znode(znodeURI, znodeSize)), []string{"stateSize=4242 uri=" + znodeURI}},
		{"uuid", NewStream(jdk.UUID(0x0123456789abcdef, -2)), []string{"01234567-89ab-cdef-ffff-fffffffffffe"}},
		{"leaderinfo", NewStream(leader.Contents()...), []string{leaderURL, "11112222-3333-4444-5555-666677778888"}},
		{"enum", NewStream(jdk.Enum("Color", "RED"), jdk.Enum("Color", "GREEN"), jdk.Enum("Color", "RED")),
			[]string{"RED GREEN RED red=true green=true same=true"}},
		{"strings", NewStream(append(goStrings(), NewString(longMixed))...), []string{
			"hello", "", `nul\u0000byte`, `BMP \u00e9 \u00df \u20ac \u4e2d`, `non-BMP \ud834\udd1e \ud83d\ude00`,
			`lone x\ud800y\udc00z`, "hello", "hello", "same=true distinct=true",
			fmt.Sprintf("long length=%d hash=%d", len(utf16.Encode([]rune(longMixed))), javaHash(longMixed)),
		}},
		{"arrays", NewStream(arrays()...), []string{
			"[1, -1, 2147483647]", "[-9223372036854775808, 0]", "[2.25, -Infinity, NaN]", "[1, 2, -1]", "[x, null, [1, 2]]",
		}},
		{"jdkbuilt", goJDKBuilt(), []string{
			"ffffffff-ffff-ffff-0000-00000000002a", "/flink/ha/my job/completedCheckpoint0a1b2c3d4e5f",
			"7 1099511627776 [1, 2, 3]", "{1=one}",
			"{0=v0, 1=v1, 2=v2, 3=v3, 4=v4, 5=v5, 6=v6, 7=v7, 8=v8, 9=v9, 10=v10, 11=v11, 12=v12}", "true", "true",
		}},
		{"custom", NewStream(goCustom(&jdk)), []string{`1 f 42 extra \u00e9\ud834\udd1e [7, 8] -1 big=true after`}},
		{"hierarchy", NewStream(goDerived()), []string{"Base.x=1 Base.name=base onlyBase=5 Derived.x=2 Derived.name=derived onlyDerived=2.5"}},
		{"externalizable", NewStream(goExt(&jdk)), []string{"5 ext 00000000-0000-0001-0000-000000000002 true"}},
		{"backrefs", NewStream(goBackrefs(&jdk)), []string{"a b a.next==b true b.next==a true a.self==a true list[2]==a true b.self null"}},
	}
	dir := t.TempDir()
	var args, want []string
	for _, c := range cases {
		data, err := Encode(c.stream)
		if err != nil {
			t.Fatalf("%s: Encode: %v", c.name, err)
		}
		p := filepath.Join(dir, c.name+".ser")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, c.name+"="+p)
		for _, w := range append(c.want, "end") {
			want = append(want, c.name+": "+w)
		}
	}
	got := strings.Split(strings.TrimRight(string(classes.Run(t, "JavaserReader", jdktest.Options{Args: args})), "\n"), "\n")
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("Java printed line %d:\n got  %q\n want %q", i+1, g, w)
		}
	}
}

// seedFile is the fuzz corpus file for a JDK-written stream.
func seedFile(name string) string {
	return filepath.Join("testdata", "fuzz", "FuzzDecode", "jdk-"+name)
}

// checkSeeds requires the committed fuzz seeds to be exactly what the JDK
// writes today (-update-seeds rewrites them), so the seeds stay genuine.
func checkSeeds(t *testing.T, streams map[string][]byte) {
	for name, data := range streams {
		if len(data) > maxSeedSize {
			continue
		}
		want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		p := seedFile(name)
		if *updateSeeds {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("fuzz seed %s is missing or differs from the JDK's stream (err %v); run go test -run TestJDK -update-seeds", p, err)
		}
	}
}
