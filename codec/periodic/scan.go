package periodic

import (
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON scanner under DecodeJob and DecodeJobList. Each function reads one
// token or value at d[i] and returns the index after it and whether it is
// sure: ok is true only for text that encoding/json's scanner accepts too.
// A false ok is no verdict; the callers then ask encoding/json, so that
// errors are its own, text and all.

// maxDepth is encoding/json's maxNestingDepth: its scanner refuses an object
// or array nested deeper than this.
const maxDepth = 10000

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace, or len(d).
func skipSpace(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// strPlain[c] is true for the bytes that stand for themselves in a JSON
// string and need no further check: ASCII from ' ' on, except '"' and '\\'.
var strPlain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string starting at d[i] == '"' and returns the index
// after its closing quote. plain reports that encoding/json would use its
// contents as they are: no escapes and valid UTF-8. ok is false for an
// unterminated string, a control byte, or a bad escape.
func scanString(d []byte, i int) (end int, plain, ok bool) {
	start := i + 1
	esc, high := false, false
	for i = start; ; {
		for i < len(d) && strPlain[d[i]] {
			i++
		}
		if i >= len(d) {
			return i, false, false
		}
		switch c := d[i]; {
		case c == '"':
			plain = !esc && (!high || utf8.Valid(d[start:i]))
			return i + 1, plain, true
		case c == '\\':
			esc = true
			if i+1 >= len(d) {
				return i, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(d[i+2:]) < 0 {
					return i, false, false
				}
				i += 6
			default:
				return i, false, false
			}
		case c < ' ':
			return i, false, false
		default: // c >= utf8.RuneSelf; the scanner takes any such byte
			high = true
			i++
		}
	}
}

// hex4 decodes the 4 hex digits at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnquoted appends the string whose contents (between the quotes)
// scanString accepted, unescaped as encoding/json's unquoteBytes does it:
// invalid UTF-8 becomes U+FFFD byte by byte, a \u surrogate pair one rune,
// and a surrogate that is not half of a pair U+FFFD, leaving whatever
// follows it to be read on its own.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch e := s[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					pair := utf8.RuneError
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						pair = utf16.DecodeRune(rr, hex4(s[r+2:]))
					}
					if pair != utf8.RuneError {
						r += 6 // the low half is used up
					}
					rr = pair
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
		}
	}
	return dst
}

// scanNumber scans the number starting at d[i] and returns the index after
// it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(d []byte, i int) (end int, ok bool) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = skipDigits(d, i+1)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		j := skipDigits(d, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func skipDigits(d []byte, i int) int {
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		i++
	}
	return i
}

// parseInt reads the number at d[i] as encoding/json stores a number in an
// int64 (strconv.ParseInt): an integer in range. ok is false for anything
// else, valid JSON or not: a fraction, an exponent, an overflow.
func parseInt(d []byte, i int) (end int, n int64, ok bool) {
	neg := i < len(d) && d[i] == '-'
	if neg {
		i++
	}
	start := i
	var u uint64
	for i < len(d) && '0' <= d[i] && d[i] <= '9' {
		u = u*10 + uint64(d[i]-'0')
		i++
	}
	digits := i - start
	switch {
	case digits == 0, digits > 1 && d[start] == '0', digits > 19:
		// no digits; a leading zero (a syntax error); more digits than
		// fit, which 19 always do in a uint64
		return i, 0, false
	case i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E'):
		return i, 0, false
	case neg && u <= 1<<63:
		return i, int64(-u), true
	case !neg && u < 1<<63:
		return i, int64(u), true
	}
	return i, 0, false
}

// hasLiteral reports whether d holds lit at i.
func hasLiteral(d []byte, i int, lit string) bool {
	return len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit
}

// skipScalar scans a string, number, true, false or null at d[i].
func skipScalar(d []byte, i int) (end int, ok bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		end, _, ok = scanString(d, i)
		return end, ok
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(d, i)
	case c == 't':
		return i + 4, hasLiteral(d, i, "true")
	case c == 'f':
		return i + 5, hasLiteral(d, i, "false")
	case c == 'n':
		return i + 4, hasLiteral(d, i, "null")
	}
	return i, false
}

// skipValue scans any value at d[i]; depth is the number of objects and
// arrays open around it.
func skipValue(d []byte, i, depth int) (end int, ok bool) {
	if i < len(d) && (d[i] == '{' || d[i] == '[') {
		return skipContainer(d, i, depth)
	}
	return skipScalar(d, i)
}

// objectKey scans `"key" :` at d[i] (whitespace around the colon) and returns
// the index of the value after it.
func objectKey(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return i, false
	}
	i, _, ok := scanString(d, i)
	if !ok {
		return i, false
	}
	i = skipSpace(d, i)
	if i >= len(d) || d[i] != ':' {
		return i, false
	}
	return skipSpace(d, i+1), true
}

// skipContainer scans the object or array at d[i] and all it holds, without
// recursion: one bit per open container says whether it is an object.
func skipContainer(d []byte, i, depth int) (end int, ok bool) {
	var isObj [maxDepth/64 + 1]uint64
	n := 0 // containers open here
	for {
		// A value starts at d[i].
		if i >= len(d) {
			return i, false
		}
		switch c := d[i]; c {
		case '{', '[':
			if depth+n >= maxDepth {
				return i, false
			}
			if c == '{' {
				isObj[n/64] |= 1 << (n % 64)
			} else {
				isObj[n/64] &^= 1 << (n % 64)
			}
			n++
			i = skipSpace(d, i+1)
			if i < len(d) && d[i] == c+2 { // '}' or ']'
				i++
				n--
				break
			}
			if c == '{' {
				if i, ok = objectKey(d, i); !ok {
					return i, false
				}
			}
			continue
		default:
			if i, ok = skipScalar(d, i); !ok {
				return i, false
			}
		}
		// After a value: close containers until one has a next value.
	next:
		for {
			if n == 0 {
				return i, true
			}
			i = skipSpace(d, i)
			if i >= len(d) {
				return i, false
			}
			obj := isObj[(n-1)/64]>>((n-1)%64)&1 == 1
			switch c := d[i]; {
			case c == ',':
				i = skipSpace(d, i+1)
				if obj {
					if i, ok = objectKey(d, i); !ok {
						return i, false
					}
				}
				break next
			case obj && c == '}', !obj && c == ']':
				i++
				n--
			default:
				return i, false
			}
		}
	}
}
