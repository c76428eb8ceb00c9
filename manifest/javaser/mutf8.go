package javaser

import "unicode/utf8"

// Java's DataOutput.writeUTF uses "modified UTF-8": U+0000 is written as
// C0 80, and characters above U+FFFF as two 3-byte surrogates (CESU-8).
//
// Go strings hold UTF-8, so a surrogate pair decodes to one rune. A Java
// string may also hold an unpaired surrogate; it has no UTF-8 form, so it is
// kept as its 3-byte encoding (as WTF-8 does). Such a Go string is not valid
// UTF-8, but encodes back to the same bytes.
//
// Decoding is stricter than the JDK's readUTF: it rejects a raw 00 byte and
// overlong forms other than C0 80. No Java writer produces them, and
// rejecting them is what makes decode followed by encode byte-exact.

// DecodeModifiedUTF8 decodes Java modified UTF-8. Errors are *UTFError.
func DecodeModifiedUTF8(b []byte) (string, error) {
	i := 0
	for i < len(b) && b[i] >= 0x01 && b[i] < 0x80 {
		i++
	}
	if i == len(b) {
		return string(b), nil
	}
	out := make([]byte, i, len(b))
	copy(out, b[:i])
	for i < len(b) {
		c := b[i]
		switch {
		case c >= 0x01 && c < 0x80:
			out = append(out, c)
			i++
		case c == 0:
			return "", &UTFError{i, "raw 00 byte (U+0000 must be C0 80)"}
		case c&0xE0 == 0xC0:
			if i+1 >= len(b) {
				return "", &UTFError{i, "truncated 2-byte sequence"}
			}
			if b[i+1]&0xC0 != 0x80 {
				return "", &UTFError{i, "bad continuation byte"}
			}
			r := rune(c&0x1F)<<6 | rune(b[i+1]&0x3F)
			if r != 0 && r < 0x80 {
				return "", &UTFError{i, "overlong 2-byte sequence"}
			}
			out = utf8.AppendRune(out, r)
			i += 2
		case c&0xF0 == 0xE0:
			r, ok := decode3(b[i:])
			if !ok {
				return "", &UTFError{i, "truncated or bad 3-byte sequence"}
			}
			if r < 0x800 {
				return "", &UTFError{i, "overlong 3-byte sequence"}
			}
			if r >= 0xD800 && r < 0xDC00 { // high surrogate: pair it if a low one follows
				if lo, ok := decode3(b[i+3:]); ok && lo >= 0xDC00 && lo < 0xE000 {
					out = utf8.AppendRune(out, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					i += 6
					continue
				}
			}
			if r >= 0xD800 && r < 0xE000 { // unpaired surrogate: keep its bytes
				out = append(out, b[i:i+3]...)
			} else {
				out = utf8.AppendRune(out, r)
			}
			i += 3
		default:
			return "", &UTFError{i, "invalid lead byte"}
		}
	}
	return string(out), nil
}

// decode3 decodes one 3-byte sequence at the start of b.
func decode3(b []byte) (rune, bool) {
	if len(b) < 3 || b[0]&0xF0 != 0xE0 || b[1]&0xC0 != 0x80 || b[2]&0xC0 != 0x80 {
		return 0, false
	}
	return rune(b[0]&0x0F)<<12 | rune(b[1]&0x3F)<<6 | rune(b[2]&0x3F), true
}

// isWTF8Surrogate reports whether s starts with the 3-byte form of a surrogate.
func isWTF8Surrogate(s string) bool {
	return len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2]&0xC0 == 0x80
}

// AppendModifiedUTF8 appends the modified UTF-8 encoding of s to dst.
// Unpaired surrogates in 3-byte form are copied as they are; any other
// invalid UTF-8 byte becomes U+FFFD, as Java's String decoding would do.
func AppendModifiedUTF8(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x01 && c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if isWTF8Surrogate(s[i:]) {
				dst = append(dst, s[i:i+3]...)
				i += 3
				continue
			}
			r = utf8.RuneError
		}
		i += size
		switch {
		case r == 0:
			dst = append(dst, 0xC0, 0x80)
		case r < 0x800:
			dst = append(dst, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
		case r < 0x10000:
			dst = append3(dst, r)
		default:
			r -= 0x10000
			dst = append3(dst, 0xD800+r>>10)
			dst = append3(dst, 0xDC00+r&0x3FF)
		}
	}
	return dst
}

func append3(dst []byte, r rune) []byte {
	return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
}

// ModifiedUTF8Len returns the length of the modified UTF-8 encoding of s.
func ModifiedUTF8Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x01 && c < 0x80 {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 && isWTF8Surrogate(s[i:]) {
			size = 3
			r = 0xD800 // any 3-byte rune
		}
		i += size
		switch {
		case r == 0, r >= 0x80 && r < 0x800:
			n += 2
		case r < 0x10000:
			n += 3
		default:
			n += 6
		}
	}
	return n
}

// validJavaString reports whether s encodes without replacement: valid
// UTF-8 apart from unpaired surrogates in their 3-byte form.
func validJavaString(s string) bool {
	for i := 0; i < len(s); {
		if s[i] < 0x80 {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if !isWTF8Surrogate(s[i:]) {
				return false
			}
			size = 3
		}
		i += size
	}
	return true
}
