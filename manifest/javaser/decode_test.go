package javaser

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

type grammarCase struct {
	name  string
	in    []byte
	check func(t *testing.T, s *Stream)
}

// Grammar pieces that must decode, each with what the model must say.
func TestDecodeGrammar(t *testing.T) {
	for _, tc := range grammarCases() {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode(tc.in)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			tc.check(t, s)
			out, err := Encode(s)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(out, tc.in) {
				t.Fatalf("re-encoded:\n%s", diffBytes(out, tc.in))
			}
		})
	}
}

// grammarCases are also seeds for FuzzDecode.
func grammarCases() []grammarCase {
	return []grammarCase{
		{"header only", stream(), func(t *testing.T, s *Stream) {
			wantEqual(t, "contents", len(s.Contents), 0)
		}},
		{"null", stream(tcNull), func(t *testing.T, s *Stream) {
			wantEqual(t, "contents", s.Contents, []Content{nil})
		}},
		{"string", stream(tcString, utf("abc")), func(t *testing.T, s *Stream) {
			wantEqual(t, "string", s.Contents[0], Content(&String{Value: "abc"}))
		}},
		{"short long string", stream(tcLongString, u64(2), "ab"), func(t *testing.T, s *Stream) {
			wantEqual(t, "string", s.Contents[0], Content(&String{Value: "ab", Long: true}))
		}},
		{"block data", stream(tcBlockData, 3, "xyz", tcBlockDataLong, u32(1), "w", tcBlockData, 0), func(t *testing.T, s *Stream) {
			wantEqual(t, "blocks", s.Contents, []Content{
				&BlockData{Data: []byte("xyz")}, &BlockData{Data: []byte("w"), Long: true}, &BlockData{Data: []byte{}},
			})
		}},
		{"resets", stream(tcReset, tcString, utf("a"), tcReset, tcReset), func(t *testing.T, s *Stream) {
			wantEqual(t, "contents", s.Contents, []Content{Reset{}, &String{Value: "a"}, Reset{}, Reset{}})
		}},
		{"all field types", stream(tcObject,
			classDesc("P", 1, SCSerializable, tcNull,
				primFieldDesc('B', "b"), primFieldDesc('C', "c"), primFieldDesc('D', "d"), primFieldDesc('F', "f"),
				primFieldDesc('I', "i"), primFieldDesc('J', "j"), primFieldDesc('S', "s"), primFieldDesc('Z', "z"),
				objFieldDesc("o", "Ljava/lang/Object;"), objFieldDesc("a", "[I")),
			0xFF, u16(0xE9), u64(math.Float64bits(-1.5)), u32(math.Float32bits(0.25)),
			u32(0xFFFFFFFE), u64(1<<62), u16(0x8000), 1,
			tcNull,
			tcArray, classDesc("[I", 7, SCSerializable, tcNull), u32(2), u32(5), u32(6),
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			wantEqual(t, "values", o.Data[0].Values[:9], []any{
				int8(-1), uint16(0xE9), -1.5, float32(0.25), int32(-2), int64(1 << 62), int16(-32768), true, nil,
			})
			wantEqual(t, "array", field[*Array](t, o, "a").Elements, []int32{5, 6})
			wantEqual(t, "type of a", o.Class.Fields[9].Signature(), "[I")
			wantEqual(t, "type of z", o.Class.Fields[7].Signature(), "Z")
		}},
		{"reference to earlier string as field value", stream(
			tcString, utf("shared"), // handle 0
			tcObject, classDesc("R", 1, SCSerializable, tcNull, objFieldDesc("s", "Ljava/lang/String;")),
			tcReference, u32(baseWireHandle),
		), func(t *testing.T, s *Stream) {
			if field[*String](t, as[*Object](t, s.Contents[1]), "s") != s.Contents[0] {
				t.Error("field does not share the earlier *String")
			}
		}},
		{"type signature by reference", stream(tcObject,
			classDesc("T", 1, SCSerializable, tcNull,
				objFieldDesc("a", "Ljava/lang/String;"),
				raw('L', utf("b"), tcReference, u32(baseWireHandle+1))), // handle 0: desc, 1: signature
			tcString, utf("x"), tcNull,
		), func(t *testing.T, s *Stream) {
			f := as[*Object](t, s.Contents[0]).Class.Fields
			if f[0].Type != f[1].Type {
				t.Error("signatures are not one *String")
			}
		}},
		{"class, enum and descriptor values", stream(
			tcClass, classDesc("K", 3, SCSerializable, tcNull),
			tcEnum, classDesc("E", 0, SCSerializable|SCEnum, classDesc("java.lang.Enum", 0, SCSerializable|SCEnum, tcNull)), tcString, utf("ONE"),
			tcEnum, tcReference, u32(baseWireHandle+2), tcReference, u32(baseWireHandle+5),
			tcReference, u32(baseWireHandle),
		), func(t *testing.T, s *Stream) {
			wantEqual(t, "class", as[*Class](t, s.Contents[0]).Desc.Name, "K")
			one, again := as[*Enum](t, s.Contents[1]), as[*Enum](t, s.Contents[2])
			if one.Name() != "ONE" || again.Constant != one.Constant || one == again {
				t.Errorf("enums %v %v: want two constants sharing the name string", one, again)
			}
			wantEqual(t, "descriptor value", as[*ClassDesc](t, s.Contents[3]).Name, "K")
		}},
		{"proxy", stream(tcObject,
			tcProxyClassDesc, u32(2), utf("I1"), utf("I2"), tcEndBlockData,
			classDesc("java.lang.reflect.Proxy", 9, SCSerializable, tcNull, objFieldDesc("h", "Ljava/lang/Object;")),
			tcNull,
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			if !o.Class.Proxy || len(o.Class.Interfaces) != 2 || o.Class.Interfaces[1] != "I2" || len(o.Data) != 1 {
				t.Errorf("proxy %+v", o)
			}
		}},
		{"writeObject annotation", stream(tcObject,
			classDesc("W", 1, SCSerializable|SCWriteMethod, tcNull, primFieldDesc('I', "n")),
			u32(3), tcBlockData, 2, "hi", tcNull, tcString, utf("s"), tcEndBlockData,
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			wantEqual(t, "annotation", o.Annotation("W"), []Content{&BlockData{Data: []byte("hi")}, nil, &String{Value: "s"}})
		}},
		{"externalizable", stream(tcObject,
			classDesc("X", 1, SCExternalizable|SCBlockData, tcNull),
			tcBlockData, 1, 9, tcEndBlockData,
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			wantEqual(t, "data", o.Data, []ClassData{{Class: o.Class, Annotation: []Content{&BlockData{Data: []byte{9}}}}})
		}},
		{"class without data in the middle of the hierarchy", stream(tcObject,
			classDesc("C", 1, SCSerializable, classDesc("B", 2, SCSerializable, classDesc("A", 3, SCSerializable, tcNull, primFieldDesc('I', "a"))),
				primFieldDesc('I', "c")),
			u32(1), u32(3),
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			if len(o.Data) != 2 || o.Data[0].Class.Name != "A" || o.Data[1].Class.Name != "C" {
				t.Fatalf("data %+v, want A then C", o.Data)
			}
			wantEqual(t, "a", field[int32](t, o, "a"), int32(1))
			wantEqual(t, "c", field[int32](t, o, "c"), int32(3))
		}},
		{"modified UTF-8 in names and strings", stream(tcObject,
			classDesc("K\xc0\x80\xed\xa0\xbd\xed\xb8\x80", 1, SCSerializable, tcNull, primFieldDesc('Z', "\xc3\xa9")), 0,
		), func(t *testing.T, s *Stream) {
			o := as[*Object](t, s.Contents[0])
			wantEqual(t, "class name", o.ClassName(), "K\x00😀")
			wantEqual(t, "field", field[bool](t, o, "é"), false)
		}},
		{"object arrays with shared and nested elements", stream(tcArray,
			classDesc("[Ljava.lang.Object;", 1, SCSerializable, tcNull), u32(3),
			tcString, utf("e"), tcReference, u32(baseWireHandle+2), tcReference, u32(baseWireHandle+1),
		), func(t *testing.T, s *Stream) {
			a := as[*Array](t, s.Contents[0])
			el := a.Values()
			if el[0] != el[1] || el[2] != Value(a) {
				t.Error("want element 1 to share element 0 and element 2 to be the array itself")
			}
		}},
	}
}

