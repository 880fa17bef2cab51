package elasticidl

// JSON as Python's json module reads and writes it, because the contract is
// defined by the Python reference:
//
//   - parsing (json.loads) keeps object keys in order, with a repeated key taking
//     the first key's place and the last value; accepts NaN, Infinity and -Infinity;
//     tells integers from floats (1 vs 1.0); keeps a lone UTF-16 surrogate of a
//     \uXXXX escape (as WTF-8, invalid UTF-8 in a Go string) instead of replacing it;
//     refuses an integer of more than pyMaxStrDigits digits (Python's int() limit);
//   - a task's JSON is read as the reference's codec reads it (parseTaskJSON): nested
//     at most maxNesting deep, and a key given twice in one object is refused;
//   - writing (json.dumps(sort_keys=True, separators=(",", ":"))) sorts keys, writes
//     no whitespace, and escapes every non-ASCII character as \uXXXX (surrogate pairs
//     beyond the BMP), with no HTML escaping.
//
// encoding/json does none of the parsing points and differs on the escaping.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonValue is one of: nil (null), bool, jsonNumber, string, []jsonValue, *jsonObject.
type jsonValue interface{}

// jsonNumber is a JSON number as Python reads it: an int (any size) or a float.
type jsonNumber struct {
	lit     string  // the literal, for ints (Python keeps every digit)
	isFloat bool    // a fraction or exponent, NaN or +-Infinity: Python reads a float
	f       float64 // the value, when isFloat
}

func jsonInt(n int64) jsonNumber { return jsonNumber{lit: strconv.FormatInt(n, 10)} }

// jsonObject is a JSON object with its keys in order. A small one (most of a
// task's) is looked up by a scan; from smallObject keys on, through an index.
type jsonObject struct {
	keys   []string
	values []jsonValue    // values[i] is the value of keys[i]
	index  map[string]int // nil while the object is small
}

const smallObject = 16

func newObject() *jsonObject { return &jsonObject{} }

// find is the place of key, or -1.
func (o *jsonObject) find(key string) int {
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

func (o *jsonObject) set(key string, v jsonValue) {
	if i := o.find(key); i >= 0 {
		o.values[i] = v
		return
	}
	if o.keys == nil { // room for a task message's fields at once
		o.keys, o.values = make([]string, 0, 8), make([]jsonValue, 0, 8)
	}
	o.keys = append(o.keys, key)
	o.values = append(o.values, v)
	switch {
	case o.index != nil:
		o.index[key] = len(o.keys) - 1
	case len(o.keys) > smallObject:
		o.index = make(map[string]int, 2*len(o.keys))
		for i, k := range o.keys {
			o.index[k] = i
		}
	}
}

func (o *jsonObject) get(key string) (jsonValue, bool) {
	if i := o.find(key); i >= 0 {
		return o.values[i], true
	}
	return nil, false
}

// value is the value of key (nil when absent).
func (o *jsonObject) value(key string) jsonValue {
	v, _ := o.get(key)
	return v
}

// ------------------------------------------------------------------ parse

type jsonSyntaxError struct {
	pos int
	msg string
}

func (e *jsonSyntaxError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.pos) }

// jsonDuplicateKey is a key given twice in one object (parseTaskJSON only).
type jsonDuplicateKey struct{ key string }

func (e *jsonDuplicateKey) Error() string { return "the key appears twice in one object" }

// jsonTooDeep is a document nested deeper than maxNesting (parseTaskJSON only).
type jsonTooDeep struct{ pos int }

func (e *jsonTooDeep) Error() string { return fmt.Sprintf("nested deeper than %d levels", maxNesting) }

// maxJSONDepth bounds nesting of any document, so hostile input cannot exhaust the stack.
const maxJSONDepth = 512

type jsonParser struct {
	s      string
	pos    int
	unique bool // a key given twice in one object is an error (as json.loads with the codec's hook)
}

