package elasticidl

import (
	"math"
	"testing"
)

func TestPyDumpsEscapesAsPython(t *testing.T) {
	// Expected values are json.dumps(value) of CPython 3.11.
	for _, tc := range []struct {
		in   string
		want string
	}{
		{`a"b\c`, `"a\"b\\c"`},
		{"\n\r\t\b\f", `"\n\r\t\b\f"`},
		{"\x00\x1f\x7f", `"\u0000\u001f\u007f"`},
		{"é", `"\u00e9"`},
		{"😀", `"\ud83d\ude00"`},
		{"<>&", `"<>&"`},
		{"\u2028", `"\u2028"`},
		{string(appendWTF8(nil, 0xD800)), `"\ud800"`},
	} {
		if got := pyDumps(tc.in); got != tc.want {
			t.Errorf("pyDumps(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	obj := newObject()
	obj.set("b", []jsonValue{jsonInt(1), true, nil})
	obj.set("a", "x")
	obj.set("é", jsonInt(-2))
	if got, want := pyDumps(obj), `{"a":"x","b":[1,true,null],"\u00e9":-2}`; got != want {
		t.Errorf("pyDumps(object) = %s, want %s", got, want)
	}
}

func TestParsePyJSONAsPython(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // pyDumps of the result, or "error"
	}{
		{`{"a": 1, "b": 2, "a": 3}`, `{"a":3,"b":2}`},
		{`[NaN, Infinity, -Infinity, 1.0, 1e400, -0, 1E2, 0.10]`, `[NaN,Infinity,-Infinity,1.0,Infinity,0,100.0,0.1]`},
		{`"\ud800x"`, `"\ud800x"`},
		{`"\ud83d\ude00"`, `"\ud83d\ude00"`},
		{` {"a" : [ ] } `, `{"a":[]}`},
		{`null`, `null`},
		{``, "error"},
		{`01`, "error"},
		{`1.`, "error"},
		{`{"a":1,}`, "error"},
		{`"a` + "\x01" + `"`, "error"},
		{`"\x"`, "error"},
		{`"\u12"`, "error"},
		{"\ufeff{}", "error"},
		{`[1] x`, "error"},
	} {
		v, err := parsePyJSON(tc.in)
		got := "error"
		if err == nil {
			got = pyDumps(v)
		}
		if got != tc.want {
			t.Errorf("parsePyJSON(%q) = %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
	v, _ := parsePyJSON(`[1, 1.5, NaN]`)
	list := v.([]jsonValue)
	if n := list[0].(jsonNumber); n.isFloat {
		t.Errorf("1 reads as a float")
	}
	if n := list[1].(jsonNumber); !n.isFloat || n.f != 1.5 {
		t.Errorf("1.5 reads as %+v", n)
	}
	if n := list[2].(jsonNumber); !math.IsNaN(n.f) {
		t.Errorf("NaN reads as %+v", n)
	}
	deep := ""
	for i := 0; i < 1000; i++ {
		deep += "["
	}
	if _, err := parsePyJSON(deep); err == nil {
		t.Errorf("1000 nested lists parse")
	}
}

func TestPyFloatRepr(t *testing.T) {
	// Expected values are repr(float) of CPython 3.11.
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0.1, "0.1"}, {1.5, "1.5"}, {1e-05, "1e-05"}, {1.5e-07, "1.5e-07"}, {1e16, "1e+16"},
		{1.2345e16, "1.2345e+16"}, {123456789012345.67, "123456789012345.67"}, {3600.000000001, "3600.000000001"},
		{0.0001, "0.0001"}, {0.00012, "0.00012"}, {1.0 / 3, "0.3333333333333333"}, {2.5e-05, "2.5e-05"},
		{-0.5, "-0.5"}, {1e22, "1e+22"}, {5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{100, "100.0"}, {0, "0.0"}, {math.Inf(1), "inf"},
	} {
		if got := pyFloatRepr(tc.in); got != tc.want {
			t.Errorf("pyFloatRepr(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestPyParseIntAsPythonInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" = ValueError
	}{
		{"5", "5"}, {" 1_0 ", "10"}, {"+5", "5"}, {"-0", "0"}, {"007", "7"}, {"\u0665", "5"}, {"\u0661\u0662", "12"},
		{"\x1c7\x1f", "7"}, {"", ""}, {"_1", ""}, {"1_", ""}, {"1__0", ""}, {"0x10", ""}, {"1e3", ""}, {"- 1", ""},
		{"99999999999999999999999", "99999999999999999999999"},
	} {
		n, ok := pyParseInt(tc.in)
		got := ""
		if ok {
			got = n.String()
		}
		if got != tc.want {
			t.Errorf("pyParseInt(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
