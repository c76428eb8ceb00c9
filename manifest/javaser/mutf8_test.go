package javaser

import (
	"errors"
	"testing"
	"unicode/utf8"
)

func TestModifiedUTF8(t *testing.T) {
	tests := []struct {
		name    string
		encoded string
		decoded string
	}{
		{"empty", "", ""},
		{"ASCII", "hello", "hello"},
		{"NUL", "a\xc0\x80b", "a\x00b"},
		{"two bytes", "\xc3\xa9", "é"},
		{"largest two-byte", "\xdf\xbf", "\u07ff"},
		{"three bytes", "\xe2\x82\xac", "€"},
		{"largest BMP", "\xef\xbf\xbf", "\uffff"},
		{"surrogate pair", "\xed\xa0\xbd\xed\xb8\x80", "😀"},
		{"largest supplementary", "\xed\xaf\xbf\xed\xbf\xbf", "\U0010ffff"},
		{"lone high surrogate", "x\xed\xa0\x80y", "x\xed\xa0\x80y"},
		{"lone low surrogate", "\xed\xb0\x80", "\xed\xb0\x80"},
		{"high surrogate at end", "\xed\xa0\x80", "\xed\xa0\x80"},
		{"two high surrogates then low", "\xed\xa0\x80\xed\xa0\xbd\xed\xb8\x80", "\xed\xa0\x80😀"},
		{"low then high", "\xed\xb0\x80\xed\xa0\x80", "\xed\xb0\x80\xed\xa0\x80"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeModifiedUTF8([]byte(tc.encoded))
			if err != nil || got != tc.decoded {
				t.Fatalf("Decode(%q) = %q, %v; want %q", tc.encoded, got, err, tc.decoded)
			}
			if enc := string(AppendModifiedUTF8(nil, tc.decoded)); enc != tc.encoded {
				t.Errorf("Append(%q) = %q, want %q", tc.decoded, enc, tc.encoded)
			}
			if n := ModifiedUTF8Len(tc.decoded); n != len(tc.encoded) {
				t.Errorf("Len(%q) = %d, want %d", tc.decoded, n, len(tc.encoded))
			}
			if !validJavaString(tc.decoded) {
				t.Errorf("validJavaString(%q) = false", tc.decoded)
			}
		})
	}
}

func TestModifiedUTF8Malformed(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		index int
	}{
		{"raw NUL", "ab\x00", 2},
		{"continuation as lead", "a\x80", 1},
		{"four-byte lead", "\xf0\x9f\x98\x80", 0},
		{"0xFF", "\xff", 0},
		{"truncated two-byte", "a\xc3", 1},
		{"bad two-byte continuation", "\xc3\x41", 0},
		{"overlong two-byte", "\xc1\xbf", 0},
		{"overlong NUL variant", "\xc0\x81", 0},
		{"truncated three-byte", "\xe2\x82", 0},
		{"bad three-byte continuation", "\xe2\x28\xa1", 0},
		{"overlong three-byte", "\xe0\x80\x80", 0},
		{"overlong three-byte 0x7ff", "\xe0\x9f\xbf", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeModifiedUTF8([]byte(tc.in))
			var ue *UTFError
			if !errors.As(err, &ue) {
				t.Fatalf("Decode(%q) = %q, %v; want *UTFError", tc.in, s, err)
			}
			if ue.Index != tc.index {
				t.Errorf("index %d, want %d (%v)", ue.Index, tc.index, err)
			}
		})
	}
}

// Go strings that are not UTF-8 and not unpaired surrogates cannot be
// written exactly: Append replaces each bad byte, and Encode refuses them.
func TestModifiedUTF8InvalidGoString(t *testing.T) {
	in := "a\xffb\xed\xa0" // a stray byte and a cut-off surrogate
	want := "a\xef\xbf\xbdb\xef\xbf\xbd\xef\xbf\xbd"
	if got := string(AppendModifiedUTF8(nil, in)); got != want {
		t.Errorf("Append = %q, want %q", got, want)
	}
	if n := ModifiedUTF8Len(in); n != len(want) {
		t.Errorf("Len = %d, want %d", n, len(want))
	}
	if validJavaString(in) {
		t.Error("validJavaString accepted invalid UTF-8")
	}
	if _, err := Encode(NewStream(NewString(in))); err == nil {
		t.Error("Encode accepted a string that is not UTF-8")
	}
}

// Every decodable input round-trips, and every decoded string is UTF-8
// apart from unpaired surrogates.
func FuzzModifiedUTF8(f *testing.F) {
	for _, s := range []string{"", "a", "\xc0\x80", "\xed\xa0\xbd\xed\xb8\x80", "\xed\xa0\x80x", "\xe2\x82\xac"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeModifiedUTF8(b)
		if err != nil {
			return
		}
		if !validJavaString(s) {
			t.Fatalf("decoded %q is not a valid Java string", s)
		}
		if got := AppendModifiedUTF8(nil, s); string(got) != string(b) {
			t.Fatalf("round trip %q -> %q -> %q", b, s, got)
		}
		if ModifiedUTF8Len(s) != len(b) {
			t.Fatalf("Len(%q) = %d, want %d", s, ModifiedUTF8Len(s), len(b))
		}
		if utf8.ValidString(s) != !containsSurrogate(s) {
			t.Fatalf("%q: UTF-8 validity does not match the absence of surrogates", s)
		}
	})
}

func containsSurrogate(s string) bool {
	for i := 0; i < len(s); i++ {
		if isWTF8Surrogate(s[i:]) {
			return true
		}
	}
	return false
}