// parsePyJSON reads one JSON document as json.loads does.
func parsePyJSON(s string) (jsonValue, error) {
	return (&jsonParser{s: s}).document()
}

// parseTaskJSON reads a task's JSON as the reference's codec does (_load_json):
// nesting deeper than maxNesting is refused before anything is parsed; then
// json.loads with duplicate keys refused, the first found when an object ends.
func parseTaskJSON(s string) (jsonValue, error) {
	if pos := jsonNestingPast(s, maxNesting); pos >= 0 {
		return nil, &jsonTooDeep{pos: pos}
	}
	return (&jsonParser{s: s, unique: true}).document()
}

// jsonNestingPast is the index of the first bracket nested deeper than limit, or
// -1: a linear scan of brackets outside strings, as the reference's _json_too_deep.
func jsonNestingPast(s string, limit int) int {
	if strings.Count(s, "[")+strings.Count(s, "{") <= limit {
		return -1
	}
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++ // the escaped character
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > limit {
				return i
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return -1
}

func (p *jsonParser) document() (jsonValue, error) {
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.s) {
		return nil, p.fail("extra data")
	}
	return v, nil
}

func (p *jsonParser) fail(msg string) error { return &jsonSyntaxError{pos: p.pos, msg: msg} }

func (p *jsonParser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) literal(word string) bool {
	if strings.HasPrefix(p.s[p.pos:], word) {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *jsonParser) value(depth int) (jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, p.fail("nesting too deep")
	}
	if p.pos >= len(p.s) {
		return nil, p.fail("expecting value")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case p.literal("null"):
		return nil, nil
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	case p.literal("NaN"):
		return jsonNumber{lit: "NaN", isFloat: true, f: math.NaN()}, nil
	case p.literal("Infinity"):
		return jsonNumber{lit: "Infinity", isFloat: true, f: math.Inf(1)}, nil
	case p.literal("-Infinity"):
		return jsonNumber{lit: "-Infinity", isFloat: true, f: math.Inf(-1)}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.fail("expecting value")
}

func (p *jsonParser) object(depth int) (jsonValue, error) {
	p.pos++ // {
	obj := newObject()
	duplicate := ""
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		return obj, nil
	}
	for {
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != '"' {
			return nil, p.fail("expecting property name enclosed in double quotes")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.fail("expecting ':' delimiter")
		}
		p.pos++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if obj.find(key) >= 0 && p.unique && duplicate == "" {
			duplicate = key
		}
		obj.set(key, v)
		p.ws()
		if p.pos >= len(p.s) {
			return nil, p.fail("expecting ',' delimiter")
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			if duplicate != "" {
				return nil, &jsonDuplicateKey{key: duplicate}
			}
			return obj, nil
		default:
			return nil, p.fail("expecting ',' delimiter")
		}
	}
}

func (p *jsonParser) array(depth int) (jsonValue, error) {
	p.pos++ // [
	out := []jsonValue{}
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		return out, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.ws()
		if p.pos >= len(p.s) {
			return nil, p.fail("expecting ',' delimiter")
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return out, nil
		default:
			return nil, p.fail("expecting ',' delimiter")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.s) && p.s[p.pos] == '0':
		p.pos++
	case p.pos < len(p.s) && isDigit(p.s[p.pos]):
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	default:
		p.pos = start
		return nil, p.fail("expecting value")
	}
	isFloat := false
	// A fraction or exponent counts only when digits follow (Python's number pattern).
	if p.pos+1 < len(p.s) && p.s[p.pos] == '.' && isDigit(p.s[p.pos+1]) {
		isFloat = true
		p.pos += 2
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		q := p.pos + 1
		if q < len(p.s) && (p.s[q] == '+' || p.s[q] == '-') {
			q++
		}
		if q < len(p.s) && isDigit(p.s[q]) {
			for q < len(p.s) && isDigit(p.s[q]) {
				q++
			}
			isFloat = true
			p.pos = q
		}
	}
	lit := p.s[start:p.pos]
	if !isFloat {
		if len(strings.TrimPrefix(lit, "-")) > pyMaxStrDigits {
			p.pos = start
			return nil, p.fail(fmt.Sprintf("an integer of more than %d digits", pyMaxStrDigits))
		}
		return jsonNumber{lit: lit}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !isRangeErr(err) { // out of range: +-Inf or 0, as Python's float()
		return nil, p.fail("bad number")
	}
	return jsonNumber{lit: lit, isFloat: true, f: f}, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func hexVal(s string) (rune, bool) {
	if len(s) != 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 32)
	return rune(v), err == nil
}

