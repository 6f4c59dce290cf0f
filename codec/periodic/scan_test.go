package periodic

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// validity are JSON texts, valid and not, for the scanner to judge as
// encoding/json's does.
var validity = []string{
	``, ` `, `null`, `nul`, `nullx`, `true`, `false`, `fals`, `True`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`,
	`1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e-10`, `1.5e5.5`, `00`, `-01`, `123456789012345678901234567890`,
	`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u0041"`, `"\u00e9"`, `"\uD83D\uDE00"`, `"\uD800"`,
	`"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, `"\a"`, `"a`, `"\"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\"",
	"\"\t\"", `"é"`, `[]`, `[ ]`, `[1,2]`, `[1,]`, `[,1]`, `[1 2]`, `[`, `]`, `[[[]]]`, `[[]`, `[]]`,
	`{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a"}`, `{"a":}`, `{a:1}`, `{"a" : 1 , "b" : [ {} ] }`, `{"a":1}}`,
	`{"a":{"b":{"c":[1,{"d":null}]}}}`, `{"a":[}`, `{"a":1]`, `[1}`, `{1:2}`, `{"a":1 "b":2}`, `{,}`,
	" \t\r\n{\"a\" \n:\t1 }\r\n ", "\f{}", "\v1", "\u00a0{}", "\xef\xbb\xbf{}", `{} {}`, `1 2`, `{}x`, `"a"b`,
	"{\"a\":\"\x00\"}", `[1,[2,[3,{"x":[true,false,null]}]]]`, `{"":""}`, `{"\u0000":0}`,
}

// TestSkipValueValid compares the scanner's verdict on whole texts with
// json.Valid.
func TestSkipValueValid(t *testing.T) {
	for _, s := range validity {
		d := []byte(s)
		end, ok := skipValue(d, skipSpace(d, 0), 0)
		got := ok && skipSpace(d, end) == len(d)
		if want := json.Valid(d); got != want {
			t.Errorf("scanner says %q valid = %v, json.Valid %v", s, got, want)
		}
	}
}

// TestSkipValueDepth: encoding/json refuses more than maxDepth open
// objects and arrays; so does the scanner, counting those around the value.
func TestSkipValueDepth(t *testing.T) {
	for _, tc := range []struct {
		open, close string
		levels      int // per repetition
	}{{"[", "]", 1}, {`{"a":`, "}", 1}, {`[{"a":`, "}]", 2}} {
		for _, depth := range []int{maxDepth - 2, maxDepth, maxDepth + 2} {
			n := depth / tc.levels
			d := []byte(strings.Repeat(tc.open, n) + "0" + strings.Repeat(tc.close, n))
			end, ok := skipValue(d, 0, 0)
			got := ok && end == len(d)
			if want := json.Valid(d); got != want {
				t.Errorf("%d levels: scanner %v, json.Valid %v", n*tc.levels, got, want)
			}
			// Inside two open containers, two levels fewer fit.
			_, ok = skipValue(d, 0, 2)
			if want := n*tc.levels+2 <= maxDepth; ok != want {
				t.Errorf("%d levels inside 2: scanner %v, want %v", n*tc.levels, ok, want)
			}
		}
	}
}

// TestAppendUnquoted compares unescaping with encoding/json's, for strings
// the scanner accepts.
func TestAppendUnquoted(t *testing.T) {
	for _, s := range []string{
		`""`, `"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u0041\u00e9\u20AC\uFFFF"`,
		`"\uD83D\uDE00"`, `"\ud83d\ude00"`, `"\uD83D"`, `"\uDE00"`, `"\uD83Dx"`, `"\uD83D\u0041"`,
		`"\uD83D\uD83D\uDE00"`, `"\uDE00\uD83D"`, `"\uD83D\n"`, `"a\uD83D"`, `"\uD800\uDBFF\uDC00\uDFFF"`,
		"\"\xff\"", "\"a\xc3\x28b\"", "\"\xe2\x82\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
		"\"ok é ✓ 🎉\"", "\"\xef\xbf\xbd\"", "\"\x7f\"", "\"<&>\u2028\"", `"\u2028"`,
	} {
		d := []byte(s)
		end, plain, ok := scanString(d, 0)
		if !ok || end != len(d) {
			t.Fatalf("scanString(%q) = %d, %v", s, end, ok)
		}
		var want string
		if err := json.Unmarshal(d, &want); err != nil {
			t.Fatal(err)
		}
		got := appendUnquoted([]byte("x"), d[1:end-1])
		if string(got) != "x"+want {
			t.Errorf("appendUnquoted(%s) = %q, encoding/json %q", s, got[1:], want)
		}
		if plain && want != s[1:len(s)-1] {
			t.Errorf("scanString(%q) says plain, but encoding/json makes it %q", s, want)
		}
	}
}

// TestParseInt compares parseInt with strconv.ParseInt, which
// encoding/json uses for an int64, on number texts the scanner accepts.
func TestParseInt(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "1", "-1", "42", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"1000000000000000000", "10000000000000000000", "1.0", "1e3", "1E3", "-1.5", "0.0", "123456789012",
	} {
		d := []byte(s + ",")
		end, n, ok := parseInt(d, 0)
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (err == nil) || ok && (n != want || end != len(s)) {
			t.Errorf("parseInt(%q) = (%d, %d, %v), strconv %d, %v", s, end, n, ok, want, err)
		}
	}
	// Not numbers JSON allows: parseInt must not be sure of them.
	for _, s := range []string{"", "-", "01", "-01", "00", "+1", "x"} {
		if _, _, ok := parseInt([]byte(s), 0); ok {
			t.Errorf("parseInt(%q) is sure", s)
		}
	}
}
