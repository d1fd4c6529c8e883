package tlog_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditrail/auditrail/internal/tlog"
)

// The examples of RFC 8785 and cases written by hand: each canonicalizes
// to the given bytes, and github.com/gowebpki/jcs (the reference) agrees.
func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"RFC 8785 3.2.4", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785 3.2.3: names sorted by UTF-16 code units, so the emoji
		// (a surrogate pair, D83D…) sorts before U+FB33 though its code
		// point is larger.
		{"RFC 8785 3.2.3 sorting", `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"nested and arrays keep order", `{"b":[3,{"z":1,"a":2}],"a":{"y":null,"x":true}}`, `{"a":{"x":true,"y":null},"b":[3,{"a":2,"z":1}]}`},
		{"escapes", `{"s":"\t\b\f\n\r\u0001\u001f\u007f\u2028/\\\""}`, "{\"s\":\"\\t\\b\\f\\n\\r\\u0001\\u001f\u007f\u2028/\\\\\\\"\"}"},
		{"raw unicode kept", `{"s":"déjà vu 日本 😀"}`, `{"s":"déjà vu 日本 😀"}`},
		{"numbers", `[-0, 0.0, 1.0, -1.50, 1e2, 100000000000000000000, 1e21, 0.000001, 0.0000001, 123456789012345678, 1E-7, 2.5e-8, 9007199254740993]`,
			`[0,0,1,-1.5,100,100000000000000000000,1e+21,0.000001,1e-7,123456789012345680,1e-7,2.5e-8,9007199254740992]`},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] } \n", `{"a":[1,2]}`},
		{"empty containers", `{"a":{},"b":[],"c":""}`, `{"a":{},"b":[],"c":""}`},
		{"name with escapes sorts by its characters", `{"a\"":1,"a":2,"a\\":3,"a!":4}`, `{"a":2,"a!":4,"a\"":1,"a\\":3}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tlog.CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			ref, err := jcs.Transform([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(ref) != tc.want {
				t.Fatalf("reference %s\nwant      %s", ref, tc.want)
			}
		})
	}
}

// RFC 8785 Appendix B: IEEE 754 doubles and their canonical forms.
func TestCanonicalNumbers(t *testing.T) {
	for _, tc := range []struct{ bits, want string }{
		{"0000000000000000", "0"}, {"8000000000000000", "0"},
		{"0000000000000001", "5e-324"}, {"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"}, {"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"}, {"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"}, {"44b52d02c7e14af6", "1e+23"}, {"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"}, {"444b1ae4d6e2ef4f", "999999999999999900000"}, {"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"}, {"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"}, {"41b3de4355555554", "333333333.33333325"}, {"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"}, {"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"}, {"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		b, _ := hex.DecodeString(tc.bits)
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		for _, in := range []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'e', 20, 64)} {
			got, err := tlog.CanonicalJSON([]byte(in))
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if string(got) != tc.want {
				t.Errorf("%s (%s): got %s, want %s", tc.bits, in, got, tc.want)
			}
		}
	}
}

// What RFC 8785 (I-JSON) cannot canonicalize is refused.
func TestCanonicalRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"duplicate name":         `{"a":1,"a":2}`,
		"duplicate by escape":    `{"a":1,"\u0061":2}`,
		"lone high surrogate":    `{"a":"\ud800"}`,
		"lone low surrogate":     `{"a":"\udc00x"}`,
		"bad pair":               `{"a":"\ud800\u0041"}`,
		"invalid UTF-8":          "{\"a\":\"\xff\"}",
		"UTF-8 surrogate":        "{\"a\":\"\xed\xa0\x80\"}",
		"control character":      "{\"a\":\"\x01\"}",
		"trailing data":          `{"a":1} x`,
		"two values":             `{} {}`,
		"number out of range":    `[1e400]`,
		"leading zero":           `[01]`,
		"plus sign":              `[+1]`,
		"bare dot":               `[1.]`,
		"NaN":                    `[NaN]`,
		"single quotes":          `{'a':1}`,
		"trailing comma":         `{"a":1,}`,
		"unterminated":           `{"a":"b`,
		"empty":                  ``,
		"bad escape":             `["\x"]`,
		"nested too deep":        strings.Repeat("[", 65) + strings.Repeat("]", 65),
		"literal with suffix":    `[truex]`,
		"missing colon":          `{"a" 1}`,
		"unquoted name":          `{a:1}`,
		"array without brackets": `1,2`,
	} {
		if got, err := tlog.CanonicalJSON([]byte(in)); err == nil || !errors.Is(err, tlog.ErrNotCanonicalizable) {
			t.Errorf("%s: %q gave %q, %v", name, in, got, err)
		}
	}
}

// FuzzCanonical: on any input, the canonicalizer and the reference agree:
// both refuse, or both give the same bytes (beyond the nesting bound, ours
// refuses alone). Canonical output is its own canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":[1,2.5,"x"],"a":null}`, `"\ud83d\ude00"`, `[1e21,1e-7,-0,0.1]`, `{"\u20ac":1,"\ufb33":2,"\ud83d\ude00":3}`,
		`{"a\"":1,"a":2}`, `[123456789012345678901234]`, `{"leaf_index":3,"event_id":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := tlog.CanonicalJSON(in)
		ref, refErr := jcs.Transform(in)
		if err != nil && strings.Contains(err.Error(), "nested deeper") {
			return
		}
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: ours %q, %v; reference %q, %v", in, got, err, ref, refErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(got, ref) {
			t.Fatalf("%q: ours %q, reference %q", in, got, ref)
		}
		again, err := tlog.CanonicalJSON(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("not idempotent: %q -> %q, %v", got, again, err)
		}
	})
}