// appendWTF8 writes r as UTF-8, or a lone surrogate as its 3-byte (WTF-8) form.
func appendWTF8(b []byte, r rune) []byte {
	if utf16.IsSurrogate(r) {
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

func (p *jsonParser) str() (string, error) {
	p.pos++ // "
	var b []byte
	for {
		if p.pos >= len(p.s) {
			return "", p.fail("unterminated string")
		}
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.fail("invalid control character")
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.s) {
			return "", p.fail("unterminated string")
		}
		esc := p.s[p.pos+1]
		p.pos += 2
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			if p.pos+4 > len(p.s) {
				return "", p.fail("invalid \\uXXXX escape")
			}
			r, ok := hexVal(p.s[p.pos : p.pos+4])
			if !ok {
				return "", p.fail("invalid \\uXXXX escape")
			}
			p.pos += 4
			if r >= 0xD800 && r <= 0xDBFF && strings.HasPrefix(p.s[p.pos:], "\\u") && p.pos+6 <= len(p.s) {
				if lo, ok := hexVal(p.s[p.pos+2 : p.pos+6]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					r = utf16.DecodeRune(r, lo)
					p.pos += 6
				}
			}
			b = appendWTF8(b, r)
		default:
			return "", p.fail("invalid \\escape")
		}
	}
}

// ------------------------------------------------------------------ write

// pyDumps is json.dumps(v, sort_keys=True, separators=(",", ":")) of Python.
func pyDumps(v jsonValue) string {
	var b strings.Builder
	writePy(&b, v)
	return b.String()
}

func writePy(b *strings.Builder, v jsonValue) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jsonNumber:
		switch {
		case !x.isFloat && x.lit == "-0":
			b.WriteString("0") // Python's int has no negative zero
		case !x.isFloat:
			b.WriteString(x.lit) // JSON's integer grammar: already canonical
		case math.IsNaN(x.f):
			b.WriteString("NaN")
		case math.IsInf(x.f, 1):
			b.WriteString("Infinity")
		case math.IsInf(x.f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloatRepr(x.f))
		}
	case string:
		writePyString(b, x)
	case []jsonValue:
		b.WriteByte('[')
		for i, item := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writePy(b, item)
		}
		b.WriteByte(']')
	case *jsonObject:
		keys := append([]string(nil), x.keys...)
		sort.Strings(keys) // byte order of UTF-8 is code point order, as Python's
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writePyString(b, k)
			b.WriteByte(':')
			writePy(b, x.value(k))
		}
		b.WriteByte('}')
	}
}

const hexDigits = "0123456789abcdef"

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>uint(shift))&0xF])
	}
}

// writePyString escapes as json.dumps with ensure_ascii=True: the short escapes
// for \" \\ \n \r \t \b \f, \uXXXX for everything else outside ' '..'~'.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
			i++
			continue
		}
		switch c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		}
		if c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f' {
			i++
			continue
		}
		r, size := decodeWTF8(s[i:])
		i += size
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			writeU(b, hi)
			writeU(b, lo)
		} else {
			writeU(b, r)
		}
	}
	b.WriteByte('"')
}

// decodeWTF8 reads one code point, a lone surrogate included; a byte that starts
// no sequence reads as itself (a Go string from elsewhere may hold any bytes).
func decodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 {
		return rune(s[0]), 1
	}
	return r, size
}