// Inputs that must fail, with the error category, the offset and a part
// of the message.
func TestDecodeErrors(t *testing.T) {
	objWith := func(fields ...[]byte) []any {
		return []any{tcObject, classDesc("O", 1, SCSerializable, tcNull, fields...)}
	}
	descEnd := func(name string, fieldBytes int) int { // offset after a new descriptor at offset 5 with a null superclass
		return 5 + 1 + 2 + len(name) + 8 + 1 + 2 + fieldBytes + 1 + 1
	}
	tests := []struct {
		name   string
		in     []byte
		kind   error
		offset int64
		msg    string
	}{
		{"empty", nil, ErrTruncated, 0, "need 4 bytes for stream header"},
		{"partial magic", raw(0xAC), ErrTruncated, 1, "stream header"},
		{"bad magic", raw(0xAC, 0xEE, 0, 5), ErrMalformed, 0, "bad stream header"},
		{"bad version", raw(0xAC, 0xED, 0, 4), ErrMalformed, 0, "bad stream header"},
		{"end block at top level", stream(tcEndBlockData), ErrMalformed, 4, "TC_ENDBLOCKDATA at top level"},
		{"exception", stream(tcException), ErrUnsupported, 4, "TC_EXCEPTION"},
		{"invalid type code", stream(0x00), ErrMalformed, 4, "invalid type code 0x00"},
		{"unknown handle", stream(tcReference, u32(baseWireHandle)), ErrMalformed, 4, "reference to unknown handle 0x7e0000"},
		{"handle below base", stream(tcString, utf("a"), tcReference, u32(1)), ErrMalformed, 8, "unknown handle 0x1"},
		{"handle after reset", stream(tcString, utf("a"), tcReset, tcReference, u32(baseWireHandle)), ErrMalformed, 9, "unknown handle"},
		{"string used as class descriptor", stream(tcString, utf("a"), tcObject, tcReference, u32(baseWireHandle)),
			ErrMalformed, 9, "which is a string"},
		{"null class descriptor", stream(tcObject, tcNull), ErrMalformed, 5, "null class descriptor for object"},
		{"null array class", stream(tcArray, tcNull), ErrMalformed, 5, "null class descriptor for array"},
		{"invalid field type", stream(objWith(raw('X', utf("f")))...), ErrMalformed, 20, "invalid type code 0x58"},
		{"primitive after object field", stream(objWith(objFieldDesc("o", "LA;"), primFieldDesc('I', "i"))...),
			ErrMalformed, 30, "primitive field i after object fields"},
		{"negative field count", stream(tcObject, tcClassDesc, utf("N"), u64(1), SCSerializable, u16(0xFFFF)),
			ErrMalformed, 18, "negative field count -1"},
		{"field count beyond input", stream(tcObject, tcClassDesc, utf("N"), u64(1), SCSerializable, u16(1000), "abc"),
			ErrTruncated, 20, "need 3000 bytes for 1000 fields of class N"},
		{"null type signature", stream(objWith(raw('L', utf("o"), tcNull))...), ErrMalformed, 24, "where a string is expected"},
		{"bad type signature", stream(objWith(raw('L', utf("o"), tcString, utf("Q")))...), ErrMalformed, 24, `field o has type signature "Q"`},
		{"descriptor as type signature", stream(tcObject, tcClassDesc, utf("N"), u64(1), SCSerializable, u16(1),
			'L', utf("o"), tcReference, u32(baseWireHandle)), ErrMalformed, 24, "which is a class descriptor, not a string"},
		{"boolean field not 0 or 1", stream(append(objWith(primFieldDesc('Z', "z")), 2)...), ErrMalformed, int64(descEnd("O", 4)), "boolean field z holds 0x02"},
		{"truncated long field", stream(append(objWith(primFieldDesc('J', "stateSize")), "abc")...),
			ErrTruncated, int64(descEnd("O", 12)), "truncated: need 8 bytes for long field stateSize, 3 left"},
		{"block data as field value", stream(append(objWith(objFieldDesc("o", "LA;")), tcBlockData, 0)...),
			ErrMalformed, 32, "unexpected TC_BLOCKDATA where an object is expected"},
		{"reset inside object", stream(append(objWith(objFieldDesc("o", "LA;")), tcReset)...),
			ErrMalformed, 32, "TC_RESET inside an object"},
		{"missing end of annotation", stream(tcObject, classDesc("W", 1, SCSerializable|SCWriteMethod, tcNull), tcBlockData, 1, 7),
			ErrTruncated, 25, "missing TC_ENDBLOCKDATA"},
		{"serializable and externalizable", stream(tcObject, classDesc("X", 1, SCSerializable|SCExternalizable, tcNull)),
			ErrMalformed, 17, "flags conflict"},
		{"externalizable version 1", stream(tcObject, classDesc("X", 1, SCExternalizable, tcNull), u32(1)),
			ErrUnsupported, 4, "protocol version 1"},
		{"enum of non-enum class", stream(tcEnum, classDesc("K", 1, SCSerializable, tcNull), tcString, utf("A")),
			ErrMalformed, 4, "not an enum"},
		{"enum name not a string", stream(tcEnum, classDesc("E", 0, SCSerializable|SCEnum, tcNull), tcNull),
			ErrMalformed, 22, "where a string is expected"},
		{"array of non-array class", stream(tcArray, classDesc("K", 1, SCSerializable, tcNull), u32(0)),
			ErrMalformed, 4, "not an array class"},
		{"array with invalid component", stream(tcArray, classDesc("[Q", 1, SCSerializable, tcNull), u32(0)),
			ErrMalformed, 4, "invalid component type"},
		{"negative array length", stream(tcArray, classDesc("[I", 1, SCSerializable, tcNull), u32(0xFFFFFFFF)),
			ErrMalformed, 23, "negative array length -1"},
		{"array longer than input", stream(tcArray, classDesc("[J", 1, SCSerializable, tcNull), u32(0x7FFFFFFF), u64(0)),
			ErrTruncated, 27, "need 17179869176 bytes for 2147483647 elements of array [J"},
		{"boolean array element", stream(tcArray, classDesc("[Z", 1, SCSerializable, tcNull), u32(2), 1, 3),
			ErrMalformed, 28, "boolean array element 1 holds 0x03"},
		{"negative block length", stream(tcBlockDataLong, u32(0x80000000)), ErrMalformed, 4, "negative block data length"},
		{"block longer than input", stream(tcBlockData, 5, "abc"), ErrTruncated, 6, "need 5 bytes for block data, 3 left"},
		{"negative long string length", stream(tcLongString, u64(1<<63)), ErrMalformed, 4, "negative long string length"},
		{"long string longer than input", stream(tcLongString, u64(1<<40), "x"), ErrTruncated, 13, "need 1099511627776 bytes for string"},
		{"overlong UTF-8", stream(tcString, utf("a\xc0\x81")), ErrMalformed, 8, "overlong 2-byte sequence"},
		{"raw NUL in string", stream(tcString, utf("a\x00")), ErrMalformed, 8, "raw 00 byte"},
		{"bad UTF-8 in class name", stream(tcObject, tcClassDesc, utf("\xff")), ErrMalformed, 8, "class name: invalid lead byte"},
		{"proxy with negative interface count", stream(tcObject, tcProxyClassDesc, u32(0xFFFFFFFF)), ErrMalformed, 5, "proxy class with -1 interfaces"},
		{"proxy with too many interfaces", stream(tcObject, tcProxyClassDesc, u32(70000)), ErrMalformed, 5, "proxy class with 70000 interfaces"},
		{"superclass is the class itself", stream(tcObject, tcClassDesc, utf("S"), u64(1), SCSerializable, u16(0), tcEndBlockData,
			tcReference, u32(baseWireHandle)), ErrMalformed, 21, "while it is still being read"},
		{"object of a class still being read", stream(tcObject, tcClassDesc, utf("S"), u64(1), SCSerializable, u16(0),
			tcObject, tcReference, u32(baseWireHandle)), ErrMalformed, 21, "while it is still being read"},
		{"trailing garbage", stream(tcNull, 0x01), ErrMalformed, 5, "invalid type code 0x01"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode succeeded: %+v", s)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v, want *DecodeError", err, err)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want category %v", err, tc.kind)
			}
			if de.Offset != tc.offset {
				t.Errorf("offset %d, want %d (%v)", de.Offset, tc.offset, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want it to contain %q", err, tc.msg)
			}
		})
	}
}

func TestDecodeErrorText(t *testing.T) {
	_, err := Decode(stream(tcObject, classDesc("F", 1, SCSerializable, tcNull, primFieldDesc('J', "stateSize")), "abc"))
	want := "javaser: truncated: need 8 bytes for long field stateSize, 3 left at offset 34"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestDecodePrefix(t *testing.T) {
	obj := stream(tcReset, tcString, utf("x"))
	in := append(bytes.Clone(obj), "trailer"...)
	s, n, err := DecodePrefix(in)
	if err != nil || n != len(obj) {
		t.Fatalf("DecodePrefix = %v, %d, %v; want %d bytes consumed", s, n, err, len(obj))
	}
	wantEqual(t, "contents", s.Contents, []Content{Reset{}, &String{Value: "x"}})
	if _, _, err := DecodePrefix(stream()); !errors.Is(err, ErrTruncated) {
		t.Errorf("DecodePrefix of a header alone: %v, want ErrTruncated", err)
	}
	if _, _, err := DecodePrefix(stream(tcBlockData, 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("DecodePrefix of block data: %v, want ErrMalformed", err)
	}
}
